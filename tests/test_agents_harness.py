"""Harnesses: golden prompts written out by hand, parse cases, round trips, templates and advice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xtree_gym.agents.harness import HarnessState, get_harness, harness_names
from xtree_gym.errors import ConfigError

DATA = Path(__file__).parent / "data" / "render"

SW_STATE = HarnessState(
    goal="Your task is to boil water.",
    observation="The stove is now activated.",
    history=[
        ("open door to kitchen", "The door is now open."),
        ("go to kitchen", "You move to the kitchen."),
        ("activate stove", "The stove is now activated."),
    ],
    initial_observation="This room is called the hallway.",
    turn=3,
    info={"action_templates": ["open OBJ", "go to LOC", "activate OBJ"], "objects": ["stove", "sink", "pot"]},
)

SW_GOLDEN = """\
You are an agent in ScienceWorld, a text simulator of elementary-school science experiments.
Task: Your task is to boil water.
You have taken 3 step(s). Your earlier actions, and the last 2 observations with the action you took after each: [Step 1, Action 1: 'open door to kitchen']
[Step 2, Observation 2: 'The door is now open.', Action 2: 'go to kitchen']
[Step 3, Observation 3: 'You move to the kitchen.', Action 3: 'activate stove']
This is step 4. What you observe now: The stove is now activated.
Action commands you can use: [open OBJ, go to LOC, activate OBJ]
Objects you can act on here: [stove, sink, pot]

Choose the next action: fill a command's OBJ / LOC slots with objects from the list.
Think step by step first, inside <think> </think>.
Then give exactly one action inside <action> </action>."""

WS_GOAL = "i need a red hat, and price lower than 30.00 dollars"
WS_SEARCH = f"WebShop [SEP] Instruction: [SEP] {WS_GOAL} [SEP] Search"
WS_RESULTS = (
    f"WebShop [SEP] Instruction: [SEP] {WS_GOAL} [SEP] Back to Search [SEP] Page 1 (Total results: 1) "
    "[SEP] Next > [SEP] B0RED00001 [SEP] Red Wool Hat [SEP] $12.0"
)
WS_ITEM = f"WebShop [SEP] Instruction: [SEP] {WS_GOAL} [SEP] Back to Search [SEP] < Prev [SEP] Red Wool Hat"
WS_STATE = HarnessState(
    goal=WS_GOAL,
    observation=WS_ITEM,
    history=[("search[red hat]", WS_RESULTS), ("click[b0red00001]", WS_ITEM)],
    initial_observation=WS_SEARCH,
    turn=2,
    valid_actions=["click[back to search]", "click[< prev]", "click[buy now]"],
)
WS_GOLDEN = """\
You are shopping on WebShop, an online store.
Your task: i need a red hat, and price lower than 30.00 dollars.
You have taken 2 step(s). The last 2 pages you saw, with the action you took on each: [Observation 1: ''Search'', Action 1: 'search[red hat]']
[Observation 2: ''Back to Search' [SEP] 'Page 1 (Total results: 1)' [SEP] 'Next >' [SEP] 'B0RED00001' [SEP] 'Red Wool Hat' [SEP] '$12.0'', Action 2: 'click[b0red00001]']
This is step 3. What you see now: 'Back to Search' [SEP] '< Prev' [SEP] 'Red Wool Hat'.
The actions you may take now:
[
'click[back to search]',
'click[< prev]',
'click[buy now]',
].

