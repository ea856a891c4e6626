"""``xtree collect webshop``: run scripted shoppers in ``XTree-WebShop-v0`` and write a corpus.

Every record is real environment output: the actions a policy took, the observations and the
purchase reward the environment returned. A policy plays one *variant* per episode:

* ``expert`` -- searches the instruction's words (without the price clause), pages through at
  most two result pages for the target product, else searches the target's title; opens it,
  clicks every option value the goal names, buys. Reward 1.0 whenever it finds the product.
* ``detour`` -- the expert, plus a look at ``description`` / ``features`` / ``reviews`` and back,
  and one invalid click on the way (still a success).
* ``paging`` -- the expert, plus ``next >`` and ``< prev`` on the results before choosing.
* ``untyped`` -- opens the target but clicks a value the goal does not name in one option group
  (a ``click<option>`` token), then buys: partial reward when the goal names options.
* ``early_buy`` -- opens the target and buys before clicking the goal's options (partial reward
  when the goal names options).
* ``wrong_product`` -- buys another product from the results, choosing goal values it offers:
  usually a partial reward.
* ``wander`` -- browses results and product pages without buying until the step limit (0).

Policies: ``expert`` plays only the expert; ``noisy`` draws one of the six noisy variants;
``mixed`` draws from all seven with :data:`MIXED_WEIGHTS`, tuned so about 56 % of episodes
succeed like the paper's WebShop corpus. Trajectories carry ``goal_options`` (so ``xtree canon``
can recanonicalize), ``target``, ``goal_idx`` and ``variant``; steps carry ``token``/``slots``.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..errors import ConfigError

VARIANTS = ("expert", "detour", "paging", "untyped", "early_buy", "wrong_product", "wander")
NOISY_WEIGHTS = {
    "detour": 1.0,
    "paging": 1.0,
    "untyped": 1.5,
    "early_buy": 1.5,
    "wrong_product": 1.5,
    "wander": 0.5,
}
MIXED_WEIGHTS = {
    "expert": 3.5,
    "detour": 1.0,
    "paging": 1.0,
    "untyped": 1.5,
    "early_buy": 1.5,
    "wrong_product": 1.5,
    "wander": 0.5,
}
POLICIES = ("expert", "noisy", "mixed")


class _Episode:
    """Steps one env and records what happened; ``over`` once the episode ended or was cut."""

    def __init__(self, env: Any, keep_observations: bool) -> None:
        self.env = env
        self.keep = keep_observations
        self.steps: list[dict[str, Any]] = []
        self.reward = 0.0
        self.over = False
        self.info: dict[str, Any] = {}

    def act(self, action: str) -> None:
        if self.over:
            return
        obs, reward, terminated, truncated, info = self.env.step(action)
        xt = info["xtree"]
        step: dict[str, Any] = {
            "action": action,
            "observation": obs if self.keep else "",
            "token": xt["token"],
            "slots": xt["slots"],
            "reward": reward,
        }
        if info["invalid"]:
            step["invalid"] = True
        self.steps.append(step)
        self.reward, self.info = float(reward), info
        self.over = bool(terminated or truncated)

    @property
    def clickables(self) -> list[str]:
        return list(self.env.get_available_actions()["clickables"])


def _query(instruction: str) -> str:
    return instruction.split(", and price lower than")[0].lower()


def _find_target(ep: _Episode, target: str, pages: int = 2) -> bool:
    """Search the goal's words, page for the target; fall back to the target's title."""
    ep.act(f"search[{_query(ep.env.goal.instruction)}]")
    for _ in range(pages):
        if target in ep.clickables:
            return True
        if "next >" not in ep.clickables:
            break
        ep.act("click[next >]")
    ep.act("click[back to search]")
    ep.act(f"search[{ep.env.product(target).title.lower()}]")
    return target in ep.clickables


def _choose_goal_options(ep: _Episode) -> None:
    for value in ep.env.goal.goal_options.values():
        if value in ep.clickables:
            ep.act(f"click[{value}]")


def _play_expert(ep: _Episode, rng: random.Random, variant: str) -> None:
    target = ep.env.goal.asin.lower()
    if not _find_target(ep, target):
        return
    if variant == "paging" and "next >" in ep.clickables:
        ep.act("click[next >]")
        ep.act("click[< prev]")
    ep.act(f"click[{target}]")
    if variant == "detour":
        ep.act(f"click[{rng.choice(['description', 'features', 'reviews'])}]")
        ep.act("click[< prev]")
        ep.act("click[add to cart]")  # not on the page: an invalid action
    if variant == "untyped":
        _click_untyped(ep, rng)
    elif variant != "early_buy":
        _choose_goal_options(ep)
    ep.act("click[buy now]")


def _click_untyped(ep: _Episode, rng: random.Random) -> None:
    """Click goal values for all groups but one, and a value the goal does not name in that one."""
    product = ep.env.product(ep.env.goal.asin)
    goal = ep.env.goal.goal_options
    groups = [g for g, vals in product.options.items() if g in goal and any(v != goal[g] for v in vals)]
    odd = rng.choice(groups) if groups else None
    for group, value in goal.items():
        if group == odd:
            value = rng.choice([v for v in product.options[group] if v != value])
        ep.act(f"click[{value}]")


def _items(ep: _Episode) -> list[str]:
    """Product links on the current page (lower-case ASINs)."""
    by_asin = ep.env.data.catalogue.by_asin
    return [c for c in ep.clickables if c.upper() in by_asin]


def _play_wrong_product(ep: _Episode, rng: random.Random) -> None:
    target = ep.env.goal.asin.lower()
    ep.act(f"search[{_query(ep.env.goal.instruction)}]")
    others = [c for c in _items(ep) if c != target]
    if not others:
        return
    ep.act(f"click[{rng.choice(others[:5])}]")
    _choose_goal_options(ep)
    ep.act("click[buy now]")


def _play_wander(ep: _Episode, rng: random.Random) -> None:
    ep.act(f"search[{_query(ep.env.goal.instruction)}]")
    while not ep.over:
        items = _items(ep)
        if ep.env.state.page == "results" and items and rng.random() < 0.6:
            ep.act(f"click[{rng.choice(items)}]")
        elif "next >" in ep.clickables and rng.random() < 0.5:
            ep.act("click[next >]")
        elif "< prev" in ep.clickables:
            ep.act("click[< prev]")
        else:
            ep.act("click[back to search]")
            ep.act(f"search[{_query(ep.env.goal.instruction)}]")


def run_episode(
    env: Any,
    goal_idx: int,
    variant: str,
    rng: random.Random,
    keep_observations: bool = True,
    episode_id: str | None = None,
) -> dict[str, Any]:
    """Play one episode of ``variant`` on goal ``goal_idx``; returns the corpus record (a dict)."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown WebShop policy variant {variant!r}", fix=f"use one of {VARIANTS}")
    env.reset(options={"goal_idx": goal_idx})
    ep = _Episode(env, keep_observations)
    if variant == "wrong_product":
        _play_wrong_product(ep, rng)
    elif variant == "wander":
        _play_wander(ep, rng)
    else:
        _play_expert(ep, rng, variant)
    goal = env.goal
    return {
        "id": episode_id or f"webshop-{goal_idx:05d}-{variant}",
        "env": "webshop",
        "task": env.product(goal.asin).category,
        "goal": goal.instruction,
        "success": bool(ep.info.get("won", False)),
        "reward": ep.reward,
        "steps": ep.steps,
        "goal_options": dict(goal.goal_options),
        "goal_idx": goal_idx,
        "target": goal.asin,
        "attributes": list(goal.attributes),
        "price_upper": goal.price_upper,
        "variant": variant,
        "purchased": ep.info.get("purchased"),
        "reward_components": ep.info.get("reward_components"),
    }


