"""Group rollouts: bookkeeping, groups, invalid turns, faults (hang, crash), workers, determinism."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("gymnasium", reason="gymnasium is not installed")

from xtree_gym.agents.model.generation import ScriptedGenerator
from xtree_gym.agents.play.rollout import plan_groups, rollout
from xtree_gym.agents.play.testing import CRASHING_ENV, ECHO_ENV, HANGING_ENV, EchoHarness
from xtree_gym.agents.types import Episode, TaskSpec
from xtree_gym.corpus import Trajectory
from xtree_gym.errors import ConfigError, XTreeError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _scripted(**per_member):
    return ScriptedGenerator({(0, int(k[1:])): v for k, v in per_member.items()})


def test_group_members_share_the_seed_and_turns_are_recorded_exactly():
    gen = _scripted(
        m0=["<action>hello</action>", "<action>win</action>"], m1=["<think>", "<action>win</action>"]
    )
    eps = rollout(ECHO_ENV, [TaskSpec("echo", seed=7, key="k7")], gen, EchoHarness(), n=2)
    assert [(e.group, e.member) for e in eps] == [(0, 0), (0, 1)]
    assert eps[0].meta["initial_observation"] == eps[1].meta["initial_observation"]
    a, b = eps
    assert [t.action for t in a.turns] == ["hello", "win"] and a.success and a.terminated
    assert [t.observation for t in a.turns] == ["You said: hello", "You said: win"]
    assert [t.token for t in a.turns] == ["say<word>", "say<magic>"] and a.turns[0].slots == {"X": "hello"}
    assert a.reward == 1.0 and a.score == 1.0 and a.id == "echo/k7/0"
    # the unparseable response: env not stepped, turn flagged, counted, next prompt unchanged
    bad = b.turns[0]
    assert bad.invalid and bad.action is None and bad.parse_error == "no <action>...</action> block"
    assert bad.response == "<think>" and b.turns[1].action == "win" and b.success
    assert b.n_invalid == 1


def test_episode_record_is_a_corpus_record_with_ids_on_every_step():
    gen = ScriptedGenerator(["<action>hello</action>", "<action>win</action>"])
    (ep,) = rollout(ECHO_ENV, [TaskSpec("echo", seed=1)], gen, EchoHarness())
    row = json.loads(json.dumps(ep.to_trajectory().to_dict()))
    assert row["id"] == "echo/echo/1/0" and row["env"] == "echo" and row["success"] is True
    assert row["harness"] == "echo" and row["backend"] == "scripted" and row["group"] == 0
    step = row["steps"][1]
    assert (
        step["action"] == "win"
        and step["token"] == "say<magic>"
        and step["response"] == "<action>win</action>"
    )
    assert set(step) >= {"prompt_ids", "completion_ids", "logprobs", "observation", "reward", "invalid"}
    back = Episode.from_trajectory(Trajectory(**{**_traj_kwargs(row)}))
    assert [t.action for t in back.turns] == ["hello", "win"] and back.success


def _traj_kwargs(row):
    from xtree_gym.corpus import Step

    known = {"id", "env", "task", "goal", "success", "reward", "steps"}
    steps = []
    for s in row["steps"]:
        base = {k: s.get(k) for k in ("action", "observation", "thought", "token", "slots")}
        extra = {k: v for k, v in s.items() if k not in base}
        steps.append(
            Step(**{k: v for k, v in base.items() if v is not None or k in ("action",)}, extra=extra)
        )
    return {
        "id": row["id"],
        "steps": steps,
        "success": row["success"],
        "env": row["env"],
        "task": row["task"],
        "goal": row["goal"],
        "reward": row["reward"],
        "extra": {k: v for k, v in row.items() if k not in known},
    }


def test_step_cap_is_the_harness_limit_unless_max_steps():
    gen = ScriptedGenerator(["<action>hi</action>"], cycle=True)
    (ep,) = rollout(ECHO_ENV, [TaskSpec("echo")], gen, EchoHarness())
    assert len(ep.turns) == EchoHarness.step_limit and ep.truncated and not ep.success
    (ep,) = rollout(ECHO_ENV, [TaskSpec("echo")], gen, EchoHarness(), max_steps=2)
    assert len(ep.turns) == 2 and ep.truncated and ep.fault is None
    # invalid turns count against the cap too
    (ep,) = rollout(
        ECHO_ENV, [TaskSpec("echo")], ScriptedGenerator(["junk"], cycle=True), EchoHarness(), max_steps=3
    )
    assert [t.invalid for t in ep.turns] == [True, True, True] and ep.truncated


def test_generation_is_one_batched_call_per_turn_across_groups():
    calls = []

    class Counting(ScriptedGenerator):
        def generate(self, requests):
            calls.append([r.key for r in requests])
            return super().generate(requests)

    gen = Counting(["<action>win</action>"], cycle=True)
    tasks = [TaskSpec("echo", seed=s) for s in range(3)]
    eps = rollout(ECHO_ENV, tasks, gen, EchoHarness(), n=2)
    assert len(eps) == 6 and all(e.success for e in eps)
    assert calls == [[(g, m, 0) for g in range(3) for m in range(2)]]


def test_mixed_groups_are_consecutive_blocks():
    tasks = [TaskSpec(f"t{i}", seed=i) for i in range(5)]
    assert [[t.seed for t in g] for g in plan_groups(tasks, 2, "mixed")] == [[0, 1], [2, 3], [4]]
    gen = ScriptedGenerator(["<action>win</action>"], cycle=True)
    eps = rollout(ECHO_ENV, tasks, gen, EchoHarness(), n=2, group_mode="mixed")
    assert [(e.group, e.member, e.task) for e in eps] == [
        (0, 0, "t0"),
        (0, 1, "t1"),
        (1, 0, "t2"),
        (1, 1, "t3"),
        (2, 0, "t4"),
    ]
    with pytest.raises(ConfigError, match="group_mode"):
        plan_groups(tasks, 2, "random")


def test_crashing_env_truncates_its_episode_and_the_group_goes_on():
    gen = ScriptedGenerator(["<action>hi</action>", "<action>win</action>"], cycle=True)
    tasks = [
        TaskSpec("crash", env_kwargs={"crash_at": 2}),
        TaskSpec("fine", env_kwargs={"crash_at": 99}),
    ]
    eps = rollout(CRASHING_ENV, tasks, gen, EchoHarness(), n=1)
    crashed, fine = eps
    assert crashed.fault == "env raised RuntimeError: the simulator fell over"
    assert crashed.truncated and not crashed.success and len(crashed.turns) == 2
    assert crashed.turns[-1].info["fault"] == crashed.fault
    assert fine.fault is None and fine.success


def test_hanging_env_in_process_is_cut_by_the_step_timeout():
    gen = ScriptedGenerator(["<action>hi</action>"], cycle=True)
    t0 = time.monotonic()
    eps = rollout(
        HANGING_ENV, [TaskSpec("h", env_kwargs={"hang_at": 2})], gen, EchoHarness(), n=2, step_timeout=0.5
    )
    assert time.monotonic() - t0 < 10
    for ep in eps:
        assert "hung past the 0.5s timeout" in ep.fault and ep.truncated and len(ep.turns) == 2


def test_episode_timeout_truncates():
    class Slow(ScriptedGenerator):
        def generate(self, requests):
            time.sleep(0.3)
            return super().generate(requests)

    gen = Slow(["<action>hi</action>"], cycle=True)
    (ep,) = rollout(ECHO_ENV, [TaskSpec("e")], gen, EchoHarness(), max_steps=50, episode_timeout=0.8)
    assert "episode timeout" in ep.fault and 1 <= len(ep.turns) <= 4


def test_workers_kill_a_hung_env_and_survive_a_dead_one():
    gen = ScriptedGenerator(["<action>hi</action>", "<action>win</action>"], cycle=True)
    tasks = [
        TaskSpec("hang", env_kwargs={"hang_at": 1}),
        TaskSpec("die", env_kwargs={"crash_at": 2, "mode": "exit"}),
    ]
    t0 = time.monotonic()
    hang = rollout(HANGING_ENV, tasks[:1], gen, EchoHarness(), workers=2, step_timeout=2.0)
    hi = ScriptedGenerator(["<action>hi</action>"], cycle=True)
    die = rollout(CRASHING_ENV, tasks[1:], hi, EchoHarness(), n=2, workers=2, step_timeout=30)
    assert time.monotonic() - t0 < 90
    assert "hung past the 2s timeout; the worker was killed" in hang[0].fault
    assert all("env worker died during step (exit code 3)" in e.fault for e in die)
    two = ScriptedGenerator(
        {(g, m): ["<action>hi</action>", "<action>win</action>"] for g in (0, 1) for m in (0, 1)}
    )
    ok = rollout(ECHO_ENV, [TaskSpec("e", seed=2)] * 2, two, EchoHarness(), n=2, workers=2)
    assert [len(e.turns) for e in ok] == [2, 2, 2, 2] and all(e.success for e in ok)


def test_same_seed_same_rollouts_in_process_and_in_workers():
    def run(workers):
        script = ["<action>hi</action>", "junk", "<action>win</action>"]
        gen = ScriptedGenerator({(g, m): script[m:] for g in range(2) for m in range(2)})
        eps = rollout(
            ECHO_ENV, [TaskSpec("e", seed=s) for s in (1, 2)], gen, EchoHarness(), n=2, workers=workers
        )
        return [json.dumps(e.to_trajectory().to_dict(), sort_keys=True) for e in eps]

    first = run(0)
    assert first == run(0)
    assert first == run(2)


def test_bad_arguments_are_one_clear_error():
    gen = ScriptedGenerator([])
    with pytest.raises(ConfigError, match="n=0"):
        rollout(ECHO_ENV, [TaskSpec("e")], gen, EchoHarness(), n=0)
    with pytest.raises(XTreeError, match="unknown env id"):
        rollout("XTree-Nope-v0", [TaskSpec("e")], ScriptedGenerator(["x"]), EchoHarness())


def test_valid_actions_are_fetched_only_when_the_harness_lists_them():
    from xtree_gym.agents.play.testing import EchoEnv

    seen = []

    class Listing(EchoHarness):
        needs_valid_actions = True

        def render(self, state):
            seen.append(state.valid_actions)
            return super().render(state)

    gen = ScriptedGenerator(["<action>hi</action>"], cycle=True)
    before = EchoEnv.valid_calls
    rollout(ECHO_ENV, [TaskSpec("e")], gen, EchoHarness(), max_steps=3)
    assert EchoEnv.valid_calls == before
    rollout(ECHO_ENV, [TaskSpec("e")], gen, Listing(), max_steps=3)
    assert EchoEnv.valid_calls == before + 3 and seen == [["win", "wait"]] * 3


def test_tiny_random_rollouts_repeat_under_the_same_seed():
    pytest.importorskip("transformers", reason="the train extra is not installed")
    from xtree_gym.agents.model.generation import HFGenerator
    from xtree_gym.agents.model.loading import load_model

    model, tok = load_model("tiny-random")
    model.train()  # a trainer's live model: sampling must not use dropout, and the mode comes back

    def run(seed):
        gen = HFGenerator(model, tok, temperature=1.0, max_new_tokens=8, seed=seed)
        eps = rollout(ECHO_ENV, [TaskSpec("e", seed=1)], gen, EchoHarness(), n=2, tokenizer=tok, max_steps=2)
        return [[(t.completion_ids, t.logprobs) for t in e.turns] for e in eps]

    a = run(0)
    assert model.training
    assert a == run(0) and a != run(1)
    assert a[0] != a[1]  # members of a group sample independently


def test_node_harness_runs_every_action_tag_in_one_turn():
    from xtree_gym.agents.harness import get_harness

    text = "<planning>greet, then win</planning><action>hi</action><action>win</action><action>never</action>"
    (ep,) = rollout(ECHO_ENV, [TaskSpec("e")], ScriptedGenerator([text]), get_harness("node"))
    (turn,) = ep.turns
    assert ep.success and ep.terminated and turn.action == "hi; win; never" and turn.reward == 1.0
    assert turn.observation == "You said: win" and turn.token is None  # the episode ended after the 2nd
    assert [(p["action"], p["token"]) for p in turn.info["primitives"]] == [
        ("hi", "say<word>"),
        ("win", "say<magic>"),
    ]
    # the budget counts env actions: a 3-action turn with 2 left runs 2
    (ep,) = rollout(
        ECHO_ENV,
        [TaskSpec("e")],
        ScriptedGenerator([text.replace("win", "wait")]),
        get_harness("node"),
        max_steps=2,
    )
    assert len(ep.turns) == 1 and len(ep.turns[0].info["primitives"]) == 2 and ep.truncated


def test_idle_envs_are_reused_and_bounded():
    from xtree_gym.agents.play.testing import EchoEnv

    gen = ScriptedGenerator(["<action>win</action>"], cycle=True)
    base_open, EchoEnv.open_peak = EchoEnv.open_now, 0
    same = [TaskSpec("e", seed=s) for s in range(4)]
    rollout(ECHO_ENV, same, gen, EchoHarness(), max_live=1)
    assert EchoEnv.open_peak - base_open == 1  # one env, reset for every task
    EchoEnv.open_peak = 0
    distinct = [TaskSpec("e", env_kwargs={"max_steps": 10 + i}) for i in range(6)]  # one env each
    rollout(ECHO_ENV, distinct, gen, EchoHarness(), max_live=2)
    assert EchoEnv.open_peak - base_open <= 4 and EchoEnv.open_now == base_open  # 2 live + 2 idle; all closed


def test_the_progress_bar_moves_per_turn_and_per_generated_token(capsys, monkeypatch):
    """A long turn (a small model on CPU) shows tokens moving, not a 0/N bar until an episode ends."""
    pytest.importorskip("transformers", reason="the train extra is not installed")
    from xtree_gym.agents.model.generation import HFGenerator
    from xtree_gym.agents.model.loading import load_model

    monkeypatch.setenv("XTREE_PROGRESS", "1")
    model, tok = load_model("tiny-random")
    gen = HFGenerator(model, tok, temperature=1.0, max_new_tokens=6, seed=0)
    streamed: list[int] = []
    original = rollout.__globals__["_Run"].count_streamed

    def spy(self, k):
        streamed.append(k)
        return original(self, k)

    monkeypatch.setattr(rollout.__globals__["_Run"], "count_streamed", spy)
    eps = rollout(
        ECHO_ENV, [TaskSpec("e", seed=1)], gen, EchoHarness(), n=2, tokenizer=tok, max_steps=2, progress=True
    )
    err = capsys.readouterr().err
    turns = sum(len(e.turns) for e in eps)
    assert streamed and set(streamed) <= {1, 2}  # one token per live sequence and decoding step
    assert f"{turns} turns" in err and "tok/s" in err
    assert gen.on_tokens is None  # the hook is taken off when the rollout ends
