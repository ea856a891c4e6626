"""LLM policies, harnesses, episodes, evaluation and trainers (GRPO, SFT, offline node RL, OPSD).

The rooms, bottom to top (each imports only from the ones below it; tests/test_import_graph.py):

* ``types`` -- the shapes every room passes on (Turn, Episode, GenRequest, Generation, TaskSpec);
* ``model`` -- the policy and its generators (loading, LoRA, logits, hf / vLLM / oracle / scripted);
  ``harness`` -- prompts from observations, actions from completions (one protocol per paper);
* ``run`` -- run folders, checkpoints, sharded saves, metrics, trackers, plots, config checks;
* ``play`` -- tasks → env workers → turns → episodes (``rollout``), and ``xtree eval``;
* ``grpo`` -- ``xtree train rlvr``: rewards/shaping → advantages → rows → losses → updates;
* ``sft_offline`` -- ``xtree sft-rows``, ``xtree train sft`` and ``xtree train offline``.

``recipes/`` (``--config NAME``) and ``accelerate/`` (``accelerate launch --config_file``) are data.
"""
