"""Readers of published trajectory formats: AgentGym/AgentTraj-L, ETO, BrowserGym/AgentLab."""

from __future__ import annotations

import json

import pytest

from xtree_gym.canon.formats import read_trajectories
from xtree_gym.corpus import read_corpus
from xtree_gym.corpus.formats.conversations import split_react
from xtree_gym.errors import CorpusError

SCI_PROMPT = "You are a helpful assistant to do some scientific experiment in an environment..."


def _agentgym_record(item_id: str = "sciworld_354") -> dict:
    return {
        "item_id": item_id,
        "conversations": [
            {"from": "human", "value": SCI_PROMPT, "loss": False},
            {"from": "gpt", "value": "OK", "loss": False},
            {
                "from": "human",
                "value": "Task Description:\nYour task is to measure the temperature of gallium.\n\nThis room is called the hallway.",
                "loss": None,
            },
            {
                "from": "gpt",
                "value": "Thought: The thermometer is in the kitchen.\nAction: open door to kitchen",
                "loss": True,
            },
            {"from": "human", "value": "Observation: The door is now open.", "loss": None},
            {"from": "gpt", "value": "Thought: Go.\nAction: go to kitchen", "loss": True},
            {"from": "human", "value": "Observation: You move to the kitchen.", "loss": None},
            {"from": "gpt", "value": "Action: pick up thermometer", "loss": True},
        ],
    }


def _eto_record() -> dict:
    return {
        "id": 160,
        "reward": 1.0,
        "conversations": [
            {"from": "human", "value": "You are web shopping.\n..."},
            {"from": "gpt", "value": "OK"},
            {
                "from": "human",
                "value": "Observation:\nWebShop [SEP] Instruction: [SEP] i am looking for a blue usb cord, and price lower than 30.00 dollars [SEP] Search",
            },
            {"from": "gpt", "value": "Thought: I'll search.\nAction: search[blue usb cord]"},
            {
                "from": "human",
                "value": "Observation:\n[SEP] Back to Search [SEP] Page 1 [SEP] B098QKQP4B [SEP] USB cord [SEP] $9.99",
            },
            {"from": "gpt", "value": "Thought: First one.\nAction: click[b098qkqp4b]"},
            {
                "from": "human",
                "value": "Observation:\nBack to Search [SEP] < Prev [SEP] color [SEP] black [SEP] blue [SEP] USB cord [SEP] Price: $9.99 [SEP] Buy Now",
            },
            {"from": "gpt", "value": "Thought: Blue.\nAction: click[blue]"},
            {"from": "human", "value": "Observation: You have clicked blue."},
            {"from": "gpt", "value": "Thought: Buy.\nAction: click[Buy Now]"},
        ],
    }


def test_split_react() -> None:
    assert split_react("Thought: a\nAction: click[x]\nmore talk") == (
        "a\n[after action] more talk",
        "click[x]",
        True,
    )
    assert split_react("Thought: Action: is a word\nAction: wait1") == ("Action: is a word", "wait1", True)


def test_agentgym_jsonl(tmp_path) -> None:
    p = tmp_path / "agenttraj.jsonl"
    p.write_text(json.dumps(_agentgym_record()) + "\n\n" + json.dumps(_agentgym_record("webshop_1")) + "\n")
    trajs = read_trajectories(p, "agentgym")
    sci = trajs[0]
    assert sci.id == "sciworld_354" and sci.env == "scienceworld" and sci.success is True
    assert sci.goal == "Your task is to measure the temperature of gallium."
    assert sci.actions == ["open door to kitchen", "go to kitchen", "pick up thermometer"]
    assert sci.tokens == ["open<door>", "navigate<kitchen>", "take<instrument>"]
    assert sci.steps[0].thought == "The thermometer is in the kitchen."
    assert sci.steps[0].observation == "The door is now open."
    assert sci.steps[2].observation == ""
    assert trajs[1].env == "webshop" and trajs[1].tokens[0] is not None


def test_agentgym_json_list_and_model_turn_without_marker(tmp_path) -> None:
    rec = _agentgym_record()
    rec["conversations"].append({"from": "human", "value": "Observation: ok"})
    rec["conversations"].append({"from": "gpt", "value": "I am done now"})
    p = tmp_path / "a.json"
    p.write_text(json.dumps([rec]))
    t = read_trajectories(p, "agentgym")[0]
    assert t.steps[-1].action == "I am done now" and t.steps[-1].extra["no_action_marker"] is True


