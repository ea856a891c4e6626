"""Generators: token ids in; completion ids, per-token logprobs and text out (batched).

Backends (``--backend``):

* ``scripted`` -- :class:`ScriptedGenerator`: fixed responses, for exact bookkeeping tests;
* ``oracle`` -- :class:`OracleGenerator`: returns ``request.oracle_text`` (the env's gold action
  written in the harness's format by the rollout), so the whole parse path runs;
* ``hf`` -- :class:`HFGenerator`: transformers ``generate`` on the model object it is given
  (a trainer passes its live weights), batched with left padding, CPU or GPU;
* ``vllm`` -- :class:`xtree_gym.agents.model.vllm.VLLMGenerator` (imported only when asked for).

Every backend returns, per request, ``completion_ids`` exactly as produced and ``text`` decoded
from them -- never the other way round, so a trainer's tokens are the ones that were sampled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ..types import Generation, Generator, GenRequest
from .stops import cut_completion

BACKENDS = ("scripted", "oracle", "hf", "vllm")
"""Backend names, as ``--backend`` spells them."""


def _encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` without special tokens (what a model would have to emit)."""
    if tokenizer is None:
        return []
    return list(tokenizer.encode(text, add_special_tokens=False))


class ScriptedGenerator:
    """Fixed responses: a list answered in order, or a mapping from request key to a list.

    A list is consumed across calls (``cycle=True`` starts over when it runs out); a mapping is
    looked up by ``request.key[:len(k)]`` for its keys ``k`` -- e.g. ``{(0, 1): [...]}`` answers
    group 0 member 1 turn by turn, ``{(0, 1, 2): "..."}`` one turn. Running out raises
    :class:`~xtree_gym.errors.ConfigError` (a test wrote too few responses).

    Example:
        >>> g = ScriptedGenerator(["a", "b"])
        >>> [x.text for x in g.generate([GenRequest([]), GenRequest([])])]
        ['a', 'b']
        >>> g.generate([GenRequest([])])
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: scripted generator ran out of responses after 2 -- fix: give more responses or cycle=True
        >>> g = ScriptedGenerator({(0, 1): ["x", "y"]})
        >>> g.generate([GenRequest([], key=(0, 1, 0)), GenRequest([], key=(0, 1, 1))])[1].text
        'y'
    """

    name = "scripted"
    needs_oracle = False

    def __init__(
        self,
        responses: Sequence[str] | Mapping[tuple[Any, ...], str | Sequence[str]],
        *,
        tokenizer: Any = None,
        cycle: bool = False,
    ) -> None:
        if isinstance(responses, str):
            raise ConfigError(
                "ScriptedGenerator wants a list of responses, got one string", fix="wrap it: [text]"
            )
        self.tokenizer = tokenizer
        self.cycle = cycle
        self._list: list[str] | None = None
        self._map: dict[tuple[Any, ...], list[str]] = {}
        self._used: dict[tuple[Any, ...], int] = {}
        if isinstance(responses, Mapping):
            for k, v in responses.items():
                self._map[tuple(k)] = [v] if isinstance(v, str) else list(v)
        else:
            self._list = list(responses)
        self._i = 0

    def _next_listed(self) -> str:
        assert self._list is not None
        if self._i >= len(self._list):
            if not self.cycle or not self._list:
                raise ConfigError(
                    f"scripted generator ran out of responses after {self._i}",
                    fix="give more responses or cycle=True",
                )
            self._i = 0
        text = self._list[self._i]
        self._i += 1
        return text

    def _next_mapped(self, key: tuple[Any, ...]) -> str:
        for k in sorted(self._map, key=len, reverse=True):  # the most specific key wins
            if tuple(key[: len(k)]) == k:
                texts = self._map[k]
                used = self._used.get(k, 0)
                if used >= len(texts) and not self.cycle:
                    raise ConfigError(
                        f"scripted generator ran out of responses for key {k} after {used}",
                        fix="give more responses for that key or cycle=True",
                    )
                self._used[k] = used + 1
                return texts[used % len(texts)]
        raise ConfigError(f"scripted generator has no response for request key {key}", fix="add that key")

    def generate(self, requests: Sequence[GenRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = self._next_listed() if self._list is not None else self._next_mapped(tuple(r.key))
            ids = _encode(self.tokenizer, text)
            out.append(Generation(text=text, completion_ids=ids, logprobs=[0.0] * len(ids)))
        return out


class OracleGenerator:
    """Returns each request's ``oracle_text`` (the env's gold action in the harness's format).

    With a tokenizer the text is also tokenized, so ``completion_ids`` exist (logprobs 0.0: no
    model sampled them). A request without oracle text gets an empty response, which the harness
    reads as an invalid action.

    Example:
        >>> OracleGenerator().generate([GenRequest([], oracle_text="<action>look around</action>")])[0].text
        '<action>look around</action>'
    """

    name = "oracle"
    needs_oracle = True

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer

    def generate(self, requests: Sequence[GenRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = r.oracle_text or ""
            ids = _encode(self.tokenizer, text)
            out.append(Generation(text=text, completion_ids=ids, logprobs=[0.0] * len(ids)))
        return out


# -- hf ------------------------------------------------------------------------------------------
class TokenCounter:
    """A ``generate`` streamer that only counts: the first ``put`` is the prompt, each later one holds
    the tokens of one decoding step (one per sequence), so a long turn shows tokens moving.

    Example:
        >>> seen = []
        >>> c = TokenCounter(seen.append)
        >>> import numpy as np
        >>> c.put(np.zeros((2, 7))); c.put(np.zeros(2)); c.put(np.zeros(2)); c.end()
        >>> seen
        [2, 2]
    """

    def __init__(self, hook: Callable[[int], None]) -> None:
        self.hook = hook
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.hook(int(value.size if isinstance(value.size, int) else value.numel()))

    def end(self) -> None:
        pass


class HFGenerator:
    """transformers ``generate`` on a live model: left-padded batches, sampling, exact ids/logprobs.

    ``logprobs[t]`` is the log-probability of the sampled token under the distribution it was
    sampled from: the model's logits after temperature and top-p (``output_scores``), so a PPO
    ratio starts at 1. With ``temperature=0`` decoding is greedy and the logprobs are the plain
    log-softmax of the logits. Each call reseeds torch from ``seed`` and a call counter (inside
    ``fork_rng``), so the same seed gives the same completions and the caller's RNG is untouched.

    ``group_seed(group, turn)``: sample each group's requests (``key = (group, member, turn)``) as a
    batch of their own, seeded by it -- completions then depend only on the group's own prompts, not
    on which other groups share the call (a trainer's groups per process change with the world size).
    """

    name = "hf"
    needs_oracle = False

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        seed: int = 0,
        batch_size: int = 16,
        group_seed: Callable[[Any, int], int] | None = None,
    ) -> None:
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1 or batch_size < 1:
            raise ConfigError(
                f"bad sampling settings temperature={temperature} top_p={top_p} "
                f"max_new_tokens={max_new_tokens} batch_size={batch_size}",
                fix="use temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1, batch_size >= 1",
            )
        if tokenizer.pad_token_id is None:
            raise ConfigError("the tokenizer has no pad token", fix="set tokenizer.pad_token (e.g. to eos)")
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_new_tokens = int(max_new_tokens)
        self.stop = tuple(stop)
        self.seed = int(seed)
        self.batch_size = int(batch_size)
        self.group_seed = group_seed
        self.calls = 0
        self.on_tokens: Callable[[int], None] | None = None
        """Told the number of tokens each decoding step makes (a rollout's progress bar sets it)."""
        eos = getattr(model.generation_config, "eos_token_id", None)
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos:
            eos.append(tokenizer.eos_token_id)
        self.eos_ids: list[int] = eos

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def generate(self, requests: Sequence[GenRequest]) -> list[Generation]:
        """Complete every request; batches of ``batch_size``, longest prompts first (less padding)."""
        import torch

        self.calls += 1
        results: dict[int, Generation] = {}
        devices = [self.model.device] if self.model.device.type == "cuda" else []
        training = bool(self.model.training)
        self.model.eval()  # a trainer's live model may be in train mode: no dropout while sampling
        try:
            for seed, lot in self._lots(requests):
                order = sorted(lot, key=lambda i: -len(requests[i].prompt_ids))
                with torch.random.fork_rng(devices=devices), torch.no_grad():
                    torch.manual_seed(seed)
                    for start in range(0, len(order), self.batch_size):
                        chunk = order[start : start + self.batch_size]
                        for i, gen in zip(chunk, self._generate_batch([requests[i] for i in chunk])):
                            results[i] = gen
        finally:
            self.model.train(training)
        return [results[i] for i in range(len(requests))]

    def _lots(self, requests: Sequence[GenRequest]) -> list[tuple[int, list[int]]]:
        """``(seed, request indices)`` sampled together: all of them, or each group on its own."""
        if self.group_seed is None:
            return [(self.seed * 1_000_003 + self.calls, list(range(len(requests))))]
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.key[0] if r.key else None, []).append(i)
        lots = []
        for group, idx in groups.items():
            turn = max(int(requests[i].key[2]) if len(requests[i].key) > 2 else 0 for i in idx)
            lots.append((int(self.group_seed(group, turn)), idx))
        return lots

    def _generate_batch(self, requests: Sequence[GenRequest]) -> list[Generation]:
        import torch

        if any(not r.prompt_ids for r in requests):
            raise ConfigError("an hf request has no prompt ids", fix="pass a tokenizer to the rollout")
        width = max(len(r.prompt_ids) for r in requests)
        pad = int(self.tokenizer.pad_token_id)
        input_ids = torch.tensor([[pad] * (width - len(r.prompt_ids)) + list(r.prompt_ids) for r in requests])
        mask = torch.tensor([[0] * (width - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in requests])
        device = self.model.device
        sample = self.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sample,
            "pad_token_id": pad,
            "eos_token_id": self.eos_ids or None,
            "output_scores": True,
            "return_dict_in_generate": True,
            "use_cache": True,
            "synced_gpus": False,  # a sharded policy is gathered for rollouts: ranks generate independently
        }
        if sample:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=0)
        else:  # silence the checkpoint's sampling defaults for greedy decoding
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if self.stop:
            kwargs.update(stop_strings=list(self.stop), tokenizer=self.tokenizer)
        if self.on_tokens is not None:
            kwargs["streamer"] = TokenCounter(self.on_tokens)
        out = self.model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device), **kwargs)
        new = out.sequences[:, width:].cpu()
        # scores[t] are the processed logits of step t (after temperature / top-p): log-softmax them
        logp = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1).cpu()
        gens = []
        for b in range(len(requests)):
            ids = [int(x) for x in new[b].tolist()]
            keep, reason = cut_completion(ids, self.eos_ids, self.stop, self._decode)
            ids = ids[:keep]
            lps = [float(logp[b, t, tok]) for t, tok in enumerate(ids)]
            lps = [x if math.isfinite(x) else -1e9 for x in lps]
            gens.append(Generation(self._decode(ids), ids, lps, reason))
        return gens


