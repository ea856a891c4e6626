"""The claim check on MiniGrid: does the X-Tree bonus keep GRPO learning while the verifier is silent?"""