def plan(n_episodes: int, goal_indices: range, policy: str, seed: int) -> list[tuple[int, str, int]]:
    """``(goal index, variant, episode seed)`` per episode, reproducible from ``seed``.

    Example:
        >>> plan(3, range(500, 6910), "expert", 0) == plan(3, range(500, 6910), "expert", 0)
        True
        >>> [v for _, v, _ in plan(3, range(10), "expert", 1)]
        ['expert', 'expert', 'expert']
        >>> plan(1, range(0), "expert", 0)
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: the chosen goal split holds no goals in this data -- fix: ...
    """
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}", fix=f"use one of {POLICIES}")
    if n_episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {n_episodes}")
    rng = random.Random(seed)
    pool = list(goal_indices)
    if not pool:  # sampling from nothing would loop forever
        raise ConfigError(
            "the chosen goal split holds no goals in this data",
            fix="pass --split all (a small catalogue may have no train/test goals), or point --data-dir at the "
            "1000-product WebShop files",
        )
    goals: list[int] = []
    while len(goals) < n_episodes:  # without replacement until the split is used up
        goals.extend(rng.sample(pool, min(len(pool), n_episodes - len(goals))))
    weights = {"expert": {"expert": 1.0}, "noisy": NOISY_WEIGHTS, "mixed": MIXED_WEIGHTS}[policy]
    names, w = list(weights), list(weights.values())
    return [(g, rng.choices(names, w)[0], rng.randrange(2**31)) for g in goals]


