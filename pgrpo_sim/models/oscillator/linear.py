"""Exact discrete linear map of linearised GRPO: heavy ball with a lagged force.

The deviation e_n = p_n - p* of the expected reward from its fixed point, linearised, obeys the
heavy-ball recursion (Polyak 1964) with a lagged restoring force (Levin & May 1976)

    e_{n+1} = (1 + mu) e_n - mu e_{n-1} - a e_{n-tau},        a = learning_rate * stiffness,

with momentum mu in [0, 1) and an integer lag tau >= 0 (in optimiser steps). Two lag models:

- ``"stale"``: constant lag tau. The exact per-step multipliers are the eigenvalues of the companion
  matrix of the state (e_n, ..., e_{n-L}), L = max(tau, 1), i.e. the roots of
  z^{tau+1} - (1+mu) z^tau + mu z^{tau-1} + a = 0 (tau >= 1), z^2 - (1+mu-a) z + mu = 0 (tau = 0).
- ``"refresh"``: the force is frozen at the state of the last refresh and refreshed every
  K_ref = lag steps: within a cycle starting at n0, e_{n0+j+1} = (1+mu) e_{n0+j} - mu e_{n0+j-1}
  - a e_{n0} for j = 0 .. K_ref-1. The exact answer is the one-cycle (monodromy, Floquet) 2x2 map
  (e_{n0}, e_{n0-1}) -> (e_{n0+K}, e_{n0+K-1}); per-step multipliers are its eigenvalues raised to
  1/K_ref (principal branch). ``lag`` 0 and 1 both mean on-policy (refresh every step), which is the
  same map as ``"stale"`` with lag 0.

Everything is per optimiser step (a spectral radius r means |e_n| ~ r^n). Functions are pure and
jit/vmap/grad-compatible in ``learning_rate``, ``momentum`` and ``stiffness`` (which broadcast against each
other); ``lag`` and ``lag_model`` are static (``lag`` sets a matrix shape). Inputs are validated
eagerly (``ValueError`` naming the parameter); under a JAX transformation invalid values give NaN.

Numerics: float32 and float64 both work. For lag >= 2 (stale) roots come from the eigenvalues of the
companion matrix; 2x2 cases (stale lag 0/1, refresh) use closed forms with cancellation-free
discriminants. Roots cluster near z = 1 as momentum -> 1 (roots 1 and mu of the a = 0 problem), and
eigenvalues of clustered roots are ill-conditioned: in float32 with momentum >= 0.99 and lag >= 10 the
radius can be off by ~1e-3; use float64 there. The radius of a slow, stable map is 1 − O(a/(1 − μ)), a = ηK:
below a/(1 − μ) ≈ 3e-8 (LLM-sized steps) float32 rounds it to exactly 1, read as "unstable"; use float64 there too.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import check_choice, check_range, check_shapes, in_range, is_concrete, nan_unless
from ...base.errors import PgrpoSimError
from ...base.regimes import DISCRETE_REGIMES, INVALID, Regime
from ..step_ranges import STEP_RANGES

MONOTONE, OSCILLATORY, FLIP, UNSTABLE = Regime.MONOTONE, Regime.OSCILLATORY, Regime.FLIP, Regime.UNSTABLE

DISCRETE_LAG_MODELS = ("stale", "refresh")
"""Lag models of the exact map (a bandit's "none" is stale lag 0: `prediction.discrete_lag`)."""

# critical_eta search: log grid in a = learning_rate * stiffness, then bisection of the first unstable cell (a cell
# spans a factor 1.23; about 50 halvings reach adjacent float64 values, _MAX_BISECT leaves room for a bracket from 0).
_A_LO, _A_HI, _N_GRID, _MAX_BISECT = 1e-8, 5.0, 96, 128
# Every stale map with lag >= 1 is unstable for a >= 1 (the product of the lag+1 roots is a), lag 0 for
# a > 2(1 + mu) < 4, and the refresh map for a >= 4 (checked numerically for K <= 80, mu <= 0.999:
# radius >= 1.045), so the first crossing lies inside the grid.


# ----------------------------------------------------------------------------------------------------
# validation and dtype


MAX_LAG = 1000
"""Largest lag of the exact map (steps): its companion matrix has lag + 1 rows (2(lag + 1) for "refresh"), and
their eigenvalues cost O(lag³) — about 10 s at 1000 on 2 CPU cores, minutes at 3000."""


def _static_lag(lag) -> int:
    if not is_concrete(lag):
        raise TypeError("lag must be a static Python int (it sets a matrix shape), got a tracer")
    if np.ndim(lag) != 0:
        raise PgrpoSimError(f"lag must be a scalar integer >= 0, got shape {np.shape(lag)}")
    check_range("lag", lag, 0, MAX_LAG, integer=True)
    return int(lag)


def _validate(learning_rate, momentum, lag, stiffness, lag_model) -> int:
    """Eager checks (no-ops on tracers, except the static `lag` and `lag_model`, and the shapes)."""
    check_shapes(learning_rate=learning_rate, momentum=momentum, stiffness=stiffness)
    STEP_RANGES["learning_rate"].check("learning_rate", learning_rate)
    STEP_RANGES["momentum"].check("momentum", momentum)
    check_range("stiffness", stiffness, 0, low_open=True)
    check_choice("lag_model", lag_model, DISCRETE_LAG_MODELS)
    return _static_lag(lag)


def _arrays(*xs):
    """Lists and tuples become numpy arrays (jit would otherwise treat them as pytrees)."""
    return tuple(np.asarray(x) if isinstance(x, (list, tuple)) else x for x in xs)


def _float_dtype(*xs):
    dtype = jnp.result_type(*xs, 1.0)
    if not jnp.issubdtype(dtype, jnp.floating) or jnp.finfo(dtype).bits < 32:
        dtype = jnp.result_type(jnp.float32, 1.0)  # at least float32 (eig has no float16)
    return dtype


def _ok(learning_rate, momentum, stiffness):
    ok = STEP_RANGES["momentum"].holds(momentum) & in_range(stiffness, 0, low_open=True)
    if learning_rate is not None:
        ok &= STEP_RANGES["learning_rate"].holds(learning_rate)
    return ok


def _default_tol(dtype) -> float:
    return 10.0 * math.sqrt(float(jnp.finfo(dtype).eps))


# ----------------------------------------------------------------------------------------------------
# scalar cores in terms of a = learning_rate * stiffness and mu (all per step)


def companion(a, mu, lag: int):
    """Unchecked companion matrix of e_{n+1} = (1+μ)e_n − μe_{n−1} − a·e_{n−lag} (a = ηK), state
    (e_n, …, e_{n−L}), L = max(lag, 1): the low-level form of `companion_matrix`, traceable in a and μ.

    Args:
        a: per-step force a = ηK; a 0-d JAX array (its dtype is the matrix's); not checked.
        mu: momentum μ; scalar; not checked.
        lag: lag τ in optimiser steps; a static Python int >= 0.

    Returns:
        The (L+1, L+1) companion matrix, dtype of `a`.
    """
    n = max(lag, 1) + 1
    one = jnp.ones((), a.dtype)
    row = jnp.zeros(n, a.dtype).at[0].set((1 + mu) * one).at[1].add(-mu).at[lag].add(-a)
    return jnp.concatenate([row[None], jnp.eye(n - 1, n, dtype=a.dtype)], axis=0)


def _monodromy_ev(a, mu, k: int):
    """One refresh cycle of k steps as a 2x2 map of (e, v = e - e_prev) (avoids rounding 1 + mu)."""
    z = jnp.zeros((), a.dtype)
    one = jnp.ones((), a.dtype)
    # augmented state (e, v, f) with f = e_{n0} frozen: v' = mu v - a f, e' = e + v'
    step = jnp.stack([jnp.stack([one, mu * one, -a]), jnp.stack([z, mu * one, -a]), jnp.stack([z, z, one])])
    embed = jnp.array([[1, 0], [0, 1], [1, 0]], a.dtype)
    return (jnp.linalg.matrix_power(step, k) @ embed)[:2]


_T = np.array([[1.0, 0.0], [1.0, -1.0]])  # (e, e_prev) <-> (e, v); its own inverse


def _monodromy(a, mu, k: int):
    t = jnp.asarray(_T, a.dtype)
    return t @ _monodromy_ev(a, mu, k) @ t


def _safe_sqrt(x, ok):
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, x, 1)), 0)


