"""Our envs and rewards inside other trainers: each adapter plays real episodes with the real package.

Countdown is the env throughout (pure Python, instant); the responses come from our ``scripted``
generator, or for TRL from a ``tiny-random`` model that GRPOTrainer really trains.
"""

from __future__ import annotations

import asyncio
import importlib.metadata as md
import re
import subprocess
import sys

import pytest

from xtree_gym import MinerConfig, Step, Trajectory, mine
from xtree_gym.adapters.text_env import TextEpisode, episode_bonus, run_sync


def _solution(seed: int) -> list[str]:
    ep = TextEpisode("XTree-Countdown-v0")
    ep.reset(seed=seed)
    return list(ep.info["solution"])


@pytest.fixture(autouse=True, scope="module")
def _fresh_accelerate_state_after_this_module():
    """TRL's trainers set Accelerate's process-wide state; later tests build their own Accelerator."""
    yield
    if "accelerate.state" in sys.modules:
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(reset_partial_state=True)


@pytest.fixture(scope="module")
def tree():
    """A tree mined from the solutions of 40 Countdown puzzles (successes) and the same without the last op (failures)."""
    trajs = []
    for seed in range(40):
        for cut, label in ((None, "win"), (-1, "stop")):
            ep = TextEpisode("XTree-Countdown-v0")
            ep.reset(seed=seed)
            plan = list(ep.info["solution"])[:cut]
            for action in plan:
                ep.step(action)
            steps = [Step(a, token=t) for a, t in zip(plan, ep.tokens)]
            trajs.append(Trajectory(f"{label}-{seed}", steps, ep.won, task="countdown"))
    t = mine(trajs, MinerConfig(min_freq=2, eta=0.0, cap=8, max_len=4))
    assert len(t.nodes) > 0
    return t


def _first_node_plan(tree) -> tuple[int, list[str], float]:
    """``(seed, solution, bonus)``: the solution without its last op matches a node (an all-fail group)."""
    for seed in range(30):
        sol = _solution(seed)
        ep = TextEpisode("XTree-Countdown-v0")
        ep.reset(seed=seed)
        for a in sol[:-1]:
            ep.step(a)
        b = episode_bonus(tree, ep.tokens)
        if b > 0 and not ep.won:
            return seed, sol, b
    pytest.fail("no seed whose unfinished solution earns a bonus")


def test_gymnasium_idioms_in_a_fresh_process():
    """Gymnasium >= 1.0 loads no plugins: ``gym.register_envs(xtree_gym)`` or the ``xtree_gym:`` prefix."""
    assert not [e for e in md.entry_points(group="gymnasium.envs") if e.value.startswith("xtree_gym")]
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'xtree_gym' not in sys.modules\n"
        "env = gym.make('xtree_gym:XTree-Countdown-v0'); obs, info = env.reset(seed=0)\n"  # the prefix imports us
        "assert 'Target' in obs, obs\n"
        "import xtree_gym\n"
        "gym.register_envs(xtree_gym)\n"
        "print(sorted(i for i in gym.registry if i.startswith('XTree-'))[:2])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "XTree-ALFWorld-v0" in out.stdout


def test_gem_plays_an_episode_with_the_running_bonus(tree):
    gem = pytest.importorskip("gem", reason="gem-llm is not installed: pip install 'xtree_gym[interop]'")
    from xtree_gym.adapters.gem_env import register_gem

    register_gem(prefix="gemtest/", tree=tree)
    env = gem.make("gemtest/XTree-Countdown-v0")
    obs, _ = env.reset(seed=3)
    assert "Target" in obs
    total, info = 0.0, {}
    for action in _solution(3):
        obs, r, term, _trunc, info = env.step(f"Thinking.\n{action}")
        total += r
    assert term and info["won"]
    assert info["xtree_lambda"] == 0.75  # first episode of the task: running win rate 0
    assert total == pytest.approx(10.0 + 0.75 * info["xtree_bonus"])


