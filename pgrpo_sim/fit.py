"""Least-squares fits in JAX and the identification of the stiffness K from a reward curve.

`identify_stiffness` gives K three independent ways (DESIGN.md §3):
(a) exactly, from the Jacobian of the expected update at the fixed point (`predict`);
(b) from the early slope of the curve, as the paper does: K = C·ṗ(0)/(p* − p0) with C = (1−μ)/η;
(c) by least-squares fit of the closed-form oscillator `theory.trajectory` to the curve.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from . import theory
from ._checks import as_float, check_range


class LeastSquares(NamedTuple):
    """Result of `least_squares`: parameters, their standard errors (from the Jacobian), the cost ½Σr²,
    the residual sum of squares Σr² and the number of points."""

    params: Array
    stderr: Array
    cost: Array
    rss: Array
    n: int


def least_squares(
    residuals: Callable[[Array], Array], x0: ArrayLike, *, iterations: int = 200, damping: float = 1e-3
) -> LeastSquares:
    """Minimise ½‖r(x)‖² by Levenberg–Marquardt (multiplicative damping on diag(JᵀJ), fixed iteration count).

    Standard errors are √diag(s²(JᵀJ)⁻¹) with s² = RSS/(n − p). Pure JAX: jit/vmap-compatible.
    """
    x0 = as_float(x0)

    def cost(x):
        r = residuals(x)
        return 0.5 * jnp.sum(r**2)

    def body(_, carry):
        x, lam, c = carry
        r, jac = residuals(x), jax.jacfwd(residuals)(x)
        jtj, jtr = jac.T @ jac, jac.T @ r
        scale = jnp.diag(jtj) + 1e-12
        step = jnp.linalg.solve(jtj + lam * jnp.diag(scale), -jtr)
        trial = x + step
        c_trial = cost(trial)
        better = jnp.isfinite(c_trial) & (c_trial < c)
        return jnp.where(better, trial, x), jnp.where(better, lam / 3, lam * 4), jnp.where(better, c_trial, c)

    x, _, c = jax.lax.fori_loop(0, iterations, body, (x0, jnp.asarray(damping, x0.dtype), cost(x0)))
    r, jac = residuals(x), jax.jacfwd(residuals)(x)
    n, p = r.size, x.size
    s2 = jnp.sum(r**2) / max(n - p, 1)
    cov = s2 * jnp.linalg.pinv(jac.T @ jac)
    return LeastSquares(x, jnp.sqrt(jnp.abs(jnp.diag(cov))), c, jnp.sum(r**2), n)


class StiffnessEstimates(NamedTuple):
    """K three ways (NaN where not computed): `exact` (Jacobian at p*), `slope` (early slope), `fit`
    (oscillator fit) with its standard error, and the plateau p* used by the slope estimate."""

    exact: Array
    slope: Array
    fit: Array
    fit_stderr: Array
    plateau: Array


def _plateau(rewards: Array, fraction: float = 0.1) -> Array:
    tail = max(1, int(round(fraction * rewards.shape[-1])))
    return jnp.mean(rewards[..., -tail:], axis=-1)


def stiffness_from_slope(
    rewards: ArrayLike, eta: ArrayLike, momentum: ArrayLike, *, early_steps: int = 5, p_star: ArrayLike | None = None
) -> Array:
    """(b) K = C·ṗ(0)/(p* − p0) with C = (1−μ)/η, ṗ(0) the least-squares slope over the first `early_steps`
    steps and p* the plateau (mean of the last 10 % of the curve) unless given.

    This is the first-order (overdamped, C ė = −K e) reading of the start of the curve. It is biased
    low with momentum (heavy ball starts at rest; its velocity builds up over ~1/(1−μ) steps, so the
    early slope is smaller than C ė would give), with stale lag (the first τ updates all use θ_0), and
    whenever the early part is not in the linear range (|p0 − p*| large: curvature of the drive).
    """
    check_range("early_steps", early_steps, 2, integer=True)
    r = as_float(rewards)
    n = jnp.arange(early_steps, dtype=r.dtype)
    y = r[..., :early_steps]
    slope = jnp.sum((n - n.mean()) * (y - y.mean(-1, keepdims=True)), -1) / jnp.sum((n - n.mean()) ** 2)
    plateau = _plateau(r) if p_star is None else as_float(p_star)
    return (1 - as_float(momentum)) / as_float(eta) * slope / (plateau - r[..., 0])


def stiffness_from_fit(
    rewards: ArrayLike,
    eta: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike = 0.0,
    *,
    start: int = 0,
    p_star: ArrayLike | None = None,
    fit_velocity: bool = True,
    k0: ArrayLike = 0.1,
) -> LeastSquares:
    """(c) Fit p(t) = p* + e(t − start) with e the closed-form oscillator (`theory.trajectory`) to
    `rewards[start:]`; free parameters log K, then p* (unless given) and ė(start) (if `fit_velocity`);
    e(start) = rewards[start] − p*. Returns the `LeastSquares` result with params (K, p*, ė0) — K
    transformed back from log and its standard error by the delta method."""
    r = as_float(rewards)[start:]
    t = jnp.arange(r.shape[-1], dtype=r.dtype)
    fixed_p = p_star is not None
    p_init = as_float(p_star) if fixed_p else _plateau(r)
    v_init = r[1] - r[0] if r.shape[-1] > 1 else jnp.zeros((), r.dtype)

    def unpack(x):
        k = jnp.exp(x[0])
        p = p_init if fixed_p else x[1]
        v = x[-1] if fit_velocity else jnp.zeros((), r.dtype)
        return k, p, v

    def residuals(x):
        k, p, v = unpack(x)
        return p + theory.trajectory(t, r[0] - p, v, eta, momentum, lag, k) - r

    x0 = [jnp.log(as_float(k0))] + ([] if fixed_p else [p_init]) + ([v_init] if fit_velocity else [])
    res = least_squares(residuals, jnp.stack([jnp.asarray(v, r.dtype) for v in x0]))
    k, p, v = unpack(res.params)
    stderr = res.stderr.at[0].multiply(k)
    return res._replace(params=jnp.stack([k, p, v]), stderr=stderr)


def identify_stiffness(
    rewards: ArrayLike,
    *,
    eta: float,
    momentum: float = 0.0,
    lag: float = 0.0,
    config=None,
    early_steps: int = 5,
    fit_start: int = 0,
) -> StiffnessEstimates:
    """K three ways from one reward curve (η = η_eff for a bandit; see `pgrpo_sim.prediction`).

    `config` (a `BanditConfig`) enables (a), the exact Jacobian via `predict`. (b) and (c) use only the
    curve; (c) starts the fit at step `fit_start` (skip the nonlinear start to fit near p*).
    """
    check_range("eta", eta, 0.0, low_open=True)
    check_range("momentum", momentum, 0.0, 1.0, high_open=True)
    r = as_float(rewards)
    exact = jnp.asarray(jnp.nan, r.dtype)
    if config is not None:
        from .prediction import predict

        exact = predict(config).stiffness.astype(r.dtype)
    slope = stiffness_from_slope(r, eta, momentum, early_steps=early_steps)
    k, k_err = _best_fit(r[fit_start:], as_float(eta), as_float(momentum), as_float(lag), slope)
    return StiffnessEstimates(exact, slope, k, k_err, _plateau(r))


@jax.jit
def _best_fit(r: Array, eta: Array, momentum: Array, lag: Array, slope: Array) -> tuple[Array, Array]:
    """(c) from several starting values of K (the slope estimate and a log grid, never the exact answer):
    the fit of least cost wins."""
    starts = jnp.concatenate([jnp.where(slope > 0, slope, 0.1)[None], jnp.logspace(-3, 1, 9, dtype=r.dtype)])
    fits = jax.vmap(lambda k0: stiffness_from_fit(r, eta, momentum, lag, k0=k0))(starts)
    best = jnp.nanargmin(fits.cost)
    return fits.params[best, 0], fits.stderr[best, 0]


def r_squared(data: ArrayLike, model: ArrayLike) -> float:
    """Coefficient of determination 1 − Σ(data − model)²/Σ(data − mean)²."""
    data, model = np.asarray(data, float), np.asarray(model, float)
    return float(1 - np.sum((data - model) ** 2) / np.sum((data - data.mean()) ** 2))
