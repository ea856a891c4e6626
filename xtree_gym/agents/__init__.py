"""LLM policies and trainers (SFT, GRPO, offline node RL, OPSD): a later issue; nothing here yet."""
