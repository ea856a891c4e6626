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

The env is a sandbox and survives its browser (see :mod:`xtree_gym.envs.browser_guard`): only
the functions of :data:`~xtree_gym.envs.browser_guard.ACTION_NAMES` run (``env.action_set``
describes them), pages and every request they make (each redirect hop, WebSocket and worker
included: a filtering proxy, :mod:`xtree_gym.envs.browser_proxy`) reach only the allowed http(s)
origins, ``about:blank`` and the task's own folder, a browser that dies mid-episode ends it as
truncated with ``info["fault"]`` (the next ``reset`` relaunches), ``close`` never raises, and a
missing Chromium is one :class:`DependencyError`.
Stepping after ``terminated`` raises :class:`EnvConfigError` (the reward is never paid twice).

Nothing here imports BrowserGym at module import: it is imported when an env is built, and
``browsergym.webarena`` (which downloads NLTK data on import) only by :class:`WebArenaEnv`.
Browser launch settings (binary, flags, pacing) are in :mod:`xtree_gym.envs.browser_launch`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..canon import canonicalize, get_canonicalizer
from ..canon.browsergym import call_slots, parse_calls
from ..errors import DependencyError, EnvConfigError, missing_dependency
from .browser_axtree import dom_element_of, element_of
from .browser_deadline import (
    DEFAULT_STEP_DEADLINE_S,
    BrowserWatchdog,
    browser_pids,
    kill_pids,
    reset_deadline,
)
from .browser_guard import (
    MAX_ACTION_CHARS,
    NavigationPolicy,
    blocked_url,
    check_guard_options,
    fence_unloaded_frames,
    guard_contexts,
    is_missing_browser,
    is_navigation_race,
    make_action_set,
    origin_of,
    parse_browsergym_calls,
)
from .browser_launch import CHROMIUM_ENV_VAR, BrowserLaunchConfig, patched_chromium_launch
from .browser_proxy import FilteringProxy

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
OBSERVE_TRIES = 3
"""Reads of a page that navigates meanwhile (a script that submits a form to a refused origin, say)
before the step ends as a browser fault; BrowserGym retries some such errors itself, not all."""
_log = logging.getLogger(__name__)


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
        allowed_origins: Sequence[str] = (),
        allow_private: bool = False,
        step_deadline_s: float | None = DEFAULT_STEP_DEADLINE_S,
    ) -> None:
        _require_browsergym(self.feature)
        check_guard_options(allowed_origins, allow_private, step_deadline_s)
        self.allowed_origins = tuple(allowed_origins)
        """http(s) origins the pages may load besides the task's own (``"*"``: any public origin)."""
        self.allow_private = bool(allow_private)
        """Let ``"*"`` reach loopback, link-local and private addresses too (off: refused)."""
        self.step_deadline_s = step_deadline_s
        """Seconds a step may take before the env's browsers are killed (a fault); None: no limit. A reset
        (two browser launches) gets :func:`~xtree_gym.envs.browser_deadline.reset_deadline` of it."""
        self._watchdog = BrowserWatchdog()
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
        self.action_set = make_action_set()
        """BrowserGym's ``HighLevelActionSet`` the env runs (``describe()`` for a prompt)."""
        self.policy = NavigationPolicy()
        """Where the agent's pages may come from; set on each reset from the task's start page."""
        self._fault: str | None = None  # why the browser died this episode (None: it is alive)
        self._blocked: list[str] = []  # URLs the route guard refused during the current step
        self._loading: set[Any] = set()  # frames whose navigation the route guard let through
        self._proxy: FilteringProxy | None = None  # the filtering proxy the browsers go through
        self._done = False

    # -- subclasses say which BrowserGym task to run ------------------------------------------
    def _task(self) -> tuple[Any, dict[str, Any]]:
        """(task entry point, task kwargs) for BrowserGym's ``BrowserEnv``."""
        raise NotImplementedError

    def _navigation_policy(self) -> NavigationPolicy:
        """The user's allow-list only, unless a subclass has pages of its own."""
        return NavigationPolicy.for_start_url("about:blank", origins=self.allowed_origins,
                                              allow_private=self.allow_private)  # fmt: skip

    def _success(self, reward: float, terminated: bool, task_info: Mapping[str, Any]) -> bool:
        """Whether this step won the task (BrowserGym's positive reward at the end)."""
        return bool(terminated and reward > 0)

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
            action_mapping=self.action_set.to_python_code,
        )

    @property
    def browser_env(self) -> Any:
        """The wrapped BrowserGym ``BrowserEnv`` (None before the first reset)."""
        return self._env

    @property
    def last_browsergym_obs(self) -> dict[str, Any] | None:
        """BrowserGym's latest observation dict (``axtree_object``, ``dom_object``, ``screenshot``...)."""
        return self._obs

    @property
    def refused_requests(self) -> list[str]:
        """What the browser's filtering proxy refused since this env's browsers were started (the latest
        1000: ``CONNECT host:port`` for a tunnel, else the URL); see :mod:`~xtree_gym.envs.browser_proxy`."""
        return list(self._proxy.refused) if self._proxy is not None else []

    def _observe(self, obs: dict[str, Any]) -> Any:
        self._obs = obs
        self._text = flatten_axtree(obs.get("axtree_object"))
        if self.obs_mode == "text":
            return self._text
        return {**obs, "axtree_txt": self._text}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Start the browsers (the configured Chromium) and the task; ``info`` has goal, url, task_info.

        A browser that died (or a first launch that fails) is torn down and launched once more;
        a second failure is one :class:`EnvConfigError`, a missing binary a :class:`DependencyError`.
        """
        if gym is not None:
            super().reset(seed=seed)
        if self._fault is not None:
            self._teardown()
        _quiet_override_warnings()
        try:
            obs, bg_info = self._launch_and_reset(seed)
        except DependencyError:
            raise
        except Exception as first:
            _log.warning("browser reset failed (%s: %s); relaunching", type(first).__name__, first)
            self._teardown()
            try:
                obs, bg_info = self._launch_and_reset(seed)
            except DependencyError:
                raise
            except Exception as exc:
                self._teardown()
                raise EnvConfigError(
                    f"{self.feature}: the browser failed to start the task twice ({type(exc).__name__}: {exc})",
                    fix="check that Chromium runs (chromium --headless --dump-dom about:blank) "
                    "and that the task's pages are reachable",
                ) from None
        self._fault, self._done = None, False
        self._steps = 0
        self.goal = str(obs.get("goal") or "")
        info = {"goal": self.goal, "url": obs.get("url", ""), "task_info": bg_info.get("task_info", {})}
        return self._observe(obs), info

    def _launch_and_reset(self, seed: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Build the BrowserGym env if needed, reset it, then fence its pages in."""
        if self._env is None:
            self._env = self._build()
            self._fence_observations(self._env)
        policy = self.policy = self._navigation_policy()
        if self._proxy is None:
            self._proxy = FilteringProxy(policy)
        self._proxy.policy = policy
        before = browser_pids()
        try:
            blocked = self._blocked
            with (
                self._watchdog.guard(
                    reset_deadline(self.step_deadline_s), "reset", lambda: browser_pids() - before
                ),
                patched_chromium_launch(
                    self.launch,
                    on_first_browser=lambda b: guard_contexts(b, policy, blocked, self._loading),
                    forced_args=self._proxy.launch_args(),
                ),
            ):
                obs, bg_info = self._env.reset(seed=seed)
            self._watchdog.pids = browser_pids() - before
        except Exception as exc:
            if is_missing_browser(exc):
                self._teardown()
                raise DependencyError(
                    f"{self.feature} found no Chromium to launch ({str(exc).splitlines()[0]})",
                    fix=f"apt-get install chromium (or set {CHROMIUM_ENV_VAR}=/path/to/chromium)",
                ) from None
            raise
        return obs, bg_info

    def _fence_observations(self, env: Any) -> None:
        """Make BrowserGym fence frames that never load (:func:`fence_unloaded_frames`) after it waits for
        the pages and before it reads them: its task check and its observation run scripts in every frame."""
        wait_dom_loaded, get_obs = env._wait_dom_loaded, env._get_obs

        def fence(settled: bool) -> None:
            context = getattr(env, "context", None)
            if context is None:
                return
            fenced = fence_unloaded_frames(context, self._loading, self.policy, settled=settled)
            if fenced:
                _log.info("%s: sent frames that never loaded to about:blank: %s", self.feature, fenced)
                env._active_page_check()  # a closed tab may have been the active one

        def wait_then_fence() -> None:
            fence(settled=False)  # before BrowserGym waits up to 3 s for each frame that never loads
            wait_dom_loaded()
            fence(settled=True)

        def fence_then_observe() -> Any:
            for tries_left in reversed(range(OBSERVE_TRIES)):
                fence(settled=True)
                try:
                    return get_obs()
                except Exception as exc:
                    if not tries_left or not is_navigation_race(exc):
                        raise
                    _log.info(
                        "%s: the page navigated while it was read (%s); reading it again", self.feature, exc
                    )
                    with contextlib.suppress(Exception):  # a refused navigation's error page loads at once
                        env.page.wait_for_load_state("load", timeout=2000)
            raise AssertionError("unreachable")  # pragma: no cover

        env._wait_dom_loaded = wait_then_fence
        env._get_obs = fence_then_observe

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
        """Context for canonicalizing ``action`` against the current (pre-action) observation.

        The bid is that of the first call BrowserGym runs (found anywhere in the string).
        """
        calls = parse_calls(action)
        slots = call_slots(calls[0]) if calls else {}
        raw_bid = slots.get("bid", slots.get("from_bid"))
        bid = None if raw_bid is None else str(raw_bid)
        obs = self._obs or {}
        return {
            "axtree_object": obs.get("axtree_object"),
            "axtree_txt": self._text,
            "element": self.element_context(obs, bid),
            "bid": bid,
            "goal": self.goal,
        }

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Canonicalize ``action`` on the current page, run it, report the token in ``info["xtree"]``.

        A ``goto`` outside :attr:`policy` is an invalid action and is not run; a browser fault
        ends the episode as truncated with ``info["fault"]``.
        """
        if self._env is None or self._obs is None:
            raise EnvConfigError("step() called before reset()", fix="call env.reset() first")
        if self._done:
            raise EnvConfigError("step() called after the episode ended", fix="call env.reset() first")
        if not isinstance(action, str):
            raise EnvConfigError(f"actions are BrowserGym strings, got {type(action).__name__}: {action!r}")
        if len(action) > MAX_ACTION_CHARS:
            canon_info = {**canonicalize(self.canon_domain, action[:200]).to_info(), "raw": action}
            too_long: dict[str, Any] = {"xtree": canon_info, "element": None, "goal": self.goal}
            return self._refused(
                too_long, f"the action has {len(action)} characters; at most {MAX_ACTION_CHARS} run"
            )
        context = self.canonical_context(action)
        canon = canonicalize(self.canon_domain, action, context)
        info: dict[str, Any] = {"xtree": canon.to_info(), "element": context["element"], "goal": self.goal}
        escaped: list[str] = []
        if self._fault is None:
            blocked = blocked_url(parse_browsergym_calls(action), self.policy)
            if blocked is not None:
                return self._refused(info, f"navigation to {blocked!r} is blocked: {self._policy_text()}")
            try:
                self._blocked.clear()
                with self._watchdog.guard(self.step_deadline_s, "step"):
                    pages_before = list(self._env.context.pages)
                    obs, reward, terminated, truncated, bg_info = self._env.step(action)
                    escaped = self._recall_escaped_pages(pages_before)
                    if escaped:
                        self._env._active_page_check()
                        obs = self._env._get_obs()
            except Exception as exc:  # the browser (or its driver) died, or hung and was killed
                self._fault = self._watchdog.fired or (
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
                )
                _log.warning("%s: browser fault, episode truncated (%s)", self.feature, self._fault)
        if self._fault is not None:
            self._steps += 1
            self._done = True
            info.update(fault=self._fault, invalid_action=False, action_error="", task_info={}, success=False)
            info["xtree"]["invalid"] = False
            return self._observe(self._obs), 0.0, False, True, info
        self._steps += 1
        error = str(obs.get("last_action_error") or "")
        if escaped or self._blocked:
            error = f"navigation to {(self._blocked or escaped)[0]!r} is blocked: {self._policy_text()}"
        task_info = bg_info.get("task_info", {})
        success = self._success(float(reward), bool(terminated), task_info)
        info["xtree"]["invalid"] = bool(error)
        info.update(invalid_action=bool(error), action_error=error, task_info=task_info, success=success)
        if self.max_steps is not None and self._steps >= self.max_steps and not terminated:
            truncated = True
        self._done = bool(terminated or truncated)
        return (
            self._observe(obs),
            self._reward(float(reward), success),
            bool(terminated),
            bool(truncated),
            info,
        )

    def _reward(self, reward: float, success: bool) -> float:
        """The step's reward (BrowserGym's; MiniWoB pays only a full success)."""
        return reward

    def _policy_text(self) -> str:
        roots = ", ".join(self.policy.file_roots)
        webs = ", ".join(self.policy.origins) or "none"
        return (
            f"only the allowed origins ({webs})" + (f" and the task's own files under {roots}" if roots else "")
            + " can open (allowed_origins adds more)"
        )  # fmt: skip

    def _refused(self, info: dict[str, Any], error: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """An invalid action that is not run: same page, no reward."""
        self._steps += 1
        info["xtree"]["invalid"] = True
        info.update(invalid_action=True, action_error=error, task_info={}, success=False)
        truncated = self.max_steps is not None and self._steps >= self.max_steps
        self._done = truncated
        return self._observe(self._obs or {}), 0.0, False, truncated, info

    def _recall_escaped_pages(self, pages_before: list[Any]) -> list[str]:
        """Pages left outside the policy (a refused navigation's error page, or one the guard
        missed): a tab opened by this step is closed, any other goes back to where it was."""
        escaped = []
        for page in list(self._env.context.pages):
            if self.policy.allows(page.url):
                continue
            escaped.append(page.url)
            if page not in pages_before:
                page.close()
                continue
            with contextlib.suppress(Exception):  # no history: the blank page below
                page.go_back()
            if not self.policy.allows(page.url):
                page.goto("about:blank")
        return escaped

    def _teardown(self) -> None:
        """Close what is left of the BrowserGym env, piece by piece; never raises, never hangs (a
        frozen browser is killed first, and the closing itself runs under the step deadline)."""
        env, self._env = self._env, None
        self._obs = None
        self._loading.clear()  # frames of the browsers about to go
        proxy, self._proxy = self._proxy, None
        if env is None:
            if proxy is not None:
                proxy.close()
            return
        if self._fault is not None:
            kill_pids(self._watchdog.pids)
        with self._watchdog.guard(self.step_deadline_s, "close"):
            self._close_parts(env)
        self._watchdog.pids = set()
        if proxy is not None:  # after the browsers: none of them is left to connect
            proxy.close()

    def _close_parts(self, env: Any) -> None:
        for name in ("task", "chat", "context", "browser"):
            part = getattr(env, name, None)
            closer = getattr(part, "teardown" if name == "task" else "close", None)
            if closer is None:
                continue
            try:
                closer()
            except Exception as exc:  # a dead browser cannot be closed cleanly; it is gone anyway
                _log.debug("closing the %s of a dead browser env: %s", name, exc)
            setattr(env, name, None)

    def close(self) -> None:
        """Close the browsers; never raises, also after a crash."""
        self._teardown()
        self._fault, self._done = None, False


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
        **guard: Any,
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise EnvConfigError(
                f"url must be an absolute URL, got {url!r}", fix="e.g. 'http://127.0.0.1:8000/'"
            )
        super().__init__(
            canon_domain=canon_domain, launch=launch, obs_mode=obs_mode, max_steps=max_steps, **guard
        )
        self.url = url
        self.task_goal = goal

    def _task(self) -> tuple[Any, dict[str, Any]]:
        from browsergym.core.task import OpenEndedTask

        return OpenEndedTask, {"start_url": self.url, "goal": self.task_goal}

    def _navigation_policy(self) -> NavigationPolicy:
        """The start page's origin (or its folder, for a local file) and the user's allow-list."""
        return NavigationPolicy.for_start_url(self.url, origins=self.allowed_origins,
                                              allow_private=self.allow_private)  # fmt: skip


class MiniWoBEnv(_BrowserGymEnv):
    """``XTree-MiniWoB-v0``: one MiniWoB++ task (``task="click-button"``) in headless Chromium.

    Pages come from the ``miniwob`` wheel as a ``file://`` URL (or ``base_url`` /
    ``$MINIWOB_URL``); the agent may open that folder's pages (and their ``../core`` assets)
    and web pages, no other local file. Success is MiniWoB's full credit (raw reward 1); the
    reward is 1.0 on success and 0.0 otherwise, so a partial-credit ending (click-checkboxes
    with a wrong box: raw 0.6) is no win; ``info["raw_reward"]`` keeps MiniWoB's own value in [-1, 1].

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
        **guard: Any,
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
        super().__init__(
            canon_domain=canon_domain, launch=launch, obs_mode=obs_mode, max_steps=max_steps, **guard
        )
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

    def _navigation_policy(self) -> NavigationPolicy:
        """The folder above the task page (``html/``: ``miniwob/*.html`` and ``core/``, ``common/``); no web
        origin unless the user lists one."""
        return NavigationPolicy.for_start_url(self.base_url, levels_up=1, origins=self.allowed_origins,
                                              allow_private=self.allow_private)  # fmt: skip

    def _success(self, reward: float, terminated: bool, task_info: Mapping[str, Any]) -> bool:
        return bool(terminated) and miniwob_full_credit(task_info.get("RAW_REWARD_GLOBAL"))

    def _reward(self, reward: float, success: bool) -> float:
        return 1.0 if success else 0.0

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        raw = info["task_info"].get("RAW_REWARD_GLOBAL")
        info["raw_reward"] = float(raw) if raw is not None else None
        return obs, reward, terminated, truncated, info


