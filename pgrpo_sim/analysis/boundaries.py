"""Phase boundaries traced exactly in a 2-D slice of hyperparameter space.

A boundary is the zero set of a field F of two hyperparameters (the others fixed):
- "damping_ratio": F = ζ − 1 (continuous oscillator, critical damping);
- "damping": F = C = ((1−μ) − ηKτ)/η (continuous oscillator; C = 0 is η·K·τ = 1 − μ, the critical lag);
- "spectral_radius": F = r − 1, r the exact per-step spectral radius of the discrete map (`linear`).
η is the oscillator's η (η_eff for a bandit), τ the continuous lag (τ for "stale", (K_ref − 1)/2 for
"refresh", as `prediction.continuous_lag`), K the stiffness (for a bandit from its exact fixed point, with
exact derivatives, `prediction.fixed_point`).

Tracing, in box coordinates u ∈ [0, 1]² (logarithmic for η, K and β): seeds are the sign changes of F along
the lines of a coarse grid (box edges included), each bracket narrowed by bisection and the crossing then
solved by Newton along its grid line; from every seed
not already on a traced curve the curve is followed both ways by continuation — a tangent predictor
(⟂ ∇F, `jax.grad`) and a Newton corrector with minimum-norm steps u ← u − F ∇F/|∇F|² — with step halving
when the corrector fails or jumps, until the curve leaves the box (its last point is corrected onto the box
edge), closes, or stops being regular. Every returned point satisfies |F|/|∇F| ≤ `xtol` (a distance in box
coordinates): exact to solver tolerance, not to grid resolution. Components that never cross a grid line
(loops smaller than a grid cell) are missed. The discrete map exists only at integer lags: with the lag as
an axis, the radius = 1 line is the set of roots along the other axis at each integer lag (found the same
way), joined in lag order.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..base.checks import check_choice, check_range
from ..base.errors import PgrpoSimError
from ..models import bandit
from ..models.bandit.configuration import LAG_MODELS
from ..models.bandit.hyperparameters import HYPERPARAMETERS, reference_mass
from ..models.oscillator import linear, theory
from ..prediction import (
    continuous_lag,
    eta_scale,
    fixed_point,
    fixed_point_stiffness,
    stiffness,
    substitute,
    two_arm_reduction,
)

KINDS = ("damping_ratio", "damping", "spectral_radius")
"""Boundaries: ζ = 1, C = 0, exact discrete spectral radius = 1."""
OSCILLATOR_AXES = ("learning_rate", "momentum", "lag", "stiffness")
BANDIT_AXES = ("learning_rate", "momentum", "lag", "beta", "p_ref")
LOG_AXES = ("stiffness", *tuple(n for n in BANDIT_AXES if HYPERPARAMETERS[n].log_scale))
"""Axes traced in log coordinates by default (K, and the log-scaled hyperparameters of the table)."""
_NEWTON_STEPS, _BISECT_STEPS, _MAX_JUMP = 12, 12, 0.1


class Curve(NamedTuple):
    """One connected piece of a boundary: points (x[i], y[i]) in the axes' units, in order along the curve;
    `residual` is the largest |F|/|∇F| over them, in box coordinates (the solver tolerance reached).

    Attributes:
        x: the x-axis values along the curve; shape (m,); the x hyperparameter's units (η per step, τ in
            optimiser steps, K per unit η; μ, β, p_ref dimensionless).
        y: the y-axis values; shape (m,); the y hyperparameter's units.
        residual: the largest |F|/|∇F| over the points; box coordinates (the box is [0, 1]²).
    """

    x: np.ndarray
    y: np.ndarray
    residual: float


@dataclasses.dataclass(frozen=True)
class _Spec:
    """Static structure of the fields of one slice (the boundary kind is traced: one program serves all three)."""

    axes: tuple[str, str]
    logs: tuple[bool, bool]
    lag_model: str  # "none", "stale" or "refresh"
    discrete_lag: int | None  # the exact map's static lag; None: integer lag read from the lag axis (traced)
    max_lag: int  # largest lag on the lag axis (discrete_lag None)
    scale: float | None  # `prediction.eta_scale` of a bandit whose K moves with the axes (β, p_ref), else None


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def stale_radius(a, mu, lag, size: int):
    """Spectral radius of the stale-lag map with a traced integer lag ≤ `size` (static): eigenvalues of
    `linear.companion` of the largest lag with the force moved to column `lag` — the roots of
    q(z) = z^lag (z² − (1+μ)z + μ) + a z, plus zeros.

    Args:
        a: the force η·K of the map; dimensionless; scalar.
        mu: heavy-ball momentum μ; in [0, 1); scalar.
        lag: stale lag; optimiser steps; integer scalar in [0, `size`] (may be traced).
        size: largest lag of the companion matrix (static); integer ≥ 0.

    Returns:
        The spectral radius (largest |root| of q); scalar; per-step multiplier (≥ 1: unstable).
    """
    companion = linear.companion(jnp.zeros_like(a), mu, size).at[0, lag].add(-a)
    return jnp.max(jnp.abs(jnp.linalg.eigvals(companion)))


@stale_radius.defjvp
def _stale_radius_jvp(size, primals, tangents):
    # Implicit derivative of the dominant (simple) root z of q: dz = −(q_a da + q_μ dμ)/q_z. The padding zeros
    # are a repeated eigenvalue, so differentiating eigvals itself would give NaN.
    a, mu, lag = primals
    da, dmu, _ = tangents
    companion = linear.companion(jnp.zeros_like(a), mu, size).at[0, lag].add(-a)
    roots = jnp.linalg.eigvals(companion)
    z = roots[jnp.argmax(jnp.abs(roots))]
    n = lag.astype(a.dtype)
    z_lag = z**n
    quad = z * z - (1 + mu) * z + mu
    q_z = n * z_lag / z * quad + z_lag * (2 * z - (1 + mu)) + a
    dz = -(z * da + z_lag * (1 - z) * dmu) / q_z
    return jnp.abs(z), jnp.real(jnp.conj(z) * dz) / jnp.abs(z)


def _axis_values(spec: _Spec, ctx, u):
    lo, hi = ctx["lo"], ctx["hi"]
    return [lo[i] * (hi[i] / lo[i]) ** u[i] if spec.logs[i] else lo[i] + (hi[i] - lo[i]) * u[i] for i in range(2)]


def _radius(spec: _Spec, learning_rate, mu, k, lag_value):
    """Exact per-step spectral radius; with the lag on an axis, the integer lag is traced: a padded companion
    matrix for "stale", a switch over the static refresh maps for "refresh"."""
    if spec.discrete_lag is not None:
        model = "stale" if spec.lag_model in ("none", "stale") else "refresh"
        return linear.spectral_radius(learning_rate, mu, spec.discrete_lag, k, lag_model=model)
    lag = jnp.clip(jnp.round(lag_value), 0, spec.max_lag).astype(jnp.int32)
    if spec.lag_model == "stale":
        return stale_radius(learning_rate * k, mu, lag, spec.max_lag)
    branches = [functools.partial(linear.spectral_radius, lag=n, lag_model="refresh") for n in range(spec.max_lag + 1)]
    return jax.lax.switch(lag, [lambda e, m, s, f=f: f(e, m, stiffness=s) for f in branches], learning_rate, mu, k)


def _field(spec: _Spec, ctx, u):
    """F of the boundary `ctx["kind"]` (index into `KINDS`) at box coordinates u (module docstring)."""
    values = dict(ctx["base"])
    values.update(zip(spec.axes, _axis_values(spec, ctx, u), strict=True))
    if spec.scale is not None:
        cfg = substitute(ctx["cfg2"], {k: values[k] for k in ("beta", "p_ref")}, spec.scale)
        k = stiffness(cfg, fixed_point(cfg)[0])
    else:
        k = values["stiffness"]
    learning_rate, mu = values["learning_rate"] * ctx["eta_scale"], values["momentum"]
    tau = continuous_lag(values["lag"], spec.lag_model)
    return jax.lax.switch(
        ctx["kind"],
        [
            lambda: theory.damping_ratio(learning_rate, mu, tau, k) - 1.0,
            lambda: theory.coefficients(learning_rate, mu, tau, k).damping,
            lambda: _radius(spec, learning_rate, mu, k, values["lag"]) - 1.0,
        ],
    )


@functools.partial(jax.jit, static_argnames=("spec",))
def _values_jit(spec: _Spec, ctx, us):
    return jax.vmap(lambda u: _field(spec, ctx, u))(us)


def _values(spec: _Spec, ctx, us) -> np.ndarray:
    """F at the rows of `us`, padded to a multiple of 1024 so that one program serves a slice."""
    us = np.asarray(us, float)
    size = -(-len(us) // 1024) * 1024
    padded = np.concatenate([us, np.full((size - len(us), 2), 0.5)])
    return np.asarray(_values_jit(spec, ctx, jnp.asarray(padded, ctx["lo"].dtype)))[: len(us)]


@functools.partial(jax.jit, static_argnames=("spec",))
def _correct(spec: _Spec, ctx, u, free):
    """Newton corrector with minimum-norm steps over the `free` coordinates (mask), steps capped at _MAX_JUMP.
    Returns (u, |F|/|∇F|, ∇F at u)."""

    def body(_, u):
        value, grad = jax.value_and_grad(lambda v: _field(spec, ctx, v))(u)
        grad = grad * free
        step = value * grad / jnp.sum(grad**2)
        step = step * jnp.minimum(1.0, _MAX_JUMP / jnp.linalg.norm(step))
        return jnp.where(jnp.all(jnp.isfinite(step)), u - step, u)

    u = jax.lax.fori_loop(0, _NEWTON_STEPS, body, u)
    value, grad = jax.value_and_grad(lambda v: _field(spec, ctx, v))(u)
    return u, jnp.abs(value) / jnp.linalg.norm(grad * free), grad


def _sign_changes(values: np.ndarray, points: np.ndarray, axes=(0, 1)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segments between neighbouring grid points (last axis of `points` = box coordinates) along the grid
    `axes` where F changes sign: (start points, end points, index of the box coordinate that varies)."""
    a, b, along = [], [], []
    for axis in axes:
        lo = [slice(None)] * values.ndim
        hi = [slice(None)] * values.ndim
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        va, vb = values[tuple(lo)], values[tuple(hi)]
        change = np.isfinite(va) & np.isfinite(vb) & (np.sign(va) != np.sign(vb))
        a.append(points[tuple(lo)][change])
        b.append(points[tuple(hi)][change])
        along.append(np.argmax(np.abs(b[-1] - a[-1]), axis=-1))
    return np.concatenate(a), np.concatenate(b), np.concatenate(along)


