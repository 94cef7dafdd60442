"""The identification of the stiffness K from a reward curve, three independent ways (docs/design.md §3):
(a) exactly, from the Jacobian of the expected update at the fixed point (`predict`);
(b) from the early slope of the curve, as the paper does: K = C·ṗ(0)/(p* − p0) with C = (1−μ)/η;
(c) by least-squares fit of the closed-form oscillator `theory.trajectory` to the curve.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

from ..base.checks import as_float, check_range
from ..base.errors import PgrpoSimError
from ..models.oscillator import theory
from ..models.step_ranges import STEP_RANGES
from .least_squares import LeastSquares, least_squares


class StiffnessEstimates(NamedTuple):
    """K three ways (NaN where not computed): `exact` (Jacobian at p*), `slope` (early slope), `fit`
    (oscillator fit) with its standard error, and the plateau p* used by the slope estimate.

    Every field is a scalar array (`identify_stiffness` reads one curve); K is per unit η (as in
    `models.oscillator.theory`).

    Attributes:
        exact: K from the Jacobian of the expected update at p* (`predict`); NaN without a configuration.
        slope: K from the early slope (`stiffness_from_slope`).
        fit: K from the oscillator fit (`stiffness_from_fit`, best of several starts); NaN if every start failed.
        fit_stderr: standard error of `fit`; NaN if every start failed.
        plateau: p*, the mean of the last 10 % of the curve; reward units.
    """

    exact: Array
    slope: Array
    fit: Array
    fit_stderr: Array
    plateau: Array


def _plateau(rewards: Array, fraction: float = 0.1) -> Array:
    tail = max(1, round(fraction * rewards.shape[-1]))
    return jnp.mean(rewards[..., -tail:], axis=-1)


def stiffness_from_slope(
    rewards: ArrayLike, learning_rate: ArrayLike, momentum: ArrayLike, *, early_steps: int = 5
) -> Array:
    """(b) K = C·ṗ(0)/(p* − p0) with C = (1−μ)/η, ṗ(0) the least-squares slope over the first `early_steps`
    steps and p* the plateau (mean of the last 10 % of the curve).

    This is the first-order (overdamped, C ė = −K e) reading of the start of the curve. It is biased
    low with momentum (heavy ball starts at rest; its velocity builds up over ~1/(1−μ) steps, so the
    early slope is smaller than C ė would give), with stale lag (the first τ updates all use θ_0), and
    whenever the early part is not in the linear range (|p0 − p*| large: curvature of the drive).

    Args:
        rewards: reward curves, one value per optimiser step from step 0; shape (..., T); reward units.
        learning_rate: η (η_eff for a bandit); per step, > 0; broadcasts with the leading shape of `rewards`.
        momentum: heavy-ball momentum μ; in [0, 1); broadcasts like `learning_rate`.
        early_steps: points of the early slope; integer in [2, T].

    Returns:
        K per curve; shape (...), the leading shape of `rewards`; per unit η. Not finite when p* = p0.

    Raises:
        PgrpoSimError: `early_steps` is not an integer in [2, T], or `learning_rate` or `momentum` is out of its range.
    """
    r = as_float(rewards)
    check_range("early_steps", early_steps, 2, r.shape[-1], integer=True)
    STEP_RANGES["learning_rate"].check("learning_rate", learning_rate)  # no-ops on tracers, as the closed forms' checks
    STEP_RANGES["momentum"].check("momentum", momentum)
    n = jnp.arange(early_steps, dtype=r.dtype)
    y = r[..., :early_steps]
    slope = jnp.sum((n - n.mean()) * (y - y.mean(-1, keepdims=True)), -1) / jnp.sum((n - n.mean()) ** 2)
    return (1 - as_float(momentum)) / as_float(learning_rate) * slope / (_plateau(r) - r[..., 0])


def stiffness_from_fit(
    rewards: ArrayLike, learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike = 0.0, *, k0: ArrayLike = 0.1
) -> LeastSquares:
    """(c) Fit p(t) = p* + e(t) with e the closed-form oscillator (`theory.trajectory`) to `rewards`; free
    parameters log K (from `k0`), p* and ė(0); e(0) = rewards[0] − p*. Returns the `LeastSquares` result with
    params (K, p*, ė0) — K transformed back from log and its standard error by the delta method.

    Args:
        rewards: one reward curve, one value per optimiser step from step 0; shape (T,); reward units.
        learning_rate: learning rate η (η_eff for a bandit); per step, > 0; scalar.
        momentum: heavy-ball momentum μ; in [0, 1); scalar.
        lag: continuous off-policy lag τ; optimiser steps, ≥ 0; scalar.
        k0: starting value of K; per unit η, > 0.

    Returns:
        `LeastSquares` whose `params` and `stderr` have shape (3,): K (per unit η), p* (reward), ė(0) (reward per
        step).

    Raises:
        PgrpoSimError: `rewards` is not one curve or `k0` is not > 0; (eagerly, from `theory.trajectory`) a
            `learning_rate`, `momentum` or `lag` outside its range, or a non-finite K at the solution.
    """
    r = as_float(rewards)
    if r.ndim != 1:  # r[0] and r[1] - r[0] below read one curve
        raise PgrpoSimError(f"rewards must be one curve (shape (T,)), got shape {r.shape}")
    check_range("k0", k0, 0.0, low_open=True)
    t = jnp.arange(r.shape[-1], dtype=r.dtype)
    v_init = r[1] - r[0] if r.shape[-1] > 1 else jnp.zeros((), r.dtype)

    def residuals(x):
        k, p, v = jnp.exp(x[0]), x[1], x[2]
        return p + theory.trajectory(t, r[0] - p, v, learning_rate, momentum, lag, k) - r

    x0 = jnp.stack([jnp.log(jnp.asarray(as_float(k0), r.dtype)), _plateau(r), v_init])
    res = least_squares(residuals, x0)
    k = jnp.exp(res.params[0])
    return res._replace(params=res.params.at[0].set(k), stderr=res.stderr.at[0].multiply(k))


def identify_stiffness(
    rewards: ArrayLike,
    *,
    learning_rate: float,
    momentum: float = 0.0,
    lag: float = 0.0,
    config=None,
    early_steps: int = 5,
    fit_start: int = 0,
) -> StiffnessEstimates:
    """K three ways from one reward curve (η = η_eff for a bandit; see `pgrpo_sim.prediction`).

    `config` (a `bandit.Config`) enables (a), the exact Jacobian via `predict`. (b) and (c) use only the
    curve; (c) starts the fit at step `fit_start` (skip the nonlinear start to fit near p*).

    Args:
        rewards: one reward curve, one value per optimiser step from step 0; shape (T,), T ≥ 3; reward units.
        learning_rate: learning rate η (η_eff for a bandit); per step, > 0.
        momentum: heavy-ball momentum μ; in [0, 1).
        lag: continuous off-policy lag τ of the fit (c); optimiser steps, ≥ 0.
        config: the `bandit.Config` that produced the curve, for (a); None: `exact` is NaN.
        early_steps: points of the early slope (b); integer in [2, T].
        fit_start: first step fitted by (c); integer in [0, T − 3].

    Returns:
        `StiffnessEstimates` (scalars).

    Raises:
        PgrpoSimError: `learning_rate`, `momentum` or `lag` outside its range, `rewards` not 1-D with at least 3 points,
            `early_steps` or `fit_start` outside its range, or a `config` that `predict` refuses.
    """
    STEP_RANGES["learning_rate"].check("learning_rate", learning_rate)
    STEP_RANGES["momentum"].check("momentum", momentum)
    check_range("lag", lag, 0.0)
    r = as_float(rewards)
    if r.ndim != 1 or r.size < 3:
        raise PgrpoSimError(f"rewards must be a curve of at least 3 points, got shape {r.shape}")
    check_range("fit_start", fit_start, 0, r.size - 3, integer=True)
    exact = jnp.asarray(jnp.nan, r.dtype)
    if config is not None:
        from ..prediction import predict

        exact = predict(config).stiffness.astype(r.dtype)
    slope = stiffness_from_slope(r, learning_rate, momentum, early_steps=early_steps)
    k, k_err = _best_fit(r[fit_start:], as_float(learning_rate), as_float(momentum), as_float(lag), slope)
    return StiffnessEstimates(exact, slope, k, k_err, _plateau(r))


@jax.jit
def _best_fit(r: Array, learning_rate: Array, momentum: Array, lag: Array, slope: Array) -> tuple[Array, Array]:
    """(c) from several starting values of K (the slope estimate and a log grid, never the exact answer):
    the fit of least cost wins. One start after another (`lax.map`; see `_fit_padded`)."""
    starts = jnp.concatenate([jnp.where(slope > 0, slope, 0.1)[None], jnp.logspace(-3, 1, 9, dtype=r.dtype)])
    fits = jax.lax.map(lambda k0: stiffness_from_fit(r, learning_rate, momentum, lag, k0=k0), starts)
    best = jnp.nanargmin(fits.cost)  # -1 if every cost is NaN: no fit, so NaN below, never the last start
    failed = jnp.all(jnp.isnan(fits.cost))
    return jnp.where(failed, jnp.nan, fits.params[best, 0]), jnp.where(failed, jnp.nan, fits.stderr[best, 0])