def miniwob_full_credit(raw_reward: Any) -> bool:
    """True when MiniWoB's raw reward is full credit (1; partial credit is a fraction).

    Example:
        >>> miniwob_full_credit(1.0), miniwob_full_credit(0.6), miniwob_full_credit(None)
        (True, False, False)
    """
    try:
        return raw_reward is not None and float(raw_reward) >= 1.0 - 1e-9
    except (TypeError, ValueError):
        return False


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
        raise missing_dependency("browsergym-webarena", "webarena", "XTree-WebArena-v0")
    try:
        from browsergym.webarena.task import GenericWebArenaTask
    except ImportError as exc:
        raise DependencyError(
            f"importing browsergym.webarena failed: {exc}", fix="pip install 'xtree_gym[webarena]'"
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
        **guard: Any,
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
        super().__init__(
            canon_domain=canon_domain, launch=launch, obs_mode=obs_mode, max_steps=max_steps, **guard
        )
        self.task_id = task_id
        self.with_na_hint = with_na_hint
        self.with_homepage_hint = with_homepage_hint
        self._task_cls = _import_webarena_task()

    def _navigation_policy(self) -> NavigationPolicy:
        """The configured WebArena sites (the ``WA_*`` origins, often private hosts) and the user's allow-list."""
        sites = tuple(o for name in WEBARENA_ENV_VARS if (o := origin_of(os.environ.get(name, ""))))
        return NavigationPolicy(origins=sites + NavigationPolicy.for_start_url(
            "about:blank", origins=self.allowed_origins).origins, allow_private=self.allow_private)  # fmt: skip

    def _task(self) -> tuple[Any, dict[str, Any]]:
        kwargs = {
            "task_id": self.task_id,
            "with_na_hint": self.with_na_hint,
            "with_homepage_hint": self.with_homepage_hint,
        }
        return self._task_cls, kwargs
