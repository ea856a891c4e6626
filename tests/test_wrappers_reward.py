"""XTreeBonus and InvalidActionPenalty: on a replay env, on every ScienceWorld gold episode, and live."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

from xtree_gym.corpus import Step, Trajectory
from xtree_gym.errors import ConfigError, EnvConfigError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.rewards import group_rewards, lambda_g, sequence_bonus
from xtree_gym.wrappers.reward import InvalidActionPenalty, XTreeBonus


class Replay(gym.Env):
    """Replays recorded tokens: step i reports ``tokens[i]`` whatever the action; ends after the last."""

    observation_space = action_space = gym.spaces.Text(64)

    def __init__(self, tokens: list[str], *, report: bool = True, won: bool = False, invalid_at: set[int] = frozenset(), task: str = "t") -> None:  # fmt: skip
        self.tokens, self.report, self.won, self.invalid_at, self.task = tokens, report, won, invalid_at, task
        self.i = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        self.i = 0
        return "", dict(getattr(self, "reset_info", {"task": self.task}))

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        tok = self.tokens[self.i]
        info: dict[str, Any] = {"won": self.won}
        if self.report:
            info["xtree"] = {"token": tok, "invalid": self.i in self.invalid_at}
        self.i += 1
        done = self.i == len(self.tokens)
        return "", 1.0 if (done and self.won) else 0.0, done, False, info


def run(env: gym.Env, actions: list[Any] | None = None, n: int | None = None) -> list[tuple]:
    env.reset()
    out = []
    for a in actions if actions is not None else [None] * (n or 0):
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.fixture(scope="module")
def abc_tree():
    trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
    return mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))  # S0 = a b, S1 = S0 c, S2 = S1 S0


def test_record_mode_keeps_the_reward_and_reports_the_bonus(abc_tree):
    env = XTreeBonus(Replay(list("abcabz")), abc_tree)
    steps = run(env, n=6)
    assert [s[1] for s in steps] == [0.0] * 6
    infos = [s[4]["xtree"] for s in steps]
    assert [x["bonus"] for x in infos] == [0.0, 1.5, 0.5, 0.0, 0.5, 0.0]
    assert [x["completed"] for x in infos] == [[], ["S0"], ["S1"], [], ["S0", "S2"], []]
    assert infos[-1]["matched"] == ("S0", "S1", "S2") and infos[-1]["episode_bonus"] == 2.5
    assert infos[-1]["weight"] is None and infos[-1]["token"] == "z"
    # reset clears the episode: the same nodes pay again
    again = run(env, n=6)
    assert again[1][4]["xtree"]["bonus"] == 1.5 and again[0][4]["xtree"]["matched"] == ()


def test_fixed_weight_and_no_nesting(abc_tree):
    env = XTreeBonus(Replay(list("abcab")), abc_tree, weight=0.5, nesting=False)
    assert [s[1] for s in run(env, n=5)] == [0.0, 0.75, 1.0, 0.0, 1.25]


def test_running_weight_follows_the_task_win_rate(abc_tree):
    base = Replay(list("ab"), won=True)
    env = XTreeBonus(base, abc_tree, weight="running", window=2, w_ref=0.4)
    first = run(env, n=2)
    assert first[1][4]["xtree"]["weight"] == 0.75 and first[1][1] == pytest.approx(1.0 + 0.75 * 1.5)
    second = run(env, n=2)  # one win in the window: rate 1 >= w_ref
    assert second[1][4]["xtree"]["weight"] == 0.0 and second[1][1] == 1.0
    base.won = False
    run(env, n=2)
    run(env, n=2)  # the window now holds two losses
    assert run(env, n=2)[1][4]["xtree"]["weight"] == 0.75
    base.task = "other"
    assert env.win_rate.rate("other") == 0.0 and env.win_rate.rate("t") == 0.0


def test_canonicalizer_when_the_env_reports_no_token(abc_tree):
    env = XTreeBonus(Replay(list("abc"), report=False), abc_tree, canonicalizer=lambda a: a.lower())
    steps = run(env, ["A", "B", "C"])
    assert steps[-1][4]["xtree"]["matched"] == ("S0", "S1")
    with pytest.raises(EnvConfigError, match="canonicalizer"):
        run(XTreeBonus(Replay(list("ab"), report=False), abc_tree), ["a"])
    with pytest.raises(ConfigError, match="weight"):
        XTreeBonus(Replay(["a"]), abc_tree, weight="adaptive")
    with pytest.raises(ConfigError, match="matching"):
        XTreeBonus(Replay(["a"]), abc_tree, matching="greedy")


def test_invalid_steps_break_chains_unless_counted(abc_tree):
    counted = run(XTreeBonus(Replay(list("ab"), invalid_at={1}), abc_tree, count_invalid=True), n=2)
    assert counted[-1][4]["xtree"]["matched"] == ("S0",)
    skipped = run(XTreeBonus(Replay(list("ab"), invalid_at={1}), abc_tree), n=2)  # the default
    assert skipped[-1][4]["xtree"]["matched"] == () and skipped[-1][4]["xtree"]["bonus"] == 0.0
    # a refused step breaks the chain: "a", refused "b", "a", "b" completes S0 only at the end
    broken = run(XTreeBonus(Replay(list("abab"), invalid_at={1}), abc_tree), n=4)
    assert [s[4]["xtree"]["completed"] for s in broken] == [[], [], [], ["S0"]]


def test_tiling_mode_pays_the_tiling_at_the_end(abc_tree):
    steps = run(XTreeBonus(Replay(list("abzab")), abc_tree, weight=1.0, matching="tiling"), n=5)
    assert [s[1] for s in steps] == [0.0, 0.0, 0.0, 0.0, 1.5]
    assert steps[-1][4]["xtree"]["matched"] == ("S0",)
    assert sequence_bonus(abc_tree, list("abzab"), matching="tiling").total == 1.5


def test_webshop_goal_options_and_task_come_from_the_reset_info():
    from xtree_gym.mining.tree import Node, XTree

    exp = ("search<query>", "click<item>", "click<option-size>", "click<option-color>")
    tree = XTree([Node("S0", ("S", "x"), 3, 4, exp, 10, success=0.5)])
    base = Replay(list(exp), won=True)
    base.reset_info = {"goal": {"index": 7, "goal_options": {"color": "blue"}}}
    env = XTreeBonus(base, tree, bonus="webshop", weight="running", w_ref=0.85)
    steps = run(env, n=4)
    # k_v = 3 (the size click is not the goal's), T = 4: 0.5 * 3 / 4 * 10, at λ0 = 0.75
    assert steps[-1][4]["xtree"]["bonus"] == pytest.approx(3.75)
    assert steps[-1][1] == pytest.approx(1.0 + 0.75 * 3.75)
    assert env.win_rate.rate("goal-7") == 1.0


def test_the_default_invalid_test_reads_flags_not_text(abc_tree):
    class Refuses(Replay):  # answers like ScienceWorld but flags nothing: the wrappers must not guess
        def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
            _, r, term, trunc, info = super().step(action)
            return "No known action matches that input.", r, term, trunc, info

    assert [s[1] for s in run(InvalidActionPenalty(Refuses(list("ab"))), n=2)] == [0.0, 0.0]
    custom = InvalidActionPenalty(
        Refuses(list("ab")), invalid_fn=lambda obs, info: obs.startswith("No known")
    )
    assert [s[1] for s in run(custom, n=2)] == pytest.approx([-0.1, -0.1])
    kept = run(XTreeBonus(Refuses(list("ab")), abc_tree), n=2)  # nothing flagged: the tokens count
    assert kept[-1][4]["xtree"]["matched"] == ("S0",)


def test_invalid_action_penalty_reads_both_conventions():
    class Env(Replay):
        def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
            obs, r, term, trunc, info = super().step(action)
            info["invalid_action"] = action == "top-level"
            return obs, r, term, trunc, info

    env = InvalidActionPenalty(Env(list("abc"), invalid_at={1}))
    steps = run(env, ["top-level", "x", "ok"])
    assert [s[1] for s in steps] == pytest.approx([-0.1, -0.1, 0.0])
    assert [s[4]["invalid_penalty"] for s in steps] == [0.1, 0.1, 0.0]
    with pytest.raises(ConfigError):
        InvalidActionPenalty(Env(["a"]), penalty=-1)


def test_every_gold_episode_matches_the_offline_matcher(sw_gold_tree, sw_gold_tokens):
    """826 ScienceWorld gold episodes replayed through the wrapper: streamed = offline matches."""
    env = XTreeBonus(Replay(["x"]), sw_gold_tree)
    n_matched = 0
    for tokens in sw_gold_tokens:
        env.env.tokens = tokens
        steps = run(env, n=len(tokens))
        completed = [m for s in steps for m in s[4]["xtree"]["completed"]]
        offline = sw_gold_tree.find_matches(tokens)
        assert completed == [m.node for m in offline]
        assert set(steps[-1][4]["xtree"]["matched"]) == {m.node for m in offline}
        assert steps[-1][4]["xtree"]["episode_bonus"] == pytest.approx(
            sequence_bonus(sw_gold_tree, tokens).total
        )
        n_matched += len(steps[-1][4]["xtree"]["matched"])
    assert n_matched > len(sw_gold_tokens)  # the tree is not empty on its own corpus


@pytest.mark.jvm
def test_live_scienceworld_gold_episode(sciworld_env, sw_gold_corpus, sw_gold_tree, sw_gold_tokens):
    """A real simulator run of two gold episodes, then Eq. 3 over a group with failed rollouts."""
    picks = [
        0,
        next(i for i, t in enumerate(sw_gold_corpus) if t.task != sw_gold_corpus[0].task and t.success),
    ]
    env = XTreeBonus(sciworld_env, sw_gold_tree)
    for idx in picks:
        traj, tokens = sw_gold_corpus[idx], sw_gold_tokens[idx]
        env.reset(options={"task": traj.task, "variation": traj.extra["variation"]})
        live_tokens, completed = [], []
        for step in traj.steps:
            _, reward, _, _, info = env.step(step.action)
            assert reward == step.extra.get("reward", reward)  # record mode: the score change, untouched
            live_tokens.append(info["xtree"]["token"])
            completed.extend(info["xtree"]["completed"])
        assert live_tokens == tokens
        assert completed == [m.node for m in sw_gold_tree.find_matches(tokens)]
        assert info["won"] == traj.success
        gold_bonus = info["xtree"]["episode_bonus"]
        assert gold_bonus == pytest.approx(sequence_bonus(sw_gold_tree, tokens).total) and gold_bonus > 0
    # the env flags a refused action itself; the penalty wrapper reads the flag, not the simulator's text
    penalized = InvalidActionPenalty(sciworld_env)
    penalized.reset(options={"task": traj.task, "variation": traj.extra["variation"]})
    _, reward, _, _, info = penalized.step("open door to nowhere")
    assert reward == pytest.approx(-0.1) and info["invalid_action"] and info["xtree"]["invalid"]
    _, _, _, _, info = penalized.step(traj.steps[0].action)
    assert info["invalid_penalty"] == 0.0 and not info["invalid_action"] and not info["xtree"]["invalid"]
    # the group: the gold rollout wins, two cut-short rollouts fail (offline bonus of their prefixes)
    cut = [sequence_bonus(sw_gold_tree, tokens[:k]).total for k in (len(tokens) // 2, 2)]
    r = group_rewards([1.0, 0.0, 0.0], [gold_bonus, *cut], [True, False, False], 0.75, 0.4)
    lam = lambda_g(1 / 3, 0.75, 0.4)
    assert r == pytest.approx([1.0 + lam * gold_bonus, lam * cut[0], lam * cut[1]])
    assert r[1] > r[2] or cut[0] == cut[1]


def test_webshop_design_on_the_real_env(webshop_env, shared_dir):
    """Expert and detour WebShop episodes: goal options from the reset info, T so far, invalid penalty."""
    import random

    from xtree_gym.collect.webshop import run_episode
    from xtree_gym.mining.tree import XTree
    from xtree_gym.rewards import WebShopBonus

    tree = XTree.load(shared_dir / "reference" / "xtree-site" / "trees" / "webshop.json")
    for idx, variant in ((208, "expert"), (0, "detour")):
        rec = run_episode(webshop_env, idx, variant, random.Random(1))
        actions = [s["action"] for s in rec["steps"]]
        goal_options = webshop_env.goals[idx].goal_options
        env = InvalidActionPenalty(XTreeBonus(webshop_env, tree, bonus="webshop", weight=1.0))
        _, info = env.reset(options={"goal_idx": idx})
        total, tokens, executed, invalid = 0.0, [], [], 0
        for a in actions:
            _, reward, _, _, info = env.step(a)
            total += reward
            tokens.append(info["xtree"]["token"])
            executed.append(
                "<refused>" if info["invalid"] else tokens[-1]
            )  # a refused click executes nothing
            invalid += info["invalid"]
        assert tokens == [s["token"] for s in rec["steps"]]
        offline = sequence_bonus(tree, executed, "webshop", goal_options=goal_options)
        assert info["xtree"]["episode_bonus"] == pytest.approx(offline.total) and offline.total > 0
        assert total == pytest.approx(rec["reward"] + offline.total - 0.1 * invalid)
        # without the goal's options every typed option counts: never less
        assert sequence_bonus(tree, executed, WebShopBonus()).total >= offline.total
        assert (variant == "detour") == (invalid > 0)


def test_domain_canonicalizer_and_tree_path(tmp_path, sw_gold_corpus, sw_gold_tree, sw_gold_tokens):
    """An env that reports no token: the wrapper canonicalizes raw actions itself ('scienceworld')."""
    path = tmp_path / "tree.json"
    sw_gold_tree.save(path)
    traj, tokens = sw_gold_corpus[5], sw_gold_tokens[5]
    env = XTreeBonus(Replay(tokens, report=False), str(path), canonicalizer="scienceworld")
    steps = run(env, traj.actions)
    assert [s[4]["xtree"]["token"] for s in steps] == tokens
    assert steps[-1][4]["xtree"]["raw"] == traj.actions[-1]
    assert set(steps[-1][4]["xtree"]["matched"]) == {m.node for m in sw_gold_tree.find_matches(tokens)}
