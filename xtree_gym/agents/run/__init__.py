"""The run: what every trainer writes and checks, whatever it trains.

Holds: ``runfolder`` (a new run never destroys a folder; resume checks), ``checkpoint`` (HF folders,
safetensors optimizer state, JSON trainer state), ``scaleout`` (checkpoints of a sharded policy
under ``accelerate launch``), ``metrics`` (``metrics.jsonl`` and cross-rank sums), ``tracking``
(``--report-to``), ``plots`` (``xtree plot-run``'s figures), ``guards`` (a non-finite loss stops the
run) and ``validate`` (the one type-and-range check of every config field).

May import: ``agents.types``, ``agents.model`` (LoRA adapters are saved as such) and the core.
"""
