"""The continuous damped oscillator of GRPO training dynamics, in closed form.

The deviation e = p − p* of the expected reward from its fixed point obeys (Predictable GRPO,
arXiv 2606.30789, eqs. for M, C, ζ):

    M ë + C ė + K e = sqrt(D/G) ξ(t)
    M = ((1+μ) + Kητ²) / (2η),   C = ((1−μ) − Kητ) / η,   ζ = C / (2 sqrt(M K))

with η the learning rate, μ the heavy-ball momentum, τ the off-policy lag (optimiser steps, continuous
here), K the stiffness (curvature of the expected update per unit η) and time t in optimiser steps.

All functions are pure and broadcast over array arguments; they work under `jit`, `vmap` and `grad`.
Eagerly, out-of-range inputs raise `ValueError`; under a JAX transformation they give NaN instead.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import as_float, check_normal, check_range, check_shapes, in_range, is_concrete, nan_unless
from ...base.regimes import INVALID, REGIMES, Damping
from ..step_ranges import STEP_RANGES


class Coefficients(NamedTuple):
    """Mass M (steps²·per unit e), damping C (steps), stiffness K of the reduced oscillator.

    Each field has the broadcast shape of the inputs and their float dtype; NaN where an input is invalid under jit.

    Attributes:
        mass: M = ((1+μ)+Kητ²)/(2η), coefficient of ë; steps²; > 0 for valid inputs.
        damping: C = ((1−μ)−Kητ)/η, coefficient of ė; steps; C <= 0 means unstable.
        stiffness: K, coefficient of e, broadcast to the shape of the others; per unit η; > 0.
    """

    mass: Array
    damping: Array
    stiffness: Array


def _check(
    learning_rate=None, momentum=None, lag=None, stiffness=None, noise=None, num_generations=None, **more
) -> None:
    check_shapes(
        learning_rate=learning_rate,
        momentum=momentum,
        lag=lag,
        stiffness=stiffness,
        noise=noise,
        num_generations=num_generations,
        **more,
    )
    STEP_RANGES["learning_rate"].check("learning_rate", learning_rate)
    STEP_RANGES["momentum"].check("momentum", momentum)
    check_range("lag", lag, 0.0)
    check_range("stiffness", stiffness, 0.0, low_open=True)
    check_range("noise", noise, 0.0)
    check_range("num_generations", num_generations, 2.0)


def _valid(learning_rate, momentum, lag, stiffness):
    return (
        STEP_RANGES["learning_rate"].holds(learning_rate)
        & STEP_RANGES["momentum"].holds(momentum)
        & in_range(lag, 0.0)
        & in_range(stiffness, 0.0, low_open=True)
    )


def _float(*xs: ArrayLike) -> list[Array]:
    arrays = [as_float(x) for x in xs]
    dtype = jnp.result_type(*arrays)
    return [a.astype(dtype) for a in arrays]


def coefficients(learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike, stiffness: ArrayLike) -> Coefficients:
    """M = ((1+μ)+Kητ²)/(2η), C = ((1−μ)−Kητ)/η and K; NaN where an input is invalid under jit.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.

    Returns:
        `Coefficients` (mass, damping, stiffness), each of the broadcast shape of the inputs, in their float dtype
            (float32 for Python numbers and integers, float64 under x64).

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast or a value is non-finite or out of range.
    """
    _check(learning_rate, momentum, lag, stiffness)
    learning_rate, momentum, lag, stiffness = _float(learning_rate, momentum, lag, stiffness)
    ok = _valid(learning_rate, momentum, lag, stiffness)
    mass = ((1 + momentum) + stiffness * learning_rate * lag**2) / (2 * learning_rate)
    damping = ((1 - momentum) - stiffness * learning_rate * lag) / learning_rate
    return Coefficients(nan_unless(ok, mass), nan_unless(ok, damping), nan_unless(ok, stiffness + 0 * mass))


def check_representable(
    learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike, stiffness: ArrayLike, dtype=None
) -> None:
    """Raise `PgrpoSimError` unless η, K and the closed forms' M, C, Kη, ζ, ω_n and τ* are zero or finite normal
    numbers of `dtype` (default: JAX's float dtype, float32 unless x64 is on): the range in which they are computed
    without overflow or underflow (e.g. η = 1e308 with K = 1e308 overflows Kη; η = 1e-320 is subnormal and 1/η
    overflows). For concrete inputs within their ranges (`coefficients` checks those); a no-op on tracers.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.
        dtype: float dtype the closed forms are computed in (e.g. `np.float32`); None: JAX's default float dtype.

    Raises:
        PgrpoSimError: if η or K, or one of M, C, Kη, ζ, ω_n, τ* computed from them, is not zero or a finite normal
            number of `dtype` (overflow, underflow or a subnormal value); the message names the quantity.
    """
    if not is_concrete(learning_rate, momentum, lag, stiffness):
        return
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(float) if dtype is None else dtype)
    check_normal("learning_rate", learning_rate, dtype)
    check_normal("stiffness", stiffness, dtype)
    where = (
        f" at learning_rate={learning_rate:g}, momentum={momentum:g}, lag={lag:g}, stiffness={stiffness:g}"
        if np.ndim(learning_rate) == 0
        else ""
    )
    with np.errstate(all="ignore"):
        learning_rate, momentum, lag, stiffness = (
            np.asarray(x, dtype) for x in (learning_rate, momentum, lag, stiffness)
        )
        k_eta = stiffness * learning_rate
        m = ((1 + momentum) + k_eta * lag**2) / (2 * learning_rate)
        c = ((1 - momentum) - k_eta * lag) / learning_rate
        derived = {
            "Kη": k_eta,
            "mass M": m,
            "damping C": c,
            "damping ratio ζ": c / (2 * np.sqrt(m * stiffness)),
            "natural frequency ω_n": np.sqrt(stiffness / m),
            "critical lag τ*": (1 - momentum) / k_eta,
        }
    for name, value in derived.items():
        check_normal(name, value, dtype, where)


def damping_ratio(learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike, stiffness: ArrayLike) -> Array:
    """ζ = C/(2√(MK)) = ((1−μ)−Kητ)/√(2Kη((1+μ)+Kητ²)); dimensionless, negative when C < 0.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.

    Returns:
        ζ, dimensionless, of the broadcast shape of the inputs (float); NaN where an input is invalid under jit.

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast or a value is non-finite or out of range.
    """
    m, c, k = coefficients(learning_rate, momentum, lag, stiffness)
    return c / (2 * jnp.sqrt(m * k))


def natural_frequency(learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike, stiffness: ArrayLike) -> Array:
    """ω_n = √(K/M), in radians per optimiser step.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.

    Returns:
        ω_n (radians per optimiser step, > 0), of the broadcast shape of the inputs (float); NaN where an input is
            invalid under jit.

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast or a value is non-finite or out of range.
    """
    m, _, k = coefficients(learning_rate, momentum, lag, stiffness)
    return jnp.sqrt(k / m)


def critical_lag(learning_rate: ArrayLike, momentum: ArrayLike, stiffness: ArrayLike) -> Array:
    """τ* = (1−μ)/(ηK): the lag (steps) at which the damping C vanishes and the oscillator turns unstable.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.

    Returns:
        τ* (optimiser steps, continuous lag, > 0), of the broadcast shape of the inputs (float); NaN
            where an input is invalid under jit.

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast or a value is non-finite or out of range.
    """
    _check(learning_rate, momentum, None, stiffness)
    learning_rate, momentum, stiffness = _float(learning_rate, momentum, stiffness)
    return nan_unless(_valid(learning_rate, momentum, 0.0, stiffness), (1 - momentum) / (learning_rate * stiffness))


def regime_code(
    learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike, stiffness: ArrayLike, tol: float = 1e-6
) -> Array:
    """jit-compatible regime: 0 overdamped (ζ>1+tol), 1 critical (|ζ−1|≤tol), 2 underdamped, 3 unstable (C≤0).

    Codes are `base.regimes.Damping`; invalid inputs under jit give `INVALID` (−1). Names are in `REGIMES`.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.
        tol: half-width of the band |ζ − 1| <= tol read as critical; Python float; >= 0.

    Returns:
        int32 codes in {−1, 0, 1, 2, 3}, of the broadcast shape of the inputs.

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast, a value is non-finite or out of range, or tol < 0.
    """
    check_range("tol", tol, 0.0)
    m, c, k = coefficients(learning_rate, momentum, lag, stiffness)
    zeta = c / (2 * jnp.sqrt(m * k))
    code = jnp.where(
        c <= 0,
        Damping.UNSTABLE,
        jnp.where(
            jnp.abs(zeta - 1) <= tol, Damping.CRITICAL, jnp.where(zeta > 1, Damping.OVERDAMPED, Damping.UNDERDAMPED)
        ),
    )
    return jnp.where(jnp.isnan(zeta), INVALID, code)


def regime(learning_rate: ArrayLike, momentum: ArrayLike, lag: ArrayLike, stiffness: ArrayLike, tol: float = 1e-6):
    """Regime name ('overdamped', 'critical', 'underdamped', 'unstable', or 'invalid' where `regime_code` is
    `INVALID`); a NumPy str array for array input.

    Host function (names are not JAX values): use `regime_code` under jit.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.
        tol: half-width of the band |ζ − 1| <= tol read as critical; Python float; >= 0.

    Returns:
        A `str` for scalar inputs, else a NumPy array of `str` of the broadcast shape of the inputs.

    Raises:
        PgrpoSimError: if the shapes do not broadcast, a value is non-finite or out of range, or tol < 0.
    """
    codes = np.asarray(regime_code(learning_rate, momentum, lag, stiffness, tol))
    names = np.asarray((*REGIMES, "invalid"))[codes]  # code −1 → "invalid"
    return str(names) if names.ndim == 0 else names


def stationary_variance(
    learning_rate: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike,
    stiffness: ArrayLike,
    noise: ArrayLike,
    num_generations: ArrayLike,
) -> Array:
    """Stationary Var(e) = D/(2·G·C·K) of the forced oscillator (units of reward²).

    When C ≤ 0 there is no stationary distribution and the result is +inf (not NaN); NaN marks
    invalid inputs under jit.

    Args:
        learning_rate: learning rate η, per optimiser step; scalar or array, all inputs broadcasting together; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.
        noise: diffusion D, G times the per-step variance of Δe/η (reward² per unit η²); broadcasts; >= 0.
        num_generations: group size G (samples per group; real values allowed); broadcasts; >= 2.

    Returns:
        Var(e) (reward², >= 0, +inf where C <= 0), of the broadcast shape of the inputs (float).

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast or a value is non-finite or out of range.
    """
    _check(learning_rate, momentum, lag, stiffness, noise, num_generations)
    m, c, k = coefficients(learning_rate, momentum, lag, stiffness)
    noise, num_generations = _float(noise, num_generations)
    ok = in_range(noise, 0.0) & in_range(num_generations, 2.0) & ~jnp.isnan(m)
    var = noise / (2 * num_generations * jnp.where(c > 0, c, 1.0) * k)
    return nan_unless(ok, jnp.where(c > 0, var, jnp.inf))


def _even_odd_series(x):
    """(Σ x^k/(2k)!, Σ x^k/(2k+1)!) to O(x^5): cosh(√x) and sinh(√x)/√x near x = 0."""
    even = 1 + x / 2 * (1 + x / 12 * (1 + x / 30 * (1 + x / 56)))
    odd = 1 + x / 6 * (1 + x / 20 * (1 + x / 42 * (1 + x / 72)))
    return even, odd


def trajectory(
    t: ArrayLike,
    e0: ArrayLike,
    v0: ArrayLike,
    learning_rate: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike,
    stiffness: ArrayLike,
) -> Array:
    """Closed-form deterministic solution e(t) of M ë + C ė + K e = 0 with e(0)=e0, ė(0)=v0 (t in steps).

    e(t) = e^{−γt}[e0·c(t) + (v0 + γ e0)·s(t)], γ = C/(2M), Δ = γ² − K/M, with c = cosh(√Δ t),
    s = sinh(√Δ t)/√Δ for Δ > 0 (overdamped), cos/sin for Δ < 0 (underdamped) and their common
    power series near Δt² = 0, so e(t) is smooth (no NaN, no jump) across ζ = 1. For C < 0 the same
    formula gives the growing (unstable) solution.

    Args:
        t: times (optimiser steps, real); scalar or array, all inputs broadcasting together.
        e0: initial deviation e(0) = p(0) − p* (reward units); broadcasts.
        v0: initial velocity ė(0) (reward per step); broadcasts.
        learning_rate: learning rate η, per optimiser step; broadcasts; > 0.
        momentum: heavy-ball momentum μ; broadcasts; in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); broadcasts; >= 0.
        stiffness: stiffness K (curvature of the expected update per unit η); broadcasts; > 0.

    Returns:
        e(t) (reward units), of the broadcast shape of all inputs (float); NaN where an oscillator parameter is
            invalid under jit.

    Raises:
        PgrpoSimError: eagerly, if the shapes do not broadcast or η, μ, τ, K is non-finite or out of range.
    """
    _check(learning_rate, momentum, lag, stiffness, t=t, e0=e0, v0=v0)
    m, c, k = coefficients(learning_rate, momentum, lag, stiffness)
    t, e0, v0, m, c, k = _float(t, e0, v0, m, c, k)
    gamma = c / (2 * m)
    disc = gamma**2 - k / m
    x = disc * t**2
    small = jnp.abs(x) < 1e-2
    over = ~small & (x > 0)
    under = ~small & (x < 0)
    # Each branch is fed a safe argument so that unused branches never produce NaN gradients.
    root = jnp.sqrt(jnp.where(over, disc, 1.0))
    # the slow mode's rate √Δ − γ as −(K/M)/(√Δ + γ): the difference cancels in float32 where K/M ≪ γ² (small η:
    # at η = 1e-7 it read e(3 t₀) 20× too small)
    slow_rate = -(k / m) / jnp.where(over, root + gamma, 1.0)
    e_fast, e_slow = jnp.exp(slow_rate * t), jnp.exp((-root - gamma) * t)
    damp = jnp.exp(-gamma * t)
    even_o, odd_o = (e_fast + e_slow) / 2, (e_fast - e_slow) / (2 * root)
    w = jnp.sqrt(jnp.where(under, -disc, 1.0))
    even_u, odd_u = damp * jnp.cos(w * t), damp * jnp.sin(w * t) / w
    ser_even, ser_odd = _even_odd_series(jnp.where(small, x, 0.0))
    even = jnp.where(over, even_o, jnp.where(under, even_u, damp * ser_even))
    odd = jnp.where(over, odd_o, jnp.where(under, odd_u, damp * ser_odd * t))
    return e0 * even + (v0 + gamma * e0) * odd


def saturation_law(t: ArrayLike, r_inf: ArrayLike, t0: ArrayLike) -> Array:
    """Empirical saturation law R(t) = R∞(1 − e^{−t/t0}) (t, t0 in steps): the overdamped limit.

    Args:
        t: times (optimiser steps); scalar or array, all inputs broadcasting together.
        r_inf: asymptote R∞ (reward units, e.g. the gain over the start); broadcasts; finite.
        t0: time constant (optimiser steps); broadcasts; > 0.

    Returns:
        R(t) (units of r_inf), of the broadcast shape of the inputs (float).

    Raises:
        PgrpoSimError: eagerly, if t0 <= 0, r_inf or t0 is non-finite, or the shapes do not broadcast (under jit the
            checks are skipped and nothing is masked).
    """
    check_range("t0", t0, 0.0, low_open=True)
    check_range("r_inf", r_inf)
    check_shapes(t=t, r_inf=r_inf, t0=t0)
    t, r_inf, t0 = _float(t, r_inf, t0)
    return r_inf * -jnp.expm1(-t / t0)


def critical_law(t: ArrayLike, r_inf: ArrayLike, r0: ArrayLike, omega: ArrayLike) -> Array:
    """Critically damped law R(t) = R∞ − (R∞ − R0)(1 + ωt)e^{−ωt} (ω per step): adds the slow start.

    Args:
        t: times (optimiser steps); scalar or array, all inputs broadcasting together.
        r_inf: asymptote R∞ (reward units); broadcasts; finite.
        r0: start R(0) (reward units); broadcasts; finite.
        omega: rate ω (per optimiser step); broadcasts; > 0.

    Returns:
        R(t) (reward units), of the broadcast shape of the inputs (float).

    Raises:
        PgrpoSimError: eagerly, if omega <= 0, r_inf, r0 or omega is non-finite, or the shapes do not broadcast
            (under jit the checks are skipped and nothing is masked).
    """
    check_range("omega", omega, 0.0, low_open=True)
    check_range("r_inf", r_inf)
    check_range("r0", r0)
    check_shapes(t=t, r_inf=r_inf, r0=r0, omega=omega)
    t, r_inf, r0, omega = _float(t, r_inf, r0, omega)
    return r_inf - (r_inf - r0) * (1 + omega * t) * jnp.exp(-omega * t)
