"""Per-run summary statistics of a reward curve and its empirical regime, in JAX (used inside sweeps).

Regime of a simulated curve p_0…p_T (codes of `base.regimes.Regime`: 0 monotone, 1 oscillatory,
2 flip, 3 unstable), with e = p − plateau, plateau = mean of the last 10 % of the curve and
"significant" meaning |e| > 1e-3·|e_0| + 1e-9:
- unstable: the run diverged; or a sustained oscillation — at least 2 sign changes of significant e in
  the second half and max|e| over the last quarter ≥ ½ max|e| over the second quarter; or growth
  without oscillation — max|e| over the last quarter > 2 × max|e| over the second quarter;
- flip: otherwise, if at least 80 % of consecutive significant samples alternate in sign (period 2) and
  there are at least 4 such alternations;
- oscillatory: otherwise, at least 2 sign changes of significant e over the whole run;
- monotone: otherwise (a single crossing of its own late mean by a not-yet-converged curve is allowed).
A noisy curve (the seed-mean of sampled runs) is judged against its standard error: given `stderr`, a
sample is significant only where |e| also exceeds `NOISE_Z` standard errors of e (of p_t and of the
plateau), and amplitudes count only their excess over that band, so seed noise around the plateau is
never read as oscillation or instability.
Runs must be several relaxation times long for "unstable" to mean what it says: a slowly decaying
oscillation that has not decayed by half between the 2nd and 4th quarters reads as unstable.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ..base.checks import as_float, is_concrete
from ..base.errors import PgrpoSimError
from ..base.regimes import Regime

MONOTONE, OSCILLATORY, FLIP, UNSTABLE = Regime.MONOTONE, Regime.OSCILLATORY, Regime.FLIP, Regime.UNSTABLE
NOISE_Z = 4.0
"""Standard errors a deviation of a noisy curve must exceed to count (as in the test suite's statistical bounds)."""


class CurveSummary(NamedTuple):
    """Summary of one reward curve (NaN / −1 where undefined, e.g. after divergence).

    final_reward: p at the last step; plateau: mean of the last 10 %; time_to_90: first step at which p has
    covered 90 % of the way from p_0 to the plateau (−1 if never); overshoot: max(p − plateau) before the
    last 10 %, signed towards the direction of travel (≥ 0 means it went past; a curve still rising within
    the plateau's own window has not); sign_changes: of significant e; regime: code (see module docstring).

    Every field is a scalar (`summarize_curve`) or has shape (B,) (`summarize_curves`).

    Attributes:
        final_reward: p at the last step; reward units; NaN after divergence.
        plateau: mean of the last 10 % of the curve; reward units; NaN after divergence.
        time_to_90: first step at 90 % of the way to the plateau; optimiser steps; int32; −1 if never, after
            divergence, or without travel.
        overshoot: largest deviation past the plateau before the last 10 %, signed towards the direction of travel;
            reward units (negative: never went past); NaN after divergence.
        sign_changes: sign changes of significant e; int32.
        regime: `base.regimes.Regime` code; int32.
    """

    final_reward: Array
    plateau: Array
    time_to_90: Array
    overshoot: Array
    sign_changes: Array
    regime: Array


def _window(x: Array, lo: float, hi: float) -> Array:
    n = x.shape[-1]
    return x[..., int(lo * n) : max(int(hi * n), int(lo * n) + 1)]


def _summary(final, plateau, time_to_90, overshoot, changes, late_changes, flip_like, a_mid, a_late, tol, diverged):
    """The regime rule of the module docstring and the `CurveSummary`, from a curve's running quantities."""
    sustained = (late_changes >= 2) & (a_late >= 0.5 * a_mid) & (a_late > tol)
    growing = a_late > 2 * a_mid + tol
    regime = jnp.where(
        diverged | sustained | growing,
        UNSTABLE,
        jnp.where(flip_like, FLIP, jnp.where(changes >= 2, OSCILLATORY, MONOTONE)),
    )
    nan = jnp.asarray(jnp.nan, plateau.dtype)
    return CurveSummary(
        final_reward=jnp.where(diverged, nan, final),
        plateau=jnp.where(diverged, nan, plateau),
        time_to_90=jnp.where(diverged, -1, time_to_90).astype(jnp.int32),
        overshoot=jnp.where(diverged, nan, overshoot),
        sign_changes=changes.astype(jnp.int32),
        regime=regime.astype(jnp.int32),
    )


def _fits(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of `shape` broadcasts to `target` (without changing it)."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def check_curve_flags(shape: tuple[int, ...], diverged: ArrayLike, stderr: ArrayLike | None) -> None:
    """Raise `PgrpoSimError` unless `diverged` is True/False (or 0/1) per curve and `stderr` one number, one per
    point or one per point and curve, for curves of `shape` ((T+1,) or time-major (T+1, B)).

    Args:
        shape: the curves' shape, (T+1,) or (T+1, B).
        diverged: divergence flag per curve; bool or 0/1; shape broadcasting to shape[1:] without changing it.
        stderr: standard error per point; reward units; shape broadcasting to `shape`; None: an exact curve.

    Raises:
        PgrpoSimError: `diverged` not boolean (0/1 when concrete) or not one per curve, or `stderr` that does not
            broadcast to `shape`.
    """
    try:
        kind = None if isinstance(diverged, str) else jnp.result_type(diverged).kind
    except TypeError:
        kind = None
    flags = np.asarray(diverged) if kind is not None and is_concrete(diverged) else None
    if kind not in ("b", "i", "u") or (flags is not None and not np.isin(flags, (0, 1)).all()):
        raise PgrpoSimError(f"diverged must be True or False (or 0/1), one per curve, got {diverged!r}")
    if not _fits(jnp.shape(diverged), shape[1:]):
        raise PgrpoSimError(f"diverged must be one flag per curve, shape {shape[1:]}, got {jnp.shape(diverged)}")
    if stderr is not None and not _fits(jnp.shape(stderr), shape):
        raise PgrpoSimError(f"stderr must broadcast to the curves' shape {shape}, got {jnp.shape(stderr)}")


def summarize_curve(rewards: ArrayLike, diverged: ArrayLike = False, stderr: ArrayLike | None = None) -> CurveSummary:
    """Summary statistics and empirical regime of a reward curve of shape (T+1,) (jit-compatible).

    `stderr`: the standard error of each point (shape (T+1,) or scalar) for a noisy curve such as a seed-mean;
    deviations within `NOISE_Z` standard errors are noise (see the module docstring). None: an exact curve.

    Args:
        rewards: the curve p_0 … p_T, one value per optimiser step; shape (T+1,), T ≥ 1; reward units.
        diverged: whether the run diverged (a non-finite point counts too); bool scalar or 0/1.
        stderr: standard error of each point; scalar or shape (T+1,); reward units; None: an exact curve.

    Returns:
        `CurveSummary` of scalars.

    Raises:
        PgrpoSimError: `rewards` not 1-D with at least 2 points, or flags refused by `check_curve_flags`.
    """
    p = as_float(rewards)
    if p.ndim != 1 or p.shape[0] < 2:
        raise PgrpoSimError(f"rewards must be one curve of at least 2 steps, got shape {p.shape}")
    check_curve_flags(p.shape, diverged, stderr)
    diverged = jnp.asarray(diverged) | ~jnp.all(jnp.isfinite(p))
    n = p.shape[-1]
    plateau = jnp.mean(_window(p, 0.9, 1.0))
    e = p - plateau
    tol = 1e-3 * jnp.abs(e[0]) + 1e-9
    if stderr is not None:
        se = jnp.broadcast_to(as_float(stderr).astype(p.dtype), p.shape)
        se_plateau = jnp.mean(_window(se, 0.9, 1.0))  # no better than one point: late samples are correlated
        band = NOISE_Z * jnp.sqrt(se**2 + se_plateau**2)
        e_excess = jnp.sign(e) * jnp.maximum(jnp.abs(e) - band, 0.0)
    else:
        band, e_excess = 0.0, e
    sig = jnp.abs(e) > tol + band
    sign = jnp.sign(e)
    # sign changes between consecutive significant samples (insignificant ones are skipped)
    idx = jnp.where(sig, jnp.arange(n), -1)
    last_sig = jnp.maximum.accumulate(idx)  # index of the latest significant sample so far
    prev = jnp.concatenate([jnp.array([-1]), last_sig[:-1]])
    prev_sign = jnp.where(prev >= 0, sign[jnp.maximum(prev, 0)], 0.0)
    change = sig & (prev >= 0) & (sign != prev_sign)
    pairs = sig & (prev >= 0)
    sign_changes = jnp.sum(change)
    late_changes = jnp.sum(change & (jnp.arange(n) >= n // 2))
    flip_like = (jnp.sum(change & (prev == jnp.arange(n) - 1)) >= 0.8 * jnp.maximum(jnp.sum(pairs), 1)) & (
        sign_changes >= 4
    )
    a_mid = jnp.max(jnp.abs(_window(e_excess, 0.25, 0.5)))
    a_late = jnp.max(jnp.abs(_window(e_excess, 0.75, 1.0)))
    travel = plateau - p[0]
    progress = (p - p[0]) / jnp.where(travel == 0, 1.0, travel)
    reached = progress >= 0.9
    time_to_90 = jnp.where(jnp.any(reached) & (travel != 0), jnp.argmax(reached), -1)
    overshoot = jnp.max(jnp.sign(travel) * e[: _bounds(n, 0.9, 1.0)[0]])
    return _summary(p[-1], plateau, time_to_90, overshoot, sign_changes, late_changes, flip_like, a_mid, a_late, tol,
                    diverged)  # fmt: skip


def _bounds(n: int, lo: float, hi: float) -> tuple[int, int]:
    """The index range [start, stop) of `_window` over n samples."""
    return int(lo * n), max(int(hi * n), int(lo * n) + 1)


def summarize_curves(rewards: ArrayLike, diverged: ArrayLike = False, stderr: ArrayLike | None = None) -> CurveSummary:
    """`summarize_curve` of B curves at once, equal to it curve by curve (jit-compatible); `rewards` is
    time-major, (T+1, B), as a `lax.scan` over steps stacks its outputs; `diverged` (B,) or scalar; `stderr`
    (T+1, B) or None. Returns (B,) fields.

    One pass over time: the plateau and window bounds come first (slices of the late curve), then a single
    `lax.scan` carries the running quantities (latest significant sign, sign-change counts, window maxima,
    first step at 90 %), so no (T+1, B) temporaries are built besides the input.

    Args:
        rewards: B curves p_0 … p_T, time-major; shape (T+1, B), T ≥ 1; reward units.
        diverged: whether each run diverged (non-finite points count too); bool or 0/1; scalar or shape (B,).
        stderr: standard error of each point; shape broadcasting to (T+1, B); reward units; None: exact curves.

    Returns:
        `CurveSummary` with fields of shape (B,).

    Raises:
        PgrpoSimError: `rewards` not 2-D with at least 2 steps, or flags refused by `check_curve_flags`.
    """
    p = as_float(rewards)
    if p.ndim != 2 or p.shape[0] < 2:
        raise PgrpoSimError(f"rewards must be time-major curves (T+1, B) of at least 2 steps, got shape {p.shape}")
    check_curve_flags(p.shape, diverged, stderr)
    n, batch = p.shape
    start, stop = _bounds(n, 0.9, 1.0)
    plateau = jnp.mean(p[start:stop], axis=0)
    p0 = p[0]
    tol = 1e-3 * jnp.abs(p0 - plateau) + 1e-9
    travel = plateau - p0
    scale = jnp.where(travel == 0, 1.0, travel)
    direction = jnp.sign(travel)
    mid, late = _bounds(n, 0.25, 0.5), _bounds(n, 0.75, 1.0)
    if stderr is not None:
        se = jnp.broadcast_to(as_float(stderr).astype(p.dtype), p.shape)
        se_plateau = jnp.mean(se[start:stop], axis=0)
        xs = (jnp.arange(n, dtype=jnp.int32), p, se)
    else:
        xs = (jnp.arange(n, dtype=jnp.int32), p)
    zero = jnp.zeros(batch, jnp.int32)
    low = jnp.full(batch, -jnp.inf, p.dtype)

    def visit(carry, x):
        prev_sign, prev_t, changes, late_changes, adjacent, pairs, t90, a_mid, a_late, overshoot, finite = carry
        t, pt = x[0], x[1]
        e = pt - plateau
        if stderr is not None:
            band = NOISE_Z * jnp.sqrt(x[2] ** 2 + se_plateau**2)
            amplitude = jnp.abs(jnp.sign(e) * jnp.maximum(jnp.abs(e) - band, 0.0))
            sig = jnp.abs(e) > tol + band
        else:
            amplitude, sig = jnp.abs(e), jnp.abs(e) > tol
        sign = jnp.sign(e)
        pair = sig & (prev_t >= 0)
        change = pair & (sign != prev_sign)
        changes = changes + change
        late_changes = late_changes + (change & (t >= n // 2))
        adjacent = adjacent + (change & (prev_t == t - 1))
        pairs = pairs + pair
        prev_t = jnp.where(sig, t, prev_t)
        prev_sign = jnp.where(sig, sign, prev_sign)
        a_mid = jnp.where((t >= mid[0]) & (t < mid[1]), jnp.maximum(a_mid, amplitude), a_mid)
        a_late = jnp.where((t >= late[0]) & (t < late[1]), jnp.maximum(a_late, amplitude), a_late)
        t90 = jnp.where((t90 < 0) & ((pt - p0) / scale >= 0.9), t, t90)
        overshoot = jnp.where(t < start, jnp.maximum(overshoot, direction * e), overshoot)
        finite = finite & jnp.isfinite(pt)
        return (prev_sign, prev_t, changes, late_changes, adjacent, pairs, t90, a_mid, a_late, overshoot, finite), None

    init = (jnp.zeros(batch, p.dtype), zero - 1, zero, zero, zero, zero, zero - 1, low, low, low, jnp.ones(batch, bool))
    carry, _ = jax.lax.scan(visit, init, xs)
    _, _, changes, late_changes, adjacent, pairs, t90, a_mid, a_late, overshoot, finite = carry
    diverged = jnp.asarray(diverged) | ~finite
    flip_like = (adjacent >= 0.8 * jnp.maximum(pairs, 1)) & (changes >= 4)
    time_to_90 = jnp.where(travel != 0, t90, -1)
    return _summary(p[-1], plateau, time_to_90, overshoot, changes, late_changes, flip_like, a_mid, a_late, tol,
                    diverged)  # fmt: skip


_summarize_jit = jax.jit(summarize_curve)


COLLAPSE_Z = 3.0
"""A fall counts as a collapse only when it exceeds this many standard errors of the difference (`collapsed`)."""


def collapsed(
    curve: np.ndarray,
    se: np.ndarray | None = None,
    start: tuple[float, float] | None = None,
    final: tuple[float, float] | None = None,
) -> bool:
    """Whether a reward curve (a mean over draws, or one run's running mean) collapsed: its final value (the mean of
    its last 10 %) is below half the best it had — its start or its peak — by more than `COLLAPSE_Z` standard errors
    of the difference, with `se` the standard error of each point (None: an exact curve). `start`, `final`:
    (value, se) of the start and of the final value when the caller knows them better than the curve's first point
    and last 10 % (runs that share a start pool it; a longer tail pools more steps). Half the peak, not only the
    start: a run that rises and then loses what it learned has collapsed (the real 16-steps-per-rollout run rises to
    0.46 and falls to 0), which the start alone misses when it is near 0.

    Args:
        curve: the reward curve, one value per step; shape (T,); reward units.
        se: standard error of each point; shape (T,); reward units; None: an exact curve (0).
        start: (value, se) of the start; reward units; None: (curve[0], se[0]).
        final: (value, se) of the final value; reward units; None: (mean of the last 10 %, se[-1]).

    Returns:
        Whether the curve collapsed.
    """
    curve = np.asarray(curve, float)
    se = np.zeros_like(curve) if se is None else np.asarray(se, float)
    first = (float(curve[0]), float(se[0])) if start is None else (float(start[0]), float(start[1]))
    tail = max(1, curve.size // 10)
    last = (float(np.mean(curve[-tail:])), float(se[-1])) if final is None else (float(final[0]), float(final[1]))
    peak = int(np.argmax(curve))
    best, best_se = first if first[0] >= curve[peak] else (float(curve[peak]), float(se[peak]))
    return last[0] < 0.5 * best and best - last[0] > COLLAPSE_Z * float(np.hypot(best_se, last[1]))


FLAT_RISE = 1e-3
"""The least rise above its start, in reward units, for which an exact curve counts as having learned (`verdict`)."""


def running_mean_stderr(curve: ArrayLike, window: int) -> np.ndarray:
    """Standard error of each point of the trailing running mean over `window` steps of a noisy per-step curve: the
    per-step noise σ, from the curve's step-to-step differences (von Neumann: σ² = mean((x_t − x_{t−1})²)/2, which a
    slow trend barely moves), over √(the points each mean averages).

    Args:
        curve: the per-step values x_0 … x_{T−1}; shape (T,), T ≥ 2; any units (NaN steps are left out of σ).
        window: points per running mean; integer ≥ 1.

    Returns:
        σ/√min(t + 1, window) per step; float (T,); the curve's units.

    Raises:
        PgrpoSimError: `curve` not 1-D with at least 2 points, or `window` < 1.
    """
    x = np.asarray(curve, float)
    if x.ndim != 1 or x.size < 2:
        raise PgrpoSimError(f"curve must be one curve of at least 2 steps, got shape {x.shape}")
    if int(window) != window or window < 1:
        raise PgrpoSimError(f"window must be an integer >= 1, got {window!r}")
    steps = np.diff(x)
    steps = steps[np.isfinite(steps)]
    sigma = float(np.sqrt(np.mean(steps**2) / 2)) if steps.size else math.nan
    return sigma / np.sqrt(np.minimum(np.arange(1, x.size + 1), int(window)))


VERDICTS = ("learns", "plateaus", "flat", "oscillates", "collapses", "diverges")
"""The verdicts `verdict` gives a reward curve."""


def verdict(
    mean: np.ndarray, diverged: bool, summary=None, *, collapse: bool | None = None, stderr: ArrayLike | None = None
) -> str:
    """The verdict of a reward curve `mean` (what-if's scenarios, the language-model level's runs), with r0 = its
    first point and final = its plateau (`summarize_curve`: the mean of the last 10 %):
    - "diverges": `diverged`, or a non-finite point;
    - "collapses": `collapsed(mean)` (final below half its start or peak), or `collapse` when the caller judged it
      on another curve or with a noise level (the language-model level: `analysis.lm_sweep.summarize_runs`);
    - "flat": the curve never rises above r0 by more than its noise — `COLLAPSE_Z` standard errors of the difference
      between its peak and r0 (as a fall must to be a collapse), and at least `FLAT_RISE`: it does not learn, whether
      it stays level (noise about a flat level is no oscillation) or sinks by less than a collapse;
    - "oscillates": the curve's regime is unstable (sustained or growing oscillation; `summarize_curve`, judged
      against `stderr` when given);
    - "plateaus": the last 20 % of the steps gain less than 0.01, and at most 10 % of (final − r0) or less than
      0.001 (it rose, then stopped);
    - "learns": otherwise (still rising at the end).
    `summary`: the curve's `summarize_curve`, when the caller has it already.

    Args:
        mean: the reward curve, one value per optimiser step; shape (T+1,), T ≥ 1 (an array or a list); reward units
            (the absolute gains 0.01 and 0.001 suit rewards in [0, 1]).
        diverged: whether the run diverged.
        summary: the curve's `CurveSummary` (`summarize_curve`, with `stderr` when given); None: computed here.
        collapse: the caller's collapse judgement; None: `collapsed(mean)`.
        stderr: standard error of each point (e.g. `running_mean_stderr` of a running mean); scalar or shape (T+1,);
            reward units; None: an exact curve.

    Returns:
        One of `VERDICTS`.

    Raises:
        PgrpoSimError: (when `summary` is None) a finite `mean` of fewer than 2 points, or `stderr` that does not
            broadcast to it.
    """
    mean = np.asarray(mean, float)  # a list too
    if diverged or not np.all(np.isfinite(mean)):
        return "diverges"
    if summary is None:
        summary = _summarize_jit(mean) if stderr is None else _summarize_jit(mean, False, stderr)
    n, r0, final = mean.size, float(mean[0]), float(summary.plateau)
    if collapsed(mean) if collapse is None else collapse:
        return "collapses"
    se = np.broadcast_to(np.zeros(1) if stderr is None else np.asarray(stderr, float), mean.shape)
    peak = int(np.argmax(mean))
    if mean[peak] - r0 <= max(FLAT_RISE, COLLAPSE_Z * float(np.hypot(se[0], se[peak]))):
        return "flat"
    if int(summary.regime) == UNSTABLE:
        return "oscillates"
    gain_late = float(mean[-1] - mean[int(0.8 * (n - 1))])
    if gain_late < 0.01 and (gain_late <= 0.1 * abs(final - r0) or gain_late < 0.001):  # it rose, then stopped
        return "plateaus"
    return "learns"