def _roots_on_segments(spec, ctx, a, b, along, xtol: float):
    """The crossing on each segment a→b (F changes sign along it): bisection of every bracket at once (F values
    only) to 2^-12 of its length, then Newton (`_correct`) along the segment. Returns (points, residuals,
    gradients) of the crossings that converged inside their segment, in input order."""
    f_a = _values(spec, ctx, a)
    lo, hi = np.zeros(len(a)), np.ones(len(a))
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        f_mid = _values(spec, ctx, a + mid[:, None] * (b - a))
        same = np.sign(f_mid) == np.sign(f_a)
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    points, dists, grads = [], [], []
    for start, end, axis, s in zip(a, b, along, (lo + hi) / 2, strict=True):
        free = np.zeros(2)
        free[axis] = 1.0
        guess = jnp.asarray(start + s * (end - start))
        u, dist, grad = (np.asarray(r) for r in _correct(spec, ctx, guess, jnp.asarray(free)))
        between = min(start[axis], end[axis]) - 1e-12 <= u[axis] <= max(start[axis], end[axis]) + 1e-12
        if dist <= xtol and between:
            points.append(u)
            dists.append(float(dist))
            grads.append(grad)
    return np.array(points).reshape(-1, 2), np.array(dists), np.array(grads).reshape(-1, 2)


