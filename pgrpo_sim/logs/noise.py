"""The noise of a logged curve, as the law fits (`laws`) and the diagnostics (`diagnostics`) read it: moving averages
(`smooth`) over a window that grows with the curve (`smoothing_window`), the per-step standard error of a logged
reward mean (`reward_stderr`) and, without one, the short-lag residual variance (`short_lag_variance`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..base.checks import check_range
from ..base.errors import PgrpoSimError


def smoothing_window(n: int) -> int:
    """Default smoothing window (points) for n points: the odd number 2⌊n/50⌋ + 1, at least 5 (about n/25).

    Args:
        n: number of points in the series; integer ≥ 0.

    Returns:
        The window in points; an odd int ≥ 5.
    """
    return max(5, 2 * (int(n) // 50) + 1)


def smooth(values: ArrayLike, window: int, *, trailing: bool = False) -> np.ndarray:
    """Moving average over `window` points: centred (window odd; near the ends, the mean of the points
    available) or, with `trailing`, over the window that ends at each point (causal).

    Args:
        values: the series in time order; shape (n,); any unit.
        window: points averaged; integer ≥ 1, odd unless `trailing`.
        trailing: average the window that ends at each point instead of the centred one.

    Returns:
        The smoothed series; shape (n,); the unit of `values`.

    Raises:
        PgrpoSimError: `values` is not one series, or `window` is not an integer ≥ 1, or is even for a centred average.
    """
    check_range("window", window, 1, integer=True)
    if not trailing and int(window) % 2 == 0:
        raise PgrpoSimError(f"window must be odd for a centred moving average, got {window}")
    v = np.asarray(values, float)
    if v.ndim != 1:  # it would be flattened into one series
        raise PgrpoSimError(f"values must be one series (shape (n,)), got shape {v.shape}")
    before = int(window) - 1 if trailing else int(window) // 2
    after = 0 if trailing else int(window) // 2
    c = np.concatenate([[0.0], np.cumsum(v)])
    idx = np.arange(v.size)
    lo, hi = np.maximum(idx - before, 0), np.minimum(idx + after + 1, v.size)
    return (c[hi] - c[lo]) / (hi - lo)


def short_lag_variance(residuals: ArrayLike) -> float:
    """White-noise variance from lag-1 differences, Σ(r_{i+1} − r_i)²/(2(n−1)) (reward²). A slow misfit
    barely changes it, so RSS/(n−p) divided by it separates "the law is wrong" (≫ 1) from "noisy data" (≈ 1).

    Args:
        residuals: data − model in time order; shape (n,); reward units.

    Returns:
        The variance (float); reward²; NaN for fewer than 3 points.
    """
    r = np.asarray(residuals, float)
    return float(np.sum(np.diff(r) ** 2) / (2 * (r.size - 1))) if r.size > 2 else float("nan")


def reward_stderr(reward_std: ArrayLike, n_samples: ArrayLike, window: int | None = None) -> np.ndarray:
    """Per-step standard error of the mean reward, √(mean of reward_std² over `window` points / n_samples).

    `reward_std` is the per-step standard deviation of individual rewards and `n_samples` the number of
    rewards averaged per step (group size × prompts). The variance is pooled over a centred window (default
    `smoothing_window`) so that a step whose groups happen to be all-equal (std 0) keeps a positive error,
    then floored at a tenth of the median positive error (all zeros stay zeros: no noise information).
    Within-group std ignores prompt-to-prompt spread, so this is a lower bound of the true error when prompts
    differ in difficulty.

    Args:
        reward_std: per-step standard deviation of individual rewards; shape (n,); reward units; finite, ≥ 0.
        n_samples: rewards averaged per step; scalar or shape (n,); ≥ 1.
        window: points of the centred pooling window; odd integer ≥ 1; None: `smoothing_window(n)`.

    Returns:
        The standard error of each step's mean reward; shape (n,); reward units.

    Raises:
        PgrpoSimError: a non-finite or negative `reward_std`, an `n_samples` below 1, or a `window` that is not an
            odd integer ≥ 1.
    """
    std, n = np.asarray(reward_std, float), np.broadcast_to(np.asarray(n_samples, float), np.shape(reward_std))
    if np.any(~np.isfinite(std)) or np.any(std < 0) or np.any(~(n >= 1)):
        raise PgrpoSimError("reward_std must be finite and >= 0 and n_samples >= 1 at every fitted step")
    check_range("window", window, 1, integer=True)
    se = np.sqrt(smooth(std**2, window or smoothing_window(std.size)) / n)
    positive = se[se > 0]
    return np.maximum(se, 0.1 * np.median(positive)) if positive.size else se
