"""The reward constants of X-Tree's Table 7 (Eq. 2, Eq. 3, the depth design, the invalid-action penalty)."""

from __future__ import annotations

ALPHA = 0.3
"""Eq. 2: weight of the completion term (Table 7)."""
GAMMA = 0.5
"""Eq. 2 and the depth design: depth factor 1 + γ·d_v (Table 7)."""
LAMBDA0 = 0.75
"""Eq. 3: bonus weight when no rollout of the group succeeds (Table 7)."""
W_REF = {"scienceworld": 0.4, "webshop": 0.85}
"""Eq. 3: the win rate at which the bonus weight reaches zero, per domain (Table 7)."""
INVALID_PENALTY = 0.1
"""Reward subtracted for an action the environment rejects (Table 7)."""
