"""Gradient-based hyperparameter search on the exact two-arm reduction of a bandit configuration.

Objectives: reach a damping ratio, minimise the smooth time to a threshold, maximise the final reward
(`analysis.outcomes`), under stability constraints (exact discrete spectral radius, ζ ≥ ζ_min). The searched
hyperparameters (`models.bandit.hyperparameters.DIFFERENTIABLE`) are optimised in an unconstrained
reparametrisation with optax Adam from vmapped Latin-hypercube restarts; integer ones (lag, group size)
form a small outer grid, one search per combination. `grid_search` minimises the same objective on a dense
grid: the reference the gradient search is validated against.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from ..base.autodiff import value_and_grad
from ..base.checks import check_choice, check_range, check_seed, check_steps
from ..base.errors import PgrpoSimError
from ..base.progress import Progress, report
from ..base.serialise import finite_or_none
from ..models import bandit
from ..models.bandit import simulate
from ..models.bandit.hyperparameters import DIFFERENTIABLE, HYPERPARAMETERS, INTEGER
from ..models.oscillator import linear
from ..prediction import (
    continuous_lag,
    discrete_lag,
    eta_scale,
    fixed_point_stiffness,
    oscillator,
    substitute,
    two_arm_reduction,
)
from .outcomes import read_outcomes
from .search_settings import OBJECTIVES as OBJECTIVES, OPTIMISER_DEFAULTS, SearchSettings as SearchSettings
from .sensitivities import check_differentiable

DEFAULT_BOUNDS = {
    "learning_rate": (1e-3, 1.0),
    "momentum": (0.0, 0.99),
    "beta": (1e-3, 10.0),
    "p_ref": (0.01, 0.99),
    "epsilon": (0.01, 0.5),
}
"""Default search box per hyperparameter (config units: η is the bandit's η, not η_eff)."""


# ----------------------------------------------------------------------------------------------------
# search problem: one objective on a box, in unconstrained coordinates


@dataclasses.dataclass(frozen=True)
class _Problem:
    """Static structure of a search: objective, searched names and their scales, discrete lag for the radius."""

    objective: str
    names: tuple[str, ...]
    logs: tuple[bool, ...]
    steps: int
    lag: int
    lag_model: str
    scale: float
    zeta_constraint: bool
    radius_constraint: bool


def _values_from_unit(problem: _Problem, u: Array, numeric) -> Array:
    """Box coordinates u ∈ [0, 1]^d → hyperparameter values (log-spaced where the hyperparameter table says
    `log_scale`)."""
    lo, hi = numeric["lo"], numeric["hi"]
    out = [
        lo[i] * (hi[i] / lo[i]) ** u[i] if log else lo[i] + (hi[i] - lo[i]) * u[i] for i, log in enumerate(problem.logs)
    ]
    return jnp.stack(out)


def _evaluate(problem: _Problem, cfg2: bandit.Config, numeric, values: Array) -> dict[str, Array]:
    """Penalised loss and read-outs at one point (hyperparameter values in config units)."""
    cfg = substitute(cfg2, dict(zip(problem.names, values, strict=True)), problem.scale)
    fixed = (numeric["x_star"], numeric["found"]) if "x_star" in numeric else None
    q = oscillator(cfg, continuous_lag(cfg.lag, cfg.lag_model), fixed)
    eta_eff, k = 2 * cfg.learning_rate, q["stiffness"]
    radius = linear.spectral_radius(eta_eff, cfg.momentum, problem.lag, k, lag_model=problem.lag_model)
    zeta = q["damping_ratio"]
    if problem.objective == "damping-ratio":
        value = zeta
        scaled = (zeta - numeric["target"]) ** 2
    else:
        reward = simulate(cfg, problem.steps, binary_rewards=True).reward  # the two-arm reduction's 0/1, traced
        out = read_outcomes(reward, q, numeric["target"], numeric["smoothing"])
        if problem.objective == "time-to-threshold":
            value, scaled = out.time_to_threshold, out.time_to_threshold / problem.steps
        else:
            value, scaled = out.final_reward, -out.final_reward
    violation = jnp.zeros_like(scaled)
    if problem.zeta_constraint:
        violation = violation + jnp.maximum(numeric["min_zeta"] - zeta, 0.0) ** 2
    if problem.radius_constraint:
        violation = violation + jnp.maximum(radius - numeric["max_radius"], 0.0) ** 2
    return dict(
        loss=scaled + numeric["penalty"] * violation,
        scaled=scaled,
        violation_sq=violation,
        objective=value,
        violation=jnp.sqrt(violation),
        damping_ratio=zeta,
        spectral_radius=radius,
        p_star=q["p_star"],
    )


_ADAM = dict(b1=0.5, b2=0.9)
"""Adam moments for a deterministic objective: short memories, so a penalty wall met early does not shrink
every later step (b2) and steps do not overshoot narrow valleys (b1)."""
_RAMP = 0.8
"""Penalty continuation: the weight grows as penalty·min(1, t/(_RAMP·iterations))³, so restarts first
settle near the unconstrained optimum and then follow it onto the constraint (a fixed stiff penalty makes
a narrow valley along the constraint that Adam crawls along)."""


@functools.partial(jax.jit, static_argnames=("problem", "iterations"))
def _optimise(problem: _Problem, cfg2, numeric, z0, learning_rate, iterations: int):
    """Adam on z = logit(u) from every row of z0 at once (vmapped restarts), penalty continuation; a step
    whose loss or gradient is not finite is skipped (the restart stays put). Returns the per-iteration
    history, its `loss` always with the full penalty (the objective that `grid_search` minimises)."""
    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, iterations, alpha=1e-3), **_ADAM)  # pyright: ignore[reportArgumentType]  # b1, b2 only

    def loss(z, weight):
        aux = _evaluate(problem, cfg2, numeric, _values_from_unit(problem, jax.nn.sigmoid(z), numeric))
        return aux["scaled"] + weight * aux["violation_sq"], aux

    def one(z, state, weight):
        (value, aux), grad = value_and_grad(loss, z, weight)
        updates, new_state = opt.update(grad, state)
        ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
        keep = lambda new, old: jnp.where(ok, new, old)
        return keep(z + updates, z), jax.tree.map(keep, new_state, state), aux

    def step(carry, t):
        z, state = carry
        weight = numeric["penalty"] * jnp.minimum(1.0, (t + 1) / (_RAMP * iterations)) ** 3
        z_new, state, aux = jax.vmap(one, in_axes=(0, 0, None))(z, state, weight)
        values = jax.vmap(lambda zz: _values_from_unit(problem, jax.nn.sigmoid(zz), numeric))(z)
        return (z_new, state), dict(aux, values=values)

    _, history = jax.lax.scan(step, (z0, jax.vmap(opt.init)(z0)), jnp.arange(iterations))
    return history


