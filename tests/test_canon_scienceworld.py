"""ScienceWorld canonicalizer: Table 11 templates, the object lexicon, slots."""

from __future__ import annotations

import pytest

from xtree_gym import canon
from xtree_gym.canon.scienceworld import ROOMS, ScienceWorldCanonicalizer, object_class, strip_object

C = ScienceWorldCanonicalizer()


@pytest.mark.parametrize(
    ("action", "token"),
    [
        ("focus on unknown substance B in inventory", "focus<substance>"),
        ("go to art studio", "navigate<art studio>"),
        ("teleport to kitchen", "navigate<kitchen>"),
        ("go to greenhouse", "navigate<green house>"),
        ("go to table", "navigate<container>"),
        ("open door to hallway", "open<door>"),
        ("close door to kitchen", "close<door>"),
        ("open paint cupboard", "open<container>"),
        ("open bee hive", "open<container>"),
        ("pick up thermometer", "take<instrument>"),
        ("put down aluminum foil", "put<ground>"),
        ("drop aluminum foil", "put<ground>"),
        ("move thermometer to metal pot", "put<container>"),
        ("move thermometer to ceramic cup", "put<container>"),
        ("move thermometer to stove", "put<device>"),
        ("move seed jar to flower pot 2", "put<container>"),
        ("activate stove", "activate<device>"),
        ("deactivate sink", "deactivate<device>"),
        ("pour cup containing red paint in inventory into bowl", "pour<container>"),
        ("pour cup containing blue paint in art studio in jug", "pour<container>"),
        ("dunk glass cup in sink", "dunk<device>"),
        ("mix bowl", "mix<container>"),
        ("look around", "observe<room>"),
        ("look at inclined plane with a rubber surface", "observe<device>"),
        ("look in cupboard", "observe<container>"),
        ("examine liquid gallium", "observe<substance>"),
        ("inventory", "observe<inventory>"),
        ("task", "observe<task>"),
        ("reset task", "observe<task>"),
        ("read recipe in inventory", "read<recipe>"),
        ("use thermometer in inventory on lead", "measure<substance>"),
        ("use stopwatch in inventory on block", "measure<block>"),
        ("use shovel in inventory on ground", "use<ground>"),
        ("use lighter", "use<device>"),
        ("connect battery anode to black wire terminal 1", "connect<device>"),
        ("disconnect black wire", "disconnect<device>"),
        ("eat apple", "eat<substance>"),
        ("flush toilet", "flush<device>"),
        ("wait1", "wait<short>"),
        ("wait", "wait<long>"),
        ("0", "disambiguate<choice>"),
        ("12", "disambiguate<choice>"),
        ("focus on blue jay", "focus<blue jay>"),
        ("focus on adult apple tree", "focus<plant>"),
        ("focus on baby baby wolf", "focus<animal>"),
        ("focus on egg turtle egg", "focus<animal>"),
        ("focus on finger painting", "focus<paint>"),
        ("dance wildly", "dance<wildly>"),
    ],
)
def test_templates(action: str, token: str) -> None:
    assert C(action).token == token


def test_registry_aliases_and_case() -> None:
    assert canon.canonicalize("sciworld", "Open Door To Kitchen").token == "open<door>"
    assert canon.get_canonicalizer("scienceworld") is canon.get_canonicalizer("science_world")


def test_slots_keep_what_was_stripped() -> None:
    ca = C("move metal pot containing gallium in inventory to flower pot 3")
    assert ca.token == "put<container>"
    assert ca.slots["X"] == "metal pot containing gallium in inventory"
    assert ca.slots["Y"] == "flower pot 3"
    assert ca.slots["Y_instance"] == "3"
    assert ca.slots["X_containing"] == "gallium in inventory"
    assert ca.slots["template"] == "move X to Y"
    tele = C("teleport to living room")
    assert tele.slots["teleport"] is True and tele.slots["X"] == "living room"
    assert C("0").slots["choice"] == 0
    assert C("put down ant").slots["surface"] == "put down"


def test_measure_only_for_measuring_instruments() -> None:
    assert C("use ruler on block").verb == "measure"
    assert C("use lighter on paper").verb == "use"
    assert C("use thermometer on steam").slots["X"] == "thermometer"


def test_strip_object_parts() -> None:
    head, quals = strip_object("book (pride and prejudice)")
    assert head == "book" and quals["paren"] == "pride and prejudice"
    head, quals = strip_object("the inclined plane with a steel surface")
    assert head == "inclined plane" and quals == {"with": "steel surface", "article": "the"}
    head, quals = strip_object("door to living room")
    assert head == "door" and quals["to"] == "living room"


def test_lexicon_order_settles_overlaps() -> None:
    # container before plant ("flower pot"), plant before substance ("apple seed"),
    # whole words only ("plant" does not contain the animal "ant").
    assert object_class("flower pot 1")[0] == "container"
    assert object_class("apple seed")[0] == "plant"
    assert object_class("red apple")[0] == "substance"
    assert object_class("pea plant")[0] == "plant"
    assert object_class("elephant")[0] == "animal"
    assert object_class("kitchen")[0] == "location"


def test_rooms_are_the_ten_scienceworld_rooms() -> None:
    assert len(set(ROOMS.values())) == 10


def test_gold_corpus_alphabet(shared_dir) -> None:
    """Every action of the 826 gold episodes gets a template (no catch-all), and the alphabet
    stays small enough for mining (the authors' tree has 84 primitives on AgentTraj-L)."""
    import json

    path = shared_dir / "data" / "scienceworld" / "train-gold.jsonl"
    actions = {s["action"] for line in path.open() for s in json.loads(line)["steps"]}
    results = [C(a) for a in actions]
    no_template = [ca.raw for ca in results if "template" not in ca.slots and "choice" not in ca.slots]
    assert no_template == []
    assert 30 <= len({ca.token for ca in results}) <= 90


def test_huge_numbers_keep_their_rule() -> None:
    """Python's int() refuses > 4,300 digits; the rule must still fire (no catch-all fallback)."""
    ca = C("9" * 5000)
    assert ca.token == "disambiguate<choice>" and ca.slots["choice"] == "9" * 5000
    assert C("wait" + "1" * 5000).token == "wait<long>"