def test_openenv_episode_over_ws_carries_the_bonus(tree):
    pytest.importorskip("fastapi", reason="fastapi is not installed")
    from fastapi.testclient import TestClient

    try:
        from xtree_gym.adapters.openenv_env import make_app
    except ImportError as exc:
        pytest.skip(f"openenv-core is not installed ({exc}): pip install 'xtree_gym[interop]'")
    client = TestClient(make_app("XTree-Countdown-v0", seed=5, tree=tree))
    with client.websocket_connect("/ws") as ws:  # one session: one env across the episode's turns
        ws.send_json({"type": "reset", "data": {}})
        first = ws.receive_json()["data"]
        assert "Target" in first["observation"]["text"]
        body: dict = {}
        for action in _solution(5):
            ws.send_json({"type": "step", "data": {"reply": action}})
            body = ws.receive_json()["data"]
        assert body["done"] is True and body["reward"] == 10.0
        obs = body["observation"]
        assert (
            obs["won"] is True and obs["xtree_bonus"] == episode_bonus(tree, obs["tokens"]) and obs["tokens"]
        )
        ws.send_json({"type": "state"})
        assert ws.receive_json()["data"]["step_count"] == len(_solution(5))


def _scripted_chat_app(plans: dict[str, list[str]], calls: list[str]):
    """An OpenAI-compatible ``/v1/chat/completions`` (streaming or not) answering from ``plans``.

    The model cannot run here; this endpoint is the policy: turn k of the conversation whose prompt holds
    key ``line`` gets ``plans[line][k]``.
    """
    import json
    import time

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def chat(request):
        body = await request.json()
        msgs = body["messages"]
        text_of = "\n".join(str(m.get("content")) for m in msgs)
        plan = next(p for line, p in plans.items() if line in text_of)
        k = sum(1 for m in msgs if m["role"] == "assistant")
        text = plan[min(k, len(plan) - 1)]
        calls.append(text)
        head = {"id": f"x{len(calls)}", "created": int(time.time()), "model": body["model"]}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            return JSONResponse(head | {"object": "chat.completion", "choices": [choice], "usage": usage})
        chunk = head | {"object": "chat.completion.chunk"}
        events = [
            chunk
            | {
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
                ]
            },
            chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            chunk | {"choices": [], "usage": usage},
        ]

        async def stream():
            for e in events:
                yield f"data: {json.dumps(e)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_verifiers_v1_taskset_resolves_by_id():
    """verifiers finds our taskset, env and task type by id; tasks are seeds with the episode's first prompt."""
    pytest.importorskip(
        "verifiers.v1", reason="verifiers>=0.4 is not installed: pip install 'xtree_gym[interop]'"
    )
    from verifiers.v1.utils.loaders import environment_class, load_taskset, task_type

    from xtree_gym.adapters.verifiers_env import XTreeEnv, XTreeTask, XTreeTasksetConfig

    assert (
        environment_class("xtree-gym-verifiers") is XTreeEnv and task_type("xtree-gym-verifiers") is XTreeTask
    )
    cfg = XTreeTasksetConfig(id="xtree-gym-verifiers", num_examples=3, seed=4, harness="rlvmr")
    tasks = list(load_taskset(cfg).take(2))
    assert [t.data.info["seed"] for t in tasks] == [4, 5] and [t.data.idx for t in tasks] == [0, 1]
    ep = TextEpisode("XTree-Countdown-v0", harness="rlvmr")
    ep.reset(seed=5)
    system = [m["content"] for m in ep.messages() if m["role"] == "system"]
    assert tasks[1].data.prompt == ep.user_text() and [tasks[1].data.system_prompt] == (system or [None])


