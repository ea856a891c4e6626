"""Property tests: every domain is total (never raises) and lossless (raw + slots keep the action)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from xtree_gym.canon import canonicalize, get_canonicalizer

DOMAINS = (
    "scienceworld",
    "webshop",
    "browsergym",
    "miniwob",
    "generic",
    "countdown",
    "alfworld",
    "twcooking",
    "discrete",
    "minigrid",
)

contexts = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=3),
    st.fixed_dictionaries(
        {"goal_options": st.one_of(st.text(), st.lists(st.text()), st.dictionaries(st.text(), st.text()))}
    ),
    st.fixed_dictionaries(
        {
            "axtree_txt": st.text(),
            "element": st.one_of(st.none(), st.text(), st.dictionaries(st.text(), st.text())),
        }
    ),
    st.fixed_dictionaries(
        {"axtree_object": st.one_of(st.text(), st.lists(st.dictionaries(st.text(), st.text())))}
    ),
    # Countdown targets as a corpus may hold them: numbers, numeric or junk strings, nan
    st.fixed_dictionaries({"target": st.one_of(st.integers(), st.floats(), st.text(max_size=4), st.none())}),
)
# Strings shaped like each domain's actions, so the rules (not only the catch-all) are exercised.
actions = st.one_of(
    st.text(),
    st.builds(
        lambda v, x: f"{v} {x}",
        st.sampled_from(["focus on", "go to", "move", "use", "pour", "open", "look at", "connect"]),
        st.text(),
    ),
    st.builds(lambda v, x: f"{v}[{x}]", st.sampled_from(["click", "search"]), st.text()),
    st.builds(
        lambda f, x: f"{f}({x})",
        st.sampled_from(["click", "fill", "type", "select_option", "goto", "press"]),
        st.text(),
    ),
    st.builds(lambda a, b: f"move {a} to {b}", st.text(min_size=1), st.text(min_size=1)),
    st.builds(lambda a, o, b: f"{a} {o} {b}", st.integers(), st.sampled_from("+-*/x÷"), st.integers()),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DOMAINS), actions, contexts)
def test_total_and_raw_kept(domain: str, action: str, context) -> None:
    ca = canonicalize(domain, action, context)
    assert ca.raw == action
    assert ca.token == f"{ca.verb}<{ca.role}>"
    assert isinstance(ca.slots, dict)
    assert "canon_error" not in ca.slots, ca.slots  # no rule raised (the base class would hide it)


def _covered(word: str, ca) -> bool:
    hay = (ca.token + " " + " ".join(map(str, ca.slots.values()))).lower()
    return word.lower() in hay


@settings(max_examples=300, deadline=None)
@given(actions)
def test_scienceworld_every_word_is_kept(action: str) -> None:
    ca = get_canonicalizer("scienceworld")(action)
    for word in action.split():
        assert _covered(word, ca), (word, ca)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_characters="[]"), min_size=1),
    st.sampled_from(["click", "search"]),
)
def test_webshop_argument_is_kept(arg: str, verb: str) -> None:
    ca = get_canonicalizer("webshop")(f"{verb}[{arg}]", {"goal_options": {"color": arg}})
    assert arg in ca.slots.values()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_browsergym_fill_keeps_bid_and_text(bid: str, text: str) -> None:
    ca = get_canonicalizer("browsergym")(f"fill({bid!r}, {text!r})")
    assert ca.verb == "type" and ca.slots["bid"] == bid and ca.slots["text"] == text


def test_every_registered_canonicalizer_is_under_test() -> None:
    from xtree_gym.canon import available_domains

    classes = {type(get_canonicalizer(d)) for d in available_domains()}
    assert classes == {type(get_canonicalizer(d)) for d in DOMAINS}


def test_deterministic() -> None:
    for domain, action in [
        ("scienceworld", "move ant to blue box"),
        ("browsergym", "click('3')"),
        ("webshop", "click[x]"),
    ]:
        assert canonicalize(domain, action) == canonicalize(domain, action)
        assert re.fullmatch(r"[^<>]+<[^<>]*>", canonicalize(domain, action).token)


def test_countdown_target_from_json_text_or_junk() -> None:
    """A target stored as text (``"54"``) is read as a number; junk gives role ``unknown``, never an error."""
    assert canonicalize("countdown", "80 - 28", {"target": "54"}).token == "sub<large-small>"
    assert canonicalize("countdown", "80 - 28", {"target": 54.0}).token == "sub<large-small>"
    for junk in ["", "n/a", float("nan"), float("inf"), True, [54]]:
        ca = canonicalize("countdown", "80 - 28", {"target": junk})
        assert ca.token == "sub<unknown>" and "canon_error" not in ca.slots, (junk, ca)
        assert ca.slots["target"] is junk  # kept as given (lossless)