def test_eto_webshop(tmp_path) -> None:
    p = tmp_path / "webshop_sft.json"
    low = _eto_record() | {"id": 9, "reward": 0.5}
    p.write_text(json.dumps([_eto_record(), low]))
    trajs = read_trajectories(p, "eto")
    t = trajs[0]
    assert t.env == "webshop" and t.id == "160" and t.success is True and t.reward == 1.0
    assert t.goal == "i am looking for a blue usb cord, and price lower than 30.00 dollars"
    # ETO carries no goal_options: the option click stays untyped, documented in docs/canonicalizers.md
    assert t.tokens == ["search<query>", "click<item>", "click<option>", "click<buy>"]
    assert trajs[1].success is False


def test_eto_with_goal_options_types_the_option(tmp_path) -> None:
    p = tmp_path / "e.json"
    p.write_text(json.dumps([_eto_record() | {"goal_options": {"color": "blue"}}]))
    assert read_trajectories(p, "eto")[0].tokens[2] == "click<option-color>"


def _agentlab_lines() -> list[dict]:
    tree0 = "RootWebArea 'Shop'\n\t[235] link 'CUSTOMERS'"
    tree1 = "RootWebArea 'Customers'\n\t[925] textbox 'from'\n\t[1301] button 'Apply Filters'"
    return [
        {
            "episode": "wa_1",
            "step": 1,
            "action": "fill('925', '03/01/2023')",
            "obs": {"axtree_txt": tree1},
            "reward": 0,
        },
        {
            "episode": "wa_1",
            "step": 0,
            "action": "click('235')",
            "obs": {"axtree_txt": tree0, "goal": "Find customers"},
            "reward": 0,
            "agent_info": {"think": "open customers"},
        },
        {"episode": "wa_1", "step": 2, "action": "click('1301')", "axtree_txt": tree1, "reward": 1.0},
        {"episode": "wa_1", "step": 3, "action": None, "obs": {"axtree_txt": "RootWebArea 'Done'"}},
    ]


def test_agentlab_steps(tmp_path) -> None:
    p = tmp_path / "steps.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in _agentlab_lines()))
    (t,) = read_trajectories(p, "agentlab")
    assert t.id == "wa_1" and t.success is True and t.goal == "Find customers"
    assert t.tokens == ["click<link>", "type<text_input>", "click<button>"]
    assert t.steps[0].thought == "open customers"
    assert t.steps[-1].observation == "RootWebArea 'Done'"
    assert t.steps[1].slots["element_name"] == "from"


def test_converted_corpus_round_trips(tmp_path) -> None:
    from xtree_gym.corpus import write_corpus

    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps(_agentgym_record()) + "\n")
    out = tmp_path / "c.jsonl"
    write_corpus(out, read_trajectories(p, "agentgym"))
    back = read_corpus(out)[0]
    assert back.tokens == ["open<door>", "navigate<kitchen>", "take<instrument>"]


@pytest.mark.parametrize(
    ("content", "fmt", "where", "what"),
    [
        (
            '{"item_id": "x", "conversations": []}\n{"item_id": "y"}\n',
            "agentgym",
            r"a\.jsonl:2",
            "'conversations' is NoneType",
        ),
        (
            '{"item_id": "x", "conversations": [{"from": "bot", "value": "hi"}]}\n',
            "agentgym",
            r"a\.jsonl:1",
            "from is 'bot'",
        ),
        (
            '{"item_id": "x", "conversations": [{"from": "gpt", "value": 3}]}\n',
            "agentgym",
            r"a\.jsonl:1",
            "value is not a string",
        ),
        ('{"conversations": []}\n', "agentgym", r"a\.jsonl:1", "no 'item_id'"),
        ("not json\n", "agentgym", r"a\.jsonl:1", "not valid JSON"),
        ('[{"id": 1, "conversations": []}, 5]', "eto", "record 1", "record is int"),
        ('{"episode": "e", "step": -1, "action": "x"}\n', "agentlab", r"a\.jsonl:1", "'step' is -1"),
        ('{"step": 0, "action": "x"}\n', "agentlab", r"a\.jsonl:1", "no episode key"),
        ('{"episode": "e", "step": 0, "action": 5}\n', "agentlab", r"a\.jsonl:1", "'action' is 5"),
        (
            '{"episode": "e", "step": 0, "action": "a"}\n{"episode": "e", "step": 0, "action": "b"}\n',
            "agentlab",
            r"a\.jsonl:2",
            "step 0 twice",
        ),
    ],
)
def test_malformed_records_name_their_position(tmp_path, content, fmt, where, what) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text(content)
    with pytest.raises(CorpusError, match=where) as info:
        read_trajectories(p, fmt)
    assert what in str(info.value)


def test_unknown_format_and_missing_file(tmp_path) -> None:
    with pytest.raises(CorpusError, match="unknown trajectory format 'csv'"):
        read_trajectories(tmp_path / "x", "csv")
    with pytest.raises(CorpusError, match="does not exist"):
        read_trajectories(tmp_path / "x.json", "eto")
