"""The reduced stochastic oscillator M ë + C ė + K e = √(D/G) ξ(t), solved with diffrax.

State y = (e, ė); drift (ė, −(C ė + K e)/M), additive noise √(D/G)/M on ė. Time in optimiser steps,
saved at the requested times (e.g. the bandit's integer steps) so curves compare 1:1.

- `solve_deterministic`: the noise-free ODE with an adaptive 5th-order solver (Tsit5), differentiable
  by `RecursiveCheckpointAdjoint` (diffrax's default).
- `solve_ensemble`: many paths, one Brownian path per path (vmapped over keys), fixed steps `dt`,
  `MultiTerm(ODETerm, ControlTerm)`. Solvers: "euler" (Euler–Maruyama; strong order 1 for additive
  noise), "shark" and "sra1" (strong order 1.5 for additive noise; need space-time Lévy area).
  Brownian paths: "unsafe" (`UnsafeBrownianPath`, one draw per step: the fast choice for ensembles) or
  "tree" (`VirtualBrownianTree`: the same path at every resolution, for convergence studies and
  pathwise gradients). Only the requested times are stored, so memory is paths × len(ts).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

from . import theory
from ._checks import as_float, check_choice, check_range

SOLVERS = {"euler": diffrax.Euler, "shark": diffrax.ShARK, "sra1": diffrax.SRA1}
BROWNIAN = ("unsafe", "tree")


class Ensemble(NamedTuple):
    """Paths e(t) of shape (paths, len(ts)) with their mean and standard deviation over paths."""

    ts: Array
    paths: Array
    mean: Array
    std: Array


def _drift(t, y, args):
    """(ė, ë) with ë = −(C ė + K e)/M; args = (M, C, K, noise scale). Module-level so diffrax caches it."""
    m, c, k, _ = args
    e, v = y[..., 0], y[..., 1]
    return jnp.stack([v, -(c * v + k * e) / m], axis=-1)


def _diffusion(t, y, args):
    """Additive noise √(D/G)/M on ė only."""
    scale = args[-1]
    return jnp.stack([jnp.zeros_like(scale), scale])


def _times(ts: ArrayLike) -> Array:
    ts = as_float(ts)
    if ts.ndim != 1 or ts.size < 1:
        raise ValueError(f"ts must be a non-empty 1-D array of times, got shape {ts.shape}")
    return ts


def solve_deterministic(
    ts: ArrayLike,
    e0: ArrayLike,
    v0: ArrayLike,
    eta: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike,
    stiffness: ArrayLike,
    *,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> Array:
    """e(t) at `ts` (steps, starting at ts[0]) of the noise-free oscillator, by Tsit5 with adaptive steps.

    Differentiable in all arguments (reverse mode through `RecursiveCheckpointAdjoint`).
    """
    ts = _times(ts)
    coef = theory.coefficients(eta, momentum, lag, stiffness)
    y0 = jnp.stack(jnp.broadcast_arrays(as_float(e0), as_float(v0)), axis=-1).astype(ts.dtype)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_drift),
        diffrax.Tsit5(),
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=y0,
        args=(*coef, jnp.zeros_like(coef.mass)),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=1_000_000,
        throw=False,
    )
    return sol.ys[..., 0]


def _one_path(coef, scale, ts, y0, key, dt: Array, tol: float, max_steps: int, solver: str, brownian: str):
    t0, t1 = ts[0], ts[-1]
    levy = diffrax.SpaceTimeLevyArea if solver in ("shark", "sra1") else diffrax.BrownianIncrement
    if brownian == "tree":
        bm = diffrax.VirtualBrownianTree(t0, t1, tol=tol, shape=(), key=key, levy_area=levy)
    else:
        bm = diffrax.UnsafeBrownianPath(shape=(), key=key, levy_area=levy)
    terms = diffrax.MultiTerm(diffrax.ODETerm(_drift), diffrax.ControlTerm(_diffusion, bm))
    sol = diffrax.diffeqsolve(
        terms,
        SOLVERS[solver](),
        t0=t0,
        t1=t1,
        dt0=dt,
        y0=y0,
        args=(*coef, scale),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=max_steps,
        adjoint=diffrax.ForwardMode() if brownian == "unsafe" else diffrax.RecursiveCheckpointAdjoint(),
        throw=False,
    )
    return sol.ys[:, 0]


def solve_ensemble(
    ts: ArrayLike,
    e0: ArrayLike,
    v0: ArrayLike,
    eta: ArrayLike,
    momentum: ArrayLike,
    lag: ArrayLike,
    stiffness: ArrayLike,
    noise: ArrayLike,
    group_size: ArrayLike,
    *,
    paths: int = 1000,
    key: Array | None = None,
    dt: float = 0.25,
    solver: str = "euler",
    brownian: str = "unsafe",
    tree_tol: float | None = None,
) -> Ensemble:
    """`paths` independent solutions of M ë + C ė + K e = √(D/G) ξ saved at `ts` (steps), from (e0, v0).

    Fixed step `dt` (steps; choose it so that the saved times are multiples of it). Paths share nothing
    but the parameters; path i uses `jax.random.split(key, paths)[i]`. `tree_tol` (default dt/4) is the
    resolution of the "tree" Brownian path: keep it fixed across step sizes to reuse one path per key.
    """
    check_range("paths", paths, 1, integer=True)
    check_range("dt", dt, 0.0, low_open=True)
    check_range("noise", noise, 0.0)
    check_range("group_size", group_size, 2.0)
    check_choice("solver", solver, tuple(SOLVERS))
    check_choice("brownian", brownian, BROWNIAN)
    ts = _times(ts)
    coef = theory.coefficients(eta, momentum, lag, stiffness)
    scale = (jnp.sqrt(as_float(noise) / as_float(group_size)) / coef.mass).astype(ts.dtype)
    y0 = jnp.stack([as_float(e0), as_float(v0)]).astype(ts.dtype)
    keys = jax.random.split(jax.random.key(0) if key is None else key, paths)
    # a power of two (at least 4096) so that nearby step sizes share one compilation
    max_steps = max(4096, 1 << math.ceil(math.log2(math.ceil(float(ts[-1] - ts[0]) / dt) + 1)))
    tol = dt / 4 if tree_tol is None else tree_tol
    dt_arr = jnp.asarray(dt, ts.dtype)
    ys = _ensemble(coef, scale, ts, y0, keys, dt_arr, float(tol), max_steps, solver, brownian)
    return Ensemble(ts=ts, paths=ys, mean=ys.mean(0), std=ys.std(0))


@functools.partial(jax.jit, static_argnames=("tol", "max_steps", "solver", "brownian"))
def _ensemble(coef, scale, ts, y0, keys, dt, tol, max_steps, solver, brownian):
    return jax.vmap(lambda k: _one_path(coef, scale, ts, y0, k, dt, tol, max_steps, solver, brownian))(keys)