def _eig2_dominant(m, disc4):
    """Larger-modulus root of z^2 - 2 m z + det with disc4 = m^2 - det, imag >= 0."""
    real = disc4 >= 0
    sgn = jnp.where(m >= 0, 1, -1).astype(m.dtype)
    re = jnp.where(real, m + sgn * _safe_sqrt(disc4, real), m)
    im = _safe_sqrt(-disc4, ~real)
    return jax.lax.complex(re, im)


def _root_and_radius(a, mu, lag: int, lag_model: str):
    """(per-step dominant root with imag >= 0, per-step spectral radius)."""
    if lag_model == "refresh" and lag >= 2:
        (p, q), (r, s) = _monodromy_ev(a, mu, lag)
        lam = _eig2_dominant((p + s) / 2, ((p - s) / 2) ** 2 + q * r)
        mod = jnp.abs(lam)
        radius = mod ** (1.0 / lag)
        theta = jnp.arctan2(jnp.imag(lam), jnp.real(lam)) / lag  # principal branch, in [0, pi/lag]
        return jax.lax.complex(radius * jnp.cos(theta), radius * jnp.sin(theta)), radius
    if lag_model == "refresh" or lag == 0:  # on-policy: z^2 - (1 + mu - a) z + mu
        root = _eig2_dominant((1 + mu - a) / 2, ((1 - mu - a) ** 2 - 4 * a * mu) / 4)
    elif lag == 1:  # z^2 - (1 + mu) z + (mu + a)
        root = _eig2_dominant((1 + mu) / 2, ((1 - mu) ** 2 - 4 * a) / 4)
    else:
        ev = jnp.linalg.eigvals(companion(a, mu, lag))
        root = ev[jnp.argmax(jnp.abs(ev))]
        root = jax.lax.complex(jnp.real(root), jnp.abs(jnp.imag(root)))
        # the roots' moduli multiply to a (the monic polynomial's constant term), so the largest is at least
        # a^(1/(lag+1)); eig loses that when a overflows its balancing (a ~ 1e300 gave radius 1e-62): use the bound
        bound = a ** (1.0 / (lag + 1))
        root = jnp.where(jnp.abs(root) < bound * (1 - 1e-6), jax.lax.complex(bound, jnp.zeros_like(bound)), root)
    return root, jnp.abs(root)