def _seeds(spec, ctx, grid: int, xtol: float):
    """Exact points of the curve on the lines of a (grid+1)² grid, box edges included (`_roots_on_segments`)."""
    line = np.linspace(0.0, 1.0, grid + 1)
    points = np.stack(np.meshgrid(line, line, indexing="ij"), -1)
    values = _values(spec, ctx, points.reshape(-1, 2)).reshape(points.shape[:2])
    return _roots_on_segments(spec, ctx, *_sign_changes(values, points), xtol)


def _inside(u, slack=1e-12) -> bool:
    return bool(np.all(u >= -slack) and np.all(u <= 1 + slack))


def _follow(spec, ctx, start, grad, sign: float, step: float, xtol: float, max_points: int):
    """Points (and residuals) from `start` (excluded) along the curve in the direction sign·(⟂ ∇F), until it
    leaves the box (last point on the edge), closes on `start`, or the corrector fails below a minimum step."""
    points, dists, u, h = [], [], start, step
    tangent = sign * np.array([-grad[1], grad[0]]) / np.linalg.norm(grad)
    both = jnp.ones(2)
    while len(points) < max_points and h >= step * 1e-3:
        pred = u + h * tangent
        if not _inside(pred):
            # shorten the predictor onto the box edge it crosses first and correct along that edge only
            room = np.where(tangent > 0, 1 - u, -u)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(tangent != 0, room / (h * tangent), np.inf)
            edge = int(np.argmin(ratio))
            pred = np.clip(u + max(ratio[edge], 0.0) * h * tangent, 0.0, 1.0)
            free = np.ones(2)
            free[edge] = 0.0
            v, dist, _ = (np.asarray(r) for r in _correct(spec, ctx, jnp.asarray(pred), jnp.asarray(free)))
            if dist <= xtol and _inside(v) and np.linalg.norm(v - u) <= 2 * h:
                points.append(v)
                dists.append(dist)
            break
        v, dist, g = (np.asarray(r) for r in _correct(spec, ctx, jnp.asarray(pred), both))
        regular = dist <= xtol and np.all(np.isfinite(v)) and np.linalg.norm(v - pred) <= 0.5 * h
        if not (regular and (v - u) @ tangent > 0):
            h /= 2  # the corrector failed or jumped (to another branch): shorter step
            continue
        points.append(v)
        dists.append(dist)
        new_tangent = np.array([-g[1], g[0]]) / np.linalg.norm(g)
        tangent = new_tangent if new_tangent @ tangent > 0 else -new_tangent
        u, h = v, min(2 * h, step)
        if len(points) > 2 and np.linalg.norm(u - start) < h:
            points.append(start)  # closed loop
            dists.append(0.0)
            break
    return points, dists