def collect(
    env: Any,
    n_episodes: int,
    policy: str,
    seed: int,
    keep_observations: bool = True,
    show_progress: bool | None = None,
) -> Iterator[dict[str, Any]]:
    """Records of ``n_episodes`` episodes on ``env``'s split (see :func:`plan`)."""
    from ..progress import progress

    episodes = plan(n_episodes, env.goal_indices, policy, seed)
    for i, (goal_idx, variant, ep_seed) in enumerate(
        progress(episodes, desc="webshop", enabled=show_progress)
    ):
        yield run_episode(
            env, goal_idx, variant, random.Random(ep_seed), keep_observations, f"webshop-s{seed}-{i:05d}"
        )


def _handler(args: argparse.Namespace) -> int:
    from ..envs.needs import check_env

    # every missing extra and the data folder in one message, before anything is read
    check_env(
        "XTree-WebShop-v0",
        {"data_dir": args.data_dir},
        feature="xtree collect webshop",
        option="--data-dir DIR",
    )
    from ..corpus.io import refuse_overwrite
    from ..corpus.records import write_corpus
    from ..envs.webshop import WebShopEnv
    from ..envs.webshop_data import CATALOGUE_FILE, INSTRUCTIONS_FILE, resolve_data_dir

    data_dir = resolve_data_dir(args.data_dir, option="--data-dir DIR")  # the error names the CLI flag
    refuse_overwrite(args.output, [data_dir / CATALOGUE_FILE, data_dir / INSTRUCTIONS_FILE])
    env = WebShopEnv(
        data_dir=data_dir,
        split=args.split,
        max_steps=args.max_steps,
        observation_mode=args.observation_mode,
        price_seed=args.price_seed,
    )
    summary: list[tuple[bool, float, int, str]] = []  # (success, reward, steps, variant) per episode

    def records() -> Iterator[dict[str, Any]]:
        for r in collect(env, args.episodes, args.policy, args.seed, not args.no_observations):
            summary.append((r["success"], r["reward"], len(r["steps"]), r["variant"]))
            yield r

    write_corpus(args.output, records())
    n = len(summary)
    wins = sum(s[0] for s in summary)
    variants = Counter(s[3] for s in summary)
    mean_reward = sum(s[1] for s in summary) / n
    mean_steps = sum(s[2] for s in summary) / n
    print(
        f"wrote {n} episodes to {args.output}: success {wins / n:.3f}, mean reward {mean_reward:.3f}, "
        f"mean steps {mean_steps:.1f}; variants " + ", ".join(f"{k} {v}" for k, v in sorted(variants.items()))
    )
    return 0


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = collect_subparsers.add_parser(
        "webshop",
        help="run scripted shoppers in XTree-WebShop-v0 into a canonicalized corpus",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--episodes", type=int, default=100, help="episodes to run (default 100)")
    p.add_argument("--policy", choices=POLICIES, default="mixed", help="expert, noisy or mixed (default)")
    p.add_argument("--seed", type=int, default=0, help="seed of goals and variants (default 0)")
    p.add_argument(
        "--split", choices=("train", "test", "all"), default="train", help="goal split (default train)"
    )
    p.add_argument("--data-dir", default=None, help="WebShop data folder (default $XTREE_WEBSHOP_DATA)")
    p.add_argument("--max-steps", type=int, default=15, help="step limit per episode (default 15)")
    p.add_argument("--price-seed", type=int, default=0, help="seed of prices and price bounds (default 0)")
    p.add_argument("--observation-mode", choices=("text", "text_rich"), default="text")
    p.add_argument("--no-observations", action="store_true", help="store empty observations (smaller file)")
    p.add_argument("-o", "--output", required=True, help="corpus file to write (.jsonl or .jsonl.gz)")
    p.set_defaults(func=_handler)