Take one action for this step. Reason step by step about the page and which allowed action gets you closest to the requested purchase, inside <think> </think>.
Then give the chosen action, copied from the list, inside <action> </action>."""


def test_registered_names_and_step_limits():
    assert {"rlvmr", "verl-agent", "react"} <= set(harness_names())
    assert get_harness("rlvmr").step_limit == 30
    assert get_harness("verl-agent").step_limit == 15 and get_harness("react").step_limit == 15
    assert get_harness("verl-agent").needs_valid_actions and not get_harness("rlvmr").needs_valid_actions
    with pytest.raises(ConfigError, match="unknown harness 'nope'"):
        get_harness("nope")
    with pytest.raises(ConfigError, match="harness 'rlvmr' has no option 'advise'"):
        get_harness("rlvmr", advise="tree.json")
    with pytest.raises(ConfigError, match="history_length=-1"):
        get_harness("node", history_length=-1)


def test_rlvmr_golden_prompt():
    messages = get_harness("rlvmr").render(SW_STATE)
    assert messages == [{"role": "user", "content": SW_GOLDEN}]


def test_rlvmr_first_turn_has_no_history_block():
    state = HarnessState(
        goal="Your task is to boil water.",
        observation="This room is called the hallway.",
        info={"action_templates": ["look around"], "objects": ["door"]},
    )
    text = get_harness("rlvmr").render(state)[0]["content"]
    assert (
        "What you observe now: This room is called the hallway.\nAction commands you can use: [look around]"
        in text
    )
    assert "step(s)" not in text and "[door]" in text


def test_rlvmr_history_length_is_an_option():
    text = get_harness("rlvmr", history_length=1).render(SW_STATE)[0]["content"]
    assert "[Step 2, Action 2: 'go to kitchen']" in text
    assert "[Step 3, Observation 3: 'You move to the kitchen.', Action 3: 'activate stove']" in text
    assert "the last 1 observations" in text


def test_verl_agent_golden_prompt():
    messages = get_harness("verl-agent").render(WS_STATE)
    assert messages == [{"role": "user", "content": WS_GOLDEN}]


def test_react_conversation_replays_responses():
    state = HarnessState(
        goal=WS_GOAL,
        observation=WS_RESULTS,
        history=[("search[red hat]", WS_RESULTS)],
        initial_observation=WS_SEARCH,
        responses=["Thought: search it.\nAction: search[red hat]"],
    )
    msgs = get_harness("react").render(state)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"] == f"Observation:\n{WS_SEARCH}"
    assert msgs[2]["content"] == "Thought: search it.\nAction: search[red hat]"
    assert msgs[3]["content"] == f"Observation:\n{WS_RESULTS}"
    assert "search[keywords]" in msgs[0]["content"] and "Action:" in msgs[0]["content"]


@pytest.mark.parametrize("name", ["rlvmr", "verl-agent"])
@pytest.mark.parametrize(
    ("text", "action", "error"),
    [
        ("<think>hot</think><action>activate stove</action>", "activate stove", None),
        ("<think>x</think>\n<action>  go to kitchen \n</action>", "go to kitchen", None),
        ("Sure! <think>a</think> then <action>look around</action> and more text", "look around", None),
        ("<think>a</think><action>open door</action><action>go to kitchen</action>", "open door", None),
        ("<action>look around</action>", "look around", None),  # no think: still runs (verl-agent)
        ("<think>only thinking</think>", None, "no <action>"),
        ("<think>a</think><action>open door", None, "no <action>"),
        ("<think>a</think><action>   </action>", None, "empty"),
        ("", None, "no <action>"),
        ("look around", None, "no <action>"),
    ],
)
def test_think_action_parse_cases(name, text, action, error):
    parsed = get_harness(name).parse(text)
    assert parsed.action == action
    if error is None:
        assert parsed.error is None and parsed.actions == (action,)
    else:
        assert error in parsed.error


def test_parse_keeps_the_thought():
    parsed = get_harness("rlvmr").parse("<think> water boils at 100C </think><action>wait</action>")
    assert parsed.thought == "water boils at 100C" and parsed.action == "wait"
    assert get_harness("rlvmr").parse("<action>wait</action>").thought is None


@pytest.mark.parametrize(
    ("text", "action", "error"),
    [
        ("Thought: I need a hat.\nAction: search[red hat]", "search[red hat]", None),
        ("Thought: ok\nAction: click[b0red00001]\nObservation: made up", "click[b0red00001]", None),
        ("thought: lower case\naction:click[buy now]", "click[buy now]", None),
        ("Thought: first Action: words\nAction: click[< prev]", "click[< prev]", None),
        ("Thought: no action here", None, "no 'Action:'"),
        ("Thought: x\nAction:   ", None, "empty"),
        ("", None, "no 'Action:'"),
    ],
)
def test_react_parse_cases(text, action, error):
    parsed = get_harness("react").parse(text)
    assert parsed.action == action
    assert (parsed.error is None) if error is None else (error in parsed.error)


_ACTIONS = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="<>\n\r"),
        min_size=1,
        max_size=60,
    )
    .map(str.strip)
    .filter(bool)
)
_THOUGHTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<>"), max_size=80
)


@pytest.mark.parametrize("name", ["rlvmr", "verl-agent", "react"])
@settings(max_examples=150, deadline=None)
@given(action=_ACTIONS, thought=_THOUGHTS)
def test_format_response_round_trip(name, action, thought):
    harness = get_harness(name)
    parsed = harness.parse(harness.format_response(action, thought))
    assert parsed.action == action and parsed.error is None


@pytest.mark.parametrize("name", ["rlvmr", "verl-agent", "react"])
@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=200))
def test_parse_never_raises(name, text):
    parsed = get_harness(name).parse(text)
    assert (parsed.action is None) == (parsed.error is not None)


def test_template_override_json_and_text(tmp_path):
    j = tmp_path / "t.json"
    j.write_text(json.dumps({"first": "TASK={task} OBS={observation} OBJ={objects}"}))
    state = HarnessState(goal="g", observation="o", info={"objects": ["a", "b"]})
    assert get_harness("rlvmr", template=j).render(state)[0]["content"] == "TASK=g OBS=o OBJ=a, b"
    t = tmp_path / "t.txt"
    t.write_text("[[system]]\nShop well.\nTwo lines.\n[[observation]]\nObs: {observation}\n")
    msgs = get_harness("react", template=t).render(HarnessState(goal="g", observation="page"))
    assert msgs == [
        {"role": "system", "content": "Shop well.\nTwo lines."},
        {"role": "user", "content": "Obs: page"},
    ]
    # fields the template leaves out keep the built-in wording
    later = get_harness("rlvmr", template=j).render(SW_STATE)[0]["content"]
    assert later == SW_GOLDEN


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ('{"frist": "x"}', ".json", "unknown wording field 'frist'"),
        ('{"first": "{task} {nope}"}', ".json", "unknown placeholder(s) {nope}"),
        ('{"first": 3}', ".json", "not a string"),
        ('{"first": "{task"}', ".json", "not a valid format string"),
        ("{not json", ".json", "bad JSON"),
        ('["first"]', ".json", "must map field names"),
        ("hello\n[[first]]\nx", ".txt", "text before the first [[field]]"),
        ("[[first]]\na\n[[first]]\nb", ".txt", "appears twice"),
    ],
)
def test_bad_template_is_one_clear_error(tmp_path, content, suffix, message):
    path = tmp_path / f"bad{suffix}"
    path.write_text(content)
    with pytest.raises(ConfigError) as exc:
        get_harness("rlvmr", template=path)
    assert message in str(exc.value) and str(path) in str(exc.value)


def test_missing_template_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read template file"):
        get_harness("verl-agent", template=tmp_path / "absent.json")


def test_advice_option_adds_the_hint_on_every_turn():
    harness = get_harness(
        "verl-agent", advice=DATA / "shop_tree.json", advice_corpus=DATA / "shop_corpus.jsonl"
    )
    state = HarnessState(
        goal="i want a red hat please",
        observation=WS_SEARCH,
        valid_actions=["search[<your query>]"],
        history=[("search[red hat]", WS_RESULTS), ("click[b0red00001]", WS_ITEM)],
        initial_observation=WS_SEARCH,
        tokens=["search<query>", "click<item>"],
    )
    text = get_harness("verl-agent").render(state)[0]["content"]
    advised = harness.render(state)[0]["content"]
    assert "Advice:" not in text
    hint = advised[advised.index("Advice:") : advised.index("Take one action")]
    assert hint.startswith("Advice: chains that recur in similar tasks")
    assert "1. search<query> -> click<item> -> click<option-color> -> click<buy>" in hint
    assert "Now: your last 2 step(s) match chain 1" in hint
    assert advised.replace(hint, "") == text  # the hint is the only difference
    with pytest.raises(ConfigError, match="advice needs the corpus"):
        get_harness("rlvmr", advice=DATA / "shop_tree.json")


# -- browsergym --------------------------------------------------------------------------------
BG_STATE = HarnessState(
    goal='Click on the "ok" button.',
    observation="RootWebArea 'Click Test'\n\t[3] button 'ok'\n\t[4] button 'cancel'",
    history=[("click('9')", "RootWebArea 'Click Test'")],
    responses=["<think>maybe 9</think><action>click('9')</action>"],
    info={"action_error": 'ValueError: Could not find element with bid "9"', "focused_element_bid": "3"},
)


def test_browsergym_sections_in_order():
    msgs = get_harness("browsergym").render(BG_STATE)
    assert [m["role"] for m in msgs] == ["system", "user"]
    text = msgs[1]["content"]
    heads = [ln for ln in text.splitlines() if ln.startswith("#")]
    assert heads[:8] == [
        "# Instructions",
        "## Goal:",
        "# Observation of current step:",
        "## AXTree:",
        "## Focused element:",
        "## Error from previous action:",
        "# History of interaction with the task:",
        "## step 0",
    ]
    assert heads[-3:] == ["# Action space:", "# Concrete Example", "# Next action"]
    assert "\t[3] button 'ok'" in text and 'Could not find element with bid "9"' in text
    assert "<think>\nmaybe 9\n</think>\n<action>\nclick('9')\n</action>" in text
    assert "select_option(bid: str" in text  # BrowserGym's own description of the bid actions
    first = get_harness("browsergym").render(HarnessState(goal="g", observation="[1] button 'x'"))[1][
        "content"
    ]
    assert "# History" not in first and "## Error" not in first and "## Focused" not in first


def test_browsergym_options():
    assert get_harness("browsergym").max_parse_retries == 4
    assert get_harness("browsergym", parse_retries=0).max_parse_retries == 0
    webarena = get_harness("browsergym", benchmark="webarena").render(BG_STATE)[1]["content"]
    assert "send_msg_to_user(" in webarena and "goto(" in webarena
    with pytest.raises(ConfigError, match="not a BrowserGym benchmark"):
        get_harness("browsergym", benchmark="workarena")
    retry = get_harness("browsergym").retry_messages(
        [{"role": "user", "content": "p"}], "junk", "no <action>"
    )
    assert [m["role"] for m in retry] == ["user", "assistant", "user"] and "no <action>" in retry[2][
        "content"
    ]


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("<think>ok is 3</think>\n<action>click('3')</action>", "click('3')"),
        ("<action>\n```python\nfill('7', 'hello')\n```\n</action>", "fill('7', 'hello')"),
        ("<action>```click('3')```</action>", "click('3')"),
        ("Action: click('3')", None),
        ("<think>x</think><action>``````</action>", None),
    ],
)
def test_browsergym_parse_cases(text, action):
    parsed = get_harness("browsergym").parse(text)
    assert parsed.action == action and (parsed.error is None) == (action is not None)


# -- node --------------------------------------------------------------------------------------
NODE_STATE = HarnessState(
    goal="Your task is to boil water.",
    observation="You move to the kitchen.",
    history=[
        ("open door to hallway; go to hallway", "You move to the hallway."),
        ("open door to kitchen; go to kitchen", "You move to the kitchen."),
    ],
    initial_observation="This room is called the bedroom.",
)
NODE_GOLDEN_USER = """\
Task: Your task is to boil water.
Turns so far: 2. Their actions, and for the last 1 the observation seen before them:
[Turn 1: 'open door to hallway; go to hallway']
[Turn 2, Observation: 'You move to the hallway.', Actions: 'open door to kitchen; go to kitchen']
Current observation: You move to the kitchen.
Plan the next routine, then write its actions, one <action> tag each."""


def test_node_golden_prompt_and_parse():
    harness = get_harness("node", history_length=1)
    msgs = harness.render(NODE_STATE)
    assert [m["role"] for m in msgs] == ["system", "user"] and "<planning>" in msgs[0]["content"]
    assert msgs[1]["content"] == NODE_GOLDEN_USER
    parsed = harness.parse(
        "<planning>heat the water</planning>\n<action>pick up pot</action>\n<action></action>"
        "<action>move pot to sink</action> trailing"
    )
    assert parsed.actions == ("pick up pot", "move pot to sink")
    assert parsed.action == "pick up pot; move pot to sink" and parsed.thought == "heat the water"
    assert harness.parse("<planning>p</planning>").action is None
    assert harness.parse("<action>wait</action>").actions == ("wait",)  # planning is optional
    assert harness.step_limit == 30


@settings(max_examples=100, deadline=None)
@given(actions=st.lists(_ACTIONS, min_size=1, max_size=5), planning=_THOUGHTS)
def test_node_format_actions_round_trip(actions, planning):
    harness = get_harness("node")
    parsed = harness.parse(harness.format_actions(actions, planning))
    assert parsed.actions == tuple(actions) and parsed.action == "; ".join(actions)


@pytest.mark.parametrize("name", ["browsergym", "node"])
@settings(max_examples=100, deadline=None)
@given(action=_ACTIONS, thought=_THOUGHTS, junk=st.text(max_size=120))
def test_round_trip_and_never_raise_browsergym_node(name, action, thought, junk):
    harness = get_harness(name)
    if not action.startswith("```"):
        assert harness.parse(harness.format_response(action, thought)).action == action
    parsed = harness.parse(junk)
    assert (parsed.action is None) == (parsed.error is not None)


@pytest.mark.parametrize("name", ["rlvmr", "verl-agent", "react", "browsergym", "node"])
def test_every_harness_takes_advice_and_templates(name, tmp_path):
    harness = get_harness(name, advice=DATA / "shop_tree.json", advice_corpus=DATA / "shop_corpus.jsonl")
    state = HarnessState(
        goal="i want a red hat please", observation=WS_SEARCH, valid_actions=["search[<your query>]"]
    )
    assert "Advice: chains that recur" in harness.render(state)[-1]["content"]
    field = sorted(harness.words)[0]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({field: "REPLACED"}))
    assert get_harness(name, template=path).words[field] == "REPLACED"


def test_advice_on_scienceworld_tracks_the_chain_in_progress():
    """rlvmr and node with the ScienceWorld tree: the hint follows the canonical tokens of the steps taken."""
    goal = (
        "Your task is to measure the temperature of unknown substance B, which is located around the bedroom."
    )
    kwargs = {"advice": DATA / "sw_tree.json", "advice_corpus": DATA / "sw_corpus.jsonl"}
    state = HarnessState(
        goal=goal,
        observation="You move to the hallway.",
        history=[
            ("open door to hallway", "The door is now open."),
            ("go to hallway", "You move to the hallway."),
        ],
        tokens=["open<door>", "navigate<hallway>"],
        info={"action_templates": ["open OBJ"], "objects": ["door"]},
    )
    for harness in (
        get_harness("rlvmr", **kwargs),
        get_harness("node", advice_domain="scienceworld", **kwargs),
    ):
        text = harness.render(state)[-1]["content"]
        assert "Advice: chains that recur in similar tasks" in text
        assert "open<door> -> navigate<hallway> -> open<door>" in text
        assert "Now: your last 2 step(s) match chain" in text
    fresh = HarnessState(goal=goal, observation="o", info={"action_templates": [], "objects": []})
    assert "Now:" not in get_harness("rlvmr", **kwargs).render(fresh)[0]["content"]


def test_yaml_template(tmp_path):
    pytest.importorskip("yaml")
    path = tmp_path / "t.yaml"
    path.write_text("system: |-\n  Shop carefully.\nobservation: 'Page: {observation}'\n")
    msgs = get_harness("react", template=path).render(HarnessState(goal="g", observation="p1"))
    assert msgs == [{"role": "system", "content": "Shop carefully."}, {"role": "user", "content": "Page: p1"}]
    bad = tmp_path / "bad.yml"
    bad.write_text("system: [unclosed\n")
    with pytest.raises(ConfigError, match="bad YAML"):
        get_harness("react", template=bad)