def _near(curve: np.ndarray, point: np.ndarray, tol: float) -> bool:
    """Whether `point` lies within `tol` of the polyline `curve` (box coordinates)."""
    curve, point = np.asarray(curve, float), np.asarray(point, float)
    if len(curve) == 1:
        return bool(np.linalg.norm(curve[0] - point) < tol)
    a, b = curve[:-1], curve[1:]
    ab = b - a
    t = np.clip(np.sum((point - a) * ab, -1) / np.maximum(np.sum(ab**2, -1), 1e-300), 0, 1)
    return bool(np.min(np.linalg.norm(a + t[:, None] * ab - point, axis=-1)) < tol)


def _trace(spec, ctx, grid: int, step: float, xtol: float, max_points: int) -> list[tuple[np.ndarray, float]]:
    """All curves (box coordinates, largest residual) of a 2-D field: one per seed not on a traced curve."""
    curves: list[tuple[np.ndarray, float]] = []
    for seed, seed_dist, grad in zip(*_seeds(spec, ctx, grid, xtol), strict=True):
        if any(_near(c, seed, 0.3 / grid) for c, _ in curves):
            continue
        forward, d_fwd = _follow(spec, ctx, seed, grad, 1.0, step, xtol, max_points)
        closed = len(forward) > 2 and np.array_equal(forward[-1], seed)
        backward, d_bwd = ([], []) if closed else _follow(spec, ctx, seed, grad, -1.0, step, xtol, max_points)
        curves.append((np.array([*backward[::-1], seed, *forward]), float(max([seed_dist, *d_fwd, *d_bwd]))))
    # a piece can stop at a kink (the dominant root of the radius changes) that another piece crosses: drop
    # pieces that lie entirely on a longer one
    curves.sort(key=lambda c: -len(c[0]))
    kept: list[tuple[np.ndarray, float]] = []
    for c in curves:
        if not any(all(_near(k, p, 0.3 / grid) for p in c[0]) for k, _ in kept):
            kept.append(c)
    return kept