@functools.partial(jax.jit, static_argnames=("problem",))
def _evaluate_many(problem: _Problem, cfg2, numeric, unit):
    """`_evaluate` at many box coordinates (rows of `unit`), plus the hyperparameter values there."""

    def one(u):
        values = _values_from_unit(problem, u, numeric)
        return dict(_evaluate(problem, cfg2, numeric, values), values=values)

    return jax.lax.map(one, unit, batch_size=256)


def _evaluate_grid(problem: _Problem, cfg2, numeric, unit: np.ndarray) -> dict[str, np.ndarray]:
    """`_evaluate_many` with the rows padded to a multiple of 1024, so that grids of different sizes (and the
    feasibility check) share one compiled program."""
    size = -(-len(unit) // 1024) * 1024
    padded = np.concatenate([unit, np.full((size - len(unit), unit.shape[1]), 0.5)])
    aux = _evaluate_many(problem, cfg2, numeric, jnp.asarray(padded, cfg2.learning_rate.dtype))
    return {k: np.asarray(v)[: len(unit)] for k, v in aux.items()}


class SearchResult(NamedTuple):
    """Result of `search` (or `grid_search`).

    Attributes:
        objective: the objective minimised, one of `OBJECTIVES`.
        best: the hyperparameters found, by name (searched ones in config units, plus lag / num_generations when they
            were an outer grid).
        objective_value: the objective there: ζ for damping-ratio, the smooth time to threshold in optimiser steps
            for time-to-threshold, the final expected reward p ∈ [0, 1] for final-reward.
        loss: the penalised, minimised loss there ((ζ − target)², T/steps or −p, plus the penalty; dimensionless).
        constraints: ζ and the exact discrete spectral radius there (`damping_ratio`, `spectral_radius`; None when
            not finite), the bounds asked for (`min_damping_ratio`, `max_spectral_radius`), the constraint
            `violation` (√ of the summed squared violations) and `feasible` (each bound met to 1e-3).
        evaluations: objective evaluations spent (each one value + gradient for `search`, restarts × iterations
            per outer-grid combination; value only for `grid_search`, one per grid point).
        trajectory: the expected reward curve p_0 … p_steps at the best point (the two-arm reduction's, `steps`
            the `SearchSettings`' also for damping-ratio); float [steps + 1], in [0, 1].
        history: per iteration × restart `loss`, `objective` and the searched values (each at the point that
            iteration evaluated, config units), of the winning outer-grid combination; name → float [iterations,
            restarts]; empty for `grid_search`.
        outer: one row per outer-grid combination: its lag / num_generations and its best `loss` and `objective_value`
            (None when every evaluation of it was NaN); one row without lag / num_generations without an outer grid.
        nan_evaluations: evaluations whose loss was NaN (diverged runs, no p*), skipped by the optimiser.
    """

    objective: str
    best: dict[str, float]
    objective_value: float
    loss: float
    constraints: dict[str, Any]
    evaluations: int
    trajectory: np.ndarray
    history: dict[str, np.ndarray]
    outer: list[dict[str, Any]]
    nan_evaluations: int

    def summary(self) -> dict[str, Any]:
        """JSON-ready: objective, best, objective_value, loss, evaluations, constraints, outer, nan_evaluations,
        and which names were searched by gradient (`searched`) or as an integer outer grid (`outer_grid`)."""
        keys = (
            "objective",
            "best",
            "objective_value",
            "loss",
            "evaluations",
            "constraints",
            "outer",
            "nan_evaluations",
        )
        out = {k: getattr(self, k) for k in keys}
        out["searched"] = [n for n in self.best if n in DIFFERENTIABLE]
        out["outer_grid"] = [n for n in self.best if n in INTEGER]
        return out


def searched_names(objective: str, search: Sequence[str] | str | None) -> tuple[str, ...]:
    """The hyperparameters a `search` of `objective` varies: `search` (one name or several), or by default η for
    damping-ratio, else η and μ.

    Args:
        objective: one of `OBJECTIVES` (only "damping-ratio" is told apart).
        search: a hyperparameter name, several, or None for the default.

    Returns:
        The names, in the order given; not validated (`search` checks them).
    """
    if search is None:
        return ("learning_rate",) if objective == "damping-ratio" else ("learning_rate", "momentum")
    return (search,) if isinstance(search, str) else tuple(search)


def _setup(objective: str, settings: SearchSettings):
    """Validate a search request; return the searched names and the numbers of the problem (box, target,
    constraint bounds, penalty) with NaN for what is not asked."""
    target, search_names, bounds, steps, smoothing, min_damping_ratio, radius_margin, penalty = settings
    check_choice("objective", objective, OBJECTIVES)
    search_names = check_differentiable(searched_names(objective, search_names))
    if not search_names or len(set(search_names)) != len(search_names):
        raise PgrpoSimError(f"search needs distinct hyperparameter names, got {list(search_names)}")
    if objective == "damping-ratio":
        if target is None:
            raise PgrpoSimError("objective damping-ratio needs a target ζ (e.g. 1.0 for critical damping)")
        check_range("target", target, 0.0, low_open=True)
    elif objective == "time-to-threshold":
        if target is None:
            raise PgrpoSimError(
                "objective time-to-threshold needs a target: the fraction of the way from p_ref to p* (e.g. 0.9)"
            )
        check_range("target", target, 0.0, 1.0, low_open=True, high_open=True)
    elif target is not None:
        raise PgrpoSimError("objective final-reward takes no target (its step budget is steps)")
    check_steps(steps)
    check_range("smoothing", smoothing, 0.0, low_open=True)
    check_range("min_damping_ratio", min_damping_ratio, 0.0)
    check_range("radius_margin", radius_margin, 0.0, 1.0, high_open=True)
    check_range("penalty", penalty, 0.0)
    bounds = dict(bounds or {})
    for name in bounds:
        if name not in search_names:
            raise PgrpoSimError(f"bounds given for {name!r}, which is not searched ({', '.join(search_names)})")
    lo, hi = [], []
    for name in search_names:
        pair = bounds.get(name, DEFAULT_BOUNDS[name])
        if np.shape(pair) != (2,):
            raise PgrpoSimError(f"bounds for {name} must be a pair (low, high), got {pair!r}")
        a, b = (float(v) for v in pair)
        row = HYPERPARAMETERS[name]
        domain = row.domain._replace(low_open=row.domain.low_open or row.log_scale)  # a log scale needs > 0
        domain.check(f"bounds for {name}", [a, b])
        if not a < b:
            raise PgrpoSimError(f"bounds for {name} must have low < high, got ({a:g}, {b:g})")
        lo.append(a)
        hi.append(b)
    numeric = dict(
        target=math.nan if target is None else float(target),
        smoothing=float(smoothing),
        min_zeta=math.nan if min_damping_ratio is None else float(min_damping_ratio),
        max_radius=math.nan if radius_margin is None else 1.0 - float(radius_margin),
        penalty=float(penalty),
        lo=np.asarray(lo),
        hi=np.asarray(hi),
    )
    return search_names, numeric


def _outer_grid(config: bandit.Config, lags, group_sizes) -> list[tuple[dict[str, int], bandit.Config]]:
    """One configuration per combination of the integer outer grid (or just `config`)."""
    if lags is not None and config.lag_model == "none":
        raise PgrpoSimError("an outer grid of lags needs lag_model 'stale' or 'refresh'")
    for name, values in (("lags", lags), ("group_sizes", group_sizes)):
        if values is not None and len(values) == 0:
            raise PgrpoSimError(f"{name} must hold at least one value (or be None: no outer grid)")
        if values is not None and len(set(map(float, values))) < len(values):
            raise PgrpoSimError(f"{name} holds a value twice: each is one search, give it once")
    combos = []
    for lag in lags if lags is not None else [None]:
        for g in group_sizes if group_sizes is not None else [None]:
            changes, label = {}, {}
            if lag is not None:
                assert lags is not None  # lag is one of them
                check_range("lags", lag, 0, integer=True)
                changes.update(lag=int(lag), max_lag=max(config.max_lag, *map(int, lags)))
                label["lag"] = int(lag)
            if g is not None:
                check_range("group_sizes", g, 2, integer=True)
                changes["num_generations"] = int(g)
                label["num_generations"] = int(g)
            combos.append((label, config.replace(**changes) if changes else config))
    return combos


def _problem(objective, names, config, scale, steps, numeric) -> _Problem:
    lag, lag_model = discrete_lag(config.lag, config.lag_model)
    return _Problem(
        objective=objective,
        names=names,
        logs=tuple(HYPERPARAMETERS[n].log_scale for n in names),
        steps=0 if objective == "damping-ratio" else int(steps),  # 0: no simulation in the objective
        lag=lag,
        lag_model=lag_model,
        scale=scale,
        zeta_constraint=not math.isnan(numeric["min_zeta"]),
        radius_constraint=not math.isnan(numeric["max_radius"]),
    )


def _unit_grid(d: int, num: int) -> np.ndarray:
    axes = np.meshgrid(*([np.linspace(0.0, 1.0, num)] * d), indexing="ij")
    return np.stack([a.ravel() for a in axes], -1)


def _check_feasible(problem: _Problem, cfg2, numeric, label: dict) -> None:
    """Refuse a box with no interior fixed point, or in which no point meets the stability constraints
    (checked on a grid of ~1024 points in the box; constraints only, no simulation)."""
    needs_p_star = problem.objective != "final-reward" or problem.zeta_constraint or problem.radius_constraint
    if not needs_p_star:
        return
    d = len(problem.names)
    unit = _unit_grid(d, max(2, round(1024 ** (1 / d))))
    quick = dataclasses.replace(problem, objective="damping-ratio", steps=0)  # ζ and radius only, no simulation
    aux = _evaluate_grid(quick, cfg2, numeric, unit)
    where = f" (at {label})" if label else ""
    if not np.any(np.isfinite(aux["p_star"])):
        raise PgrpoSimError(
            f"no interior fixed point p* anywhere in the search box{where} (β = 0 has none): objective "
            f"{problem.objective} and the stability constraints need p* and K"
        )
    ok = np.ones(len(unit), bool)
    wanted = []
    if problem.zeta_constraint:
        ok &= aux["damping_ratio"] >= numeric["min_zeta"]
        wanted.append(f"ζ ≥ {numeric['min_zeta']:g}")
    if problem.radius_constraint:
        ok &= aux["spectral_radius"] <= numeric["max_radius"]
        wanted.append(f"spectral radius ≤ {numeric['max_radius']:g}")
    if wanted and not ok.any():
        i = int(np.nanargmin(aux["violation"]))
        at = ", ".join(f"{n}={v:.4g}" for n, v in zip(problem.names, aux["values"][i], strict=True))
        raise PgrpoSimError(
            f"infeasible constraints{where}: no point of the search box has {' and '.join(wanted)}; the closest, "
            f"{at}, has ζ = {aux['damping_ratio'][i]:.4g} and spectral radius {aux['spectral_radius'][i]:.4g}"
        )


def _latin_hypercube(seed: int, restarts: int, d: int) -> np.ndarray:
    """`restarts` starting points in (0, 1)^d, one per stratum along every axis (Latin hypercube)."""
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(restarts) for _ in range(d)], -1)
    return (perms + rng.uniform(0.1, 0.9, (restarts, d))) / restarts