def _regime_code(root, radius, tol):
    code = jnp.where(
        jnp.abs(jnp.imag(root)) > tol * jnp.abs(root),
        OSCILLATORY,
        jnp.where(jnp.real(root) < 0, FLIP, MONOTONE),
    )
    code = jnp.where(radius >= 1, UNSTABLE, code)
    return jnp.where(jnp.isnan(radius), INVALID, code).astype(jnp.int32)


def _radius_excess(a, mu, lag: int, lag_model: str):
    """radius(a, mu) - 1: negative while stable; its root in a is the crossing."""
    return _root_and_radius(a, mu, lag, lag_model)[1] - 1


class _WidthBisection(optx.Bisection):
    """Bisection stopped by the bracket width alone. The slope of the radius in a at the crossing grows as
    1/(1 - mu) (lag 0), so |radius - 1| one ulp of a from the root can be ~1e3 eps: optimistix's extra test
    |f| < atol would tie the step tolerance to that slope."""

    def terminate(self, fn, y, args, options, state, tags):
        del fn, args, options, tags
        return jnp.abs(state.upper - state.lower) < self.atol + self.rtol * jnp.abs(y), optx.RESULTS.successful


def _critical_a(mu, lag: int, lag_model: str):
    """Smallest a = learning_rate*K at which the per-step radius reaches 1 (inf if none below _A_HI, NaN if the
    bisection fails). Differentiable in mu by the implicit function theorem (optimistix `ImplicitAdjoint`)."""
    dtype = mu.dtype
    excess = functools.partial(_radius_excess, lag=lag, lag_model=lag_model)
    grid = jnp.geomspace(_A_LO, _A_HI, _N_GRID, dtype=dtype)
    # the bracket is piecewise constant in mu: no derivative flows through it
    f = jax.vmap(excess, in_axes=(0, None))(grid, jax.lax.stop_gradient(mu))
    # The grid only brackets; a margin of sqrt(eps) keeps rounding noise in the radius (which is
    # 1 - a/(1 - mu) for small a) from faking an early crossing. The bisection then uses r >= 1.
    # The bracket's low end is the last grid point before it with radius strictly below 1.
    unstable = f > math.sqrt(float(jnp.finfo(dtype).eps))
    found = jnp.any(unstable)
    i = jnp.argmax(unstable)
    idx = jnp.arange(_N_GRID)
    j = jnp.max(jnp.where((f < 0) & (idx < i), idx, -1))
    hi = grid[i]
    lo = jnp.where(j >= 0, grid[jnp.maximum(j, 0)], 0)
    # stop once the bracket is under 2 eps |a| wide (a few ulp; adjacent floats always qualify); the atol floor
    # matters only for a bracket from 0
    eps = float(jnp.finfo(dtype).eps)
    solver = _WidthBisection(rtol=2 * eps, atol=_A_LO * eps, flip=False)
    sol = optx.root_find(
        excess,
        solver,
        (lo + hi) / 2,
        mu,
        options=dict(lower=lo, upper=hi),
        max_steps=_MAX_BISECT,
        adjoint=optx.ImplicitAdjoint(),
        throw=False,
    )
    return jnp.where(found, jnp.where(sol.result == optx.RESULTS.successful, sol.value, jnp.nan), jnp.inf)


