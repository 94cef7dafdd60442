"""The collapse monitors practitioners use today, computed from a log's first steps: the baselines a collapse
probability must beat (docs/anchor-study.md, "Scoring the collapse calls").

Each monitor reads the log up to a step `until` (what a user has at that step) and calls "collapse ahead" (1) or
not (0); `available` is False when the log lacks what it reads. Fixed rules, not tuned per run:

- **entropy drop** (as in RLVR entropy-collapse work, e.g. arXiv 2505.22617): the token entropy's relative drop
  from its start (mean of its first `EDGE_POINTS` values) to now (mean of its last `EDGE_POINTS` up to `until`)
  exceeds `ENTROPY_DROP`.
- **gradient-norm spike**: some gradient norm up to `until` lies `SPIKE_Z` or more standard deviations above the
  mean of those before it (at least `MIN_POINTS` before it): a Z-score over the run so far.
- **entropy-performance law** (Cui et al. 2025, arXiv 2505.22617: R = −a·e^H + b): a least-squares fit of the
  reward on e^H over the steps up to `until` (entropy interpolated to the reward's steps), extrapolated to H = 0
  (entropy exhausted): R(0) = b − a; it calls a collapse when R(0) is below half the best reward so far, the same
  "half the best" a collapse label uses (`analysis.summaries.collapsed`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..base.checks import check_range
from .readers import TrainingLog

ENTROPY_DROP = 0.5
"""Entropy drop: relative fall of the token entropy that fires."""
SPIKE_Z = 4.0
"""Gradient-norm spike: Z-score that fires (4: a Gaussian exceeds it once in ~30 000 points)."""
MIN_POINTS = 5
"""Points a monitor needs before it reads anything."""
EDGE_POINTS = 3
"""Entropy drop: points averaged at the start and at `until`."""
MONITORS = ("entropy_drop", "grad_norm_spike", "entropy_law")
"""The monitors' names, in `monitor_calls`' order."""


@dataclasses.dataclass(frozen=True)
class MonitorCall:
    """One monitor's call on a log up to a step.

    Attributes:
        name: one of `MONITORS`.
        available: whether the log has what the monitor reads (at least `MIN_POINTS` points up to `until`).
        collapse: the call: 1.0 (collapse ahead) or 0.0; NaN when not available.
        value: the number the call rests on: the entropy's relative drop, the largest Z-score, or R(0) in the
            reward's units; NaN when not available.
        detail: one sentence: what was read, or why nothing was.
    """

    name: str
    available: bool
    collapse: float
    value: float
    detail: str


def _upto(log: TrainingLog, name: str, until: float) -> tuple[np.ndarray, np.ndarray]:
    if name not in log:
        return np.zeros(0), np.zeros(0)
    steps, values = log.series(name)
    keep = steps <= until
    return steps[keep], values[keep]


def _missing(name: str, why: str) -> MonitorCall:
    return MonitorCall(name, False, float("nan"), float("nan"), why)


def entropy_drop(log: TrainingLog, until: float) -> MonitorCall:
    """The entropy-drop monitor (module docstring).

    Args:
        log: the training log; reads its `entropy` (nats per token).
        until: the last step read, in the log's steps.

    Returns:
        The `MonitorCall`; `value` the relative drop (1 − now/start, ≤ 1).
    """
    _, entropy = _upto(log, "entropy", until)
    if entropy.size < MIN_POINTS or not np.mean(entropy[:EDGE_POINTS]) > 0:
        return _missing("entropy_drop", f"needs {MIN_POINTS} entropy values with a positive start up to {until:g}")
    drop = 1.0 - float(np.mean(entropy[-EDGE_POINTS:]) / np.mean(entropy[:EDGE_POINTS]))
    detail = f"entropy fell by {drop:.0%} of its start (fires above {ENTROPY_DROP:.0%})"
    return MonitorCall("entropy_drop", True, float(drop > ENTROPY_DROP), drop, detail)


def grad_norm_spike(log: TrainingLog, until: float) -> MonitorCall:
    """The gradient-norm spike monitor (module docstring).

    Args:
        log: the training log; reads its `grad_norm`.
        until: the last step read, in the log's steps.

    Returns:
        The `MonitorCall`; `value` the largest Z-score.
    """
    _, norm = _upto(log, "grad_norm", until)
    if norm.size < MIN_POINTS + 1:
        return _missing("grad_norm_spike", f"needs {MIN_POINTS + 1} gradient norms up to {until:g}")
    x = norm - norm[0]  # centred: the running sums below lose no digits to a large common level
    n = np.arange(1, x.size + 1, dtype=float)
    mean = np.cumsum(x) / n  # of points 0 … t
    var = np.maximum(np.cumsum(x**2) - n * mean**2, 0.0) / np.maximum(n - 1, 1)
    t = np.arange(MIN_POINTS, x.size)
    before_mean, before_sd = mean[t - 1], np.sqrt(var[t - 1])  # of the points before t
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(before_sd > 0, (x[t] - before_mean) / before_sd, np.where(x[t] > before_mean, np.inf, 0.0))
    top = float(np.max(z))
    detail = f"largest gradient-norm Z-score {top:.1f} (fires at {SPIKE_Z:g})"
    return MonitorCall("grad_norm_spike", True, float(top >= SPIKE_Z), top, detail)


def entropy_law(log: TrainingLog, until: float) -> MonitorCall:
    """The entropy-performance law monitor (module docstring).

    Args:
        log: the training log; reads its `reward` and `entropy` (nats per token).
        until: the last step read, in the log's steps.

    Returns:
        The `MonitorCall`; `value` R(0) = b − a, in the reward's units.
    """
    steps, reward = _upto(log, "reward", until)
    h_steps, entropy = _upto(log, "entropy", until)
    if reward.size < MIN_POINTS or entropy.size < 2:
        return _missing("entropy_law", f"needs {MIN_POINTS} rewards and 2 entropies up to {until:g}")
    inside = (steps >= h_steps[0]) & (steps <= h_steps[-1])
    if np.sum(inside) < MIN_POINTS:
        return _missing("entropy_law", f"needs {MIN_POINTS} rewards within the entropy's steps up to {until:g}")
    h = np.interp(steps[inside], h_steps, entropy)
    design = np.stack([np.ones_like(h), -np.exp(h)], axis=1)  # R = b − a·e^H
    if np.linalg.matrix_rank(design) < 2:
        return _missing("entropy_law", "the entropy does not change: the law's slope is undefined")
    (b, a), *_ = np.linalg.lstsq(design, reward[inside], rcond=None)
    at_zero, best = float(b - a), float(np.max(reward))
    detail = f"R(H=0) = {at_zero:.3g} against the best reward so far {best:.3g} (fires below half of it)"
    return MonitorCall("entropy_law", True, float(at_zero < 0.5 * best), at_zero, detail)


def monitor_calls(log: TrainingLog, until: float) -> dict[str, MonitorCall]:
    """Every monitor's call on `log` up to `until`.

    Args:
        log: the training log.
        until: the last step read, in the log's steps; finite.

    Returns:
        `MONITORS` name → its `MonitorCall`.

    Raises:
        PgrpoSimError: `until` is not finite.
    """
    check_range("until", until)
    until = float(until)
    calls = (entropy_drop(log, until), grad_norm_spike(log, until), entropy_law(log, until))
    return {call.name: call for call in calls}
