"""Playing episodes: tasks → env workers → harness + generator turns → episodes; and ``xtree eval``.

Holds: ``tasks`` (which tasks a step plays, and which rank plays which), ``envproc`` (envs in this
process or one worker process per copy), ``rollout`` (n identically seeded env copies per task,
generation batched across live episodes), ``evaluate`` (a benchmark's evaluation fold, counted as
the benchmark counts), ``testing`` (a tiny real text env for tests and docs) and ``cli``
(``xtree eval``).

May import: ``agents.types``, ``agents.model``, ``agents.harness``, ``agents.run`` and the core.
Training code lives above (``agents.grpo``); nothing here computes a loss.
"""
