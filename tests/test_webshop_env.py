"""XTree-WebShop-v0: goals, search, pages, actions and invalid actions on the real catalogue."""

from __future__ import annotations

import json
import math
import random

import pytest

from xtree_gym.envs.webshop_data import PRICE_STEPS, build_goals, draw_prices, load_catalogue, parse_pricing
from xtree_gym.errors import EnvConfigError


def _reset(env, idx=0):
    obs, info = env.reset(options={"goal_idx": idx})
    return obs, info


# -- goals ----------------------------------------------------------------------------------------


def test_goal_set_counts_and_splits(webshop_env, webshop_data_dir):
    raw = json.loads((webshop_data_dir / "items_ins_v2_1000.json").read_text())
    with_instruction = {a for a, r in raw.items() if r.get("instruction") is not None}
    # one goal per instruction product and combination of its option values
    expected = sum(
        math.prod(len(v) for v in webshop_env.product(a).options.values()) for a in with_instruction
    )
    assert len(webshop_env.goals) == expected == 6910
    assert {g.asin for g in webshop_env.goals} == with_instruction
    assert [g.index for g in webshop_env.goals] == list(range(expected))
    from xtree_gym.envs.webshop import WebShopEnv

    test = WebShopEnv(data_dir=str(webshop_data_dir), split="test")
    train = WebShopEnv(data_dir=str(webshop_data_dir), split="train")
    assert test.goal_indices == range(500) and train.goal_indices == range(500, 6910)


def test_goal_text_options_and_price_bound(webshop_env):
    for g in webshop_env.goals[:300]:
        p = webshop_env.product(g.asin)
        assert set(g.goal_options) == set(p.options)
        assert all(g.goal_options[k] in p.options[k] for k in p.options)
        price = webshop_env.data.prices[g.asin]
        assert min(p.pricing) <= price <= max(p.pricing)
        above = [s for s in PRICE_STEPS if s > price][:4]
        if len(above) >= 2:
            # the bound is the larger of two draws from the four steps above the price
            assert g.price_upper in above[1:] and g.instruction.endswith(
                f"price lower than {g.price_upper:.2f} dollars"
            )
        for k, v in g.goal_options.items():
            assert f"{k}: {v}" in g.instruction


def test_goals_are_reproducible_from_the_seed(webshop_data_dir):
    cat = load_catalogue(webshop_data_dir)

    def goals(seed):
        rng = random.Random(seed)
        return build_goals(cat, draw_prices(cat.products, rng), rng)

    a, b, c = goals(7), goals(7), goals(8)
    assert a == b
    # the order, targets and options do not depend on the seed (the original's seeded shuffle)
    assert [(g.asin, g.goal_options) for g in a] == [(g.asin, g.goal_options) for g in c]
    assert [g.price_upper for g in a] != [g.price_upper for g in c]


def test_reset_draws_goals_from_the_split_under_a_seed(webshop_data_dir):
    from xtree_gym.envs.webshop import WebShopEnv

    env = WebShopEnv(data_dir=str(webshop_data_dir), split="test")
    first = [env.reset(seed=3)[1]["goal"]["index"]] + [env.reset()[1]["goal"]["index"] for _ in range(5)]
    again = [env.reset(seed=3)[1]["goal"]["index"]] + [env.reset()[1]["goal"]["index"] for _ in range(5)]
    assert first == again and all(0 <= i < 500 for i in first) and len(set(first)) > 1


def test_parse_pricing():
    assert parse_pricing("$22.99$25.99") == ((22.99, 25.99), "$22.99 to $25.99")
    assert parse_pricing(None) == ((100.0,), "$100.0")


# -- search ---------------------------------------------------------------------------------------


def test_search_finds_products_by_title(webshop_env):
    search = webshop_env.data.search
    rng = random.Random(0)
    sample = rng.sample(range(len(webshop_env.products)), 40)
    top1 = sum(search.search(webshop_env.products[i].title)[:1] == [i] for i in sample)
    top10 = sum(i in search.search(webshop_env.products[i].title)[:10] for i in sample)
    assert top1 >= 36 and top10 == 40
    assert search.search("zzqqxx") == [] and search.search("the of and") == []
    assert len(search.search("women")) == 50  # at most 50 hits, as the original


