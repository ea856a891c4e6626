"""`xtree eval` and evaluate(): folds, golden rows (scripted), oracle wins on real envs, tiny-random end to end."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gymnasium", reason="gymnasium is not installed")

from xtree_gym.agents.model.generation import ScriptedGenerator
from xtree_gym.agents.play.evaluate import enumerate_fold, evaluate, summarize
from xtree_gym.agents.types import Episode
from xtree_gym.cli import main
from xtree_gym.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


RESULT_KEYS = {"env", "harness", "fold", "model", "backend", "episodes", "success_rate", "score", "per_task"}


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_folds_enumerate_in_full_and_subsets_are_seeded():
    counts = {f: len(enumerate_fold("XTree-ScienceWorld-v0", f)[1]) for f in ("G0", "G1", "G2")}
    assert counts == {"G0": 1661, "G1": 1684, "G2": 549}
    assert enumerate_fold("XTree-ScienceWorld-v0", None)[0] == "G0"
    fold, ws = enumerate_fold("XTree-WebShop-v0", None)
    assert fold == "test" and [s.reset_options["goal_idx"] for s in ws] == list(range(500))
    a = enumerate_fold("XTree-ScienceWorld-v0", "G1", tasks=20, seed=3)[1]
    assert a == enumerate_fold("XTree-ScienceWorld-v0", "G1", tasks=20, seed=3)[1]
    assert a != enumerate_fold("XTree-ScienceWorld-v0", "G1", tasks=20, seed=4)[1]
    boil = enumerate_fold("XTree-ScienceWorld-v0", "G1", env_args={"task": "boil"})[1]
    assert {s.task for s in boil} == {"boil"} and [s.seed for s in boil] == list(range(21, 30))
    with pytest.raises(ConfigError, match="unknown WebShop fold"):
        enumerate_fold("XTree-WebShop-v0", "G1")


def test_summary_counts_rlvmr_success_beside_the_strict_one():
    def ep(task, success, score, done, kept):
        return Episode(
            "x", "scienceworld", task, "", 0, 0, 0, success=success, score=score,
            truncated=True, meta={"done_rlvmr": done, "score_rlvmr": kept},
        )  # fmt: skip

    eps = [
        ep("boil", True, 1.0, True, 100),
        ep("boil", False, 0.5, True, 50),
        ep("melt", False, 0.0, True, 0),
    ]
    r = summarize(eps, "scienceworld")
    assert r["success_rate"] == pytest.approx(1 / 3) and r["success_rate_rlvmr"] == pytest.approx(2 / 3)
    assert r["score"] == pytest.approx(0.5) and r["per_task"]["boil"]["success_rate_rlvmr"] == 1.0


# -- golden rows: one WebShop step and one ScienceWorld step written out by hand --------------------
def test_golden_webshop_rows_scripted(webshop_data_dir, tmp_path):
    gen = ScriptedGenerator(
        ["<think>the goal names a shirt</think><action>click[buy now]</action>", "no tags here"]
    )
    evaluate(
        "XTree-WebShop-v0", harness="verl-agent", generator=gen, tasks=1, max_steps=2,
        env_args={"data_dir": str(webshop_data_dir)}, output_dir=tmp_path,
    )  # fmt: skip
    (row,) = _rows(tmp_path / "episodes.jsonl")
    goal = (
        "Find me hand wash, machine wash women's sweaters with long sleeve, unique design with color: "
        "mocha brown, and size: large, and price lower than 50.00 dollars"
    )
    page = f"WebShop [SEP] Instruction: [SEP] {goal} [SEP] Search"
    assert {k: row[k] for k in ("id", "env", "task", "goal", "success", "reward", "score", "key", "truncated")} == {
        "id": "webshop/goal/432/0", "env": "webshop", "task": "webshop", "goal": goal, "success": False,
        "reward": 0.0, "score": 0.0, "key": "goal/432", "truncated": True,
    }  # fmt: skip
    assert row["steps"] == [
        {
            "action": "click[buy now]", "observation": page, "thought": "the goal names a shirt",
            "token": "click<buy>", "slots": {"button": "buy now"},
            "response": "<think>the goal names a shirt</think><action>click[buy now]</action>",
            "prompt_ids": [], "completion_ids": [], "logprobs": [], "reward": 0.0, "invalid": True,
            "info": {"invalid": True, "invalid_action": True, "won": False, "page": "search", "goal_idx": 432},
        },
        {
            "action": "", "observation": "Invalid response: no <action>...</action> block in the response",
            "token": "noop<empty>", "slots": {"rest": ""}, "response": "no tags here",
            "prompt_ids": [], "completion_ids": [], "logprobs": [], "reward": 0.0, "invalid": True,
            "parse_error": "no <action>...</action> block in the response",
        },
    ]  # fmt: skip


def test_golden_scienceworld_row_scripted_with_token_ids(sciworld_jvm, tmp_path):
    from xtree_gym.agents.model.loading import tiny_tokenizer

    tok = tiny_tokenizer()
    text = "<think>out first</think><action>open door to kitchen</action>"
    evaluate(
        "XTree-ScienceWorld-v0", harness="rlvmr", generator=ScriptedGenerator([text], tokenizer=tok),
        fold="G0", tasks=1, max_steps=1, env_args={"task": "boil", "jvm": sciworld_jvm}, output_dir=tmp_path,
    )  # fmt: skip
    ep_rows = _rows(tmp_path / "episodes.jsonl")
    step = ep_rows[0]["steps"][0]
    goal = (
        "Your task is to boil lead. For compounds without a boiling point, combusting the substance is "
        "also acceptable. First, focus on the substance. Then, take actions that will cause it to change "
        "its state of matter."
    )
    assert ep_rows[0]["id"] == "scienceworld/boil/20/0" and ep_rows[0]["goal"] == goal
    assert {k: step[k] for k in ("action", "observation", "thought", "token", "slots", "response", "reward")} == {
        "action": "open door to kitchen", "observation": "The door is now open.", "thought": "out first",
        "token": "open<door>", "slots": {"template": "open X", "X": "door to kitchen", "X_to": "kitchen"},
        "response": text, "reward": 0.0,
    }  # fmt: skip
    assert step["info"] == {
        "task": "boil", "task_id": "1-1", "variation": 20, "score": 0, "won": False,
        "moves": 1, "steps": 1, "invalid_action": False,
    }  # fmt: skip
    assert tok.decode(step["completion_ids"]) == text and step["logprobs"] == [0.0] * len(
        step["completion_ids"]
    )
    prompt = tok.decode(step["prompt_ids"])
    assert (
        prompt.startswith("<|im_start|>user\n")
        and goal in prompt
        and prompt.endswith("<|im_start|>assistant\n")
    )


# -- the oracle wins real episodes through the full parse path --------------------------------------
def test_oracle_wins_scienceworld_through_rlvmr(sciworld_jvm):
    r = evaluate(
        "XTree-ScienceWorld-v0", harness="rlvmr", backend="oracle", fold="G1", tasks=2, max_steps=60,
        env_args={"task": "find-plant", "jvm": sciworld_jvm},
    )  # fmt: skip
    assert (
        r["episodes"] == 2
        and r["success_rate"] == 1.0
        and r["success_rate_rlvmr"] == 1.0
        and r["score"] == 1.0
    )


def test_oracle_wins_concurrent_scienceworld_episodes_on_one_jvm(sciworld_jvm):
    """Issue 33: episodes whose resets run at once (the eval's step timeout puts each on a thread) in one
    JVM got crossed worlds -- find-plant/248 saw one world and was handed another's gold path. Each
    episode must play its own variation: the oracle wins both, with no refused action."""
    from xtree_gym.agents.harness import get_harness
    from xtree_gym.agents.model.generation import make_generator
    from xtree_gym.agents.play.rollout import rollout
    from xtree_gym.agents.types import TaskSpec

    pairs = [("find-plant", 248), ("test-conductivity-of-unknown-substances", 548)]
    specs = [TaskSpec(t, seed=v, reset_options={"task": t, "variation": v}, key=f"{t}/{v}") for t, v in pairs]
    eps = rollout(
        "XTree-ScienceWorld-v0", specs, make_generator("oracle"), get_harness("rlvmr"), max_steps=60,
        env_kwargs={"jvm": sciworld_jvm, "step_limit": None}, step_timeout=300.0,
    )  # fmt: skip
    assert len(eps) == 2 and [e.meta["key"] for e in eps] == [f"{t}/{v}" for t, v in pairs]
    for e in eps:
        refused = [t.action for t in e.turns if t.invalid]
        assert e.success and e.score == 1.0 and not refused and e.fault is None, (e.meta["key"], refused)


def _expert_results(data_dir, goal_ids):
    """The expert shopper's own (won, reward) on each goal, played directly (no harness, no parse)."""
    import random

    import gymnasium as gym

    from xtree_gym.collect.webshop import run_episode

    env = gym.make("XTree-WebShop-v0", data_dir=str(data_dir))
    try:
        recs = [run_episode(env.unwrapped, g, "expert", random.Random(0)) for g in goal_ids]
    finally:
        env.close()
    return [(bool(r["success"]), float(r["reward"])) for r in recs]


def test_oracle_wins_webshop_through_both_harnesses_and_resumes(webshop_data_dir, tmp_path):
    args = {"data_dir": str(webshop_data_dir)}
    for harness in ("verl-agent", "react"):
        out = tmp_path / harness
        r = evaluate(
            "XTree-WebShop-v0", harness=harness, backend="oracle", tasks=3, env_args=args, output_dir=out
        )
        rows = _rows(out / "episodes.jsonl")
        goals = [int(row["id"].split("goal/")[1].split("/")[0]) for row in rows]
        # Through the full parse path the oracle does exactly what the expert does on its own; under the
        # original WebShop reward the expert itself misses a few goals (docs/webshop.md: 0.937 success).
        expert = _expert_results(webshop_data_dir, goals)
        assert [(row["success"], row["reward"]) for row in rows] == expert
        assert r["success_rate"] == sum(w for w, _ in expert) / 3 >= 2 / 3 and r["episodes"] == 3
        assert set(r) >= RESULT_KEYS and json.loads((out / "results.json").read_text()) == r
    again = evaluate(
        "XTree-WebShop-v0", harness="react", backend="oracle", tasks=3, env_args=args, output_dir=out
    )
    assert again["resumed"] == 3 and len(_rows(out / "episodes.jsonl")) == 3
    with pytest.raises(ConfigError, match="holds another evaluation"):
        evaluate(
            "XTree-WebShop-v0", harness="verl-agent", backend="oracle", tasks=3, env_args=args, output_dir=out
        )


def test_resume_replays_a_group_cut_short_and_drops_a_torn_line(webshop_data_dir, tmp_path):
    args = {"data_dir": str(webshop_data_dir)}

    def run():
        return evaluate(
            "XTree-WebShop-v0",
            harness="verl-agent",
            backend="oracle",
            tasks=2,
            n=2,
            env_args=args,
            output_dir=tmp_path,
        )

    run()
    path = tmp_path / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:40])  # the last group lost a member mid-write
    r = run()
    rows = _rows(path)
    assert r["resumed"] == 2 and r["episodes"] == 4 and len(rows) == 4
    assert sorted((x["key"], x["member"]) for x in rows) == sorted(
        (x["key"], x["member"]) for x in map(json.loads, lines)
    )


