"""Regime codes: one jit-safe enumeration per classification, shared by every layer.

`Regime` classifies a trajectory — of the exact discrete map (`linear`), of a simulated reward curve
(`analysis.summaries`) or a prediction of either (`analysis.phase`). `Damping` classifies the continuous
oscillator by ζ (`theory`). Members are `int`s, so they go into `jnp.where` under `jit`; `INVALID` (−1) marks
an out-of-range input under a transformation. Names are the lower-case member names.
"""

from __future__ import annotations

import enum

import numpy as np


class Regime(enum.IntEnum):
    """Monotone approach, oscillatory approach (complex dominant root), period-2 flip, unstable.

    Attributes:
        MONOTONE: 0, monotone approach (exact map: real dominant root >= 0, spectral radius < 1).
        OSCILLATORY: 1, oscillatory approach (exact map: complex dominant root, radius < 1).
        FLIP: 2, period-2 alternation (exact map: real negative dominant root, radius < 1).
        UNSTABLE: 3, no approach (exact map: radius >= 1; a curve that diverges or keeps oscillating).
    """

    MONOTONE = 0
    OSCILLATORY = 1
    FLIP = 2
    UNSTABLE = 3


class Damping(enum.IntEnum):
    """ζ > 1, ζ = 1, ζ < 1, and C ≤ 0 (unstable) of the continuous oscillator.

    Attributes:
        OVERDAMPED: 0, ζ > 1 (beyond the tolerance of `theory.regime_code`).
        CRITICAL: 1, ζ = 1 within that tolerance.
        UNDERDAMPED: 2, 0 < ζ < 1.
        UNSTABLE: 3, damping C <= 0.
    """

    OVERDAMPED = 0
    CRITICAL = 1
    UNDERDAMPED = 2
    UNSTABLE = 3


INVALID = -1
"""Code under `jit` where an input is out of range."""
DISCRETE_REGIMES = tuple(r.name.lower() for r in Regime)
"""Names of `Regime` codes: index = code."""
REGIMES = tuple(d.name.lower() for d in Damping)
"""Names of `Damping` codes: index = code."""
DAMPING_TO_REGIME = np.array([Regime.MONOTONE, Regime.MONOTONE, Regime.OSCILLATORY, Regime.UNSTABLE])
"""`Damping` code → the `Regime` a continuous prediction implies (the continuous model has no flip)."""
