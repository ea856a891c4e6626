"""verifiers adapter: ``load_environment(...)`` wraps one of our envs as a ``vf.MultiTurnEnv``.

prime-rl (and ``vf-eval``) load an environment module's ``load_environment``. Ours plays
``gym.make(env_id)`` turn by turn: the harness of :mod:`xtree_gym.agents.harness` writes the first
prompt and parses each reply (:class:`HarnessParser`), the env's text is the next user turn, and
the rubric is ours: the episode's env reward (``xtree_outcome``) plus, with a ``tree``, Eq. 3's
``λ_g · Σ b_v`` as a *group* reward function (``xtree_bonus``), which verifiers calls once per
group with every state, so λ_g is the group's own win rate. Targets verifiers' classic
``MultiTurnEnv`` API (0.1.9 – 0.2.x); the 0.3+ ``verifiers.v1`` taskset/harness stack is not covered.

Example:
    >>> env = load_environment("XTree-Countdown-v0", num_examples=2)
    >>> len(env.dataset), env.dataset[0]["info"]["seed"]
    (2, 0)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import verifiers as vf
from datasets import Dataset
from verifiers.types import Response, ResponseMessage

from ..rewards import LAMBDA0, W_REF
from ..tree import XTree
from .text_env import TextEpisode, episode_bonus, group_bonus_rewards


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(getattr(p, "text", "")) for p in content
        )
    return str(content or "")


class HarnessParser(vf.Parser):
    """A verifiers parser that reads the action out of a reply with our harness (or its last line)."""

    def __init__(self, episode: TextEpisode) -> None:
        super().__init__()
        self.episode = episode

    def parse(self, text: str) -> Any:
        return self.episode.parse(text)[0]


class XTreeVerifiersEnv(vf.MultiTurnEnv):
    """``gym.make(env_id)`` as a verifiers multi-turn env; one dataset row per seed."""

    def __init__(
        self, env_id: str, *, harness: Any = None, env_kwargs: dict[str, Any] | None = None,
        num_examples: int = 64, seed: int = 0, max_turns: int | None = None, tree: XTree | str | None = None,
        bonus: str = "depth", lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"],
    ) -> None:  # fmt: skip
        # verifiers' Environment owns ``env_id``/``env_args``: ours live under gym_* names.
        self.gym_id, self.gym_harness, self.gym_kwargs = env_id, harness, dict(env_kwargs or {})
        self.tree = XTree.load(tree) if isinstance(tree, str) else tree
        self.bonus, self.lambda0, self.w_ref = bonus, lambda0, w_ref
        probe = TextEpisode(env_id, harness=harness, env_kwargs=self.gym_kwargs)
        rows = []
        for s in range(seed, seed + num_examples):  # the first prompt of each seed, rendered once
            probe.reset(seed=s)
            rows.append({"prompt": probe.messages(), "info": {"seed": s, "env_id": env_id}, "answer": ""})
        probe.close()
        parser = HarnessParser(probe)
        rubric = vf.Rubric(funcs=[self.xtree_outcome], weights=[1.0], parser=parser)
        if self.tree is not None:
            rubric.add_reward_func(self.xtree_bonus, weight=1.0)
        turns = max_turns or getattr(probe.harness, "step_limit", None) or 30
        super().__init__(dataset=Dataset.from_list(rows), parser=parser, rubric=rubric, max_turns=turns)

    async def setup_state(self, state: vf.State) -> None:
        episode = TextEpisode(self.gym_id, harness=self.gym_harness, env_kwargs=self.gym_kwargs)
        episode.reset(seed=int(state["info"]["seed"]))
        state["xtree_episode"] = episode

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        episode: TextEpisode = state["xtree_episode"]
        reply = _text(messages[-1]) if messages else ""
        episode.step(reply)
        response = [vf.UserMessage(content=episode.user_text())]
        if episode.done:
            state["final_env_response"] = response
        return response

    @vf.cleanup
    async def close_episode(self, state: vf.State) -> None:
        episode = state.get("xtree_episode")
        if episode is not None:
            episode.close()

    @staticmethod
    def _settle(state: vf.State) -> TextEpisode:
        """Play the last reply if verifiers stopped (``max_turns``) before asking for its env turn."""
        episode: TextEpisode = state["xtree_episode"]
        trajectory = state.get("trajectory") or []
        if not episode.done and episode.n_steps < len(trajectory):
            last = trajectory[-1]["completion"]
            episode.step(_text(last[-1]) if last else "")
        return episode

    async def xtree_outcome(self, state: vf.State) -> float:
        """The episode's total env reward."""
        return float(self._settle(state).total_reward)

    async def xtree_bonus(self, states: list[vf.State]) -> list[float]:
        """Eq. 3's ``λ_g · Σ b_v`` over one group (λ_g from the group's win rate)."""
        assert self.tree is not None
        eps = [self._settle(s) for s in states]
        bonuses = [
            episode_bonus(self.tree, e.tokens, bonus=self.bonus, goal_options=e.goal_options) for e in eps
        ]
        extra, lam = group_bonus_rewards(
            [e.total_reward for e in eps],
            bonuses,
            [e.won for e in eps],
            lambda0=self.lambda0,
            w_ref=self.w_ref,
        )
        for s in states:
            s["lambda_g"] = lam
        return extra


def load_environment(env_id: str = "XTree-Countdown-v0", **kwargs: Any) -> XTreeVerifiersEnv:
    """verifiers' entry point: ``XTreeVerifiersEnv(env_id, **kwargs)``."""
    return XTreeVerifiersEnv(env_id, **kwargs)


class GeneratorClient(vf.Client):
    """A verifiers client answered by one of our generators (``scripted``, ``oracle``, ``hf``).

    It lets a verifiers env run here with no API server. Chat messages are rendered with the
    tokenizer's chat template when one is given.
    """

    def __init__(self, generator: Any, tokenizer: Any = None) -> None:
        self.generator, self.tokenizer, self.calls = generator, tokenizer, 0
        super().__init__(generator)

    def setup_client(self, config: Any) -> Any:
        return self.generator

    async def to_native_tool(self, tool: Any) -> Any:
        return tool

    async def to_native_prompt(self, messages: vf.Messages) -> tuple[Any, dict]:
        return [{"role": getattr(m, "role", "user"), "content": _text(m)} for m in messages], {}

    async def get_native_response(
        self, prompt: Any, model: str, sampling_args: Any, tools: Any = None, **kwargs: Any
    ) -> Any:
        from ..agents.types import GenRequest

        ids: list[int] = []
        if self.tokenizer is not None:
            ids = list(self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True))
        self.calls += 1
        turn = sum(1 for m in prompt if m["role"] == "assistant")  # scripted backends answer per turn
        return self.generator.generate([GenRequest(prompt_ids=ids, key=(turn,))])[0]

    async def raise_from_native_response(self, response: Any) -> None:
        return None

    async def from_native_response(self, response: Any) -> Response:
        msg = ResponseMessage(content=response.text, finish_reason="stop", is_truncated=False)
        return Response(
            id=f"xtree-{self.calls}", created=int(time.time()), model=self.generator.name, message=msg
        )

    async def close(self) -> None:
        return None


def run_group(env: XTreeVerifiersEnv, row: int, client: vf.Client, n: int) -> list[Any]:
    """Play ``n`` rollouts of dataset row ``row`` through verifiers and score them as one group."""
    import asyncio

    base = dict(env.dataset[row])
    inputs: Sequence[Any] = [{**base, "example_id": row} for _ in range(n)]
    return asyncio.run(env.run_group(list(inputs), client, client.generator.name, {}))