@pytest.mark.slow
def test_verifiers_v1_group_reward_is_eq3(tree, tmp_path, loopback, run_async, monkeypatch):
    """A real verifiers 0.4 episode: its null harness program (a subprocess) asks our scripted endpoint."""
    vf = pytest.importorskip(
        "verifiers.v1", reason="verifiers>=0.4 is not installed: pip install 'xtree_gym[interop]'"
    )
    from verifiers.v1.harnesses.null import NullHarnessConfig

    from xtree_gym.adapters.verifiers_env import XTreeEnv, XTreeEnvConfig, XTreeTasksetConfig

    seed, sol, _ = _first_node_plan(tree)
    win = 0 if seed != 0 else 1
    tree_path = tmp_path / "tree.json"
    tree.save(str(tree_path))
    target = {}
    for s in (seed, win):
        ep = TextEpisode("XTree-Countdown-v0")
        target[s] = ep.reset(seed=s).splitlines()[1]  # "Target: N" names the task in the prompt
    plans = {target[seed]: [*sol[:-1], "giving up"], target[win]: _solution(win)}
    calls: list[str] = []
    monkeypatch.setenv("XTREE_TEST_KEY", "unused")
    with loopback(_scripted_chat_app(plans, calls)) as url:
        taskset = XTreeTasksetConfig(
            id="xtree-gym-verifiers", num_examples=max(seed, win) + 1, max_steps=len(sol)
        )
        agent = vf.AgentConfig(harness=NullHarnessConfig(id="null"), runtime=vf.SubprocessConfig())
        env = XTreeEnv(XTreeEnvConfig(taskset=taskset, n=2, tree=str(tree_path), w_ref=0.4, agent=agent))
        tasks = {t.data.info["seed"]: t for t in env.taskset}
        client = vf.EvalClientConfig(base_url=f"{url}/v1", api_key_var="XTREE_TEST_KEY")
        ctx = vf.ModelContext(model="scripted", client=client)

        async def play():
            async with env.serving():
                return [await env.run_episode(tasks[s], ctx) for s in (seed, win)]

        lost, won = run_async(asyncio.wait_for(play(), timeout=300))
    assert not lost.errors and not won.errors and len(lost.traces) == len(won.traces) == 2
    assert all(t.ok for t in [*lost.traces, *won.traces])
    ep = TextEpisode("XTree-Countdown-v0")
    ep.reset(seed=seed)
    for a in sol[:-1]:
        ep.step(a)
    expect = 0.75 * episode_bonus(tree, ep.tokens)  # an all-fail group: λ_g = λ0
    assert expect > 0 and [t.reward for t in lost.traces] == pytest.approx([expect, expect])
    assert [t.rewards["xtree_bonus"].value for t in lost.traces] == pytest.approx([expect, expect])
    assert [t.info["xtree"]["tokens"] for t in lost.traces] == [ep.tokens, ep.tokens]
    # a winning group: λ_g = 0, the reward is the outcome alone
    assert [t.reward for t in won.traces] == [10.0, 10.0]
    assert [t.metrics["xtree_lambda_g"] for t in won.traces] == [0.0, 0.0]
    assert calls.count(sol[0]) == 2 and calls.count(_solution(win)[-1]) == 2


def test_tinker_group_rewards_add_the_bonus(tree):
    pytest.importorskip(
        "tinker_cookbook", reason="tinker-cookbook is not installed: pip install 'xtree_gym[tinker]'"
    )
    from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs
    from tinker_cookbook.rl.rollouts import do_group_rollout

    from xtree_gym.adapters.tinker_env import XTreeGroupBuilder
    from xtree_gym.agents.model.loading import tiny_tokenizer

    tok = tiny_tokenizer()
    seed, sol, _ = _first_node_plan(tree)

    class Replay(TokenCompleter):
        """Answers turn k with plan[k]; k is read from Countdown's own "Step k/30" line of the prompt."""

        def __init__(self, plan):
            self.plan = plan

        async def __call__(self, model_input, stop, *, max_tokens=None):
            k = int(re.search(r"Step (\d+)/", tok.decode(model_input.to_ints())).group(1))
            text = self.plan[min(k, len(self.plan) - 1)]
            return TokensWithLogprobs(tokens=tok.encode(text, add_special_tokens=False), maybe_logprobs=None)

    builder = XTreeGroupBuilder("XTree-Countdown-v0", tokenizer=tok, seed=seed, n=2, tree=tree, w_ref=0.4)
    group = run_sync(do_group_rollout(builder, Replay([*sol[:-1], "giving up"])))
    totals = group.get_total_rewards()
    assert len(totals) == 2
    ep = TextEpisode("XTree-Countdown-v0")
    ep.reset(seed=seed)
    for a in sol[:-1]:
        ep.step(a)
    assert totals == pytest.approx([0.75 * episode_bonus(tree, ep.tokens)] * 2)


