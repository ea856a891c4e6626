"""BrowserGym/WebArena (Table 9) and MiniWoB++ (Table 10) canonicalizers."""

from __future__ import annotations

import json

import pytest

from xtree_gym.canon import get_canonicalizer
from xtree_gym.canon.browsergym import BrowserGymCanonicalizer, map_role, parse_calls
from xtree_gym.canon.miniwob import MiniWoBCanonicalizer, dom_role

B = BrowserGymCanonicalizer()
M = MiniWoBCanonicalizer()

AXTREE_TXT = """RootWebArea 'Dashboard', focused
\t[235] link 'CUSTOMERS'
\t[883] button 'Filters', expanded=False
\t[925] textbox 'from', required
\t[690] combobox 'State/Province*' value='California'
\t[701] menuitemradio "it's on"
\t[12] searchbox 'Search'
\t[77] LabelText ''"""
AXTREE_OBJ = {
    "nodes": [
        {"nodeId": "1", "role": {"type": "role", "value": "RootWebArea"}, "name": {"value": "x"}},
        {"nodeId": "2", "browsergym_id": "235", "role": {"value": "link"}, "name": {"value": "CUSTOMERS"}},
        {"nodeId": "3", "browsergym_id": "925", "role": {"value": "textbox"}, "name": {"value": "from"}},
    ]
}


@pytest.mark.parametrize(
    ("action", "token"),
    [
        ("click('235')", "click<link>"),
        ("dblclick('883')", "click<button>"),
        ("fill('925', '03/01/2023')", "type<text_input>"),
        ("select_option('690', 'California')", "select<select>"),
        ("click('701')", "click<option>"),
        ("press('12', 'Enter')", "key<text_input>"),
        ("click('77')", "click<labeltext>"),
        ("hover('235')", "hover<link>"),
        ("keyboard_press('Enter')", "key<element>"),
        ("goto('http://a.b/c?d=1,2')", "navigate<element>"),
        ("go_back()", "navigate<element>"),
        ("scroll(0, 200)", "scroll<element>"),
        ("send_msg_to_user('It is 3, not 4.')", "stop<element>"),
        ("report_infeasible('no')", "stop<element>"),
        ("noop()", "noop<element>"),
        ("drag_and_drop('235', '883')", "drag<link>"),
        ("upload_file('925', 'report.txt')", "upload<text_input>"),
        ("click('999')", "click<element>"),
        ("click [235]", "click<link>"),
        ("go_back", "navigate<element>"),
        ("tab_focus(2)", "tab_focus<element>"),
    ],
)
def test_browsergym_axtree_txt(action: str, token: str) -> None:
    assert B(action, {"axtree_txt": AXTREE_TXT}).token == token


def test_browsergym_context_sources() -> None:
    assert B("click('235')", {"axtree_object": AXTREE_OBJ}).token == "click<link>"
    assert B("fill('925', 'x')", {"axtree_object": AXTREE_OBJ}).slots["role_source"] == "context"
    assert B("click('1')", {"element": {"role": "tab", "name": "Tab #2"}}).token == "click<tab>"
    # the element wins over a tree; implied roles only without any element
    assert B("fill('5', 'x')").slots["role_source"] == "implied"
    assert B("fill('925', 'x')", {"element": {"role": "combobox"}}).token == "type<select>"


def test_browsergym_slots_and_parsing() -> None:
    ca = B("fill('925', 'it\\'s, \"quoted\"')", {"axtree_txt": AXTREE_TXT})
    assert ca.slots["bid"] == "925" and ca.slots["text"] == 'it\'s, "quoted"'
    assert ca.slots["element_name"] == "from" and ca.slots["element_role"] == "textbox"
    assert B("select_option('690', ['a', 'b'])").slots["options"] == ["a", "b"]
    multi = B("click('235')\nfill('925', 'x')", {"axtree_txt": AXTREE_TXT})
    assert multi.token == "click<link>" and len(multi.slots["calls"]) == 2
    assert B("send_msg_to_user(text='done')").slots["text"] == "done"
    assert B("this is not an action").token == "this<is not an action>"
    assert parse_calls("print(") == []


def test_map_role_table9() -> None:
    assert [map_role(r) for r in ("link", "button", "checkbox", "radio", "tab")] == [
        "link",
        "button",
        "checkbox",
        "radio",
        "tab",
    ]
    assert {map_role(r) for r in ("option", "menuitem", "menuitemcheckbox", "menuitemradio")} == {"option"}
    assert {map_role(r) for r in ("textbox", "searchbox")} == {"text_input"}
    assert {map_role(r) for r in ("combobox", "listbox")} == {"select"}
    assert map_role("gridcell") == "gridcell"


