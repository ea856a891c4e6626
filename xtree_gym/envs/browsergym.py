"""BrowserGym environments in real headless Chromium that report canonical tokens.

* ``XTree-MiniWoB-v0`` -> :class:`MiniWoBEnv`: MiniWoB++ tasks from the HTML shipped in the
  ``miniwob`` wheel (a ``file://`` URL, no server). Reward and success come from the task.
* ``XTree-WebArena-v0`` -> :class:`WebArenaEnv`: WebArena tasks against your own servers
  (``WA_SHOPPING`` ... ``WA_HOMEPAGE``).
* :class:`OpenURLEnv`: any URL with BrowserGym's open-ended task (reward 0), for fixtures and play.

Each step's ``info["xtree"]`` holds the canonical token of the action, canonicalized with the
role and name of the addressed element read from the AXTree observed *before* the action;
``info["xtree"]["invalid"]`` (and ``info["invalid_action"]``) is True when BrowserGym reported a
``last_action_error``. The observation is BrowserGym's flattened AXTree text
(``flatten_axtree_to_str``), or with ``obs_mode="dict"`` BrowserGym's whole observation dict
plus an ``"axtree_txt"`` key.

Nothing here imports BrowserGym at module import: it is imported when an env is built, and
``browsergym.webarena`` (which downloads NLTK data on import) only by :class:`WebArenaEnv`.
Browser launch settings (binary, flags, pacing) are in :mod:`xtree_gym.envs.browser_launch`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..canon import canonicalize, get_canonicalizer
from ..errors import DependencyError, EnvConfigError, missing_dependency
from .browser_axtree import dom_element_of, element_of, parse_action
from .browser_launch import BrowserLaunchConfig, patched_chromium_launch

try:
    import gymnasium as gym

    _EnvBase: Any = gym.Env
except ImportError:  # pragma: no cover - the env needs gymnasium; the helpers do not
    gym = None  # type: ignore[assignment]
    _EnvBase = object

OBS_MODES = ("text", "dict")
WEBARENA_ENV_VARS = (
    "WA_SHOPPING",
    "WA_SHOPPING_ADMIN",
    "WA_REDDIT",
    "WA_GITLAB",
    "WA_WIKIPEDIA",
    "WA_MAP",
    "WA_HOMEPAGE",
)
WEBARENA_N_TASKS = 812


def _require_browsergym(feature: str) -> None:
    if gym is None:
        raise missing_dependency("gymnasium", "browser", feature)
    if importlib.util.find_spec("browsergym") is None or importlib.util.find_spec("browsergym.core") is None:
        raise missing_dependency("browsergym-core", "browser", feature)


def flatten_axtree(axtree_object: Mapping[str, Any] | None) -> str:
    """BrowserGym's own text rendering of an AXTree (``flatten_axtree_to_str``); ``""`` for none."""
    if not axtree_object or not axtree_object.get("nodes"):
        return ""
    from browsergym.utils.obs import flatten_axtree_to_str

    return str(flatten_axtree_to_str(axtree_object))


def miniwob_html_dir() -> Path:
    """The folder of MiniWoB++ task pages shipped in the ``miniwob`` wheel."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise missing_dependency("miniwob", "browser", "XTree-MiniWoB-v0")
    for root in spec.submodule_search_locations:
        path = Path(root) / "html" / "miniwob"
        if (path / "click-button.html").is_file():
            return path
    raise EnvConfigError(
        "the installed 'miniwob' package has no html/miniwob/*.html pages",
        fix="pip install --force-reinstall miniwob==1.1.0, or set MINIWOB_URL to a served copy",
    )


def miniwob_base_url() -> str:
    """``$MINIWOB_URL`` when set, else the ``file://`` URL of the wheel's pages (ends with '/')."""
    url = os.environ.get("MINIWOB_URL")
    if url:
        return url if url.endswith("/") else url + "/"
    return miniwob_html_dir().as_uri() + "/"