def make_generator(backend: str, *, model: Any = None, tokenizer: Any = None, **sampling: Any) -> Generator:
    """The generator of ``backend`` (``scripted``, ``oracle``, ``hf``, ``vllm``).

    ``scripted`` takes ``responses=``; ``hf`` needs ``model`` and ``tokenizer`` objects; ``vllm``
    takes the model folder (``model=PATH``) or ``server_url=``. ``sampling`` holds temperature,
    top_p, max_new_tokens, stop, seed (and backend extras).

    Example:
        >>> make_generator("oracle").name
        'oracle'
        >>> make_generator("gpt")
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: unknown backend 'gpt' -- fix: use one of: scripted, oracle, hf, vllm
    """
    if backend == "scripted":
        if "responses" not in sampling:
            raise ConfigError("the scripted backend needs responses=[...]")
        return ScriptedGenerator(
            sampling.pop("responses"), tokenizer=tokenizer, cycle=bool(sampling.pop("cycle", False))
        )
    if backend == "oracle":
        return OracleGenerator(tokenizer=tokenizer)
    if backend == "hf":
        if model is None or tokenizer is None:
            raise ConfigError("the hf backend needs a model and its tokenizer", fix="pass --model")
        return HFGenerator(model, tokenizer, **sampling)
    if backend == "vllm":
        from .vllm import VLLMGenerator

        return VLLMGenerator(model, tokenizer=tokenizer, **sampling)
    raise ConfigError(f"unknown backend {backend!r}", fix=f"use one of: {', '.join(BACKENDS)}")
