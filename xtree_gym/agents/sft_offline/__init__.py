"""Training from a fixed corpus: SFT rows and SFT (X-Tree App. D), offline node RL (Eq. 2).

Holds: ``rows`` (a gold corpus as standard / node / span SFT rows) and ``rows_cli``
(``xtree sft-rows``); ``sft`` (``xtree train sft``); ``offline`` (node instances, config and task
schedule of ``xtree train offline``, torch-free) and ``offline_trainer`` (the GRPO trainer on
replayed node instances); ``cli`` adds ``train sft`` and ``train offline`` to the ``train`` group.

May import: everything below it in ``agents`` (``grpo`` included: offline node RL is the GRPO
trainer on replayed episodes, SFT shares its rows and losses) and the core.
"""