def miniwob_tasks() -> dict[str, Any]:
    """MiniWoB++ task classes of ``browsergym-miniwob`` by name (``"click-button"`` -> class)."""
    from browsergym.miniwob import ALL_MINIWOB_TASKS

    return {cls.subdomain: cls for cls in ALL_MINIWOB_TASKS}


class _DropOverrideWarnings(logging.Filter):
    """Drops BrowserGym's "Overriding the task's slow_mo ..." warning: our pacing does that on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Overriding the task's")


def _quiet_override_warnings() -> None:
    logger = logging.getLogger("browsergym.core.env")
    if not any(isinstance(f, _DropOverrideWarnings) for f in logger.filters):
        logger.addFilter(_DropOverrideWarnings())


class _BrowserGymEnv(_EnvBase):  # type: ignore[misc]
    """Shared machinery: one BrowserGym ``BrowserEnv``, launch patching, canonical tokens."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    feature = "BrowserGym env"

    def __init__(
        self,
        *,
        canon_domain: str,
        launch: BrowserLaunchConfig | None = None,
        obs_mode: str = "text",
        max_steps: int | None = None,
    ) -> None:
        _require_browsergym(self.feature)
        if obs_mode not in OBS_MODES:
            raise EnvConfigError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}", fix="use 'text'")
        if max_steps is not None and max_steps < 1:
            raise EnvConfigError(f"max_steps must be >= 1 or None, got {max_steps!r}", fix="use e.g. 30")
        get_canonicalizer(canon_domain)  # an unknown domain fails here, not at the first step
        self.launch = launch if launch is not None else BrowserLaunchConfig()
        self.launch.check_executable()
        self.canon_domain = canon_domain
        self.obs_mode = obs_mode
        self.max_steps = max_steps
        from browsergym.core.spaces import Unicode

        self.action_space = Unicode()
        self.observation_space = (
            Unicode() if obs_mode == "text" else gym.spaces.Dict({"axtree_txt": Unicode()})
        )
        self._env: Any = None  # browsergym.core.env.BrowserEnv, built on first reset
        self._obs: dict[str, Any] | None = None  # last BrowserGym observation (before the next action)
        self._text = ""  # flattened AXTree of self._obs
        self._steps = 0
        self.goal = ""

    # -- subclasses say which BrowserGym task to run ------------------------------------------
    def _task(self) -> tuple[Any, dict[str, Any]]:
        """(task entry point, task kwargs) for BrowserGym's ``BrowserEnv``."""
        raise NotImplementedError

    def _build(self) -> Any:
        from browsergym.core.env import BrowserEnv

        entry, kwargs = self._task()
        cfg = self.launch
        return BrowserEnv(
            task_entrypoint=entry,
            task_kwargs=kwargs,
            slow_mo=cfg.slow_mo_ms,
            timeout=cfg.timeout_ms,
            headless=cfg.headless,
            pre_observation_delay=cfg.pre_observation_delay_s,
        )

    @property
    def browser_env(self) -> Any:
        """The wrapped BrowserGym ``BrowserEnv`` (None before the first reset)."""
        return self._env

    @property
    def last_browsergym_obs(self) -> dict[str, Any] | None:
        """BrowserGym's latest observation dict (``axtree_object``, ``dom_object``, ``screenshot``...)."""
        return self._obs

    def _observe(self, obs: dict[str, Any]) -> Any:
        self._obs = obs
        self._text = flatten_axtree(obs.get("axtree_object"))
        if self.obs_mode == "text":
            return self._text
        return {**obs, "axtree_txt": self._text}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Start the browsers (the configured Chromium) and the task; ``info`` has goal, url, task_info."""
        if gym is not None:
            super().reset(seed=seed)
        if self._env is None:
            self._env = self._build()
        _quiet_override_warnings()
        with patched_chromium_launch(self.launch):
            obs, bg_info = self._env.reset(seed=seed)
        self._steps = 0
        self.goal = str(obs.get("goal") or "")
        info = {"goal": self.goal, "url": obs.get("url", ""), "task_info": bg_info.get("task_info", {})}
        return self._observe(obs), info

    def element_context(self, obs: Mapping[str, Any], bid: str | None) -> dict[str, Any] | None:
        """The addressed element as the canonicalizer sees it: AX ``role``/``name`` plus DOM facts.

        ``{"role", "name"}`` from the AXTree (``label`` too when unnamed) and ``tag``, ``type``,
        ``id``, ``class``, ``aria_role`` from the DOM snapshot; None when ``bid`` is on no element.
        """
        element: dict[str, Any] | None = element_of(obs.get("axtree_object"), bid)
        dom = dom_element_of(obs.get("dom_object"), bid)
        if element is None and dom is None:
            return None
        return {**(dom or {}), **(element or {"role": "", "name": ""})}

    def canonical_context(self, action: str) -> dict[str, Any]:
        """Context for canonicalizing ``action`` against the current (pre-action) observation."""
        _, bid = parse_action(action)
        obs = self._obs or {}
        return {
            "axtree_object": obs.get("axtree_object"),
            "axtree_txt": self._text,
            "element": self.element_context(obs, bid),
            "bid": bid,
            "goal": self.goal,
        }

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Canonicalize ``action`` on the current page, run it, report the token in ``info["xtree"]``."""
        if self._env is None or self._obs is None:
            raise EnvConfigError("step() called before reset()", fix="call env.reset() first")
        if not isinstance(action, str):
            raise EnvConfigError(f"actions are BrowserGym strings, got {type(action).__name__}: {action!r}")
        context = self.canonical_context(action)
        canon = canonicalize(self.canon_domain, action, context)
        obs, reward, terminated, truncated, bg_info = self._env.step(action)
        self._steps += 1
        error = str(obs.get("last_action_error") or "")
        xtree = canon.to_info()
        xtree["invalid"] = bool(error)
        task_info = bg_info.get("task_info", {})
        info: dict[str, Any] = {
            "xtree": xtree,
            "invalid_action": bool(error),
            "action_error": error,
            "element": context["element"],
            "goal": self.goal,
            "task_info": task_info,
            "success": bool(terminated and float(reward) > 0),
        }
        if self.max_steps is not None and self._steps >= self.max_steps and not terminated:
            truncated = True
        return self._observe(obs), float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
        self._obs = None


