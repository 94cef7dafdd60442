"""What every claim `pgrpo-sim validate` checks shares, whichever module computes it: the bandit setting most
sections start from, the tolerance of a measured difference, and a verdict's form."""

from __future__ import annotations

from typing import Any

BASE: dict[str, Any] = dict(p_ref=0.2, beta=0.5, num_generations=8)
"""The bandit setting sections vary one knob of: start p = 0.2, β = 0.5, G = 8."""
VERDICT_Z = 3.0
"""A measured difference counts when it exceeds VERDICT_Z standard errors (of the numbers compared)."""


def verdict(holds: bool, text: str) -> dict:
    """A section's verdict: whether its claim holds, and the numbers that decided it."""
    return {"holds": bool(holds), "text": text}