def _integer_lag_curves(spec, ctx, grid: int, xtol: float) -> list[tuple[np.ndarray, float]]:
    """Radius = 1 with the lag on an axis: the roots along the other axis at each integer lag (one program for
    all lags, the lag traced), joined in lag order: the k-th root of every lag forms the k-th curve."""
    axis = spec.axes.index("lag")
    lo, hi = float(ctx["lo"][axis]), float(ctx["hi"][axis])
    lags = np.arange(math.ceil(lo), math.floor(hi) + 1)
    points = np.zeros((len(lags), grid + 1, 2))
    points[..., axis] = ((lags - lo) / (hi - lo))[:, None]
    points[..., 1 - axis] = np.linspace(0.0, 1.0, grid + 1)
    values = _values(spec, ctx, points.reshape(-1, 2)).reshape(points.shape[:2])
    roots, dist, _ = _roots_on_segments(spec, ctx, *_sign_changes(values, points, axes=(1,)), xtol)
    lag_of_root = np.round(lo + (hi - lo) * roots[:, axis])
    rows = []
    for lag in lags:  # roots come ordered by lag, then along the other axis
        mine = lag_of_root == lag
        rows.append((roots[mine], dist[mine]))
    depth = max((len(r) for r, _ in rows), default=0)
    return [
        (np.array([r[k] for r, _ in rows if len(r) > k]), float(max(d[k] for _, d in rows if len(d) > k)))
        for k in range(depth)
    ]


