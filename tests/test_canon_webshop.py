"""WebShop canonicalizer: Table 11 rows, goal_options shapes, page options."""

from __future__ import annotations

import pytest

from xtree_gym.canon.webshop import (
    WebShopCanonicalizer,
    goal_option_pairs,
    option_type_name,
    page_options_from_text,
)

C = WebShopCanonicalizer()
GOAL = {"goal_options": {"color": "blue", "size": "16foot", "flavor name": "caramel"}}


@pytest.mark.parametrize(
    ("action", "token"),
    [
        ("search[16 foot long blue usb cord]", "search<query>"),
        ("click[b098qkqp4b]", "click<item>"),
        ("click[B098QKQP4B]", "click<item>"),
        ("click[0316769177]", "click<item>"),
        ("click[16foot]", "click<option-size>"),
        ("click[16 foot]", "click<option-size>"),
        ("click[Blue]", "click<option-color>"),
        ("click[caramel]", "click<option-flavor-name>"),
        ("click[black]", "click<option>"),
        ("click[buy now]", "click<buy>"),
        ("click[Buy Now]", "click<buy>"),
        ("click[back to search]", "click<back>"),
        ("click[next >]", "click<next>"),
        ("click[< prev]", "click<prev>"),
        ("click[description]", "click<desc>"),
        ("click[features]", "click<features>"),
        ("click[reviews]", "click<reviews>"),
        ("click[attributes]", "click<attrs>"),
        ("click<option-color>(black)", "click<option-color>"),
        ("think[what now]", "think[what<now]>"),
    ],
)
def test_rows(action: str, token: str) -> None:
    assert C(action, GOAL).token == token


def test_without_context_options_are_untyped() -> None:
    assert C("click[blue]").token == "click<option>"
    assert C("click[blue]", {"goal_options": None}).token == "click<option>"


def test_slots() -> None:
    assert C("search[grey sofa ]").slots == {"query": "grey sofa "}
    assert C("click[b08qmwl422]").slots == {"item": "b08qmwl422"}
    ca = C("click[16foot]", GOAL)
    assert ca.slots == {"value": "16foot", "goal_group": "size"}
    assert C("click[buy now]").slots["button"] == "buy now"


def test_goal_option_shapes() -> None:
    assert goal_option_pairs([["color", "red"]]) == [("color", "red")]
    assert goal_option_pairs([{"type": "Fit Type", "value": "men"}]) == [("Fit Type", "men")]
    assert goal_option_pairs("nonsense") == []
    assert (
        C("click[men]", {"goal_options": [{"type": "Fit Type", "value": "men"}]}).token
        == "click<option-fit-type>"
    )
    assert option_type_name("Item  Package_Quantity") == "item-package-quantity"


def test_value_only_goal_options_use_page_groups() -> None:
    ctx = {"goal_options": ["blue"], "page_options": {"color": ["black", "blue"]}}
    assert C("click[blue]", ctx).token == "click<option-color>"
    assert C("click[blue]", {"goal_options": ["blue"]}).token == "click<option-goal>"


def test_page_options_from_text_and_corpus_context() -> None:
    from xtree_gym.corpus import Step, Trajectory

    obs = "Back to Search [SEP] < Prev [SEP] flavor name [SEP] caramel [SEP] vanilla [SEP] Wafers [SEP] Price: $5"
    assert page_options_from_text(obs)["flavor name"][:2] == ["caramel", "vanilla"]
    t = Trajectory(
        "t",
        [Step("click[b085qmttsc]", obs), Step("click[caramel]")],
        True,
        extra={"goal_options": ["caramel"]},
    )
    ctx = C.corpus_context(t, 1)
    assert C(t.steps[1].action, ctx).token == "click<option-flavor-name>"
    assert C.corpus_context(Trajectory("u", [Step("x")], True), 0) == {}