# ----------------------------------------------------------------------------------------------------
# jitted kernels (one jit per public entry; lag and lag_model static)


def _prepare(learning_rate, momentum, stiffness):
    dtype = _float_dtype(learning_rate, momentum, stiffness)
    learning_rate, momentum, stiffness = (jnp.asarray(x, dtype) for x in (learning_rate, momentum, stiffness))
    ok = _ok(learning_rate, momentum, stiffness)
    # substitute harmless values where invalid so no NaN reaches eig or the gradients
    a = jnp.where(ok, learning_rate * stiffness, 0.1)
    mu = jnp.where(ok, momentum, 0)
    return a, mu, ok


@functools.partial(jax.jit, static_argnames=("lag", "lag_model"))
def _root_radius_kernel(learning_rate, momentum, stiffness, lag, lag_model):
    a, mu, ok = _prepare(learning_rate, momentum, stiffness)
    core = jnp.vectorize(lambda a, m: _root_and_radius(a, m, lag, lag_model))
    root, radius = core(a, mu)
    return nan_unless(ok, root), nan_unless(ok, radius)


@functools.partial(jax.jit, static_argnames=("lag", "lag_model"))
def _regime_kernel(learning_rate, momentum, stiffness, tol, lag, lag_model):
    root, radius = _root_radius_kernel(learning_rate, momentum, stiffness, lag, lag_model)
    if tol is None:
        tol = _default_tol(radius.dtype)
    return _regime_code(root, radius, jnp.asarray(tol, radius.dtype))


@functools.partial(jax.jit, static_argnames=("lag", "lag_model"))
def _matrix_kernel(learning_rate, momentum, stiffness, lag, lag_model):
    a, mu, ok = _prepare(learning_rate, momentum, stiffness)
    if lag_model == "stale":
        n = max(lag, 1) + 1
        core = jnp.vectorize(lambda a, m: companion(a, m, lag), signature=f"(),()->({n},{n})")
    else:
        k = max(lag, 1)
        core = jnp.vectorize(lambda a, m: _monodromy(a, m, k), signature="(),()->(2,2)")
    return nan_unless(ok[..., None, None], core(a, mu))


@functools.partial(jax.jit, static_argnames=("lag", "lag_model"))
def _critical_eta_kernel(momentum, stiffness, lag, lag_model):
    dtype = _float_dtype(momentum, stiffness)
    momentum, stiffness = jnp.asarray(momentum, dtype), jnp.asarray(stiffness, dtype)
    ok = _ok(None, momentum, stiffness)
    mu = jnp.where(ok, momentum, 0)
    k = jnp.where(ok, stiffness, 1)
    a_crit = jnp.vectorize(lambda m: _critical_a(m, lag, lag_model))(mu)
    return nan_unless(ok, a_crit / k)


# ----------------------------------------------------------------------------------------------------
# public API


