"""BrowserGym area without a browser: action/AXTree helpers, launch patching, WebArena config
errors and the canonicalization of the authors' stored WebArena step records."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xtree_gym.canon import canonicalize
from xtree_gym.collect.miniwob import CollectConfig, random_action, scripted_plan
from xtree_gym.envs.browser_axtree import dom_element_of, element_of, iter_elements, parse_action
from xtree_gym.envs.browser_launch import BrowserLaunchConfig, _merge_launch_kwargs, patched_chromium_launch
from xtree_gym.envs.browsergym import WEBARENA_ENV_VARS, missing_webarena_vars
from xtree_gym.errors import CanonicalizationError, ConfigError, EnvConfigError

ROOT = Path(__file__).resolve().parent.parent


def _node(
    node_id: str, role: str, name: str = "", bid: str | None = None, children: tuple[str, ...] = ()
) -> dict:
    node: dict[str, Any] = {"nodeId": node_id, "role": {"value": role}, "name": {"value": name}}
    if bid is not None:
        node["browsergym_id"] = bid
    node["childIds"] = list(children)  # CDP always sends the key, BrowserGym's flattener needs it
    return node


LOGIN_TREE = {
    "nodes": [
        _node("1", "RootWebArea", "Login", children=("2", "3", "4", "5", "6")),
        _node("2", "StaticText", "Username"),
        _node("3", "textbox", "", "16"),
        _node("4", "StaticText", "Password"),
        _node("5", "textbox", "", "19"),
        _node("6", "button", "Login", "20"),
    ]
}


# -- action parsing and element lookup -------------------------------------------------------
@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("click('12')", ("click", "12")),
        ("fill(\"a7\", 'x, y')", ("fill", "a7")),
        ("select_option('5', ['a', 'b'])", ("select_option", "5")),
        ("drag_and_drop(from_bid='3', to_bid='4')", ("drag_and_drop", "3")),
        ("click('1')\nfill('2', 'x')", ("click", "1")),
        ("goto('http://x.y')", ("goto", None)),
        ("send_msg_to_user('it is 3')", ("send_msg_to_user", None)),
        ("click(12)", ("click", "12")),
        ("", ("", None)),
    ],
)
def test_parse_action(action: str, expected: tuple[str, str | None]) -> None:
    assert parse_action(action) == expected


def test_labels_come_from_preceding_text_for_unnamed_fields() -> None:
    rows = [(e["bid"], e["role"], e["label"]) for e in iter_elements(LOGIN_TREE)]
    assert rows == [("16", "textbox", "Username"), ("19", "textbox", "Password"), ("20", "button", "Login")]
    assert element_of(LOGIN_TREE, "19") == {"role": "textbox", "name": "", "label": "Password"}
    assert element_of(LOGIN_TREE, "20") == {"role": "button", "name": "Login"}
    assert element_of(LOGIN_TREE, None) is None and element_of(None, "20") is None


def test_dom_element_of_reads_snapshot_attributes() -> None:
    strings = [
        "DIV",
        "bid",
        "7",
        "BUTTON",
        "8",
        "class",
        "primary",
        "role",
        "tab",
        "INPUT",
        "type",
        "password",
        "9",
    ]
    snap = {
        "strings": strings,
        "documents": [
            {"nodes": {"nodeName": [0, 3], "attributes": [[1, 2], [1, 4, 5, 6, 7, 8]]}},
            {"nodes": {"nodeName": [9], "attributes": [[10, 11, 1, 12]]}},  # an iframe's document
        ],
    }
    assert dom_element_of(snap, "7") == {"tag": "div"}
    assert dom_element_of(snap, "8") == {"tag": "button", "class": "primary", "aria_role": "tab"}
    assert dom_element_of(snap, "9") == {"tag": "input", "type": "password"}
    assert dom_element_of(snap, "10") is None and dom_element_of(None, "7") is None


# -- launch configuration and the launch patch -------------------------------------------------
def test_launch_config_defaults_and_checks(tmp_path: Path) -> None:
    fast, slow = BrowserLaunchConfig(), BrowserLaunchConfig.browsergym_defaults()
    assert (fast.slow_mo_ms, fast.pre_observation_delay_s) == (0, 0.0)
    assert (slow.slow_mo_ms, slow.pre_observation_delay_s) == (None, 0.5)
    assert fast.launch_args()[:2] == ["--no-sandbox", "--disable-background-networking"]
    assert "--disable-quic" in fast.launch_args()
    with pytest.raises(ConfigError, match="slow_mo_ms"):
        BrowserLaunchConfig(slow_mo_ms=-1)
    with pytest.raises(EnvConfigError, match="not executable") as err:
        BrowserLaunchConfig(executable_path=str(tmp_path / "nochrome")).check_executable()
    assert "XTREE_CHROMIUM" in str(err.value)


def test_merge_launch_kwargs_keeps_browsergym_args() -> None:
    cfg = BrowserLaunchConfig(executable_path="/usr/lib/chromium/chromium", extra_args=("--disable-sync",))
    kwargs = {"headless": False, "slow_mo": 0, "args": ["--window-size=500,800", "--no-sandbox"]}
    merged = _merge_launch_kwargs(cfg, kwargs)
    assert (
        merged["executable_path"] == "/usr/lib/chromium/chromium"
        and merged["headless"] is True
        and merged["slow_mo"] == 0
    )
    assert merged["args"] == ["--window-size=500,800", "--no-sandbox", "--disable-sync"]
    assert kwargs["args"] == ["--window-size=500,800", "--no-sandbox"]  # the caller's list is untouched


class _FakeBrowserType:
    """Stands in for Playwright's BrowserType: records what a launch was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def launch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return kwargs