def trace_boundary(
    kind: str,
    point: Mapping[str, float] | bandit.Config,
    x: str,
    x_range: tuple[float, float],
    y: str,
    y_range: tuple[float, float],
    *,
    lag_model: str = "stale",
    log_x: bool | None = None,
    log_y: bool | None = None,
    grid: int = 24,
    step: float = 0.02,
    xtol: float | None = None,
    max_points: int = 2000,
) -> list[Curve]:
    """Trace the boundary `kind` (`KINDS`) in the (x, y) slice through `point` (see the module docstring).

    `point`: a mapping of oscillator parameters {learning_rate, momentum, lag, stiffness} (axes among those; `lag_model`
    says how the lag enters), or a `bandit.Config` (η in the bandit's units, η_eff = η·N/(c(N−c)); K from its
    exact fixed point; its lag model, "none" read as stale lag 0 by the exact map; axes among learning_rate, momentum,
    lag, beta, p_ref). `x_range`/`y_range`: the box; log coordinates by default for η, K and β (`log_x`/`log_y`
    override). `grid` lines per axis seed the tracing; `step` (largest continuation step) and `xtol`
    (corrector tolerance on |F|/|∇F|) are in box coordinates; xtol defaults to 1e-10 (1e3·eps in float32).
    For "spectral_radius" the lag is the exact map's integer lag. Returns the connected pieces found.

    Args:
        kind: the boundary, one of `KINDS`.
        point: the slice's fixed values: a mapping with learning_rate (per step), momentum, lag (optimiser steps) and
            stiffness (per unit η) for those not on an axis, or a `bandit.Config`.
        x: the x axis, among `OSCILLATOR_AXES` (a mapping `point`) or `BANDIT_AXES` (a `bandit.Config`).
        x_range: (low, high) of x in its units, low < high, low > 0 on a log scale, within the hyperparameter's
            domain.
        y: the y axis, as `x`; not `x`.
        y_range: (low, high) of y, as `x_range`.
        lag_model: "none", "stale", "refresh" or "refresh_fresh" (a mapping `point`; a `bandit.Config` uses its
            own).
        log_x: trace x in log coordinates; None: log for `LOG_AXES`.
        log_y: trace y in log coordinates; None: log for `LOG_AXES`.
        grid: grid lines per axis that seed the tracing; integer ≥ 2.
        step: largest continuation step; box coordinates, in (0, 0.5].
        xtol: corrector tolerance on |F|/|∇F|; box coordinates, > 0; None: max(1e-10, 1e3·eps).
        max_points: most points followed in each direction from a seed; integer ≥ 1.

    Returns:
        The connected pieces found, each a `Curve` in the axes' units; empty when the boundary misses the box.

    Raises:
        PgrpoSimError: an unknown `kind`, `lag_model` or axis, equal axes, a bad range, a `point` missing values
            or holding non-finite ones, a lag axis with lag model "none", `grid`, `step`, `xtol` or `max_points`
            out of range, or a non-integer lag for "spectral_radius".
    """
    check_choice("kind", kind, KINDS)
    spec, ctx = _slice(point, x, x_range, y, y_range, lag_model, log_x, log_y)
    check_range("grid", grid, 2, integer=True)
    check_range("step", step, 0.0, 0.5, low_open=True)
    check_range("max_points", max_points, 1, integer=True)
    if xtol is None:
        xtol = max(1e-10, 1e3 * float(jnp.finfo(ctx["lo"].dtype).eps))
    check_range("xtol", xtol, 0.0, low_open=True)
    if kind == "spectral_radius" and spec.discrete_lag is not None and float(ctx["base"]["lag"]) != spec.discrete_lag:
        raise PgrpoSimError(f"the exact discrete map needs an integer lag, got {float(ctx['base']['lag']):g}")
    ctx = dict(ctx, kind=jnp.asarray(KINDS.index(kind), jnp.int32))
    if kind == "spectral_radius" and spec.discrete_lag is None:
        pieces = _integer_lag_curves(spec, ctx, grid, xtol)
    else:
        pieces = _trace(spec, ctx, grid, step, float(xtol), int(max_points))
    return [_to_curve(spec, ctx, p, r) for p, r in pieces]