@pytest.mark.browser
def test_oracle_wins_miniwob_through_browsergym(browser_chromium):
    for task in ("click-button", "enter-text"):
        r = evaluate(
            "XTree-MiniWoB-v0",
            harness="browsergym",
            backend="oracle",
            fold="scripted",
            tasks=1,
            env_args={"task": task},
        )
        assert r["episodes"] == 1 and r["success_rate"] == 1.0, r


# -- tiny-random end to end through the CLI, then `xtree mine` on what it wrote ---------------------
def test_tiny_random_end_to_end_through_xtree_eval_and_mine(webshop_data_dir, tmp_path, capsys):
    pytest.importorskip("transformers", reason="the train extra is not installed")
    from xtree_gym.agents.model.loading import tiny_tokenizer

    out = tmp_path / "run"
    argv = [
        "eval", "XTree-WebShop-v0", "--model", "tiny-random", "--harness", "verl-agent", "--tasks", "2",
        "--n", "2", "--max-steps", "2", "--max-new-tokens", "12", "--temperature", "1.0",
        "--env-arg", f"data_dir={webshop_data_dir}", "-o", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out.splitlines()[0])
    assert shown["backend"] == "hf" and shown["episodes"] == 4
    rows = _rows(out / "episodes.jsonl")
    assert len(rows) == 4 and {r["member"] for r in rows} == {0, 1}
    tok = tiny_tokenizer()
    for row in rows:
        assert row["model"] == "tiny-random" and len(row["steps"]) == 2
        for step in row["steps"]:
            assert 0 < len(step["completion_ids"]) <= 12 and len(step["logprobs"]) == len(
                step["completion_ids"]
            )
            assert tok.decode(step["completion_ids"], skip_special_tokens=True) == step["response"]
            assert all(lp <= 0 for lp in step["logprobs"])
            assert row["goal"] in tok.decode(step["prompt_ids"])
    results = json.loads((out / "results.json").read_text())
    assert set(results) >= RESULT_KEYS and results["model"] == "tiny-random"
    assert main(["mine", str(out / "episodes.jsonl"), "-o", str(tmp_path / "tree.json")]) == 0
    assert json.loads((tmp_path / "tree.json").read_text())


