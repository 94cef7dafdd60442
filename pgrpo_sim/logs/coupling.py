"""The train/eval coupling ρ(t) = Δeval/Δtrain of a log, with its uncertainty (reward hacking shows as ρ → 0)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.stats
from jax.typing import ArrayLike

from ..base.checks import check_range
from ..base.errors import PgrpoSimError


class Coupling(NamedTuple):
    """Train/eval coupling ρ = Δeval/Δtrain over a trailing window (see `coupling_ratio`), per eval step.

    Attributes:
        steps: the eval steps; shape (E,); optimiser steps.
        ratio: ρ at each eval step; shape (E,); eval-reward units per train-reward unit; NaN where undefined.
        stderr: standard error of `ratio`; shape (E,); its units.
        train_slope: least-squares slope of the train reward over each window; shape (E,); train reward per step.
        train_slope_stderr: standard error of `train_slope`; shape (E,); its units.
        window: length of the trailing window; optimiser steps.
    """

    steps: np.ndarray
    ratio: np.ndarray
    stderr: np.ndarray
    train_slope: np.ndarray
    train_slope_stderr: np.ndarray
    window: float


def _slope(t: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and its standard error (`scipy.stats.linregress`; NaN with fewer than 5 points or no
    spread in t)."""
    if t.size < 5 or np.ptp(t) == 0:
        return float("nan"), float("nan")
    fit = scipy.stats.linregress(t, y)
    return float(fit.slope), float(fit.stderr)  # pyright: ignore[reportAttributeAccessIssue]  # scipy's stub hides them


def coupling_ratio(
    train_steps: ArrayLike,
    train: ArrayLike,
    eval_steps: ArrayLike,
    eval_values: ArrayLike,
    *,
    window: float | None = None,
) -> Coupling:
    """ρ(t) = Δeval/Δtrain: the ratio of the least-squares slopes of the eval and train rewards at each eval
    step t, over the eval points in the trailing window (t − window, t] and the train points in their span.

    Standard error by the delta method from the two slopes' errors (taken as independent):
    se(ρ)² = (se_e/b_t)² + (b_e·se_t/b_t²)². Default window: the larger of 10 % of the run and 8 eval
    intervals (steps), so that the eval slope has ≥ 6 degrees of freedom. ρ is NaN where the window holds
    fewer than 5 points of either series, or where the train slope is exactly 0.

    Args:
        train_steps: steps of the train reward; shape (N,), N ≥ 1, increasing; optimiser steps.
        train: the train reward at `train_steps`; shape (N,); reward units.
        eval_steps: steps of the eval reward; shape (E,), E ≥ 1, increasing; optimiser steps.
        eval_values: the eval (or true) reward at `eval_steps`; shape (E,); reward units.
        window: length of the trailing window; optimiser steps, > 0; None: the default above.

    Returns:
        `Coupling`, one entry per eval step.

    Raises:
        PgrpoSimError: the steps and values are not 1-D of equal lengths, either series is empty, the steps are not
            finite and increasing, or `window` is not finite and > 0.
    """
    ts, tr = np.asarray(train_steps, float), np.asarray(train, float)
    es, ev = np.asarray(eval_steps, float), np.asarray(eval_values, float)
    if ts.shape != tr.shape or es.shape != ev.shape or ts.ndim != 1 or es.ndim != 1:
        raise PgrpoSimError("train_steps and train, eval_steps and eval_values must be 1-D and of equal lengths")
    if ts.size == 0 or es.size == 0:
        raise PgrpoSimError("coupling_ratio needs at least one train and one eval point")
    for name, steps in (("train_steps", ts), ("eval_steps", es)):  # windows are spans of steps
        if not np.all(np.isfinite(steps)) or np.any(np.diff(steps) <= 0):
            raise PgrpoSimError(f"{name} must be finite and increasing")
    if window is None:
        spacing = np.median(np.diff(es)) if es.size > 1 else 1.0
        window = float(max(0.1 * (max(ts[-1], es[-1]) - min(ts[0], es[0])), 8 * spacing))
    check_range("window", window, 0.0, low_open=True)
    out = np.full((4, es.size), np.nan)
    for i, t in enumerate(es):
        inside_e = (es > t - window) & (es <= t)
        inside_t = (ts >= es[inside_e].min()) & (ts <= t)  # the same span: curvature biases both slopes alike
        b_e, se_e = _slope(es[inside_e], ev[inside_e])
        b_t, se_t = _slope(ts[inside_t], tr[inside_t])
        if b_t == 0:  # a flat train reward (e.g. stuck at 0 after a collapse): ρ is undefined, not a number
            out[:, i] = np.nan, np.nan, b_t, se_t
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, i] = b_e / b_t, np.hypot(se_e / b_t, b_e * se_t / b_t**2), b_t, se_t
    return Coupling(es, *out, window=float(window))