def _curve(problem: _Problem, cfg2, values: dict[str, float], steps: int) -> np.ndarray:
    cfg = substitute(cfg2, {k: jnp.asarray(v, cfg2.learning_rate.dtype) for k, v in values.items()}, problem.scale)
    return np.asarray(simulate(cfg, steps).reward)


def _constraint_report(aux_at_best: dict, numeric) -> dict[str, Any]:
    zeta, radius = float(aux_at_best["damping_ratio"]), float(aux_at_best["spectral_radius"])
    out: dict[str, Any] = {"damping_ratio": finite_or_none(zeta), "spectral_radius": finite_or_none(radius)}
    feasible = True
    if not math.isnan(numeric["min_zeta"]):
        out["min_damping_ratio"] = numeric["min_zeta"]
        feasible &= zeta >= numeric["min_zeta"] - 1e-3
    if not math.isnan(numeric["max_radius"]):
        out["max_spectral_radius"] = numeric["max_radius"]
        feasible &= radius <= numeric["max_radius"] + 1e-3
    out["violation"] = float(aux_at_best["violation"])
    out["feasible"] = bool(feasible)
    return out


def search(
    objective: str,
    config: bandit.Config,
    *,
    restarts: int = OPTIMISER_DEFAULTS["restarts"],
    iterations: int = OPTIMISER_DEFAULTS["iterations"],
    learning_rate: float = OPTIMISER_DEFAULTS["learning_rate"],
    lags: Sequence[int] | None = None,
    group_sizes: Sequence[int] | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    **settings,
) -> SearchResult:
    """Gradient search for hyperparameters of `config` (its other hyperparameters stay fixed).

    Objectives (all minimised as a loss; `objective_value` reports the natural quantity):
    - "damping-ratio": reach ζ = `target` (e.g. 1.0, critical damping): loss (ζ − target)². By default only
      η is searched, i.e. solve ζ(η; μ, τ, K) = target.
    - "time-to-threshold": the smooth time (steps) to cover the fraction `target` of the way from p_ref to p*
      in `steps` expected-mode steps (`Outcomes.time_to_threshold`, width `smoothing`); loss T/steps.
    - "final-reward": maximise p after `steps` steps (the step budget); loss −p_steps.
    Stability constraints, any objective: exact discrete spectral radius ≤ 1 − `radius_margin` (default
    δ = 0.01; None: off) and ζ ≥ `min_damping_ratio` (None: off), as a quadratic exterior penalty:
    loss + `penalty` · Σ max(0, violation)², violations in units of ζ and of the radius. A box in which no
    point meets them is refused (checked on a grid first, constraints only).

    Searched names (`search`, default η for damping-ratio, else η and μ) come from η, μ, β, p_ref, clip, each
    in a box (`bounds`, default `DEFAULT_BOUNDS`) mapped to u ∈ (0, 1) — logarithmically for η, β, clip —
    and optimised as z = logit(u), unconstrained, by Adam (`learning_rate` in units of z, cosine decay) for
    `iterations` steps from `restarts` Latin-hypercube starts (`seed`), vmapped; the penalty weight is ramped up over
    the first 80 % of the iterations (continuation), so restarts reach the constraint from the unconstrained
    optimum instead of crawling along a stiff penalty wall. Lag and group size are integer: give `lags` /
    `group_sizes` for an outer grid, one search per combination. The best point over all evaluations (full
    penalty) wins. Evaluations whose loss or gradient is NaN are skipped (with a warning); if every one is
    NaN, ValueError. Each search (one per outer-grid combination) is told to `progress` once its box is found
    feasible.

    Args:
        objective: one of `OBJECTIVES`.
        config: the bandit configuration searched around (reduced to two arms, `two_arm_reduction`).
        restarts: Latin-hypercube starts, vmapped; ≥ 1.
        iterations: Adam steps per start; ≥ 1.
        learning_rate: Adam's initial step in logit units of the box; > 0.
        lags: an outer grid of integer lags (lag model "stale" or "refresh"); None: the config's lag.
        group_sizes: an outer grid of group sizes; None: the config's.
        seed: seed of the Latin-hypercube starts.
        progress: told each search's start (`base.progress`); None: silent.
        **settings: the fields of `SearchSettings` (target, search, bounds, steps, smoothing, constraints, penalty).

    Returns:
        A `SearchResult`: the best point, its objective value and constraints, the evaluations spent and history.

    Raises:
        PgrpoSimError: a setting out of its range, a configuration without an exact two-arm reduction
            (`two_arm_reduction`), a box without an interior fixed point p* or in which no point meets the
            constraints, or every evaluation NaN.
    """
    settings = SearchSettings(**settings)
    steps = settings.steps
    names, numeric = _setup(objective, settings)
    check_range("restarts", restarts, 1, integer=True)
    check_range("iterations", iterations, 1, integer=True)
    check_range("learning_rate", learning_rate, 0.0, low_open=True)
    check_seed(seed)
    runs = []
    grid = _outer_grid(config, lags, group_sizes)
    for i, (label, cfg) in enumerate(grid):
        cfg2 = two_arm_reduction(cfg)
        problem = _problem(objective, names, cfg, eta_scale(cfg), steps, numeric)
        num = _numeric_arrays(numeric, cfg2, names)
        _check_feasible(problem, cfg2, num, label)
        where = "".join(f", {k}={v}" for k, v in label.items())
        report(progress, f"searching{where} ({i + 1}/{len(grid)}): {restarts} restart(s) × {iterations} Adam steps")
        z0 = jnp.asarray(_logit(_latin_hypercube(int(seed), restarts, len(names))), cfg2.learning_rate.dtype)
        history = _optimise(
            problem, cfg2, num, z0, jnp.asarray(learning_rate, cfg2.learning_rate.dtype), int(iterations)
        )
        runs.append((label, cfg2, problem, jax.tree.map(np.asarray, history)))
    return _collect(objective, runs, numeric, restarts * iterations, steps)


