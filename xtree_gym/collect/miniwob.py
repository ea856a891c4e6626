"""``xtree collect miniwob``: MiniWoB++ episodes in real Chromium, written as a corpus.

Two policies:

* ``scripted`` -- hand-written solvers that read the goal and the AXTree of the first
  observation and plan the BrowserGym actions (tasks in :data:`SCRIPTED_TASKS`). With
  ``noise > 0`` each planned action is swapped for a random one with that probability, so a
  scripted corpus also holds failures.
* ``random`` -- a uniformly random interactive element and an action that fits its role.

Every step stores the action, the flattened AXTree after it (``observation``; the first one is
``extra["initial_observation"]`` of the trajectory), the addressed ``element`` ``{role, name}``
read before the action, and the canonical ``token``/``slots``. Rewards are MiniWoB's own.
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..corpus.records import Step, Trajectory, write_corpus
from ..envs.browser_axtree import iter_elements
from ..errors import ConfigError

POLICIES = ("scripted", "random")
# iter_elements(...) rows: {"bid", "role", "name", "label", "value", "checked"}
Elements = list[dict[str, Any]]


def _quoted(goal: str) -> list[str]:
    return re.findall(r'"([^"]*)"', goal)


def _first(elements: Elements, role: str | tuple[str, ...], label: str | None = None) -> dict[str, Any]:
    roles = (role,) if isinstance(role, str) else role
    for e in elements:
        if e["role"] in roles and (label is None or e["label"].strip().lower() == label.lower()):
            return e
    raise ConfigError(f"no {'/'.join(roles)} element{f' labelled {label!r}' if label else ''} on the page")


def _submit(elements: Elements, name: str = "Submit") -> str:
    return f"click({_first(elements, 'button', name)['bid']!r})"


def _fill(e: Mapping[str, Any], text: str) -> str:
    return f"fill({e['bid']!r}, {text!r})"


def _click_button(goal: str, els: Elements) -> list[str]:
    (name,) = _quoted(goal)[:1]
    return [f"click({_first(els, 'button', name)['bid']!r})"]


def _enter_text(goal: str, els: Elements) -> list[str]:
    (text,) = _quoted(goal)[:1]
    return [_fill(_first(els, "textbox"), text), _submit(els)]


def _login_user(goal: str, els: Elements) -> list[str]:
    user, password = _quoted(goal)[:2]
    return [
        _fill(_first(els, "textbox", "Username"), user),
        _fill(_first(els, "textbox", "Password"), password),
        _submit(els, "Login"),
    ]


def _click_checkboxes(goal: str, els: Elements) -> list[str]:
    m = re.match(r"Select (.*) and click Submit\.?$", goal.strip())
    if not m:
        raise ConfigError(f"unexpected click-checkboxes goal {goal!r}")
    wanted = set() if m.group(1) == "nothing" else {w.strip() for w in m.group(1).split(",")}
    actions = []
    for e in els:
        if e["role"] == "checkbox" and (e["name"] in wanted) != (str(e["checked"]) == "true"):
            actions.append(f"click({e['bid']!r})")
    return [*actions, _submit(els)]


def _choose_list(goal: str, els: Elements) -> list[str]:
    m = re.match(r"Select (.*) from the list and click Submit\.?$", goal.strip())
    if not m:
        raise ConfigError(f"unexpected choose-list goal {goal!r}")
    box = _first(els, ("combobox", "listbox"))
    return [f"select_option({box['bid']!r}, {m.group(1)!r})", _submit(els)]


def _focus_text(goal: str, els: Elements) -> list[str]:
    return [f"click({_first(els, 'textbox')['bid']!r})"]


# task name -> solver(goal, elements) -> planned BrowserGym actions
SCRIPTED_TASKS: dict[str, Callable[[str, Elements], list[str]]] = {
    "click-button": _click_button,
    "enter-text": _enter_text,
    "login-user": _login_user,
    "click-checkboxes": _click_checkboxes,
    "choose-list": _choose_list,
    "focus-text": _focus_text,
}


def scripted_plan(task: str, goal: str, axtree_object: Mapping[str, Any] | None) -> list[str]:
    """The scripted solver's actions for one episode, planned from the goal and first AXTree.

    Example:
        >>> tree = {"nodes": [
        ...     {"nodeId": "1", "role": {"value": "RootWebArea"}, "childIds": ["2", "3"]},
        ...     {"nodeId": "2", "role": {"value": "button"}, "name": {"value": "no"}, "browsergym_id": "4"},
        ...     {"nodeId": "3", "role": {"value": "button"}, "name": {"value": "yes"}, "browsergym_id": "5"}]}
        >>> scripted_plan("click-button", 'Click on the "yes" button.', tree)
        ["click('5')"]
    """
    solver = SCRIPTED_TASKS.get(task)
    if solver is None:
        raise ConfigError(
            f"no scripted solver for MiniWoB++ task {task!r}",
            fix=f"use --policy random, or one of: {', '.join(sorted(SCRIPTED_TASKS))}",
        )
    return solver(goal, list(iter_elements(axtree_object)))


_RANDOM_ROLES = ("button", "link", "textbox", "searchbox", "combobox", "listbox", "checkbox", "radio", "tab")


def random_action(rng: random.Random, goal: str, axtree_object: Mapping[str, Any] | None) -> str:
    """One action on a uniformly drawn interactive element, of a kind that fits its role.

    Example:
        >>> tree = {"nodes": [{"nodeId": "1", "role": {"value": "button"}, "name": {"value": "ok"},
        ...                    "browsergym_id": "3"}]}
        >>> random_action(random.Random(0), "", tree)
        "click('3')"
    """
    els = list(iter_elements(axtree_object))
    candidates = [e for e in els if e["role"] in _RANDOM_ROLES]
    if not candidates:
        return "noop()"
    e = rng.choice(candidates)
    if e["role"] in ("textbox", "searchbox"):
        words = [*_quoted(goal), "hello", "xyz", "42"]
        return _fill(e, rng.choice(words))
    if e["role"] in ("combobox", "listbox"):
        options = [o["name"] for o in els if o["role"] == "option" and o["name"]]
        if options:
            return f"select_option({e['bid']!r}, {rng.choice(options)!r})"
    return f"click({e['bid']!r})"


@dataclass(frozen=True)
class CollectConfig:
    """What ``xtree collect miniwob`` runs."""

    tasks: tuple[str, ...] = ("click-button",)
    """MiniWoB++ task names (``click-button``, ``enter-text``, ...)."""
    policy: str = "scripted"
    """``scripted`` (needs a solver in SCRIPTED_TASKS) or ``random``."""
    episodes: int = 5
    """Episodes per task."""
    seed: int = 0
    """Episode ``i`` of a task is reset with seed ``seed + i``; the random policy is seeded from it too."""
    max_steps: int = 10
    """Steps after which an episode is cut (counted as a failure)."""
    noise: float = 0.0
    """Probability that the scripted policy's action is replaced by a random one."""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if not self.tasks:
            raise ConfigError("no tasks given", fix="e.g. --tasks click-button enter-text")
        if self.episodes < 1 or self.max_steps < 1:
            raise ConfigError(
                f"episodes and max_steps must be >= 1, got {self.episodes!r}, {self.max_steps!r}"
            )
        if not 0.0 <= self.noise <= 1.0:
            raise ConfigError(f"noise must be in [0, 1], got {self.noise!r}")
        if self.policy == "scripted":
            unknown = [t for t in self.tasks if t not in SCRIPTED_TASKS]
            if unknown:
                raise ConfigError(
                    f"no scripted solver for {', '.join(map(repr, unknown))}",
                    fix=f"use --policy random, or tasks among: {', '.join(sorted(SCRIPTED_TASKS))}",
                )


