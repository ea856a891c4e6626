"""BrowserGym envs in real headless Chromium: canonical tokens, invalid actions, MiniWoB++ rewards."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from xtree_gym.envs.browser_axtree import iter_elements

pytestmark = pytest.mark.browser


def _bid(env: Any, role: str, label: str) -> str:
    """Bid of the element with AX ``role`` whose name (or preceding label) is ``label``."""
    for e in iter_elements(env.last_browsergym_obs["axtree_object"]):
        if e["role"] == role and e["label"] == label:
            return str(e["bid"])
    raise AssertionError(f"no {role} {label!r} in the page")


@pytest.fixture(scope="module")
def form(browser_form_env: Any) -> Any:
    text, info = browser_form_env.reset(seed=0)
    assert "XTree fixture form" in text and info["goal"] == "Sign up"
    return browser_form_env


def test_form_observation_is_flattened_axtree(form: Any) -> None:
    from browsergym.utils.obs import flatten_axtree_to_str

    obs = form.last_browsergym_obs
    assert form._text == flatten_axtree_to_str(obs["axtree_object"])
    assert "textbox 'First name'" in form._text and "combobox 'Country'" in form._text


def test_form_actions_give_table9_tokens(form: Any) -> None:
    steps = [
        (f"fill({_bid(form, 'textbox', 'First name')!r}, 'Ada')", "type<text_input>", "First name"),
        (f"fill({_bid(form, 'textbox', 'Email')!r}, 'ada@example.org')", "type<text_input>", "Email"),
        (f"select_option({_bid(form, 'combobox', 'Country')!r}, 'Japan')", "select<select>", "Country"),
        (f"click({_bid(form, 'checkbox', 'Accept terms')!r})", "click<checkbox>", "Accept terms"),
        (f"click({_bid(form, 'button', 'Submit')!r})", "click<button>", "Submit"),
    ]
    for action, token, name in steps:
        text, reward, terminated, _, info = form.step(action)
        x = info["xtree"]
        assert (x["token"], x["raw"], x["invalid"]) == (token, action, False), info["action_error"]
        assert x["slots"]["element_name"] == name and info["element"]["name"] == name
        assert info["invalid_action"] is False and reward == 0.0 and not terminated
    # the page really changed: the form's submit handler wrote the typed name
    assert "Submitted Ada" in text
    assert "checked='true'" in text and "value='Japan'" in text


def test_invalid_action_is_marked(form: Any) -> None:
    before = form._text
    _, _, _, _, info = form.step("click('99999')")
    assert info["xtree"]["invalid"] is True and info["invalid_action"] is True
    assert "99999" in info["action_error"] and info["element"] is None
    assert info["xtree"]["token"] == "click<element>"
    assert form._text.splitlines()[0] == before.splitlines()[0]  # still on the form


def test_link_click_navigates(form: Any) -> None:
    action = f"click({_bid(form, 'link', 'Next page')!r})"
    text, _, _, _, info = form.step(action)
    assert info["xtree"]["token"] == "click<link>" and info["xtree"]["slots"]["element_name"] == "Next page"
    assert "XTree fixture next page" in text and "You followed the link." in text


def test_both_browsers_are_the_configured_chromium(form: Any, browser_chromium: str) -> None:
    out = subprocess.run([browser_chromium, "--version"], capture_output=True, text=True, check=True).stdout
    version = out.split()[1]  # "Chromium 156.0.8078.108 built on Debian ..."
    env = form.browser_env
    assert env.browser.version == version
    assert env.chat.browser.version == version
    # the launch patch is gone after reset: a plain launch is not redirected
    from browsergym.core import _get_global_playwright

    assert "launch" not in vars(_get_global_playwright().chromium)


@pytest.mark.parametrize("task", ["click-button", "enter-text"])
def test_miniwob_scripted_solves(task: str, browser_chromium: str) -> None:
    import gymnasium as gym

    from xtree_gym.collect.miniwob import CollectConfig, run_episode
    from xtree_gym.envs import register_envs
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig

    register_envs()
    env = gym.make(
        "XTree-MiniWoB-v0", task=task, launch=BrowserLaunchConfig(executable_path=browser_chromium)
    )
    try:
        traj = run_episode(env, task, seed=1, config=CollectConfig(tasks=(task,), episodes=1))
    finally:
        env.close()
    assert traj.success and traj.reward is not None and traj.reward > 0
    assert traj.extra["raw_reward"] > 0
    tokens = [s.token for s in traj.steps]
    if task == "click-button":
        assert tokens == ["click<button>"]
        assert traj.steps[0].extra["element"]["name"] in traj.goal
    else:
        assert tokens == ["type<input_text>", "click<button>"]
        assert traj.steps[0].slots["text"] in traj.goal


def test_collect_cli_random_and_recanonicalize(tmp_path: Path, browser_chromium: str) -> None:
    from xtree_gym.canon import get_canonicalizer
    from xtree_gym.collect.miniwob import register_cli
    from xtree_gym.corpus import read_corpus

    # only this plugin's parser, so the test does not depend on the other subcommands
    parser = argparse.ArgumentParser(prog="xtree")
    sub = parser.add_subparsers(dest="command")
    register_cli(sub, sub.add_parser("collect").add_subparsers(dest="env"))
    out = tmp_path / "mw.jsonl"
    argv = ["collect", "miniwob", "--tasks", "click-checkboxes", "--policy", "random", "--episodes", "2"]
    argv += ["--seed", "3", "--max-steps", "4", "--chromium", browser_chromium, "-o", str(out)]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    corpus = read_corpus([out])
    assert len(corpus) == 2 and all(t.env == "miniwob" and t.task == "click-checkboxes" for t in corpus)
    assert [t.extra["seed"] for t in corpus] == [3, 4]
    canon = get_canonicalizer("miniwob")
    for traj in corpus:
        assert traj.goal.startswith("Select ") and traj.extra["initial_observation"].startswith("RootWebArea")
        assert 0 < len(traj.steps) <= 4
        for i, step in enumerate(traj.steps):
            assert step.observation.startswith("RootWebArea") and isinstance(step.extra["element"], dict)
            # the stored element reproduces the stored token offline
            assert canon(step.action, canon.corpus_context(traj, i)).token == step.token
        assert traj.success == (traj.reward is not None and traj.reward > 0)
    raw = json.loads(out.read_text().splitlines()[0])
    assert {"action", "observation", "token", "slots", "element"} <= set(raw["steps"][0])