def test_trl_env_methods_and_plan_reward(tree):
    pytest.importorskip("trl", reason="trl is not installed: pip install 'xtree_gym[interop]'")
    from xtree_gym.adapters.trl_env import XTreeTRLEnv, make_env_bonus_reward, replay_outcome

    seed, sol, _ = _first_node_plan(tree)
    envs = [XTreeTRLEnv("XTree-Countdown-v0") for _ in range(2)]
    for e, plan in zip(envs, (sol, sol[:-1])):
        e.reset(seed=seed)
        for a in plan:
            e.act(a)
    assert [e.get_reward() for e in envs] == [10.0, 0.0]
    fn = make_env_bonus_reward(tree, w_ref=0.85)  # w_g = 0.5: λ_g = 0.75 (1 − 0.5/0.85)
    got = fn(["p", "p"], ["", ""], environments=envs)
    lam = 0.75 * (1 - 0.5 / 0.85)
    assert got == pytest.approx([lam * episode_bonus(tree, e.episode.tokens) for e in envs])
    assert replay_outcome("XTree-Countdown-v0")("p", "\n".join(sol), seed=seed) == 1.0


def test_trl_grpo_trainer_logs_our_reward(tree, tmp_path):
    trl = pytest.importorskip("trl", reason="trl is not installed: pip install 'xtree_gym[interop]'")
    from datasets import Dataset

    from xtree_gym.adapters.trl_env import replay_outcome
    from xtree_gym.agents.model.loading import tiny_random
    from xtree_gym.rewards import XTreeRewardFunction

    model, tok = tiny_random(seed=0)
    rows = []
    for seed in range(2):
        ep = TextEpisode("XTree-Countdown-v0")
        rows.append({"prompt": [{"role": "user", "content": ep.reset(seed=seed)}], "seed": seed})
    inner = XTreeRewardFunction(
        tree, domain="countdown", outcome_fn=replay_outcome("XTree-Countdown-v0"), w_ref=0.4
    )
    calls: list[tuple[list[str], list[float]]] = []

    def xtree_bonus(prompts, completions, **kw):  # records what TRL handed over and what we answered
        out = inner(prompts, completions, **kw)
        calls.append(([str(c) for c in completions], out))
        return out

    cfg = trl.GRPOConfig(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=12, learning_rate=1e-2, logging_steps=1, report_to=[], use_cpu=True,
        save_strategy="no", seed=0, beta=0.0, bf16=False,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[xtree_bonus],
        args=cfg,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
    )
    trainer.train()
    logged = [
        h["rewards/xtree_bonus/mean"] for h in trainer.state.log_history if "rewards/xtree_bonus/mean" in h
    ]
    assert len(calls) == 2 and len(logged) == 2  # one call per step, each step's mean in the logs
    for (completions, out), mean in zip(calls, logged):
        assert len(completions) == 4 and mean == pytest.approx(sum(out) / len(out))