# -- pages and actions ----------------------------------------------------------------------------


def test_gym_make_and_search_page(webshop_data_dir):
    gym = pytest.importorskip("gymnasium")
    import xtree_gym.envs

    xtree_gym.envs.register_envs()
    env = gym.make("XTree-WebShop-v0", data_dir=str(webshop_data_dir), split="test")
    obs, info = env.reset(seed=0, options={"goal_idx": 3})
    goal = info["goal"]
    assert obs == f"WebShop [SEP] Instruction: [SEP] {goal['instruction']} [SEP] Search"
    assert info["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}
    env.close()


def test_results_paging_and_back(webshop_env):
    _reset(webshop_env)
    obs, *_, info = webshop_env.step("search[pillow cover]")
    assert not info["invalid"] and info["page"] == "results" and info["xtree"]["token"] == "search<query>"
    assert "Page 1 (Total results: 50) [SEP] Next > [SEP] " in obs and "< Prev" not in obs
    assert obs.count(" [SEP] B0") == 10
    obs, *_, info = webshop_env.step("click[next >]")
    assert "Page 2 (Total results: 50) [SEP] < Prev [SEP] Next >" in obs
    for _ in range(3):
        obs, *_ = webshop_env.step("click[next >]")
    assert "Page 5 (Total results: 50)" in obs and "Next >" not in obs
    obs, *_, info = webshop_env.step("click[next >]")  # not on the last page
    assert info["invalid"] and "Page 5" in obs
    obs, *_, info = webshop_env.step("click[back to search]")
    assert info["page"] == "search" and obs.startswith("WebShop [SEP]")


def test_item_page_options_sub_pages_and_buy(webshop_env):
    _reset(webshop_env, 0)
    webshop_env.step("search[ambesonne abstract throw pillow cushion cover geometric]")
    obs, *_, info = webshop_env.step("click[b0743jkhbv]")
    assert info["page"] == "item" and info["xtree"]["token"] == "click<item>"
    assert ' [SEP] Back to Search [SEP] < Prev [SEP] size [SEP] 16" x 16" [SEP] ' in obs
    assert obs.endswith(
        "Price: $14.95 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    *_, info = webshop_env.step('click[28" x 28"]')
    assert info["xtree"]["token"] == "click<option-size>" and webshop_env.state.options == {
        "size": '28" x 28"'
    }
    *_, info = webshop_env.step('click[26" x 26"]')
    assert info["xtree"]["token"] == "click<option>"
    webshop_env.step('click[28" x 28"]')
    obs, *_, info = webshop_env.step("click[features]")
    assert info["page"] == "sub" and "Double sided print" in obs and obs.count("Back to Search") == 1
    obs, *_, info = webshop_env.step("click[< prev]")
    assert info["page"] == "item"
    obs, reward, term, trunc, info = webshop_env.step("click[buy now]")
    assert (reward, term, trunc, info["won"]) == (1.0, True, False, True)
    assert info["reward_components"]["r_option"] == 1.0 and info["purchased"]["asin"] == "B0743JKHBV"
    assert info["xtree"]["token"] == "click<buy>"
    # after the episode, every action is invalid
    obs2, reward, term, _, info = webshop_env.step("click[buy now]")
    assert info["invalid"] and reward == 0.0 and term and obs2 == obs


def test_invalid_actions_change_nothing(webshop_env):
    obs0, _ = _reset(webshop_env)
    for bad in ["click[nothing here]", "jump", "search[]", "click[search]", "buy now", "click[buy now]"]:
        obs, reward, term, _, info = webshop_env.step(bad)
        assert info["invalid"] and info["invalid_action"] and info["xtree"]["invalid"], bad
        assert (obs, reward, term) == (obs0, 0.0, False)
        assert "xtree" in info and info["xtree"]["raw"] == bad
    with pytest.raises(EnvConfigError, match="actions are strings, got NoneType"):
        webshop_env.step(None)
    obs, *_, info = webshop_env.step("search[shampoo]")
    assert not info["invalid_action"] and not info["xtree"]["invalid"]
    obs1, reward, term, _, info = webshop_env.step("search[pillow]")  # no search bar on results page
    assert info["invalid"] and info["invalid_action"] and obs1 == obs


def test_step_limit_truncates(webshop_data_dir):
    from xtree_gym.envs.webshop import WebShopEnv

    env = WebShopEnv(data_dir=str(webshop_data_dir), max_steps=3)
    env.reset(seed=1)
    flags = [env.step("click[nope]")[3] for _ in range(3)]
    assert flags == [False, False, True]


def test_rich_text_marks_buttons_and_clicked_options(webshop_data_dir):
    from xtree_gym.envs.webshop import WebShopEnv

    env = WebShopEnv(data_dir=str(webshop_data_dir), observation_mode="text_rich", split="all")
    env.reset(options={"goal_idx": 0})
    obs, *_ = env.step("search[ambesonne abstract throw pillow cushion cover geometric]")
    assert "[button] Back to Search [button_]\n" in obs and "\n[button] B0743JKHBV [button_]\n" in obs
    env.step("click[b0743jkhbv]")
    obs, *_ = env.step('click[28" x 28"]')
    assert obs.startswith('You have clicked 28" x 28".\n')
    assert '  [clicked button] 28" x 28" [clicked button_]\n' in obs and "[button] Buy Now [button_]" in obs
    obs, *_ = env.step("click[< prev]")  # item page -> results
    assert "[clicked button] B0743JKHBV [clicked button_]" in obs  # visited product marked


def test_bad_arguments_raise_one_clear_error(webshop_data_dir, tmp_path):
    from xtree_gym.envs.webshop import WebShopEnv

    with pytest.raises(EnvConfigError, match="observation_mode"):
        WebShopEnv(data_dir=str(webshop_data_dir), observation_mode="html")
    with pytest.raises(EnvConfigError, match="split"):
        WebShopEnv(data_dir=str(webshop_data_dir), split="dev")
    with pytest.raises(EnvConfigError, match=r"items_shuffle_1000\.json"):
        WebShopEnv(data_dir=str(tmp_path))
    with pytest.raises(EnvConfigError, match="unknown WebShopEnv argument"):
        WebShopEnv(data_dir=str(webshop_data_dir), num_products=1000)
    env = WebShopEnv(data_dir=str(webshop_data_dir))
    with pytest.raises(EnvConfigError, match="goal_idx"):
        env.reset(options={"goal_idx": 10**6})


def test_passes_gymnasium_env_checker(webshop_data_dir):
    from gymnasium.utils.env_checker import check_env

    from xtree_gym.envs.webshop import WebShopEnv

    check_env(WebShopEnv(data_dir=str(webshop_data_dir)), skip_render_check=True)


def test_demo_catalogue_without_shared_data(tmp_path, monkeypatch):
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from xtree_gym.envs.webshop import WebShopEnv
    from xtree_gym.envs.webshop_data import write_demo_data

    monkeypatch.setenv("XTREE_WEBSHOP_DATA", str(write_demo_data(tmp_path)))
    env = WebShopEnv(split="all")  # data folder from the environment variable
    assert [g.goal_options for g in env.goals] in (
        [{"size": "small"}, {"size": "large"}],
        [{"size": "large"}, {"size": "small"}],
    )
    assert env.product("B000DEMO03").price_tag == "$100.0" and 8.5 <= env.data.prices["B000DEMO02"] <= 11.0
    env.reset(options={"goal_idx": 0})
    obs, *_ = env.step("search[hat]")
    assert "B000DEMO02 [SEP] Wool Winter Hat [SEP] $8.5 to $11.0" in obs


def test_blank_search_runs_and_shows_zero_results(tmp_path):
    # the original's parser takes any non-empty text in the brackets: "search[ ]" searches for a
    # blank and shows a results page with 0 results; "search[]" does not parse (invalid)
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from xtree_gym.envs.webshop import WebShopEnv
    from xtree_gym.envs.webshop_data import write_demo_data

    env = WebShopEnv(data_dir=str(write_demo_data(tmp_path)), split="all")
    obs0, _ = env.reset(options={"goal_idx": 0})
    obs, reward, term, _, info = env.step("search[]")
    assert info["invalid"] and obs == obs0
    obs, reward, term, _, info = env.step("search[ ]")
    assert not info["invalid"] and info["page"] == "results" and (reward, term) == (0.0, False)
    assert "Total results: 0" in obs and info["available_actions"]["clickables"] == ["back to search"]
