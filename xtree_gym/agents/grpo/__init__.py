"""Multi-turn GRPO (``xtree train rlvr``): one optimizer step, read room by room.

The flow of a step: ``play.tasks`` → ``play.rollout`` → ``shaping`` (outcome − invalid penalty +
X-Tree bonus / segment cost) → ``advantages`` (per group) → ``rows`` (turn rows, micro-batches) →
``losses`` (clipped ratio, k3 KL, OPSD) inside ``updates`` (mini-batches × PPO epochs) → checkpoint
(``run.checkpoint``). ``trainer`` reads that top to bottom; ``config`` is its dataclass (one
docstring per field); ``policy`` holds the Accelerator, dtype, frozen copies and EMA every trainer
shares; ``opsd`` (Eq. 4's teacher context), ``remine`` (the tree re-mined from own rollouts),
``schedule`` (learning rate) and ``learning_signal`` (no silent no-learning) are the step's helpers;
``cli`` registers ``xtree train rlvr`` and ``xtree plot-run``.

May import: ``agents.types``, ``agents.model``, ``agents.harness``, ``agents.run``,
``agents.play`` and the core.
"""