MAX_GRID_POINTS = 2**20
"""Largest `grid_search` grid: 10⁶ evaluations of a few hundred steps take minutes on a CPU; 64 points for each of
5 hyperparameters (10⁹) would need tens of GB and hours."""


def grid_search(
    objective: str,
    config: bandit.Config,
    *,
    num: int = 64,
    **settings,
) -> SearchResult:
    """The same penalised objective as `search`, minimised by a dense grid of `num` points per searched
    hyperparameter over the same box (log-spaced for η, β, clip, box edges included): the reference that the
    gradient search is validated against. One objective evaluation (value only) per grid point.

    Args:
        objective: one of `OBJECTIVES`.
        config: the bandit configuration searched around.
        num: grid points per searched hyperparameter; ≥ 2, num^(searched names) ≤ `MAX_GRID_POINTS`.
        **settings: the fields of `SearchSettings`.

    Returns:
        A `SearchResult` (empty `history`).

    Raises:
        PgrpoSimError: a setting out of its range, more than `MAX_GRID_POINTS` grid points, a configuration without
            an exact two-arm reduction (`two_arm_reduction`), or every grid point NaN.
    """
    settings = SearchSettings(**settings)
    steps = settings.steps
    names, numeric = _setup(objective, settings)
    check_range("num", num, 2, integer=True)
    if int(num) ** len(names) > MAX_GRID_POINTS:
        raise PgrpoSimError(
            f"num = {num} per hyperparameter gives {int(num) ** len(names):.3g} grid points over {len(names)} "
            f"hyperparameters; at most MAX_GRID_POINTS = {MAX_GRID_POINTS} (lower num or search fewer names)"
        )
    cfg2 = two_arm_reduction(config)
    problem = _problem(objective, names, config, eta_scale(config), steps, numeric)
    num_arrays = _numeric_arrays(numeric, cfg2, names)
    unit = _unit_grid(len(names), int(num))
    history = {k: v[None] for k, v in _evaluate_grid(problem, cfg2, num_arrays, unit).items()}
    result = _collect(objective, [({}, cfg2, problem, history)], numeric, len(unit), steps)
    return result._replace(history={})