def test_trl_environment_factory_in_grpo_trainer(tree, tmp_path):
    """TRL's multi-turn path: a scripted policy's tool calls reach our env, its reward reaches TRL's logs.

    The model is tiny-random (TRL really computes its logprobs and updates it); only ``generate`` is
    scripted: it answers each turn with a ``<tool_call>`` for the ``act`` tool (Qwen 2.5's format, whose
    tool-capable chat template TRL ships). One group plays a solution (one member stops one op short, so the
    group's rewards differ and GRPO updates); the other stops one op short twice and earns Eq. 3's bonus.
    """
    trl = pytest.importorskip("trl", reason="trl is not installed: pip install 'xtree_gym[interop]'")
    import json

    import torch
    import transformers
    from datasets import Dataset
    from packaging.version import Version
    from trl.chat_template_utils import qwen2_5_chat_template

    from xtree_gym.adapters.trl_env import XTreeTRLEnv, make_env_bonus_reward
    from xtree_gym.agents.model.loading import tiny_random

    assert Version(transformers.__version__) >= Version("5.2.0"), (
        "environment_factory needs transformers>=5.2"
    )
    model, tok = tiny_random(seed=0)
    tok.chat_template = qwen2_5_chat_template  # tool-capable; TRL adds its response parser for it
    lose, lose_plan, _ = _first_node_plan(tree)  # a seed whose solution minus its last op earns a bonus
    win = 0 if lose != 0 else 1
    seed_of, plans = {}, {lose: lose_plan[:-1], win: _solution(win)}
    for s in (win, lose):
        ep = TextEpisode("XTree-Countdown-v0")
        seed_of[ep.reset(seed=s).splitlines()[1]] = s  # "Target: N" line -> seed
    played: list[tuple[int, int, str, str]] = []

    class RecordingEnv(XTreeTRLEnv):
        def act(self, action: str) -> str:
            """Execute one action in the environment and return what it shows next.

            Args:
                action: the action to execute, in the environment's own syntax.
            """
            out = super().act(action)
            played.append((id(self), self.seed, action, out.splitlines()[0]))
            return out

        def reset(self, seed=None, **row):
            self.seed = int(seed)
            return super().reset(seed=seed, **row)

    last_op_seen: dict[int, int] = {}

    def scripted_generate(input_ids, attention_mask=None, **kw):
        rows = []
        for ids, mask in zip(input_ids, attention_mask):
            text = tok.decode(ids[mask.bool()].tolist())
            seed = next(s for line, s in seed_of.items() if line in text)
            k = text.count("<tool_response>")
            if seed == win and k == len(plans[seed]) - 1:  # one member of the won group stops short
                last_op_seen[seed] = last_op_seen.get(seed, 0) + 1
                k += last_op_seen[seed] - 1
            if k < len(plans[seed]):
                call = {"name": "act", "arguments": {"action": plans[seed][k]}}
                reply = f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>"
            else:
                reply = "Done.<|im_end|>"
            rows.append(tok.encode(reply, add_special_tokens=False))
        width = max(len(r) for r in rows)
        pad = tok.pad_token_id
        new = torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=input_ids.dtype)
        return torch.cat([input_ids, new.to(input_ids.device)], dim=1)

    model.generate = scripted_generate
    rows = [
        {"prompt": [{"role": "user", "content": f"Solve puzzle {s} with the act tool."}], "seed": s}
        for s in (win, lose)
    ]
    cfg = trl.GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=512, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
        learning_rate=1e-2, beta=0.0, seed=0, bf16=False,
    )  # fmt: skip
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = trl.GRPOTrainer(
        model=model, args=cfg, train_dataset=Dataset.from_list(rows), processing_class=tok,
        reward_funcs=[make_env_bonus_reward(tree, w_ref=0.4)], environment_factory=RecordingEnv.factory("XTree-Countdown-v0"),
    )  # fmt: skip
    trainer.train()
    # every rollout's tool calls were executed in its own env, in order
    per_env: dict[int, list[str]] = {}
    for env_id, s, action, _ in played:
        per_env.setdefault(env_id, []).append(f"{s}:{action}")
    short = [f"{win}:{a}" for a in plans[win][:-1]]
    expect = sorted([[f"{win}:{a}" for a in plans[win]], short] + [[f"{lose}:{a}" for a in plans[lose]]] * 2)
    assert sorted(per_env.values()) == expect  # four rollouts, four envs, each its own plan in order
    assert sum(first.endswith("Target reached!") for _, s, _, first in played) == 1
    logs = {k: v for h in trainer.state.log_history for k, v in h.items()}
    assert logs["rewards/RecordingEnv/mean"] == pytest.approx(2.5)  # rewards 10, 0 | 0, 0
    ep = TextEpisode("XTree-Countdown-v0")
    ep.reset(seed=lose)
    for a in plans[lose]:
        ep.step(a)
    bonus = 0.75 * episode_bonus(tree, ep.tokens)  # lost group: win rate 0, λ_g = λ0 = 0.75
    # the other group's win rate 0.5 >= w_ref 0.4: λ_g = 0, it adds nothing
    assert bonus > 0 and logs["rewards/xtree_env_bonus/mean"] == pytest.approx(bonus / 2)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