class _FakePlaywright:
    def __init__(self) -> None:
        self.chromium = _FakeBrowserType()


def test_patch_applies_inside_block_only_and_nests() -> None:
    pw = _FakePlaywright()
    cfg = BrowserLaunchConfig(executable_path="/usr/bin/chromium")
    with patched_chromium_launch(cfg, pw):
        pw.chromium.launch(headless=True, args=["--x"])  # what BrowserEnv.reset does
        with patched_chromium_launch(BrowserLaunchConfig(executable_path="/other"), pw):
            pw.chromium.launch(headless=True)
        pw.chromium.launch(headless=True, args=["--window-size=1,2"])  # what Chat does
    pw.chromium.launch(headless=True)
    paths = [c.get("executable_path") for c in pw.chromium.calls]
    assert paths == ["/usr/bin/chromium", "/other", "/usr/bin/chromium", None]
    assert (
        pw.chromium.calls[2]["args"][0] == "--window-size=1,2"
        and "--no-sandbox" in pw.chromium.calls[2]["args"]
    )
    assert "launch" not in vars(pw.chromium)


# -- scripted and random policies -------------------------------------------------------------
def test_scripted_plans_from_goal_and_tree() -> None:
    plan = scripted_plan(
        "login-user", 'Enter the username "kenda" and the password "Ttlh" into ...', LOGIN_TREE
    )
    assert plan == ["fill('16', 'kenda')", "fill('19', 'Ttlh')", "click('20')"]
    boxes = {
        "nodes": [
            _node("1", "RootWebArea", children=("2", "3", "4")),
            {
                **_node("2", "checkbox", "Gh", "18"),
                "properties": [{"name": "checked", "value": {"value": "false"}}],
            },
            {
                **_node("3", "checkbox", "Ab", "21"),
                "properties": [{"name": "checked", "value": {"value": "true"}}],
            },
            _node("4", "button", "Submit", "24"),
        ]
    }
    # tick Gh (wanted, unchecked), untick Ab (checked, unwanted), then submit
    assert scripted_plan("click-checkboxes", "Select Gh and click Submit.", boxes) == [
        "click('18')",
        "click('21')",
        "click('24')",
    ]
    assert scripted_plan("click-checkboxes", "Select Ab and click Submit.", boxes) == ["click('24')"]
    with pytest.raises(ConfigError, match="no scripted solver"):
        scripted_plan("book-flight", "", boxes)


