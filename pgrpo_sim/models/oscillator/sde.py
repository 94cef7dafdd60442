"""The reduced stochastic oscillator M ë + C ė + K e = √(D/G) ξ(t), solved with diffrax.

State y = (e, ė); drift (ė, −(C ė + K e)/M), additive noise √(D/G)/M on ė. Time in optimiser steps,
saved at the requested times (e.g. the bandit's integer steps) so curves compare 1:1.

- `solve_deterministic`: the noise-free ODE with an adaptive 5th-order solver (Tsit5), differentiable
  by `RecursiveCheckpointAdjoint` (diffrax's default).
- `solve_ensemble`: many paths in one solve, fixed steps `dt`: the state holds e and ė of all paths
  (each of shape (paths,)), driven by one Brownian path of shape (paths,), so that every step draws
  one block of normals for the whole ensemble; the noise term maps it elementwise onto ė (no
  paths × paths matrix). Solvers: "euler" (Euler–Maruyama; strong order 1 for additive noise),
  "shark" and "sra1" (strong order 1.5 for additive noise; need space-time Lévy area). Brownian
  paths: "unsafe" (`BlockBrownianPath`, diffrax's `UnsafeBrownianPath` idea with a fused hash: one
  fresh block of draws per step, the fast choice for ensembles) or "tree" (`VirtualBrownianTree`:
  the same path at every resolution, for convergence studies and pathwise gradients). Only e at the
  requested times is stored: memory paths × len(ts).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ...base import threefry as _random
from ...base.checks import as_float, as_key, check_choice, check_range, is_concrete
from ...base.errors import PgrpoSimError
from . import theory

SOLVERS = {"euler": diffrax.Euler, "shark": diffrax.ShARK, "sra1": diffrax.SRA1}
BROWNIAN = ("unsafe", "tree")


class Ensemble(NamedTuple):
    """Paths e(t) of shape (paths, len(ts)) with their mean and standard deviation over paths.

    All fields have the float dtype of `ts`.

    Attributes:
        ts: the save times (optimiser steps), shape (T,), T = len(ts).
        paths: e(t) of every path (reward units), shape (paths, T); all NaN if the solve failed.
        mean: mean of e over the paths, shape (T,).
        std: standard deviation of e over the paths (ddof 0), shape (T,).
    """

    ts: Array
    paths: Array
    mean: Array
    std: Array


def _drift(t, y, args):
    """(ė, ë) with ë = −(C ė + K e)/M; args = (M, C, K). Module-level so diffrax caches it."""
    m, c, k = args
    e, v = y[..., 0], y[..., 1]
    return jnp.stack([v, -(c * v + k * e) / m], axis=-1)


def _times(ts: ArrayLike) -> Array:
    ts = as_float(ts)
    if ts.ndim != 1 or ts.size < 1:
        raise PgrpoSimError(f"ts must be a non-empty 1-D array of times, got shape {ts.shape}")
    check_range("ts", ts)
    if is_concrete(ts) and np.any(np.diff(np.asarray(ts)) < 0):
        raise PgrpoSimError("ts must be non-decreasing (the times to save at, in steps)")
    return ts


def _failed_as_nan(sol: diffrax.Solution) -> Array:
    """`sol.ys`, NaN where the solve failed (diverged to non-finite values, or ran out of `max_steps`): diffrax
    fills a failed solve with inf, from t0 on, and `throw=False` keeps the solve traceable."""
    assert sol.ys is not None, "the solves here save at ts"
    return jnp.where(sol.result == diffrax.RESULTS.successful, sol.ys, jnp.nan)


def solve_deterministic(
    ts: ArrayLike,
    e0: ArrayLike,
    v0: ArrayLike,
    learning_rate: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike,
    stiffness: ArrayLike,
    *,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> Array:
    """e(t) at `ts` (steps, starting at ts[0]) of the noise-free oscillator, by Tsit5 with adaptive steps.

    Differentiable in all arguments (reverse mode through `RecursiveCheckpointAdjoint`).

    Args:
        ts: save times (optimiser steps), shape (T,); finite, non-decreasing; the solve runs from ts[0] to ts[-1].
        e0: initial deviation e(ts[0]) (reward units); scalar or array, finite; with v0 it sets the batch shape S.
        v0: initial velocity ė(ts[0]) (reward per step); finite; broadcasts with e0.
        learning_rate: learning rate η, per optimiser step; > 0; scalar or any shape broadcasting to S.
        momentum: heavy-ball momentum μ; in [0, 1); scalar or broadcasting to S.
        lag: off-policy lag τ (optimiser steps, continuous); >= 0; scalar or broadcasting to S.
        stiffness: stiffness K, per unit η; > 0; scalar or broadcasting to S.
        rtol: relative tolerance of the adaptive step-size controller; > 0.
        atol: absolute tolerance of the controller (reward units); > 0.

    Returns:
        e at `ts` (reward units), shape (T, *S), in the float dtype of `ts`; all NaN if the solve failed (non-finite
            values, or more than 10⁶ steps) or, under a transformation, an input is invalid.

    Raises:
        PgrpoSimError: eagerly, if `ts` is not a non-empty, finite, non-decreasing 1-D array, e0 or v0 is non-finite,
            rtol or atol <= 0, or η, μ, τ, K is out of range (`theory.coefficients`).
    """
    check_range("rtol", rtol, 0.0, low_open=True)
    check_range("atol", atol, 0.0, low_open=True)
    check_range("e0", e0)
    check_range("v0", v0)
    ts = _times(ts)
    coef = theory.coefficients(learning_rate, momentum, lag, stiffness)
    y0 = jnp.stack(jnp.broadcast_arrays(as_float(e0), as_float(v0)), axis=-1).astype(ts.dtype)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_drift),
        diffrax.Tsit5(),
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=y0,
        args=tuple(coef),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=1_000_000,
        throw=False,
    )
    return _failed_as_nan(sol)[..., 0]


def fused_normals(key: Array, shape: tuple[int, ...], dtype) -> Array:
    """Standard normals √2·erf⁻¹(2u − 1) (as `jax.random.normal`) of uniforms u from `_random.uniform`.

    `_random.uniform` writes the Threefry hash out in jnp, so XLA fuses hash, transform and their use
    into one kernel; `jax.random.normal` on CPU lowers the hash as a rolled loop, several small kernels
    a call, each split over threads on its own: for a block of 10^4 a step, those launches and
    synchronisations cost more than the arithmetic, most of all on a busy machine.

    Args:
        key: JAX PRNG key (`jax.random.key` or raw uint32 key data); non-Threefry keys use `jax.random.uniform`.
        shape: output shape; a static tuple of ints.
        dtype: float dtype of the output (float32 or float64).

    Returns:
        Standard normal draws of `shape` and `dtype`, all finite (u = 0 is moved just inside erf⁻¹'s domain).
    """
    u = _random.uniform(key, shape, dtype)
    lo = jnp.nextafter(jnp.asarray(-1, dtype), jnp.asarray(1, dtype))  # excludes erf⁻¹(−1) = −∞
    return jnp.sqrt(jnp.asarray(2, dtype)) * jax.lax.erf_inv(jnp.maximum(lo, 2 * u - 1))


class BlockBrownianPath(diffrax.AbstractBrownianPath):
    """Independent Brownian increments over each interval, for a fixed-step, forward-mode solve.

    As diffrax's `UnsafeBrownianPath` (normals keyed by the interval's end points, no correlation
    between overlapping intervals: valid only for fixed steps and no reverse-mode differentiation),
    for one array of shape (paths,): an interval draws one block of `paths` normals (and a second for
    the space-time Lévy area H), keyed by all bits of both times (float64 times are not rounded to
    float32 first), with `fused_normals`' fused hash.

    Attributes:
        shape: shape and float dtype of W (`jax.ShapeDtypeStruct`; (paths,) in `solve_ensemble`); static.
        levy_area: `diffrax.BrownianIncrement` or `diffrax.SpaceTimeLevyArea` (the class): what `evaluate` returns
            with `use_levy=True`; static.
        key: JAX PRNG key of the path.
    """

    shape: jax.ShapeDtypeStruct = eqx.field(static=True)
    levy_area: type = eqx.field(static=True)
    key: Array

    @property
    def t0(self):
        """−inf: the path is defined at every time."""
        return -jnp.inf

    @property
    def t1(self):
        """+inf: the path is defined at every time."""
        return jnp.inf

    def evaluate(self, t0, t1=None, left: bool = True, use_levy: bool = False):
        """The increment W(t1) − W(t0), drawn afresh for each interval (diffrax's `AbstractBrownianPath` interface).

        Args:
            t0: start of the interval (optimiser steps); with `t1` None, its end, the interval being [0, t0].
            t1: end of the interval (optimiser steps), >= t0; or None.
            left: ignored (the path has no jumps).
            use_levy: return a `levy_area` object instead of the bare increment.

        Returns:
            W, shape `shape.shape`, N(0, t1 − t0) per element, in `shape.dtype`; with `use_levy`, a
                `diffrax.BrownianIncrement(dt, W)` or `diffrax.SpaceTimeLevyArea(dt, W, H)`, H ~ N(0, (t1 − t0)/12).
        """
        del left
        dtype = self.shape.dtype
        if t1 is None:  # W(t0) − W(0), as diffrax's paths
            t0, t1 = 0.0, t0
        t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
        key = self.key
        for t in (t0, t1):  # one 32-bit word of a float32 time, two of a float64 one
            for word in jax.lax.bitcast_convert_type(t, jnp.uint32).reshape(-1):
                key = jax.random.fold_in(key, word)
        levy = self.levy_area is diffrax.SpaceTimeLevyArea
        z = fused_normals(key, (2 if levy else 1, *self.shape.shape), dtype)
        h = t1 - t0
        w = z[0] * jnp.sqrt(h)
        if not use_levy:
            return w
        if levy:
            return diffrax.SpaceTimeLevyArea(dt=h, W=w, H=z[1] * jnp.sqrt(h / 12))
        return diffrax.BrownianIncrement(dt=h, W=w)


class _Kick(diffrax.AbstractTerm):
    """Additive noise on ė only: d(e, ė) = (0, s dW) for a Brownian path W of the paths' shape.

    The control is one Brownian path whose value is a vector over all paths, so that a step draws
    one block of normals for the whole ensemble; `prod` is elementwise (no paths × paths matrix).
    The vector field is the scale s, independent of y (the noise is additive, as ShARK/SRA1 need).
    """

    control: diffrax.AbstractBrownianPath

    def vf(self, t, y, args):
        return args[-1]

    def contr(self, t0, t1, **kwargs):
        return self.control.evaluate(t0, t1, **kwargs)

    def prod(self, vf, control):
        return jnp.zeros_like(control), vf * control


def _drift_paths(t, y, args):
    """(ė, ë) for the state (e, ė) of all paths, each of shape (paths,); args = (C/M, K/M, scale)."""
    c_m, k_m, _ = args
    e, v = y
    return v, -(c_m * v + k_m * e)


def _save_e(t, y, args):
    return y[0]


def euler_step_limit(
    learning_rate: float, momentum: float, lag: float, stiffness: float, span: float, *, tolerance: float = 0.1
) -> float:
    """The largest step 2^−k ≤ 1 (optimiser steps) at which Euler's one-step map 1 + dt·λ reproduces, for each
    eigenvalue λ of the noise-free oscillator, the exact decay rate Re λ and frequency Im λ to within
    `tolerance` of themselves (or of 1/`span`, whichever is larger: rate errors below 1/span barely act over
    the run); a mode that decays within one optimiser step (Re λ ≤ −1) must only decay (|1 + dt·λ| < 1), its
    error is invisible at the output spacing. A larger step does not resolve the dynamics: Euler–Maruyama then
    gives a wrong trajectory. Concrete inputs only (host-side).

    Args:
        learning_rate: learning rate η, per optimiser step; a concrete scalar > 0.
        momentum: heavy-ball momentum μ; a concrete scalar in [0, 1).
        lag: off-policy lag τ (optimiser steps, continuous); a concrete scalar >= 0.
        stiffness: stiffness K, per unit η; a concrete scalar > 0.
        span: length of the run (optimiser steps); > 0.
        tolerance: allowed relative error of each eigenvalue's rate and frequency; > 0.

    Returns:
        The step dt = 2^−k (optimiser steps), k in 0 … 30, as a Python float; 0.0 if even 2^−30 does not qualify.

    Raises:
        PgrpoSimError: if η, μ, τ or K is non-finite or out of range, or span or tolerance <= 0 or non-finite.
    """
    m, c, k = (float(x) for x in theory.coefficients(learning_rate, momentum, lag, stiffness))
    check_range("span", span, 0.0, low_open=True)
    check_range("tolerance", tolerance, 0.0, low_open=True)
    roots = np.roots([m, c, k])
    floor = 1.0 / span
    for power in range(0, 31):
        dt = 2.0**-power
        amp = 1 + dt * roots
        rate, freq = np.log(np.abs(amp)) / dt, np.angle(amp) / dt
        ok_rate = np.abs(rate - roots.real) <= tolerance * np.maximum(np.abs(roots.real), floor)
        ok_freq = np.abs(freq - roots.imag) <= tolerance * np.maximum(np.abs(roots.imag), floor)
        fast = (roots.real <= -1) & (np.abs(amp) < 1)
        if np.all((ok_rate & ok_freq) | fast):
            return dt
    return 0.0


def solve_ensemble(
    ts: ArrayLike,
    e0: ArrayLike,
    v0: ArrayLike,
    learning_rate: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike,
    stiffness: ArrayLike,
    noise: ArrayLike,
    num_generations: ArrayLike,
    *,
    paths: int = 1000,
    key: Array | None = None,
    dt: float = 0.25,
    solver: str = "euler",
    brownian: str = "unsafe",
    tree_tol: float | None = None,
) -> Ensemble:
    """`paths` independent solutions of M ë + C ė + K e = √(D/G) ξ saved at `ts` (steps), from (e0, v0).

    Fixed step `dt` (steps; choose it so that the saved times are multiples of it). All paths are
    solved together in one `diffeqsolve`: the state is (e, ė) with each component of shape (paths,),
    driven by one Brownian path of shape (paths,) made from `key` (a JAX PRNG key or an int seed); with
    "unsafe", each step draws one block of `paths` normals (two blocks with "shark"/"sra1": the increment and
    the space-time Lévy area). The paths are independent and share only the parameters. The same arguments (`key`,
    `paths`, `ts`, `dt`, `solver`, `brownian`, `tree_tol`, dtype) give the same paths; an ensemble is
    not a prefix of a larger one from the same key. `tree_tol` (default dt/4) is the resolution of
    the "tree" Brownian path: keep it fixed across step sizes and every `dt` samples the same path.

    Args:
        ts: save times (optimiser steps), shape (T,); finite, non-decreasing; concrete, as is `dt` (they size the
            solve on the host, so `solve_ensemble` is not jittable).
        e0: initial deviation e(ts[0]) (reward units); finite; scalar, or shape (paths,) for one value per path.
        v0: initial velocity ė(ts[0]) (reward per step); finite; scalar or shape (paths,).
        learning_rate: learning rate η, per optimiser step; > 0; scalar or shape (paths,).
        momentum: heavy-ball momentum μ; in [0, 1); scalar or shape (paths,).
        lag: off-policy lag τ (optimiser steps, continuous); >= 0; scalar or shape (paths,).
        stiffness: stiffness K, per unit η; > 0; scalar or shape (paths,).
        noise: diffusion D, G times the per-step variance of Δe/η (reward² per unit η²); >= 0; scalar or (paths,).
        num_generations: group size G (the noise amplitude is √(D/G)); >= 2; scalar or shape (paths,).
        paths: number of independent paths; an integer >= 1 (static: each value compiles its own program).
        key: JAX PRNG key or int seed in [0, 2³² − 1]; None: seed 0.
        dt: fixed step (optimiser steps); a concrete number > 0.
        solver: "euler", "shark" or "sra1" (`SOLVERS`).
        brownian: "unsafe" (`BlockBrownianPath`; differentiable in forward mode only, `jax.jvp`) or "tree"
            (`diffrax.VirtualBrownianTree`; reverse mode only, `jax.grad`).
        tree_tol: resolution of the "tree" path (optimiser steps), > 0; None: dt/4; ignored by "unsafe".

    Returns:
        `Ensemble` (ts (T,), paths (paths, T), mean and std (T,)) in the float dtype of `ts`; every path is NaN if the
            solve failed (non-finite values, or too many steps) or, under a transformation, a parameter is invalid.

    Raises:
        PgrpoSimError: eagerly, if paths is not an integer >= 1, dt or tree_tol <= 0, noise < 0, num_generations < 2,
            solver or brownian is unknown, e0 or v0 is non-finite, `ts` is not a non-empty, finite, non-decreasing
            1-D array, key is neither a PRNG key nor a valid seed, or η, μ, τ, K is out of range.
    """
    check_range("paths", paths, 1, integer=True)
    check_range("dt", dt, 0.0, low_open=True)
    check_range("noise", noise, 0.0)
    check_range("num_generations", num_generations, 2.0)
    check_choice("solver", solver, tuple(SOLVERS))
    check_choice("brownian", brownian, BROWNIAN)
    check_range("tree_tol", tree_tol, 0.0, low_open=True)
    check_range("e0", e0)
    check_range("v0", v0)
    ts = _times(ts)
    coef = theory.coefficients(learning_rate, momentum, lag, stiffness)
    scale = jnp.sqrt(as_float(noise) / as_float(num_generations)) / coef.mass
    rates = tuple(jnp.asarray(x, ts.dtype) for x in (coef.damping / coef.mass, coef.stiffness / coef.mass, scale))
    y0 = tuple(jnp.asarray(x, ts.dtype) for x in (as_float(e0), as_float(v0)))
    key = as_key(0 if key is None else key)
    # a power of two (at least 4096) so that nearby step sizes share one compilation
    max_steps = max(4096, 1 << math.ceil(math.log2(math.ceil(float(ts[-1] - ts[0]) / dt) + 1)))
    # static: a "tree" compiles once per resolution; "unsafe" ignores it, so one compilation serves all dt
    tol = None if brownian == "unsafe" else float(dt / 4 if tree_tol is None else tree_tol)
    dt_arr = jnp.asarray(dt, ts.dtype)
    ys = _ensemble(rates, ts, y0, key, dt_arr, int(paths), tol, max_steps, solver, brownian)
    return Ensemble(ts=ts, paths=ys, mean=ys.mean(0), std=ys.std(0))


@functools.partial(jax.jit, static_argnames=("paths", "tol", "max_steps", "solver", "brownian"))
def _ensemble(rates, ts, y0, key, dt, paths, tol, max_steps, solver, brownian):
    """e of all paths at `ts`, shape (paths, len(ts)): one `diffeqsolve` over the whole ensemble."""
    t0, t1 = ts[0], ts[-1]
    shape = jax.ShapeDtypeStruct((paths,), ts.dtype)
    levy = diffrax.SpaceTimeLevyArea if solver in ("shark", "sra1") else diffrax.BrownianIncrement
    if brownian == "tree":
        bm = diffrax.VirtualBrownianTree(t0, t1, tol=tol, shape=shape, key=key, levy_area=levy)
    else:
        bm = BlockBrownianPath(shape=shape, levy_area=levy, key=key)
    # the tree draws with `jax.random`: by JAX's original threefry scheme, one hash per two normals (the
    # partitionable default hashes once per normal; one device, nothing to partition), and then the same
    # whatever the global `jax_threefry_partitionable` setting (the block path does not depend on it)
    with jax.threefry_partitionable(False):
        sol = diffrax.diffeqsolve(
            diffrax.MultiTerm(diffrax.ODETerm(_drift_paths), _Kick(bm)),
            SOLVERS[solver](),
            t0=t0,
            t1=t1,
            dt0=dt,
            y0=tuple(jnp.full((paths,), y) for y in y0),
            args=rates,
            saveat=diffrax.SaveAt(ts=ts, fn=_save_e),
            stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=max_steps,
            adjoint=diffrax.ForwardMode() if brownian == "unsafe" else diffrax.RecursiveCheckpointAdjoint(),
            throw=False,
        )
    return _failed_as_nan(sol).T
