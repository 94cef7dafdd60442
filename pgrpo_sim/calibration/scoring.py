"""Scoring collapse probabilities against what the labelled runs did (docs/design.md §7): the Brier score, its skill
against always saying the base rate, and a reliability table.

A probability p of n labelled runs y ∈ {0, 1} (1: collapsed) scores B = mean (p − y)²; always saying the base rate ȳ
scores B_ref = ȳ(1 − ȳ); the skill is 1 − B/B_ref (0: no better than the base rate, 1: perfect, negative: worse).
A reliability table bins p and sets each bin's mean p beside its share of collapses: a well-calibrated 0.3 is a
bin in which 3 runs in 10 collapsed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..base.errors import PgrpoSimError

RELIABILITY_EDGES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
"""Bin edges of `reliability`: the extremes narrow (the calls a user acts on), the middle wide."""


def _checked(p, y) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(p, float).ravel(), np.asarray(y, float).ravel()
    if p.size == 0 or p.shape != y.shape:
        raise PgrpoSimError(f"probabilities and labels must be non-empty and of one length, got {p.size} and {y.size}")
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise PgrpoSimError("probabilities must be finite and in [0, 1]")
    if np.any((y != 0) & (y != 1)):
        raise PgrpoSimError("labels must be 0 (learned) or 1 (collapsed)")
    return p, y


def brier_score(p, y) -> float:
    """The Brier score mean (p − y)².

    Args:
        p: collapse probabilities; (n,), each in [0, 1].
        y: labels; (n,), 1 for a run that collapsed, 0 for one that did not.

    Returns:
        The score, in [0, 1] (0: perfect).

    Raises:
        PgrpoSimError: empty or unequal lengths, a probability outside [0, 1], a label not 0 or 1.
    """
    p, y = _checked(p, y)
    return float(np.mean((p - y) ** 2))


def brier_skill(p, y) -> float:
    """The Brier skill 1 − B/B_ref against always saying the base rate ȳ (B_ref = ȳ(1 − ȳ)).

    Args:
        p: collapse probabilities; (n,), each in [0, 1].
        y: labels; (n,), 0 or 1, both present.

    Returns:
        The skill, ≤ 1 (0: as good as the base rate; negative: worse).

    Raises:
        PgrpoSimError: as `brier_score`, or labels all alike (the base rate is then perfect: no skill is defined).
    """
    p, y = _checked(p, y)
    base = float(np.mean(y))
    if base in (0.0, 1.0):
        raise PgrpoSimError("the labels must hold both outcomes for a skill against the base rate")
    return 1.0 - brier_score(p, y) / (base * (1.0 - base))


@dataclasses.dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability table.

    Attributes:
        low: the bin's lower edge (included); probability.
        high: its upper edge (included for the last bin only); probability.
        n: runs whose probability falls in it.
        mean_probability: their mean p; NaN when n = 0.
        collapsed_share: the share of them that collapsed; NaN when n = 0.
    """

    low: float
    high: float
    n: int
    mean_probability: float
    collapsed_share: float


def reliability(p, y, edges=RELIABILITY_EDGES) -> list[ReliabilityBin]:
    """The reliability table of probabilities `p` against labels `y`.

    Args:
        p: collapse probabilities; (n,), each in [0, 1].
        y: labels; (n,), 0 or 1.
        edges: increasing bin edges from 0 to 1.

    Returns:
        One `ReliabilityBin` per pair of consecutive edges.

    Raises:
        PgrpoSimError: as `brier_score`, or edges that are not increasing from 0 to 1.
    """
    p, y = _checked(p, y)
    edges = np.asarray(edges, float)
    if edges.size < 2 or edges[0] != 0 or edges[-1] != 1 or np.any(np.diff(edges) <= 0):
        raise PgrpoSimError("edges must increase from 0 to 1")
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, edges.size - 2)
    bins = []
    for i in range(edges.size - 1):
        inside = index == i
        n = int(inside.sum())
        mean_p = float(np.mean(p[inside])) if n else float("nan")
        share = float(np.mean(y[inside])) if n else float("nan")
        bins.append(ReliabilityBin(float(edges[i]), float(edges[i + 1]), n, mean_p, share))
    return bins