def test_random_policy_fits_roles_and_is_seeded() -> None:
    import random

    acts = [random_action(random.Random(s), 'Enter the username "kenda"', LOGIN_TREE) for s in range(30)]
    assert acts == [
        random_action(random.Random(s), 'Enter the username "kenda"', LOGIN_TREE) for s in range(30)
    ]
    assert {a.split("(")[0] for a in acts} == {"fill", "click"}
    assert all(a == "click('20')" for a in acts if a.startswith("click"))
    assert random_action(random.Random(0), "", {"nodes": []}) == "noop()"


def test_collect_config_checks() -> None:
    with pytest.raises(ConfigError, match="book-flight"):
        CollectConfig(tasks=("book-flight",), policy="scripted")
    CollectConfig(tasks=("book-flight",), policy="random")  # any task runs with the random policy
    with pytest.raises(ConfigError, match="noise"):
        CollectConfig(noise=1.5)
    with pytest.raises(ConfigError, match="policy"):
        CollectConfig(policy="greedy")


# -- WebArena: configuration errors and import hygiene ---------------------------------------------
def test_missing_webarena_vars_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gymnasium")
    from xtree_gym.envs.browsergym import WebArenaEnv

    for name in WEBARENA_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WA_SHOPPING", "http://localhost:7770")
    with pytest.raises(EnvConfigError) as err:
        WebArenaEnv(task_id=3)
    msg = str(err.value)
    assert "WA_SHOPPING," not in msg and all(v in msg for v in WEBARENA_ENV_VARS[1:])
    assert "export WA_SHOPPING=" in msg  # says how to set them
    assert missing_webarena_vars({v: "http://h" for v in WEBARENA_ENV_VARS}) == []
    with pytest.raises(EnvConfigError, match="task_id"):
        WebArenaEnv(task_id=812)


def test_webarena_missing_dependency_names_its_own_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """browsergym-webarena lives in ``xtree_gym[webarena]`` (it pins huggingface-hub<1), not in ``[browser]``."""
    import importlib.util

    from xtree_gym.envs import browsergym as bg
    from xtree_gym.errors import DependencyError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        bg.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "browsergym.webarena" else real(name, *a),
    )
    with pytest.raises(DependencyError) as err:
        bg._import_webarena_task()
    assert "xtree_gym[webarena]" in str(err.value) and "XTree-WebArena-v0" in str(err.value)