def companion_matrix(learning_rate: ArrayLike, momentum: ArrayLike, lag: int, stiffness: ArrayLike) -> Array:
    """Companion matrix of the stale-lag recursion, shape (..., L+1, L+1), L = max(lag, 1).

    Acts on the state (e_n, e_{n-1}, ..., e_{n-L}); first row holds 1+mu, -mu and -eta*stiffness
    (at column ``lag``). Its eigenvalues are the per-step multipliers. Heavy ball: Polyak (1964);
    delay: Levin & May (1976).

    Args:
        learning_rate: η, per optimiser step; scalar or array, broadcasting with momentum and stiffness; > 0.
        momentum: heavy-ball momentum μ; scalar or array (broadcasts); in [0, 1).
        lag: constant lag τ, in optimiser steps; a static Python int in [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η (a = ηK is the per-step force); scalar or array (broadcasts); > 0.

    Returns:
        Matrices of shape (..., L+1, L+1), with ... the broadcast shape of learning_rate, momentum and stiffness, in the
            inputs' float dtype (at least float32); NaN where an input is invalid under a transformation.

    Raises:
        PgrpoSimError: eagerly, if a value is non-finite or out of range, the shapes do not broadcast, or `lag` is not
            a scalar integer in [0, `MAX_LAG`].
        TypeError: if `lag` is a tracer.
    """
    learning_rate, momentum, stiffness = _arrays(learning_rate, momentum, stiffness)
    lag = _validate(learning_rate, momentum, lag, stiffness, "stale")
    return _matrix_kernel(learning_rate, momentum, stiffness, lag, "stale")


def monodromy_matrix(learning_rate: ArrayLike, momentum: ArrayLike, lag: int, stiffness: ArrayLike) -> Array:
    """One-cycle (monodromy) map of the refresh model, shape (..., 2, 2).

    Maps (e_{n0}, e_{n0-1}) to (e_{n0+K}, e_{n0+K-1}) over one refresh cycle of K = max(lag, 1) steps
    during which the force -eta*stiffness*e_{n0} is frozen (lag 0 and 1: refresh every step).
    Its eigenvalues are multipliers per cycle (Floquet multipliers).

    Args:
        learning_rate: η, per optimiser step; scalar or array, broadcasting with momentum and stiffness; > 0.
        momentum: heavy-ball momentum μ; scalar or array (broadcasts); in [0, 1).
        lag: refresh period K_ref, in optimiser steps; a static Python int in [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η (a = ηK is the per-step force); scalar or array (broadcasts); > 0.

    Returns:
        Matrices of shape (..., 2, 2), with ... the broadcast shape of learning_rate, momentum and stiffness, in the
            inputs' float dtype (at least float32); NaN where an input is invalid under a transformation.

    Raises:
        PgrpoSimError: eagerly, if a value is non-finite or out of range, the shapes do not broadcast, or `lag` is not
            a scalar integer in [0, `MAX_LAG`].
        TypeError: if `lag` is a tracer.
    """
    learning_rate, momentum, stiffness = _arrays(learning_rate, momentum, stiffness)
    lag = _validate(learning_rate, momentum, lag, stiffness, "refresh")
    return _matrix_kernel(learning_rate, momentum, stiffness, lag, "refresh")


def spectral_radius(
    learning_rate: ArrayLike, momentum: ArrayLike, lag: int, stiffness: ArrayLike, lag_model: str = "stale"
) -> Array:
    """Largest modulus of the per-step multipliers (|e_n| ~ radius^n); < 1 means stable.

    For ``lag_model="refresh"`` this is max|lambda|^(1/K) over the monodromy eigenvalues lambda.
    Heavy ball: Polyak (1964); delay: Levin & May (1976).

    Args:
        learning_rate: η, per optimiser step; scalar or array, broadcasting with momentum and stiffness; > 0.
        momentum: heavy-ball momentum μ; scalar or array (broadcasts); in [0, 1).
        lag: constant lag τ ("stale") or refresh period K_ref ("refresh"), in optimiser steps; a static Python int in
            [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η (a = ηK is the per-step force); scalar or array (broadcasts); > 0.
        lag_model: "stale" or "refresh" (`DISCRETE_LAG_MODELS`); static.

    Returns:
        The radius per optimiser step (>= 0), of the broadcast shape of learning_rate, momentum and stiffness,
            in the inputs' float dtype (at least float32); NaN where an input is invalid under a transformation.

    Raises:
        PgrpoSimError: eagerly, if a value is non-finite or out of range, the shapes do not broadcast, `lag` is not a
            scalar integer in [0, `MAX_LAG`] or `lag_model` is unknown.
        TypeError: if `lag` is a tracer.
    """
    learning_rate, momentum, stiffness = _arrays(learning_rate, momentum, stiffness)
    lag = _validate(learning_rate, momentum, lag, stiffness, lag_model)
    return _root_radius_kernel(learning_rate, momentum, stiffness, lag, lag_model)[1]