def test_eval_needs_a_model_for_hf_and_says_so(capsys, tmp_path):
    assert main(["eval", "XTree-WebShop-v0", "--harness", "verl-agent", "-o", str(tmp_path)]) == 1
    assert "the hf backend needs --model" in capsys.readouterr().err


@pytest.mark.slow
def test_one_smollm2_episode(webshop_data_dir, tmp_path):
    pytest.importorskip("gguf", reason="the train extra (gguf) is not installed")
    r = evaluate(
        "XTree-WebShop-v0", model="smollm2", harness="verl-agent", backend="hf", tasks=1, max_steps=2,
        env_args={"data_dir": str(webshop_data_dir)}, sampling={"max_new_tokens": 64}, output_dir=tmp_path,
    )  # fmt: skip
    (row,) = _rows(tmp_path / "episodes.jsonl")
    assert r["episodes"] == 1 and len(row["steps"]) == 2
    assert all(s["completion_ids"] and s["response"] for s in row["steps"])


# -- `xtree eval --harness node`: every turn runs through the MacroAction wrapper (App. D) -----------
REFUSED = ["op(+, 999, 998)", "op(*, 997, 2)", "op(-, 996, 1)", "op(+, 995, 3)"]


def _node_eval(tmp_path, name, workers):
    from xtree_gym.agents.harness import get_harness

    macro = get_harness("node").format_actions(REFUSED, "numbers that are not there")
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps(["no tags at all", macro, macro]))  # cycled: 1 + 4 + 4 budget a cycle
    out = tmp_path / name
    argv = [
        "eval", "XTree-Countdown-v0", "--harness", "node", "--backend", "scripted",
        "--responses", str(responses), "--tasks", "1", "--workers", str(workers), "-o", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    (row,) = _rows(out / "episodes.jsonl")
    return row


def test_eval_node_harness_goes_through_the_macro_wrapper(tmp_path, monkeypatch, capsys):
    from xtree_gym.wrappers.macro import MacroAction

    calls: list[tuple[int, int]] = []  # (actions asked, budget left after) per wrapper step
    real_step = MacroAction.step

    def spy(self, action):
        answer = real_step(self, action)
        calls.append((len(action), self.budget_left))
        return answer

    monkeypatch.setattr(MacroAction, "step", spy)
    row = _node_eval(tmp_path, "local", workers=0)
    steps = row["steps"]
    # 3 cycles of (junk, 4, 4) spend 27 of the 30, then junk (28) and a turn cut after 2 actions (30)
    assert len(steps) == 11 and row["truncated"] and not row["success"]
    assert [s.get("parse_error") is not None for s in steps] == [True, False, False] * 3 + [True, False]
    assert [n for n, _ in calls] == [4] * 7 and [left for _, left in calls][-1] == 0
    assert [left for _, left in calls][:2] == [25, 21]  # the junk turn before was charged to the wrapper
    prims = [len(s.get("info", {}).get("primitives", [])) for s in steps]
    assert sum(prims) == 26 and prims[-1] == 2  # 30 budget = 26 env actions + 4 junk turns
    first = steps[1]["observation"].splitlines()
    assert first[0].startswith("Action 'op(+, 999, 998)' failed: 999 is not in the pool")
    assert len([ln for ln in first if ln.startswith("Action ")]) == 3  # the 4th's error is the observation
    assert steps[1]["action"] == "; ".join(REFUSED) and steps[1]["invalid"]
    # the same protocol inside an env worker process: the same episode
    monkeypatch.undo()
    assert _node_eval(tmp_path, "worker", workers=1)["steps"] == steps


def test_eval_takes_the_harness_stop_and_response_length_unless_given(monkeypatch, tmp_path):
    """A model that never closes its tag must not run on for 512 tokens a turn: the defaults are the
    harness's (``</action>``, its protocol's length); explicit settings win."""
    from xtree_gym.agents.harness.base import get_harness
    from xtree_gym.agents.play import evaluate as ev

    seen: list[dict] = []

    def fake_generator(backend, model, *, device, sampling):
        seen.append(dict(sampling))
        raise RuntimeError("stop here")

    monkeypatch.setattr(ev, "_generator", fake_generator)
    for sampling in ({}, {"max_new_tokens": 40, "stop": ("\n",)}):
        with pytest.raises(RuntimeError, match="stop here"):
            ev.evaluate(
                "XTree-Countdown-v0", model="tiny-random", harness="rlvmr", tasks=1, sampling=sampling
            )
    rlvmr = get_harness("rlvmr")
    assert seen[0]["stop"] == ("</action>",) == rlvmr.stop
    assert seen[0]["max_new_tokens"] == rlvmr.response_tokens == 256
    assert seen[1]["stop"] == ("\n",) and seen[1]["max_new_tokens"] == 40
