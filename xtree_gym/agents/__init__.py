"""LLM policies, harnesses, group rollouts, evaluation and trainers (SFT, GRPO, offline node RL, OPSD).

Rooms (each only looks down): ``types`` (Turn, Episode, GenRequest, Generation) → ``models``,
``generation`` (+ ``vllm``), ``harness/`` → ``rollout`` → ``evaluate``; ``advantages`` and
``losses`` (pure) → ``config``, ``trainer`` → ``sft``, ``offline``.
"""