def _slice(point, x, x_range, y, y_range, lag_model, log_x, log_y) -> tuple[_Spec, dict]:
    """The static spec and traced context of a slice: base values, η scale, box, bandit configuration."""
    if x == y:
        raise PgrpoSimError(f"the two axes must differ, got {x} twice")
    for name, box in ((x, x_range), (y, y_range)):
        if np.shape(box) != (2,):
            raise PgrpoSimError(f"{name} range must be a pair (low, high), got {box!r}")
        a, b = box
        check_range(f"{name} range", [a, b])
        if not a < b:
            raise PgrpoSimError(f"{name} range must have low < high, got ({a:g}, {b:g})")
    logs = (x in LOG_AXES if log_x is None else bool(log_x), y in LOG_AXES if log_y is None else bool(log_y))
    for name, (a, b), log in ((x, x_range, logs[0]), (y, y_range, logs[1])):
        if log and a <= 0:
            raise PgrpoSimError(f"{name} range must be > 0 on a log scale, got low {a:g}")
        row = HYPERPARAMETERS.get(name)
        if row is not None:  # the hyperparameter's own domain (μ < 1, p_ref in (0, 1), …)
            row.domain.check(f"{name} range", [a, b])
    scale = None
    if isinstance(point, bandit.Config):
        for name in (x, y):
            if name not in BANDIT_AXES:
                raise PgrpoSimError(f"axis {name!r} is not supported for a bandit (use {', '.join(BANDIT_AXES)})")
        if "lag" in (x, y) and point.lag_model == "none":
            raise PgrpoSimError("a lag axis needs lag_model 'stale' or 'refresh'")
        lag_model = point.lag_model
        cfg2, point_scale = two_arm_reduction(point), eta_scale(point)
        dtype = cfg2.learning_rate.dtype
        base = dict(learning_rate=point.learning_rate, momentum=point.momentum, lag=point.lag, beta=point.beta)
        base["p_ref"] = reference_mass(point)
        ctx: dict[str, Any] = dict(eta_scale=2 * point_scale)
        if {"beta", "p_ref"} & {x, y}:
            ctx["cfg2"], scale = cfg2, point_scale
        else:  # K does not move in this slice: compute it once
            base["stiffness"] = fixed_point_stiffness(cfg2)[2]
    else:
        check_choice("lag_model", lag_model, LAG_MODELS)
        for name in (x, y):
            if name not in OSCILLATOR_AXES:
                raise PgrpoSimError(f"axis {name!r} is not an oscillator parameter ({', '.join(OSCILLATOR_AXES)})")
        missing = [n for n in OSCILLATOR_AXES if n not in point and n not in (x, y)]
        if missing:
            raise PgrpoSimError(f"point needs values for {', '.join(missing)}")
        base = {n: point[n] for n in OSCILLATOR_AXES if n not in (x, y)}
        for name, v in base.items():
            check_range(name, v)
        base.update({n: 1.0 for n in (x, y)})  # placeholders: the axes set them
        dtype = jnp.result_type(*[jnp.asarray(v, float) for v in base.values()])
        ctx = dict(eta_scale=1.0)
    if "lag" in (x, y):
        discrete_lag, max_lag = None, math.floor(max(x_range[1] if x == "lag" else y_range[1], 0))
    else:
        discrete_lag, max_lag = (round(float(base["lag"])) if lag_model != "none" else 0), 0
    spec = _Spec(axes=(x, y), logs=logs, lag_model=lag_model, discrete_lag=discrete_lag, max_lag=max_lag, scale=scale)
    ctx.update(
        base={k: jnp.asarray(v, dtype) for k, v in base.items()},
        eta_scale=jnp.asarray(ctx["eta_scale"], dtype),
        lo=jnp.asarray([x_range[0], y_range[0]], dtype),
        hi=jnp.asarray([x_range[1], y_range[1]], dtype),
    )
    return spec, ctx


def _to_curve(spec: _Spec, ctx, pts: np.ndarray, residual: float) -> Curve:
    box = {"lo": np.asarray(ctx["lo"], float), "hi": np.asarray(ctx["hi"], float)}
    xs, ys = _axis_values(spec, box, np.asarray(pts, float).T)
    return Curve(x=xs, y=ys, residual=float(residual))


def phase_boundaries(dataset, x: str, y: str) -> dict[str, list[Curve]] | None:
    """Traced ζ = 1, C = 0 and radius = 1 curves (keys `KINDS`) over a 2-D phase-diagram sweep whose axes are
    among learning_rate, momentum and lag; None for other axes. Uses the bandit of the sweep's fixed parameters, the
    grid's range and its spacing (log axes traced in log coordinates).

    Args:
        dataset: a 2-D phase-diagram sweep (an `xarray.Dataset` with the sweep spec in `attrs["spec"]`, its
            spacing in `attrs["spacing"]` and a coordinate per axis).
        x: the first axis's name.
        y: the second axis's name.

    Returns:
        Boundary kind (`KINDS`) → its `Curve` pieces (`trace_boundary`); None unless both axes are among learning_rate,
        momentum and lag.

    Raises:
        PgrpoSimError: as `trace_boundary`, or a sweep base that `bandit.config` refuses.
    """
    if not {x, y} <= {"learning_rate", "momentum", "lag"}:
        return None
    spec = json.loads(dataset.attrs["spec"])
    spacing = json.loads(dataset.attrs.get("spacing", "{}"))
    base = dict(spec["base"])
    ranges = {n: (float(dataset[n].values.min()), float(dataset[n].values.max())) for n in (x, y)}
    if "lag" in (x, y):
        base["max_lag"] = int(ranges["lag"][1])
    config = bandit.config(**base)
    logs = {n: spacing.get(n) == "log" for n in (x, y)}
    box = (x, ranges[x], y, ranges[y])
    return {kind: trace_boundary(kind, config, *box, log_x=logs[x], log_y=logs[y]) for kind in KINDS}