def run_episode(env: Any, task: str, seed: int, config: CollectConfig) -> Trajectory:
    """One episode of ``config.policy`` on a :class:`~xtree_gym.envs.browsergym.MiniWoBEnv` (or a wrapper)."""
    rng = random.Random(f"{task}/{seed}")
    base = getattr(env, "unwrapped", env)  # works on gym.make(...) wrappers too
    first_text, info = env.reset(seed=seed)
    goal = info["goal"]
    plan = (
        scripted_plan(task, goal, base.last_browsergym_obs["axtree_object"])
        if config.policy == "scripted"
        else []
    )
    steps: list[Step] = []
    reward, raw, terminated = 0.0, None, False
    for t in range(config.max_steps):
        if config.policy == "scripted" and t >= len(plan):
            break
        axtree = base.last_browsergym_obs["axtree_object"]
        if config.policy == "random" or rng.random() < config.noise:
            action = random_action(rng, goal, axtree)
        else:
            action = plan[t]
        text, r, terminated, truncated, info = env.step(action)
        x = info["xtree"]
        reward += r
        raw = info.get("raw_reward")
        extra = {"element": info["element"], "invalid": x["invalid"], "reward": r}
        if info["action_error"]:
            extra["action_error"] = info["action_error"]
        steps.append(Step(action=action, observation=text, token=x["token"], slots=x["slots"], extra=extra))
        if terminated or truncated:
            break
    success = bool(terminated and reward > 0)
    extra = {"policy": config.policy, "seed": seed, "raw_reward": raw, "initial_observation": first_text}
    return Trajectory(
        id=f"miniwob/{task}/{config.policy}/seed{seed}",
        steps=steps,
        success=success,
        env="miniwob",
        task=task,
        goal=goal,
        reward=reward,
        extra=extra,
    )


