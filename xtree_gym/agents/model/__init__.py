"""The policy and its generators: the model a run trains, and everything that turns prompts into actions.

Holds: ``loading`` (``--model``: a folder, a hub id, ``smollm2``, ``tiny-random``), ``lora`` (PEFT
adapters, gradient checkpointing, mixed precision), ``logits`` (log-probs on completion positions
only), ``stops`` (where a completion ends), ``generation`` (the ``hf`` / ``scripted`` / ``oracle``
backends behind one interface), ``vllm`` (the only file that imports vLLM) and ``oracle`` (an env's
own expert next action).

May import: ``agents.types`` and the core below ``agents`` (corpus … collect). Nothing here knows
an episode loop, a loss or a run folder.
"""