def test_webarena_tree_alphabet_is_reachable(shared_dir) -> None:
    """Every primitive of the authors' WebArena tree is produced by some BrowserGym call and role."""
    tree = json.loads((shared_dir / "reference/xtree-site/trees/webarena.json").read_text())
    prims = {t for n in tree["nodes"] for t in n["expansion"]}
    fn = {
        "click": "click('1')",
        "type": "fill('1', 'x')",
        "select": "select_option('1', 'x')",
        "key": "press('1', 'Enter')",
        "focus": "focus('1')",
        "hover": "hover('1')",
        "clear": "clear('1')",
        "navigate": "goto('u')",
        "scroll": "scroll(0, 1)",
    }
    back = {"text_input": "textbox", "select": "combobox", "option": "menuitem"}
    for tok in prims:
        verb, role = tok[:-1].split("<")
        ctx = None if role == "element" else {"element": {"role": back.get(role, role), "name": ""}}
        # an element-less type is keyboard_type (a fill with no element found implies text_input)
        action = "keyboard_type('x')" if tok == "type<element>" else fn[verb]
        assert B(action, ctx).token == tok


@pytest.mark.parametrize(
    ("element", "typed", "role"),
    [
        ({"tag": "div", "role": "button"}, True, "button"),
        ({"tag": "button"}, True, "button"),
        ({"tag": "input", "type": "submit"}, False, "button"),
        ({"tag": "a"}, True, "link"),
        ({"tag": "select"}, True, "select"),
        ({"tag": "option"}, True, "option"),
        ({"tag": "input", "type": "checkbox"}, False, "checkbox"),
        ({"tag": "input", "type": "checkbox"}, True, "input_checkbox"),
        ({"tag": "input", "type": "date"}, False, "text_input"),
        ({"tag": "input"}, True, "input_text"),
        ({"tag": "textarea"}, True, "text_input"),
        ({"tag": "div", "class": "ui-dialog"}, True, "dialog"),
        ({"tag": "dialog"}, True, "dialog"),
        ({"tag": "li"}, True, "text"),
        ({"tag": "h3"}, True, "h3"),
        ({"tag": "input_password"}, False, "input_password"),
        ({}, True, "element"),
        # the browser env's merged dict: computed AX role/name + DOM facts (aria_role = attribute)
        ({"tag": "input", "type": "checkbox", "role": "checkbox", "name": "x"}, True, "input_checkbox"),
        ({"tag": "div", "aria_role": "tab", "role": "tab", "name": "Tab #2"}, True, "tab"),
        ({"tag": "span", "role": "StaticText", "name": "Reply"}, True, "text"),
    ],
)
def test_dom_rules(element: dict, typed: bool, role: str) -> None:
    assert dom_role(element, typed_input_tags=typed) == role


def test_miniwob_actions() -> None:
    el = {"element": {"tag": "input", "type": "text", "label": "Username"}}
    ca = M('type(ref=7, "myron")', el)
    assert ca.token == "type<input_text>"
    assert ca.slots["text"] == "myron" and ca.slots["ref"] == 7 and ca.slots["label"] == "Username"
    assert M("submit(ref=15)", {"element": {"tag": "span", "text": "Search"}}).token == "submit<text>"
    assert M('select(ref=3, "Male")', {"element": {"tag": "select"}}).slots["value"] == "Male"
    assert M("key('Enter')").token == "key<element>"
    assert M("noop").token == "noop<element>"
    assert (
        M("fill('12', 'x')", {"element": {"tag": "input"}, "typed_input_tags": False}).token
        == "type<text_input>"
    )
    literal = MiniWoBCanonicalizer(typed_input_tags=False)
    assert literal("click(ref=1)", {"element": {"tag": "input", "type": "radio"}}).token == "click<radio>"
    assert M("type<input_text>(Donovan, Departure Date)").slots["args"] == "Donovan, Departure Date"
    with pytest.raises(TypeError):
        MiniWoBCanonicalizer(typed_input_tags="yes")  # type: ignore[arg-type]


