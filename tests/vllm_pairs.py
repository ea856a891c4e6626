"""What both vLLM test modules score: one fixed (prompt, completion) pair, and the trainer's log-probs of it.

A helper module, not a test module: ``tests/test_vllm_cpu.py`` (the in-process engine) and
``tests/test_vllm_server.py`` (``xtree vllm-serve``) compare these log-probs with the engine's own.
"""

from __future__ import annotations

from typing import Any


def fixed_pair(tok: Any) -> tuple[list[int], list[int]]:
    """A Countdown-style prompt (the chat template's ids) and a short completion's ids."""
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Target: 145. Pool: [87, 3, 55]. Your move?"}],
        add_generation_prompt=True,
        return_dict=False,
    )
    completion = tok.encode("op(+, 55, 87)<|im_end|>", add_special_tokens=False)
    return [int(i) for i in prompt], [int(i) for i in completion]


def trainer_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(completion | prompt) per token under the trainer's live weights (fp32)."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].float()
    per = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:].unsqueeze(1)).squeeze(1)
    return [float(x) for x in per[len(prompt) - 1 :]]