def test_import_touches_no_network_module() -> None:
    code = (
        "import sys, xtree_gym, xtree_gym.envs.browsergym, xtree_gym.collect.miniwob\n"
        "from xtree_gym.envs.browsergym import WebArenaEnv\n"
        "try:\n    WebArenaEnv(task_id=0)\nexcept Exception as e:\n    print(type(e).__name__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('browsergym', 'nltk', 'webarena', 'playwright')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    assert out.stdout.split() == ["EnvConfigError", "[]"], out.stderr


# -- the authors' stored WebArena records (xtree-site data.js) -------------------------------------
# Table 9 role -> an accessibility role that maps to it (the records keep names, not roles).
_AX_ROLE = {"link": "link", "button": "button", "text_input": "textbox", "select": "combobox"}


def _webarena_examples(shared_dir: Path) -> list[dict[str, Any]]:
    text = (shared_dir / "reference" / "xtree-site" / "data.js").read_text()
    data = json.loads(text[text.index("[") : text.rstrip().rstrip(";").rindex("]") + 1])
    (section,) = [s for s in data if s["env"] == "WebArena"]
    return list(section["examples"])


def test_stored_webarena_steps_canonicalize(shared_dir: Path) -> None:
    """Rebuild each step's AXTree from its grounded form, then canonicalize the raw command."""
    pytest.importorskip("browsergym.utils.obs", reason="browsergym-core is not installed")
    from xtree_gym.envs.browsergym import flatten_axtree

    examples = _webarena_examples(shared_dir)
    n_steps = 0
    for ex in examples:
        for command, grounded, token in zip(ex["commands"], ex["grounded"], ex["tokens"], strict=True):
            m = re.match(r'^\w+ "(.*?)"(?: (.*))?$', grounded)
            assert m, grounded
            name, value = m.group(1), m.group(2)
            _, bid = parse_action(command)
            assert bid is not None
            role = _AX_ROLE[token.split("<")[1].rstrip(">")]
            tree = {
                "nodes": [_node("1", "RootWebArea", "page", children=("2",)), _node("2", role, name, bid)]
            }
            assert element_of(tree, bid) == {"role": role, "name": name}
            for ctx in (
                {"axtree_object": tree},
                {"axtree_txt": flatten_axtree(tree)},
                {"element": element_of(tree, bid)},
            ):
                ca = canonicalize("webarena", command, ctx)
                assert ca.token == token, (command, grounded, ctx)
                assert ca.slots["element_name"] == name and ca.slots["bid"] == bid
                if value is not None:
                    assert value in (ca.slots.get("text"), ca.slots.get("options"))
            n_steps += 1
    assert len(examples) == 5 and n_steps == 32


def test_env_arguments_are_checked_before_any_browser_starts() -> None:
    pytest.importorskip("browsergym.miniwob", reason="browsergym-miniwob is not installed")
    from xtree_gym.envs.browsergym import MiniWoBEnv, OpenURLEnv

    with pytest.raises(EnvConfigError, match="unknown MiniWoB"):
        MiniWoBEnv(task="click-buton")
    with pytest.raises(EnvConfigError, match="obs_mode"):
        MiniWoBEnv(task="click-button", obs_mode="pixels")
    with pytest.raises(EnvConfigError, match="absolute URL"):
        OpenURLEnv("form.html")
    with pytest.raises(CanonicalizationError, match="nodomain"):
        OpenURLEnv("http://127.0.0.1:1/", canon_domain="nodomain")
    with pytest.raises(EnvConfigError, match="before reset"):
        MiniWoBEnv(task="click-button").step("click('1')")


def test_element_context_per_canonicalizer_domain() -> None:
    """The same checkbox gives Table 9's click<checkbox> and Table 10's click<input_checkbox>."""
    pytest.importorskip("browsergym.miniwob", reason="browsergym-miniwob is not installed")
    from xtree_gym.envs.browsergym import MiniWoBEnv, OpenURLEnv

    strings = ["INPUT", "type", "checkbox", "bid", "18", "id", "ch0"]
    obs = {
        "axtree_object": {
            "nodes": [_node("1", "RootWebArea", "t", children=("2",)), _node("2", "checkbox", "Gh", "18")]
        },
        "dom_object": {
            "strings": strings,
            "documents": [{"nodes": {"nodeName": [0], "attributes": [[1, 2, 3, 4, 5, 6]]}}],
        },
    }
    table9 = OpenURLEnv("http://127.0.0.1:1/", obs_mode="dict")
    table10 = MiniWoBEnv(task="click-checkboxes")
    for env in (table9, table10):
        shown = env._observe(obs)
        assert (shown["axtree_txt"] if env is table9 else shown).startswith("RootWebArea 't'")
    ctx9, ctx10 = table9.canonical_context("click('18')"), table10.canonical_context("click('18')")
    assert ctx9["element"] == {
        "tag": "input",
        "type": "checkbox",
        "id": "ch0",
        "role": "checkbox",
        "name": "Gh",
    }
    assert ctx10["element"] == {
        "tag": "input",
        "type": "checkbox",
        "id": "ch0",
        "name": "Gh",
        "ax_role": "checkbox",
        "label": "Gh",
    }
    assert canonicalize("browsergym", "click('18')", ctx9).token == "click<checkbox>"
    assert canonicalize("miniwob", "click('18')", ctx10).token == "click<input_checkbox>"
    assert table9.canonical_context("click('77')")["element"] is None