def _numeric_arrays(numeric: dict, cfg2: bandit.Config, names: Sequence[str]) -> dict[str, Array]:
    """The numbers of a search as arrays, plus p* computed once when no searched name moves it (β, p_ref)."""
    out = {k: jnp.asarray(v, cfg2.learning_rate.dtype) for k, v in numeric.items()}
    if not {"beta", "p_ref"} & set(names):
        out["x_star"], out["found"], _ = fixed_point_stiffness(cfg2)
    return out


def _logit(u: np.ndarray) -> np.ndarray:
    return np.log(u) - np.log1p(-u)


def _collect(objective: str, runs, numeric, evaluations_per_run: int, steps: int) -> SearchResult:
    """Pick the best evaluation over all runs (outer-grid combinations) and assemble the result."""
    outer, best = [], None
    nan_count = 0
    for label, cfg2, problem, history in runs:
        loss = history["loss"]
        nan_count += int(np.sum(~np.isfinite(loss)))
        if not np.any(np.isfinite(loss)):
            outer.append(dict(label, loss=None, objective_value=None))
            continue
        i = np.unravel_index(np.nanargmin(loss), loss.shape)
        row = dict(label, loss=float(loss[i]), objective_value=float(history["objective"][i]))
        outer.append(row)
        if best is None or row["loss"] < best[0]["loss"]:
            best = (row, label, cfg2, problem, history, i)
    if best is None:
        raise PgrpoSimError(
            f"objective {objective} is NaN at every evaluated point (runs that diverge, or no fixed point p*); "
            "narrow the search box (smaller η) or check the configuration"
        )
    if nan_count:
        warnings.warn(
            f"{nan_count} evaluations of {objective} were NaN (runs that diverge, or no fixed point "
            "p*) and were skipped",
            RuntimeWarning,
            stacklevel=3,
        )
    row, label, cfg2, problem, history, i = best
    values = {n: float(history["values"][i][k]) for k, n in enumerate(problem.names)}
    aux_at_best = {k: history[k][i] for k in ("damping_ratio", "spectral_radius", "violation")}
    trace = {"loss": history["loss"], "objective": history["objective"]}
    trace.update({n: history["values"][..., k] for k, n in enumerate(problem.names)})
    return SearchResult(
        objective=objective,
        best=dict(values, **label),
        objective_value=row["objective_value"],
        loss=row["loss"],
        constraints=_constraint_report(aux_at_best, numeric),
        evaluations=evaluations_per_run * len(runs),
        trajectory=_curve(problem, cfg2, values, steps),
        history=trace,
        outer=outer,
        nan_evaluations=nan_count,
    )