def collect_miniwob(
    config: CollectConfig, *, launch: Any = None, progress: bool | None = None
) -> list[Trajectory]:
    """Run ``config.episodes`` episodes of every task; one browser env per task."""
    from ..envs.browsergym import MiniWoBEnv, miniwob_tasks
    from ..progress import Progress

    known = miniwob_tasks()
    unknown = [t for t in config.tasks if t not in known]
    if unknown:  # before any browser starts, so a typo costs nothing
        raise ConfigError(
            f"unknown MiniWoB++ task(s): {', '.join(map(repr, unknown))}",
            fix=f"use names such as {', '.join(sorted(SCRIPTED_TASKS))} ({len(known)} tasks in browsergym-miniwob)",
        )
    out: list[Trajectory] = []
    with Progress(total=len(config.tasks) * config.episodes, desc="miniwob", enabled=progress) as bar:
        for task in config.tasks:
            env = MiniWoBEnv(task=task, launch=launch, max_steps=config.max_steps)
            try:
                for i in range(config.episodes):
                    out.append(run_episode(env, task, config.seed + i, config))
                    bar.update()
            finally:
                env.close()
    return out


def _split_tasks(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(t for v in values for t in v.split(",") if t)


def _handler(args: argparse.Namespace) -> int:
    from ..envs.browser_launch import BrowserLaunchConfig
    from ..envs.needs import check_env

    check_env("XTree-MiniWoB-v0", feature="xtree collect miniwob")  # every missing package in one message

    config = CollectConfig(
        tasks=_split_tasks(args.tasks),
        policy=args.policy,
        episodes=args.episodes,
        seed=args.seed,
        max_steps=args.max_steps,
        noise=args.noise,
    )
    launch = BrowserLaunchConfig(executable_path=args.chromium) if args.chromium else BrowserLaunchConfig()
    trajectories = collect_miniwob(config, launch=launch)
    n = write_corpus(args.output, trajectories)
    wins = sum(t.success for t in trajectories)
    steps = sum(len(t.steps) for t in trajectories)
    print(f"wrote {n} episodes ({wins} successes, {steps} steps) to {args.output}")
    return 0


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = collect_subparsers.add_parser(
        "miniwob",
        help="run MiniWoB++ tasks in headless Chromium and write a corpus",
        description="Run MiniWoB++ tasks in headless Chromium (scripted or random policy) and write a "
        "JSONL corpus with rewards, flattened AXTree observations and canonical tokens.",
    )
    p.add_argument(
        "--tasks", nargs="+", default=["click-button"], help="task names (space or comma separated)"
    )
    p.add_argument("--policy", choices=POLICIES, default="scripted")
    p.add_argument("--episodes", type=int, default=5, help="episodes per task (default 5)")
    p.add_argument("--seed", type=int, default=0, help="episode i uses seed SEED+i (default 0)")
    p.add_argument("--max-steps", type=int, default=10, help="cut an episode after this many steps")
    p.add_argument("--noise", type=float, default=0.0, help="scripted: chance of a random action instead")
    p.add_argument(
        "--chromium", default=None, help="Chromium binary (default: $XTREE_CHROMIUM or /usr/bin/chromium)"
    )
    p.add_argument("-o", "--output", required=True, help="corpus file to write (.jsonl or .jsonl.gz)")
    p.set_defaults(func=_handler)