def test_axtree_txt_from_browsergyms_own_flattener() -> None:
    """The text parser reads what BrowserGym's real ``flatten_axtree_to_str`` writes, and agrees
    with the parser of the CDP tree it was flattened from."""
    obs = pytest.importorskip("browsergym.utils.obs")
    nodes = [
        {
            "nodeId": "1",
            "role": {"value": "RootWebArea"},
            "name": {"value": "Shop"},
            "childIds": ["2", "3", "4"],
        },
        {
            "nodeId": "2",
            "parentId": "1",
            "role": {"value": "link"},
            "name": {"value": "CUSTOMERS"},
            "childIds": [],
            "browsergym_id": "235",
        },
        {
            "nodeId": "3",
            "parentId": "1",
            "role": {"value": "searchbox"},
            "name": {"value": 'it\'s "from"'},
            "childIds": [],
            "browsergym_id": "925",
            "properties": [{"name": "required", "value": {"value": True}}],
        },
        {
            "nodeId": "4",
            "parentId": "1",
            "role": {"value": "menuitem"},
            "name": {"value": "A, B"},
            "childIds": [],
            "browsergym_id": "690",
        },
    ]
    tree = {"nodes": nodes}
    text = obs.flatten_axtree_to_str(tree)
    for action, token in [
        ("click('235')", "click<link>"),
        ("fill('925', 'x')", "type<text_input>"),
        ("hover('690')", "hover<option>"),
    ]:
        from_txt = B(action, {"axtree_txt": text})
        from_obj = B(action, {"axtree_object": tree})
        assert from_txt.token == from_obj.token == token
        assert from_txt.slots["element_name"] == from_obj.slots["element_name"]
    assert B("fill('925', 'x')", {"axtree_txt": text}).slots["element_name"] == 'it\'s "from"'


# -- the call BrowserGym executes, found inside a response ------------------------------------

RESPONSES = [
    "Action: click('12')",
    "```python\nclick('12')\n```",
    "Thought: the form is done.\nAction: fill('4', \"it's me\")",
    "<think>submit</think><action>click('7', button='left')</action>",
    "# click('1')\nfill('2', 'x')",
    "I will use page.click('3') now",
    "f(g('1'))",
    "don't click('5') yet; then select_option('6', ['a', 'b'])",
]


@pytest.mark.parametrize("response", RESPONSES)
def test_canonicalizer_reads_the_calls_browsergym_runs(response: str) -> None:
    from xtree_gym.canon.browsergym import search_calls

    parsers = pytest.importorskip("browsergym.core.action.parsers")
    theirs = [
        (name, [a.value if hasattr(a, "value") else a for a in args if not hasattr(a, "name")])
        for match in parsers.highlevel_action_parser.search_string(response).as_list()
        for name, args in match
    ]
    ours = [(c.name, c.args) for c in search_calls(response)]
    assert ours == theirs
    for domain in ("webarena", "miniwob"):
        token = get_canonicalizer(domain)(response).token
        assert token.startswith(VERB_OF.get(theirs[0][0], theirs[0][0]) + "<"), (domain, token)


VERB_OF = {"fill": "type", "select_option": "select"}


def test_action_prefix_is_not_the_verb() -> None:
    c = get_canonicalizer("webarena")
    ctx = {"axtree_txt": "[12] button 'Submit'"}
    assert c("Action: click('12')", ctx).token == "click<button>"
    assert c("```\nclick('12')\n```", ctx).token == "click<button>"
    assert c("Action: click('12')", ctx).raw == "Action: click('12')"


@pytest.mark.parametrize("domain", ["browsergym", "webarena", "miniwob"])
def test_send_msg_to_user_is_stop_in_every_browser_domain(domain: str) -> None:
    c = get_canonicalizer(domain)
    assert c("send_msg_to_user('the answer is 42')").verb == "stop"
    assert c("report_infeasible('no such page')").verb == "stop"


def test_stored_webarena_clicks_use_ax_role_and_the_page_before() -> None:
    from xtree_gym.corpus import Step, Trajectory

    page0 = "RootWebArea 'Dashboard'\n\t[235] link 'CUSTOMERS'\n\t[883] button 'Filters'"
    steps = [
        # the role stored as ax_role (as the MiniWoB env's records keep it)
        Step("click('235')", observation=page0, extra={"element": {"ax_role": "link", "name": "CUSTOMERS"}}),
        # an element stored without any role: the observation before the step names it
        Step("click('883')", observation="RootWebArea 'Customers'", extra={"element": {"tag": "button"}}),
    ]
    traj = Trajectory("wa-1", steps, True, env="webarena", extra={"initial_observation": page0})
    c = get_canonicalizer("webarena")
    assert [c(s.action, c.corpus_context(traj, i)).token for i, s in enumerate(steps)] == [
        "click<link>",
        "click<button>",
    ]