def dominant_root(
    learning_rate: ArrayLike, momentum: ArrayLike, lag: int, stiffness: ArrayLike, lag_model: str = "stale"
) -> Array:
    """Per-step multiplier of largest modulus (complex; of a conjugate pair, the one with imag >= 0).

    ``log(root)`` is the per-step exponent comparable with the continuous eigenvalue s. For
    ``"refresh"`` it is lambda^(1/K) (principal branch) of the dominant monodromy eigenvalue, so a
    negative lambda at K >= 2 reads as an oscillation of period 2K steps.

    Args:
        learning_rate: η, per optimiser step; scalar or array, broadcasting with momentum and stiffness; > 0.
        momentum: heavy-ball momentum μ; scalar or array (broadcasts); in [0, 1).
        lag: constant lag τ ("stale") or refresh period K_ref ("refresh"), in optimiser steps; a static Python int in
            [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η (a = ηK is the per-step force); scalar or array (broadcasts); > 0.
        lag_model: "stale" or "refresh" (`DISCRETE_LAG_MODELS`); static.

    Returns:
        The root per optimiser step, complex (complex64, or complex128 for float64 inputs), of the broadcast shape
            of learning_rate, momentum and stiffness; NaN where an input is invalid under a transformation.

    Raises:
        PgrpoSimError: eagerly, if a value is non-finite or out of range, the shapes do not broadcast, `lag` is not a
            scalar integer in [0, `MAX_LAG`] or `lag_model` is unknown.
        TypeError: if `lag` is a tracer.
    """
    learning_rate, momentum, stiffness = _arrays(learning_rate, momentum, stiffness)
    lag = _validate(learning_rate, momentum, lag, stiffness, lag_model)
    return _root_radius_kernel(learning_rate, momentum, stiffness, lag, lag_model)[0]


def discrete_regime_code(
    learning_rate: ArrayLike,
    momentum: ArrayLike,
    lag: int,
    stiffness: ArrayLike,
    lag_model: str = "stale",
    tol: float | None = None,
) -> Array:
    """Integer regime code (index into `DISCRETE_REGIMES`); jit-compatible; -1 where input invalid.

    UNSTABLE if the radius is >= 1; else OSCILLATORY if the dominant root has
    |imag| > tol * |root|; else FLIP if its real part is negative (period-2 alternation); else
    MONOTONE. ``tol`` defaults to 10 * sqrt(eps) of the dtype (1.5e-7 in float64, 3.5e-3 in
    float32): eigenvalues at a near-double root are only determined to ~sqrt(eps), so complex
    roots closer to the real axis than this count as real.

    Args:
        learning_rate: η, per optimiser step; scalar or array, broadcasting with momentum and stiffness; > 0.
        momentum: heavy-ball momentum μ; scalar or array (broadcasts); in [0, 1).
        lag: constant lag τ ("stale") or refresh period K_ref ("refresh"), in optimiser steps; a static Python int in
            [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η (a = ηK is the per-step force); scalar or array (broadcasts); > 0.
        lag_model: "stale" or "refresh" (`DISCRETE_LAG_MODELS`); static.
        tol: relative tolerance |imag| <= tol·|root| under which a root counts as real; >= 0; None: the default.

    Returns:
        int32 `base.regimes.Regime` codes in {−1, 0, 1, 2, 3}, of the broadcast shape of learning_rate, momentum and
            stiffness; −1 (`INVALID`) where an input is invalid under a transformation.

    Raises:
        PgrpoSimError: eagerly, if a value is non-finite or out of range, the shapes do not broadcast, `lag` is not a
            scalar integer in [0, `MAX_LAG`], `lag_model` is unknown or tol < 0.
        TypeError: if `lag` is a tracer.
    """
    learning_rate, momentum, stiffness = _arrays(learning_rate, momentum, stiffness)
    lag = _validate(learning_rate, momentum, lag, stiffness, lag_model)
    if tol is not None:
        check_range("tol", tol, 0)
    return _regime_kernel(learning_rate, momentum, stiffness, tol, lag, lag_model)


