"""Miner configuration: one frozen dataclass, one documented field each, presets from the paper.

The presets are Tables 6 and 8 of the X-Tree paper (``../shared/seeds/000_...txt``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class MinerConfig:
    """Hyper-parameters of X-Tree mining (Eq. 1 and the compression rule of §3.1).

    Example:
        >>> MinerConfig.preset("scienceworld").cap
        80
        >>> MinerConfig.preset("webshop", cap=10).cap
        10
    """

    p_len: float = 1.0
    """Exponent p_l on the candidate length (l_u + l_v) in the X-Score; 0 ignores length."""
    p_succ: float = 1.0
    """Exponent p_s on (succ + eps) in the X-Score; 0 ignores success."""
    eps: float = 0.001
    """Floor epsilon added to the success fraction so an all-failure pair keeps a non-zero score."""
    eta: float = 0.5
    """Compression cost per primitive: merge only when f_uv - 1 > eta * (l_u + l_v)."""
    cap: int = 80
    """Maximum number of nodes; mining stops when this many exist."""
    max_len: int = 8
    """Maximum node length in primitives (l_u + l_v <= max_len)."""
    min_freq: int = 5
    """Minimum non-overlapping pair frequency f_uv of a candidate."""
    min_succ: float = 0.0
    """Minimum success fraction succ(uv) of a candidate (0 keeps failure-heavy pairs)."""
    min_task_types: int = 1
    """Minimum number of distinct task types the pair must occur in."""

    def __post_init__(self) -> None:
        checks: list[tuple[str, bool, str]] = [
            ("p_len", math.isfinite(self.p_len), "a finite number such as 1"),
            ("p_succ", math.isfinite(self.p_succ), "a finite number such as 1"),
            ("eps", math.isfinite(self.eps) and self.eps >= 0, "a number >= 0 such as 0.001"),
            ("eta", math.isfinite(self.eta) and self.eta >= 0, "a number >= 0 such as 0.5"),
            ("cap", isinstance(self.cap, int) and self.cap >= 0, "an integer >= 0"),
            ("max_len", isinstance(self.max_len, int) and self.max_len >= 2, "an integer >= 2"),
            ("min_freq", isinstance(self.min_freq, int) and self.min_freq >= 1, "an integer >= 1"),
            ("min_succ", 0.0 <= self.min_succ <= 1.0, "a fraction in [0, 1]"),
            (
                "min_task_types",
                isinstance(self.min_task_types, int) and self.min_task_types >= 1,
                "an integer >= 1",
            ),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ConfigError(
                    f"MinerConfig.{name} = {getattr(self, name)!r} is invalid", fix=f"use {expected}"
                )
        if self.p_succ < 0 and self.eps == 0:
            raise ConfigError(
                "p_succ < 0 with eps = 0 divides by zero on all-failure pairs", fix="set eps > 0"
            )

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> MinerConfig:
        """The paper's settings for ``name`` (webarena, scienceworld, webshop, miniwob), with overrides."""
        key = name.lower().replace("-", "").replace("_", "").replace("+", "")
        if key not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}", fix=f"use one of: {', '.join(sorted(PRESETS))}")
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown MinerConfig field(s) {sorted(unknown)}", fix="check the spelling")
        return dataclasses.replace(PRESETS[key], **{k: v for k, v in overrides.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MinerConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# Table 6 (WebArena, ScienceWorld, WebShop) and Table 8 (MiniWoB++ prompted agents).
PRESETS: dict[str, MinerConfig] = {
    "webarena": MinerConfig(p_len=1, p_succ=1, eps=0.001, eta=0.3, cap=256, max_len=12, min_freq=4),
    "scienceworld": MinerConfig(
        p_len=1, p_succ=1, eps=0.001, eta=0.5, cap=80, max_len=8, min_freq=5, min_succ=0.9, min_task_types=2
    ),
    "webshop": MinerConfig(p_len=1, p_succ=1, eps=0.001, eta=0.5, cap=60, max_len=8, min_freq=5),
    "miniwob": MinerConfig(p_len=1, p_succ=1.5, eps=0.001, eta=0.3, cap=200, max_len=10, min_freq=4),
}
