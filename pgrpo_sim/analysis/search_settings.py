"""What a hyperparameter search minimises, apart from how (`analysis.search`): its objectives and `SearchSettings`.
Pure Python, so the command line builds its flags from them without importing the search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

OBJECTIVES = ("damping-ratio", "time-to-threshold", "final-reward")
"""What `search` minimises: (ζ − target)², the smooth time to a threshold, or −(final expected reward)."""


class SearchSettings(NamedTuple):
    """What a search minimises beside its objective: the keyword arguments `search` and `grid_search` share (they
    take them as `**settings`).

    Attributes:
        target: ζ for "damping-ratio" (> 0); the fraction of the way from p_ref to p* for "time-to-threshold"
            (in (0, 1)); None for "final-reward".
        search: the searched hyperparameters (names in learning_rate, momentum, beta, p_ref, epsilon); None: η for
            damping-ratio, else η, μ.
        bounds: name → (low, high) box of a searched hyperparameter, config units; default `DEFAULT_BOUNDS`.
        steps: expected-mode steps of a run (the step budget of "final-reward"); an integer in [1, MAX_STEPS].
        smoothing: width of the smooth time to threshold, in units of the threshold fraction; > 0.
        min_damping_ratio: constraint ζ ≥ this; None: off.
        radius_margin: constraint exact discrete spectral radius ≤ 1 − this; in [0, 1); None: off.
        penalty: weight of the quadratic exterior penalty on constraint violations; ≥ 0.
    """

    target: float | None = None
    search: Sequence[str] | str | None = None
    bounds: Mapping[str, tuple[float, float]] | None = None
    steps: int = 300
    smoothing: float = 0.02
    min_damping_ratio: float | None = None
    radius_margin: float | None = 0.01
    penalty: float = 1e3


OPTIMISER_DEFAULTS = {"restarts": 8, "iterations": 100, "learning_rate": 0.3}
"""`search`'s defaults for its optimiser: Latin-hypercube restarts, Adam steps per restart, Adam's initial step in
logit units of the box."""