class OpenURLEnv(_BrowserGymEnv):
    """Any page in real Chromium, through BrowserGym's open-ended task (reward always 0).

    Tokens use the ``browsergym`` canonicalizer (Table 9 roles: ``type<text_input>``, ...).

    Example:
        >>> env = OpenURLEnv("http://127.0.0.1:8000/form.html", goal="fill the form")  # doctest: +SKIP
        >>> text, info = env.reset(seed=0)  # doctest: +SKIP
        >>> _, _, _, _, info = env.step("click('12')")  # doctest: +SKIP
        >>> info["xtree"]["token"]  # doctest: +SKIP
        'click<button>'
    """

    feature = "OpenURLEnv"

    def __init__(
        self,
        url: str,
        goal: str = "",
        *,
        launch: BrowserLaunchConfig | None = None,
        obs_mode: str = "text",
        max_steps: int | None = None,
        canon_domain: str = "browsergym",
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise EnvConfigError(
                f"url must be an absolute URL, got {url!r}", fix="e.g. 'http://127.0.0.1:8000/'"
            )
        super().__init__(canon_domain=canon_domain, launch=launch, obs_mode=obs_mode, max_steps=max_steps)
        self.url = url
        self.task_goal = goal

    def _task(self) -> tuple[Any, dict[str, Any]]:
        from browsergym.core.task import OpenEndedTask

        return OpenEndedTask, {"start_url": self.url, "goal": self.task_goal}


class MiniWoBEnv(_BrowserGymEnv):
    """``XTree-MiniWoB-v0``: one MiniWoB++ task (``task="click-button"``) in headless Chromium.

    Pages come from the ``miniwob`` wheel as a ``file://`` URL (or ``base_url`` /
    ``$MINIWOB_URL``). Reward is BrowserGym's (1.0 when the task's raw reward is positive);
    ``info["raw_reward"]`` keeps MiniWoB's own value in [-1, 1].

    Example:
        >>> import gymnasium as gym, xtree_gym.envs  # doctest: +SKIP
        >>> xtree_gym.envs.register_envs()  # doctest: +SKIP
        >>> env = gym.make("XTree-MiniWoB-v0", task="click-button")  # doctest: +SKIP
        >>> text, info = env.reset(seed=0)  # doctest: +SKIP
        >>> info["goal"]  # doctest: +SKIP
        'Click on the "submit" button.'
    """

    feature = "XTree-MiniWoB-v0"

    def __init__(
        self,
        task: str = "click-button",
        *,
        base_url: str | None = None,
        launch: BrowserLaunchConfig | None = None,
        obs_mode: str = "text",
        max_steps: int | None = 30,
        canon_domain: str = "miniwob",
        episode_max_time_ms: int = 1_000_000,
    ) -> None:
        _require_browsergym(self.feature)
        if importlib.util.find_spec("browsergym.miniwob") is None:
            raise missing_dependency("browsergym-miniwob", "browser", self.feature)
        tasks = miniwob_tasks()
        if task not in tasks:
            close = sorted(t for t in tasks if task.split("-")[0] in t)[:8]
            raise EnvConfigError(
                f"unknown MiniWoB++ task {task!r}",
                fix=f"use one of the {len(tasks)} task names, e.g. {', '.join(close or sorted(tasks)[:8])}",
            )
        if episode_max_time_ms <= 0:
            raise EnvConfigError(f"episode_max_time_ms must be > 0, got {episode_max_time_ms!r}")
        super().__init__(canon_domain=canon_domain, launch=launch, obs_mode=obs_mode, max_steps=max_steps)
        self.task = task
        self.base_url = base_url if base_url is not None else miniwob_base_url()
        if not self.base_url.endswith("/"):
            self.base_url += "/"
        self.episode_max_time_ms = episode_max_time_ms
        self._task_cls = tasks[task]

    def _task(self) -> tuple[Any, dict[str, Any]]:
        return self._task_cls, {"base_url": self.base_url, "episode_max_time": self.episode_max_time_ms}

    def element_context(self, obs: Mapping[str, Any], bid: str | None) -> dict[str, Any] | None:
        """For the ``miniwob`` canonicalizer (paper Table 10), ``role`` is the DOM's ARIA attribute.

        Table 10 ranks an explicit ARIA role above the tag, so the computed AX role (which turns
        every ``<input type=checkbox>`` into ``checkbox``) moves to ``ax_role``; the AX name is
        kept as ``name`` and as ``label``. Other canonicalizer domains get the base context.
        """
        element = super().element_context(obs, bid)
        if element is None or self.canon_domain.lower() not in ("miniwob", "miniwob++"):
            return element
        out = {k: v for k, v in element.items() if k not in ("role", "aria_role")}
        out["ax_role"] = element.get("role", "")
        label = element.get("name") or element.get("label")
        if label:
            out["label"] = label
        if element.get("aria_role"):
            out["role"] = element["aria_role"]
        return out

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        raw = info["task_info"].get("RAW_REWARD_GLOBAL")
        info["raw_reward"] = float(raw) if raw is not None else None
        return obs, reward, terminated, truncated, info


def missing_webarena_vars(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``WA_*`` variables WebArena needs that are unset or empty in ``environ``.

    Example:
        >>> missing_webarena_vars({"WA_SHOPPING": "http://h:7770"})[:2]
        ['WA_SHOPPING_ADMIN', 'WA_REDDIT']
    """
    env = os.environ if environ is None else environ
    return [name for name in WEBARENA_ENV_VARS if not env.get(name)]


def _import_webarena_task() -> Any:
    """``GenericWebArenaTask``, imported only now: ``browsergym.webarena`` fetches NLTK data on import."""
    if importlib.util.find_spec("browsergym.webarena") is None:
        raise missing_dependency("browsergym-webarena", "browser", "XTree-WebArena-v0")
    try:
        from browsergym.webarena.task import GenericWebArenaTask
    except ImportError as exc:
        raise DependencyError(
            f"importing browsergym.webarena failed: {exc}", fix="pip install 'xtree_gym[browser]'"
        ) from exc
    except Exception as exc:  # its import downloads NLTK 'punkt_tab' and may fail offline
        raise EnvConfigError(
            f"importing browsergym.webarena failed ({type(exc).__name__}: {exc}); it downloads NLTK's "
            "'punkt_tab' data on first import",
            fix="run once with network: python -c \"import nltk; nltk.download('punkt_tab')\"",
        ) from exc
    return GenericWebArenaTask


class WebArenaEnv(_BrowserGymEnv):
    """``XTree-WebArena-v0``: WebArena task ``task_id`` (0-811) against your own WebArena servers.

    Needs the seven ``WA_*`` URL variables (see :data:`WEBARENA_ENV_VARS`); without them the
    constructor raises one :class:`EnvConfigError` naming the missing ones. Tokens use the
    ``webarena`` canonicalizer.

    Example:
        >>> WebArenaEnv(task_id=0)  # doctest: +SKIP
        Traceback (most recent call last):
        EnvConfigError: XTree-WebArena-v0 needs the WebArena server URLs; missing: WA_SHOPPING, ...
    """

    feature = "XTree-WebArena-v0"

    def __init__(
        self,
        task_id: int = 0,
        *,
        launch: BrowserLaunchConfig | None = None,
        obs_mode: str = "text",
        max_steps: int | None = 30,
        with_na_hint: bool = False,
        with_homepage_hint: bool = False,
        canon_domain: str = "webarena",
    ) -> None:
        if isinstance(task_id, bool) or not isinstance(task_id, int) or not 0 <= task_id < WEBARENA_N_TASKS:
            raise EnvConfigError(
                f"task_id must be an int in [0, {WEBARENA_N_TASKS}), got {task_id!r}", fix="e.g. task_id=0"
            )
        missing = missing_webarena_vars()
        if missing:
            raise EnvConfigError(
                f"{self.feature} needs the WebArena server URLs; missing: {', '.join(missing)}",
                fix="start your WebArena servers and export each base URL, e.g. "
                "export WA_SHOPPING=http://HOST:7770 WA_SHOPPING_ADMIN=http://HOST:7780/admin "
                "WA_REDDIT=http://HOST:9999 WA_GITLAB=http://HOST:8023 "
                "WA_WIKIPEDIA=http://HOST:8888/wikipedia_en_all_maxi_2022-05/A/User:The_other_Kiwix_guy/Landing "
                "WA_MAP=http://HOST:3000 WA_HOMEPAGE=http://HOST:4399",
            )
        super().__init__(canon_domain=canon_domain, launch=launch, obs_mode=obs_mode, max_steps=max_steps)
        self.task_id = task_id
        self.with_na_hint = with_na_hint
        self.with_homepage_hint = with_homepage_hint
        self._task_cls = _import_webarena_task()

    def _task(self) -> tuple[Any, dict[str, Any]]:
        kwargs = {
            "task_id": self.task_id,
            "with_na_hint": self.with_na_hint,
            "with_homepage_hint": self.with_homepage_hint,
        }
        return self._task_cls, kwargs