def discrete_regime(
    learning_rate: ArrayLike,
    momentum: ArrayLike,
    lag: int,
    stiffness: ArrayLike,
    lag_model: str = "stale",
    tol: float | None = None,
) -> str | np.ndarray:
    """Regime name: "monotone", "oscillatory", "flip" (negative real root) or "unstable".

    Host function (not jittable; use `discrete_regime_code` under jit). Returns a ``str`` for scalar
    inputs and a numpy array of ``str`` otherwise. See `discrete_regime_code` for ``tol``.

    Args:
        learning_rate: η, per optimiser step; scalar or array, broadcasting with momentum and stiffness; > 0.
        momentum: heavy-ball momentum μ; scalar or array (broadcasts); in [0, 1).
        lag: constant lag τ ("stale") or refresh period K_ref ("refresh"), in optimiser steps; a static Python int in
            [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η (a = ηK is the per-step force); scalar or array (broadcasts); > 0.
        lag_model: "stale" or "refresh" (`DISCRETE_LAG_MODELS`); static.
        tol: relative tolerance |imag| <= tol·|root| under which a root counts as real; >= 0; None: the default.

    Returns:
        A `str` for scalar inputs, else a numpy array of `str` of the broadcast shape of learning_rate, momentum and
        stiffness.

    Raises:
        PgrpoSimError: if a value is non-finite or out of range, the shapes do not broadcast, `lag` is not a scalar
            integer in [0, `MAX_LAG`], `lag_model` is unknown or tol < 0.
        TypeError: if an argument is a tracer.
    """
    learning_rate, momentum, stiffness = _arrays(learning_rate, momentum, stiffness)
    if not is_concrete(learning_rate, momentum, stiffness, tol):
        raise TypeError("discrete_regime returns strings and cannot be traced; use discrete_regime_code")
    code = np.asarray(discrete_regime_code(learning_rate, momentum, lag, stiffness, lag_model, tol))
    names = np.array((*DISCRETE_REGIMES, "invalid"))[code]  # code -1 -> "invalid"
    return str(names) if names.ndim == 0 else names


def critical_eta(momentum: ArrayLike, lag: int, stiffness: ArrayLike, lag_model: str = "stale") -> Array:
    """Learning rate at which the per-step radius first reaches 1 as learning_rate grows from 0.

    Returns a_crit / stiffness, where a_crit = (learning_rate*stiffness)_crit is found by a 96-point log grid
    in a over [1e-8, 5] that brackets the first unstable point, then bisection (``optimistix.root_find``)
    to a few ulp. A stable window narrower than one grid cell (~23 % in a) would be missed; none is
    known for these maps. ``inf`` if no crossing below a = 5 (does not happen for valid inputs); NaN
    if the bisection fails. Differentiable in momentum and stiffness (implicit function theorem at the
    crossing, ``optimistix.ImplicitAdjoint``).
    Known values: lag 0 -> 2(1+mu)/K (Polyak 1964); mu = 0 stale -> 2 sin(pi/(2(2 lag+1)))/K
    (Levin & May 1976).

    Args:
        momentum: heavy-ball momentum μ; scalar or array, broadcasting with stiffness; in [0, 1).
        lag: constant lag τ ("stale") or refresh period K_ref ("refresh"), in optimiser steps; a static Python int in
            [0, `MAX_LAG`].
        stiffness: stiffness K, per unit η; scalar or array (broadcasts); > 0.
        lag_model: "stale" or "refresh" (`DISCRETE_LAG_MODELS`); static.

    Returns:
        η_crit (per optimiser step, > 0; inf or NaN as above), of the broadcast shape of momentum and stiffness,
            in the inputs' float dtype (at least float32); NaN where an input is invalid under a transformation.

    Raises:
        PgrpoSimError: eagerly, if a value is non-finite or out of range, the shapes do not broadcast, `lag` is not a
            scalar integer in [0, `MAX_LAG`] or `lag_model` is unknown.
        TypeError: if `lag` is a tracer.
    """
    momentum, stiffness = _arrays(momentum, stiffness)
    lag = _validate(None, momentum, lag, stiffness, lag_model)
    return _critical_eta_kernel(momentum, stiffness, lag, lag_model)
