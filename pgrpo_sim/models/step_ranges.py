"""The allowed ranges of the optimiser step's two hyperparameters, learning rate η and momentum μ: the oscillator
(`oscillator.theory`, `oscillator.linear`) checks its inputs against them, and the bandit's `LEAF_RANGES`
(`bandit.configuration`) holds the same two intervals for its `learning_rate` and `momentum` leaves. Here, below
both rooms, so that the oscillator does not import the bandit and the two levels cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..base.checks import Interval

STEP_RANGES: Mapping[str, Interval] = MappingProxyType(
    {
        "learning_rate": Interval(0.0, None, low_open=True),
        "momentum": Interval(0.0, 1.0, high_open=True),
    }
)
"""Learning rate η (per optimiser step) > 0 and heavy-ball momentum μ (Adam's b1 on the bandit) in [0, 1). Read-only:
the oscillator's checks and the bandit's config leaves share these two intervals."""
