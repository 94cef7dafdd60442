"""Differentiable hyperparameters: sensitivities, differentiable simulated outcomes, gradient-based search.

Everything here works on the exact two-arm reduction of a class-symmetric, binary-reward, single-prompt
configuration (`prediction.two_arm_reduction`; SGD or Nesterov): its expected-mode reward curve equals the
N-arm one, and the oscillator uses η_eff = η·N/(c(N−c)) as its η (README, "From bandit to oscillator").
Gradients are exact:
- p* = σ(x*) solves X(x*) = 0 for the expected logit drive X. `predict` finds x* by bisection, which has no
  derivative; here the bisection root is refined by one Newton step x* − X(x*)/X'(x*), which leaves the value
  unchanged and carries the implicit-function derivative dx*/dθ = −∂X/∂θ / X'. K = −X'(x*) then has exact
  first derivatives as well.
- simulated outcomes differentiate through the `lax.scan` of the exact expected-mode bandit.

Differentiated ("continuous") hyperparameters: η, μ, β, p_ref (the class-symmetric start, which is also the
KL reference) and clip (ε_low, and ε_high too when the configuration has ε_high = ε_low). The lag is
differentiated only as the continuous τ of the oscillator (`sensitivities`). Integer hyperparameters (lag,
group size) are never differentiated: `search` takes them as a small outer grid (`lags`, `group_sizes`),
runs one gradient search per combination and reports every combination.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from . import linear, theory
from ._checks import check_choice, check_range, is_concrete
from .bandit import simulate
from .config import BanditConfig
from .prediction import _noise, continuous_lag, expected_drive, stiffness_at_fixed_point, two_arm_reduction
from .sweep import _point_config

CONTINUOUS = ("eta", "momentum", "beta", "p_ref", "clip")
"""Hyperparameters that `with_hyperparameters`, `outcomes` and `search` differentiate."""
INTEGER = ("lag", "group_size")
"""Integer hyperparameters: an outer grid in `search`, never a gradient."""
PARAMETERS = CONTINUOUS + ("lag",)
"""Columns of `sensitivities` ("lag" is the continuous lag τ of the oscillator)."""
QUANTITIES = (
    "p_star",
    "stiffness",
    "noise",
    "damping_ratio",
    "natural_frequency",
    "critical_lag",
    "stationary_variance",
)
"""Rows of `sensitivities`: `predict` fields, with exact derivatives."""
OBJECTIVES = ("damping-ratio", "time-to-threshold", "final-reward")
DEFAULT_BOUNDS = {
    "eta": (1e-3, 1.0),
    "momentum": (0.0, 0.99),
    "beta": (1e-3, 10.0),
    "p_ref": (0.01, 0.99),
    "clip": (0.01, 0.5),
}
"""Default search box per hyperparameter (config units: η is the bandit's η, not η_eff)."""
LOG_SCALE = ("eta", "beta", "clip")
"""Searched in log coordinates (the others linearly): box coordinate u ∈ (0, 1), optimised as logit(u)."""
_LIMITS = {
    "eta": (0.0, None, True),
    "momentum": (0.0, 1.0, False),
    "beta": (0.0, None, True),
    "p_ref": (0.0, 1.0, True),
    "clip": (0.0, 1.0, True),
}
"""Allowed search-box range per name: (low, high, low end open); the high end is open."""


# ----------------------------------------------------------------------------------------------------
# reduction, substitution and the differentiable oscillator


@dataclasses.dataclass(frozen=True)
class _Reduction:
    """Static facts of the two-arm reduction: η₂ = η·eta_scale, and whether `clip` moves ε_high too."""

    eta_scale: float
    clip_both: bool


def _clip_both(config: BanditConfig) -> bool:
    """Whether `clip` moves ε_high with ε_low: when they are equal (or traced)."""
    if not is_concrete(config.clip_low, config.clip_high):
        return True
    return bool(np.all(np.asarray(config.clip_low) == np.asarray(config.clip_high)))


def _reduce(config: BanditConfig) -> tuple[BanditConfig, _Reduction]:
    """The exact two-arm reduction of `config` and its static facts; refuses Adam and configurations that
    have no exact reduction (`prediction.two_arm_reduction`)."""
    if config.optimizer == "adam":
        raise ValueError(
            "optimizer adam is not supported: Adam rescales each logit separately, so the exact two-arm reduction "
            "(and the p*, K, ζ and spectral radius it gives) does not hold; use sgd or nesterov"
        )
    cfg2 = two_arm_reduction(config)  # raises for non-binary rewards, several prompts, asymmetric starts
    rewards = np.asarray(config.rewards)[0]
    n, c = rewards.size, int(rewards.sum())
    return cfg2, _Reduction(n / (2 * c * (n - c)), _clip_both(config))


def _substitute(cfg2: BanditConfig, values: Mapping[str, Array], red: _Reduction) -> BanditConfig:
    """The two-arm configuration with continuous hyperparameters (config units) replaced; works on tracers."""
    params = dict(values)
    if "eta" in params:
        params["eta"] = params["eta"] * red.eta_scale
    return _point_config(cfg2, params, 1, red.clip_both)


def with_hyperparameters(config: BanditConfig, **values: Any) -> BanditConfig:
    """`config` with continuous hyperparameters replaced (η, μ, β, p_ref, clip; traced values allowed).

    `p_ref` rebuilds the class-symmetric start (and KL reference) with correct mass p_ref; `clip` sets
    ε_low, and ε_high too when the configuration has ε_high = ε_low. Use it to differentiate with respect
    to p_ref: `jax.grad(lambda p: outcomes(with_hyperparameters(cfg, p_ref=p), 500).final_reward)(0.2)`.
    """
    _check_names(values)
    rewards = np.asarray(config.rewards)
    if "p_ref" in values and not np.all((rewards == 0) | (rewards == 1)):
        raise ValueError("p_ref needs binary (0/1) rewards: it sets the mass of the correct arms")
    return _point_config(config, values, int(rewards[0].sum()), _clip_both(config))


def _check_names(names) -> None:
    for name in names:
        if name in INTEGER:
            raise ValueError(
                f"{name} is an integer hyperparameter and is not differentiated; "
                f"search it as an outer grid instead ({'lags' if name == 'lag' else 'group_sizes'}=[...], "
                f"pgrpo-sim tune --{'lags' if name == 'lag' else 'group-sizes'} ...)"
            )
        if name not in CONTINUOUS:
            raise ValueError(f"unknown hyperparameter {name!r}; continuous ones are {', '.join(CONTINUOUS)}")


def _fixed_point(cfg2: BanditConfig) -> tuple[Array, Array]:
    """(x* = logit p*, found) of a two-arm configuration, with the exact first derivative (module docstring)."""
    x, found, _, _ = stiffness_at_fixed_point(jax.lax.stop_gradient(cfg2))
    value, slope = jax.value_and_grad(functools.partial(expected_drive, cfg2))(x)
    return x - jnp.where(found, value / jnp.where(found, slope, 1.0), 0.0), found


def _stiffness(cfg2: BanditConfig, fixed: tuple[Array, Array] | None = None) -> tuple[Array, Array, Array]:
    """(x* = logit p*, found, K = −X'(x*)) of a two-arm configuration (`prediction.two_arm_reduction`), with
    exact first derivatives in every float leaf; `fixed`: (x*, found) when p* is known not to move."""
    x, found = _fixed_point(cfg2) if fixed is None else fixed
    return x, found, -jax.grad(functools.partial(expected_drive, cfg2))(x)


_stiffness_jit = jax.jit(_stiffness)


def _stiffness_once(cfg2: BanditConfig) -> tuple[Array, Array, Array]:
    """`_stiffness` of a concrete two-arm configuration, compiled once for every lag model and buffer length
    (the on-policy drive reads neither)."""
    return _stiffness_jit(cfg2.replace(lag_model="none", lag=0, max_lag=0))


def reference_mass(config: BanditConfig) -> float:
    """p_ref: the correct mass of the class-symmetric start (which is also the KL reference)."""
    logits = np.asarray(config.init_logits[0], float)
    pi = np.exp(logits - logits.max())
    return float(np.sum(pi * np.asarray(config.rewards[0])) / pi.sum())


_DRIVE_FIELDS = ("rewards", "init_logits", "beta", "kl_clamp", "adv_eps")
"""The leaves the on-policy drive (`bandit.on_policy_grad`) reads: η, μ, clip and lag do not move p*."""


def _constant_fixed_point(cfg2: BanditConfig) -> tuple[Array, Array] | None:
    """(x*, found) computed once, eagerly, when no leaf the drive reads is traced (so p* cannot move); else None.

    Keeps the fixed-point search (a 1201-point grid and 80 bisection steps) out of the traced programs of
    gradients with respect to η, μ and clip."""
    if not is_concrete([getattr(cfg2, f) for f in _DRIVE_FIELDS]):
        return None
    placeholder = lambda v: np.ones(v.shape, v.dtype) if isinstance(v, jax.core.Tracer) else v  # noqa: E731
    return _stiffness_once(jax.tree.map(placeholder, cfg2))[:2]


def _quantities(cfg2: BanditConfig, lag: Array, fixed: tuple[Array, Array] | None = None) -> dict[str, Array]:
    """`QUANTITIES` of a two-arm configuration with continuous oscillator lag τ = `lag`; NaN without p*.
    `fixed`: (x*, found) when p* is known not to move (see `_constant_fixed_point`)."""
    x, found, k = _stiffness(cfg2, fixed)
    eta_eff = 2 * cfg2.eta
    osc = (eta_eff, cfg2.momentum, lag, k)
    noise = _noise(cfg2, x)
    out = dict(
        p_star=jax.nn.sigmoid(x),
        stiffness=k,
        noise=noise,
        damping_ratio=theory.damping_ratio(*osc),
        natural_frequency=theory.natural_frequency(*osc),
        critical_lag=theory.critical_lag(eta_eff, cfg2.momentum, k),
        stationary_variance=theory.stationary_variance(*osc, noise, jnp.asarray(cfg2.group_size, eta_eff.dtype)),
    )
    return {name: jnp.where(found, v, jnp.nan) for name, v in out.items()}


# ----------------------------------------------------------------------------------------------------
# sensitivities


class Sensitivities(NamedTuple):
    """A named table of partial derivatives at one configuration.

    point: the hyperparameters' values (η in config units; lag = the continuous τ of the oscillator: τ for
    stale lag, (K_ref − 1)/2 for refresh, 0 for none); values: `QUANTITIES` at that point; partials:
    partials[quantity][parameter] = ∂quantity/∂parameter (units of the quantity per unit of the parameter).
    """

    point: dict[str, float]
    values: dict[str, float]
    partials: dict[str, dict[str, float]]

    def table(self) -> str:
        """The table as aligned text: one row per quantity, one column per parameter."""
        cols = list(self.point)
        head = f"{'':<20}{'value':>13}" + "".join(f"{'d/d' + c:>13}" for c in cols)
        rows = [head] + [
            f"{q:<20}{self.values[q]:>13.5g}" + "".join(f"{self.partials[q][c] + 0.0:>13.5g}" for c in cols)
            for q in self.values
        ]
        return "\n".join(rows)


@functools.partial(jax.jit, static_argnames=("red",))
def _sensitivity_kernel(cfg2, point, red):
    def f(p):
        p = dict(p)
        lag = p.pop("lag")
        return _quantities(_substitute(cfg2, p, red), lag)

    return f(point), jax.jacfwd(f)(point)


def sensitivities(config: BanditConfig, wrt: Sequence[str] = PARAMETERS) -> Sensitivities:
    """Exact partial derivatives (`jax.jacfwd`) of p*, K, D, ζ, ω_n, τ* and the stationary variance D/(2GCK)
    with respect to η, μ, β, p_ref, clip and the continuous lag τ, at `config` (see `Sensitivities`).

    p* and K do not depend on η, μ or τ (the fixed point of the on-policy drive), nor on clip (the ratio is 1
    on-policy), so those entries are exactly 0: the table says so rather than leaving them out.
    """
    wrt = tuple(wrt)
    for name in wrt:
        if name != "lag":
            _check_names([name])
    cfg2, red = _reduce(config)
    dtype = cfg2.eta.dtype
    current = dict(
        eta=config.eta,
        momentum=config.momentum,
        beta=config.beta,
        p_ref=reference_mass(config),
        clip=config.clip_low,
    )
    point = {name: jnp.asarray(current[name], dtype) for name in wrt if name != "lag"}
    point["lag"] = jnp.asarray(continuous_lag(config), dtype)
    values, jac = _sensitivity_kernel(cfg2, point, red)
    return Sensitivities(
        point={name: float(point[name]) for name in wrt},
        values={q: float(values[q]) for q in QUANTITIES},
        partials={q: {name: float(jac[q][name]) for name in wrt} for q in QUANTITIES},
    )


# ----------------------------------------------------------------------------------------------------
# differentiable simulated outcomes


class Outcomes(NamedTuple):
    """Differentiable read-outs of the expected-mode reward curve p_0 … p_steps.

    final_reward: p_steps. time_to_threshold (steps): the smooth time spent short of the threshold,
    T = ∫₀^steps σ((f − u(t))/s) dt, with u(t) = (p(t) − p_0)/(p* − p_0) the fraction of the way to p*
    (linearly interpolated between steps), f = `fraction`, s = `smoothing` and σ(x) = ½(1 + x/√(1+x²)). As
    s → 0, T → the time u spends below f, which for a monotone curve is its (interpolated) first-passage
    time; an oscillating curve also counts its later dips below f. Two choices keep T usable by a gradient:
    integrating over the interpolated curve (a plain Σ_t σ((f − u_t)/s) is a staircase in the
    hyperparameters when one step moves u by much more than s), and an algebraic sigmoid, whose tails decay
    as 1/x² rather than e^{−x}, so a run that stays far short of the threshold still has a gradient towards
    it. overshoot: max(0, max_t sign(p* − p_0)(p_t − p*)), reward units.
    area: trapezoidal ∫ p dt over the run (reward × steps). late_variance: the predicted stationary Var(p) of
    sampled training, D/(2GCK) (reward²). p_star: the fixed point. reward: the curve itself.
    """

    final_reward: Array
    time_to_threshold: Array
    overshoot: Array
    area: Array
    late_variance: Array
    p_star: Array
    reward: Array


def _time_short_of(u: Array, f, s) -> Array:
    """Σ_t ∫₀¹ σ((f − u(t+θ))/s) dθ over the linearly interpolated curve u (see `Outcomes`): per interval
    (S(a_t) − S(a_{t+1}))/(a_t − a_{t+1}) with a = (f − u)/s and S(x) = ½(x + √(1+x²)) the antiderivative of
    σ(x) = ½(1 + x/√(1+x²)); σ at the midpoint when a_t ≈ a_{t+1}."""
    a = (f - u) / s
    root = jnp.sqrt(1 + a * a)
    antiderivative = 0.5 * jnp.where(a > 0, a + root, 1 / (root - a))  # both forms free of cancellation
    d = a[:-1] - a[1:]
    close = jnp.abs(d) < 1e-6
    exact = (antiderivative[:-1] - antiderivative[1:]) / jnp.where(close, 1.0, d)
    mid = (a[:-1] + a[1:]) / 2
    return jnp.sum(jnp.where(close, 0.5 * (1 + mid / jnp.sqrt(1 + mid * mid)), exact))


def _read_outcomes(reward: Array, q: dict[str, Array], fraction, smoothing) -> Outcomes:
    p0, p_star = reward[0], q["p_star"]
    progress = (reward - p0) / (p_star - p0)
    return Outcomes(
        final_reward=reward[-1],
        time_to_threshold=_time_short_of(progress, fraction, smoothing),
        overshoot=jnp.maximum(jnp.max(jnp.sign(p_star - p0) * (reward - p_star)), 0.0),
        area=jnp.trapezoid(reward),
        late_variance=q["stationary_variance"],
        p_star=p_star,
        reward=reward,
    )


@functools.partial(jax.jit, static_argnames=("steps",))
def _outcomes_kernel(cfg2, fixed, fraction, smoothing, steps):
    reward = simulate(cfg2, steps).reward
    return _read_outcomes(reward, _quantities(cfg2, continuous_lag(cfg2), fixed), fraction, smoothing)


def outcomes(config: BanditConfig, steps: int, *, fraction: float = 0.9, smoothing: float = 0.02) -> Outcomes:
    """Differentiable outcomes (`Outcomes`) of `steps` expected-mode steps of `config` (its exact two-arm
    reduction, the same reward curve); `jax.grad` / `jax.jacfwd` work with respect to config's float leaves
    (η, μ, β, clip, init_logits; use `with_hyperparameters` for p_ref), through the whole `lax.scan`.

    `fraction` ∈ (0, 1) sets the threshold, `smoothing` > 0 the width of the relaxation, both in units of the
    way from p_0 to p*. A run that diverges gives NaN, never a number.
    """
    check_range("steps", steps, 1, integer=True)
    check_range("fraction", fraction, 0.0, 1.0, low_open=True, high_open=True)
    check_range("smoothing", smoothing, 0.0, low_open=True)
    cfg2, _ = _reduce(config)
    dtype = cfg2.eta.dtype
    fixed = _constant_fixed_point(cfg2)
    return _outcomes_kernel(cfg2, fixed, jnp.asarray(fraction, dtype), jnp.asarray(smoothing, dtype), int(steps))


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
    red: _Reduction
    zeta_constraint: bool
    radius_constraint: bool


def _values_from_unit(problem: _Problem, u: Array, numeric) -> Array:
    """Box coordinates u ∈ [0, 1]^d → hyperparameter values (log-spaced for `LOG_SCALE`)."""
    lo, hi = numeric["lo"], numeric["hi"]
    out = [
        lo[i] * (hi[i] / lo[i]) ** u[i] if log else lo[i] + (hi[i] - lo[i]) * u[i] for i, log in enumerate(problem.logs)
    ]
    return jnp.stack(out)


def _evaluate(problem: _Problem, cfg2: BanditConfig, numeric, values: Array) -> dict[str, Array]:
    """Penalised loss and read-outs at one point (hyperparameter values in config units)."""
    cfg = _substitute(cfg2, dict(zip(problem.names, values)), problem.red)
    fixed = (numeric["x_star"], numeric["found"]) if "x_star" in numeric else None
    q = _quantities(cfg, continuous_lag(cfg), fixed)
    eta_eff, k = 2 * cfg.eta, q["stiffness"]
    radius = linear.spectral_radius(eta_eff, cfg.momentum, problem.lag, k, lag_model=problem.lag_model)
    zeta = q["damping_ratio"]
    if problem.objective == "damping-ratio":
        value = zeta
        scaled = (zeta - numeric["target"]) ** 2
    else:
        reward = simulate(cfg, problem.steps).reward
        out = _read_outcomes(reward, q, numeric["target"], numeric["smoothing"])
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
    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, iterations, alpha=1e-3), **_ADAM)

    def loss(z, weight):
        aux = _evaluate(problem, cfg2, numeric, _values_from_unit(problem, jax.nn.sigmoid(z), numeric))
        return aux["scaled"] + weight * aux["violation_sq"], aux

    def one(z, state, weight):
        (value, aux), grad = jax.value_and_grad(loss, has_aux=True)(z, weight)
        updates, new_state = opt.update(grad, state)
        ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
        keep = lambda new, old: jnp.where(ok, new, old)  # noqa: E731
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
    aux = _evaluate_many(problem, cfg2, numeric, jnp.asarray(padded, cfg2.eta.dtype))
    return {k: np.asarray(v)[: len(unit)] for k, v in aux.items()}


class SearchResult(NamedTuple):
    """Result of `search` (or `grid_search`).

    best: the hyperparameters found, by name (searched ones in config units, plus lag / group_size when they
    were an outer grid); objective_value: the objective there (ζ for damping-ratio, steps for
    time-to-threshold, p for final-reward); loss: the penalised, minimised loss there; constraints: ζ and the
    exact discrete spectral radius there, the bounds asked for and `feasible`; evaluations: objective
    evaluations spent (each one value + gradient for `search`, value only for `grid_search`); trajectory: the
    expected reward curve p_0 … p_steps at the best point; history: per iteration × restart `loss`,
    `objective` and the searched values (the winning outer-grid combination; empty for `grid_search`);
    outer: one row per outer-grid combination (its best loss and objective); nan_evaluations: evaluations
    whose loss was NaN (diverged runs, no p*), skipped by the optimiser.
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
        keys = ("objective", "best", "objective_value", "loss", "evaluations", "constraints", "outer", "nan_evaluations")
        out = {k: getattr(self, k) for k in keys}
        out["searched"] = [n for n in self.best if n in CONTINUOUS]
        out["outer_grid"] = [n for n in self.best if n in INTEGER]
        return out


def _setup(
    objective: str,
    search_names: Sequence[str] | None,
    target: float | None,
    bounds: Mapping[str, tuple[float, float]] | None,
    steps: int,
    smoothing: float,
    min_damping_ratio: float | None,
    radius_margin: float | None,
    penalty: float,
):
    """Validate a search request; return the searched names and the numbers of the problem (box, target,
    constraint bounds, penalty) with NaN for what is not asked."""
    check_choice("objective", objective, OBJECTIVES)
    if search_names is None:
        search_names = ("eta",) if objective == "damping-ratio" else ("eta", "momentum")
    search_names = tuple(search_names)
    if not search_names or len(set(search_names)) != len(search_names):
        raise ValueError(f"search needs distinct hyperparameter names, got {list(search_names)}")
    _check_names(search_names)
    if objective == "damping-ratio":
        if target is None:
            raise ValueError("objective damping-ratio needs a target ζ (e.g. 1.0 for critical damping)")
        check_range("target", target, 0.0, low_open=True)
    elif objective == "time-to-threshold":
        if target is None:
            raise ValueError(
                "objective time-to-threshold needs a target: the fraction of the way from p_ref to p* (e.g. 0.9)"
            )
        check_range("target", target, 0.0, 1.0, low_open=True, high_open=True)
    elif target is not None:
        raise ValueError("objective final-reward takes no target (the step budget is steps; --steps on the command line)")
    check_range("steps", steps, 1, integer=True)
    check_range("smoothing", smoothing, 0.0, low_open=True)
    check_range("min_damping_ratio", min_damping_ratio)
    check_range("radius_margin", radius_margin, 0.0, 1.0, high_open=True)
    check_range("penalty", penalty, 0.0)
    bounds = dict(bounds or {})
    for name in bounds:
        if name not in search_names:
            raise ValueError(f"bounds given for {name!r}, which is not searched ({', '.join(search_names)})")
    lo, hi = [], []
    for name in search_names:
        a, b = (float(v) for v in bounds.get(name, DEFAULT_BOUNDS[name]))
        low, high, low_open = _LIMITS[name]
        check_range(f"bounds for {name}", [a, b], low, high, low_open=low_open, high_open=True)
        if not a < b:
            raise ValueError(f"bounds for {name} must have low < high, got ({a:g}, {b:g})")
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


def _outer_grid(config: BanditConfig, lags, group_sizes) -> list[tuple[dict[str, int], BanditConfig]]:
    """One configuration per combination of the integer outer grid (or just `config`)."""
    if lags is not None and config.lag_model == "none":
        raise ValueError("an outer grid of lags needs lag_model 'stale' or 'refresh'")
    combos = []
    for lag in lags if lags is not None else [None]:
        for g in group_sizes if group_sizes is not None else [None]:
            changes, label = {}, {}
            if lag is not None:
                check_range("lags", lag, 0, integer=True)
                changes.update(lag=int(lag), max_lag=max(config.max_lag, *map(int, lags)))
                label["lag"] = int(lag)
            if g is not None:
                check_range("group_sizes", g, 2, integer=True)
                changes["group_size"] = int(g)
                label["group_size"] = int(g)
            combos.append((label, config.replace(**changes) if changes else config))
    return combos


def _problem(objective, names, config, red, steps, numeric) -> _Problem:
    lag = int(np.asarray(config.lag)) if config.lag_model != "none" else 0
    return _Problem(
        objective=objective,
        names=names,
        logs=tuple(n in LOG_SCALE for n in names),
        steps=0 if objective == "damping-ratio" else int(steps),  # 0: no simulation in the objective
        lag=lag,
        lag_model="refresh" if config.lag_model == "refresh" else "stale",
        red=red,
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
    unit = _unit_grid(d, max(2, int(round(1024 ** (1 / d)))))
    quick = dataclasses.replace(problem, objective="damping-ratio", steps=0)  # ζ and radius only, no simulation
    aux = _evaluate_grid(quick, cfg2, numeric, unit)
    where = f" (at {label})" if label else ""
    if not np.any(np.isfinite(aux["p_star"])):
        raise ValueError(
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
        at = ", ".join(f"{n}={v:.4g}" for n, v in zip(problem.names, aux["values"][i]))
        raise ValueError(
            f"infeasible constraints{where}: no point of the search box has {' and '.join(wanted)}; the closest, "
            f"{at}, has ζ = {aux['damping_ratio'][i]:.4g} and spectral radius {aux['spectral_radius'][i]:.4g}"
        )


def _latin_hypercube(seed: int, restarts: int, d: int) -> np.ndarray:
    """`restarts` starting points in (0, 1)^d, one per stratum along every axis (Latin hypercube)."""
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(restarts) for _ in range(d)], -1)
    return (perms + rng.uniform(0.1, 0.9, (restarts, d))) / restarts


def _curve(problem: _Problem, cfg2, values: dict[str, float], steps: int) -> np.ndarray:
    cfg = _substitute(cfg2, {k: jnp.asarray(v, cfg2.eta.dtype) for k, v in values.items()}, problem.red)
    return np.asarray(simulate(cfg, steps).reward)


def _constraint_report(aux_at_best: dict, numeric) -> dict[str, Any]:
    zeta, radius = float(aux_at_best["damping_ratio"]), float(aux_at_best["spectral_radius"])
    out: dict[str, Any] = {"damping_ratio": _json_float(zeta), "spectral_radius": _json_float(radius)}
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


def _json_float(x: float) -> float | None:
    return None if math.isnan(x) else x


def search(
    objective: str,
    config: BanditConfig,
    *,
    target: float | None = None,
    search: Sequence[str] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    steps: int = 300,
    smoothing: float = 0.02,
    min_damping_ratio: float | None = None,
    radius_margin: float | None = 0.01,
    penalty: float = 1e3,
    restarts: int = 8,
    iterations: int = 100,
    learning_rate: float = 0.3,
    lags: Sequence[int] | None = None,
    group_sizes: Sequence[int] | None = None,
    seed: int = 0,
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
    the first half of the iterations (continuation), so restarts reach the constraint from the unconstrained
    optimum instead of crawling along a stiff penalty wall. Lag and group size are integer: give `lags` /
    `group_sizes` for an outer grid, one search per combination. The best point over all evaluations (full
    penalty) wins. Evaluations whose loss or gradient is NaN are skipped (with a warning); if every one is
    NaN, ValueError.
    """
    names, numeric = _setup(
        objective, search, target, bounds, steps, smoothing, min_damping_ratio, radius_margin, penalty
    )
    check_range("restarts", restarts, 1, integer=True)
    check_range("iterations", iterations, 1, integer=True)
    check_range("learning_rate", learning_rate, 0.0, low_open=True)
    check_range("seed", seed, 0, integer=True)
    runs = []
    for label, cfg in _outer_grid(config, lags, group_sizes):
        cfg2, red = _reduce(cfg)
        problem = _problem(objective, names, cfg, red, steps, numeric)
        num = _numeric_arrays(numeric, cfg2, names)
        _check_feasible(problem, cfg2, num, label)
        z0 = jnp.asarray(_logit(_latin_hypercube(int(seed), restarts, len(names))), cfg2.eta.dtype)
        history = _optimise(problem, cfg2, num, z0, jnp.asarray(learning_rate, cfg2.eta.dtype), int(iterations))
        runs.append((label, cfg2, problem, jax.tree.map(np.asarray, history)))
    return _collect(objective, runs, numeric, restarts * iterations, steps)


def grid_search(
    objective: str,
    config: BanditConfig,
    *,
    num: int = 64,
    target: float | None = None,
    search: Sequence[str] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    steps: int = 300,
    smoothing: float = 0.02,
    min_damping_ratio: float | None = None,
    radius_margin: float | None = 0.01,
    penalty: float = 1e3,
) -> SearchResult:
    """The same penalised objective as `search`, minimised by a dense grid of `num` points per searched
    hyperparameter over the same box (log-spaced for η, β, clip, box edges included): the reference that the
    gradient search is validated against. One objective evaluation (value only) per grid point."""
    names, numeric = _setup(
        objective, search, target, bounds, steps, smoothing, min_damping_ratio, radius_margin, penalty
    )
    check_range("num", num, 2, integer=True)
    cfg2, red = _reduce(config)
    problem = _problem(objective, names, config, red, steps, numeric)
    num_arrays = _numeric_arrays(numeric, cfg2, names)
    unit = _unit_grid(len(names), int(num))
    history = {k: v[None] for k, v in _evaluate_grid(problem, cfg2, num_arrays, unit).items()}
    result = _collect(objective, [({}, cfg2, problem, history)], numeric, len(unit), steps)
    return result._replace(history={})


def _numeric_arrays(numeric: dict, cfg2: BanditConfig, names: Sequence[str]) -> dict[str, Array]:
    """The numbers of a search as arrays, plus p* computed once when no searched name moves it (β, p_ref)."""
    out = {k: jnp.asarray(v, cfg2.eta.dtype) for k, v in numeric.items()}
    if not {"beta", "p_ref"} & set(names):
        out["x_star"], out["found"], _ = _stiffness_once(cfg2)
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
        raise ValueError(
            f"objective {objective} is NaN at every evaluated point (runs that diverge, or no fixed point p*); "
            "narrow the search box (smaller η) or check the configuration"
        )
    if nan_count:
        warnings.warn(
            f"{nan_count} evaluations of {objective} were NaN (runs that diverge, or no fixed point p*) and were skipped",
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


def plot_convergence(result: SearchResult, path: str) -> None:
    """Objective value per iteration for every restart, and the best penalised loss so far; saved to `path`."""
    from .plots import PALETTE, plt

    loss, objective = result.history["loss"], result.history["objective"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8), layout="constrained")
    steps = np.arange(1, loss.shape[0] + 1)
    for r in range(loss.shape[1]):
        ax1.plot(steps, objective[:, r], color=PALETTE[r % len(PALETTE)], lw=1.0, label=f"restart {r}")
    best_so_far = np.fmin.accumulate(np.where(np.isfinite(loss), loss, np.inf).min(axis=1))
    ax2.plot(steps, best_so_far, color=PALETTE[0], lw=1.5)
    ax1.set_xlabel("iteration")
    ax1.set_ylabel(f"objective: {result.objective}")
    ax1.legend(loc="best", fontsize=8)
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("best penalised loss so far")
    if np.all(best_so_far[np.isfinite(best_so_far)] > 0):
        ax2.set_yscale("log")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.suptitle(", ".join(f"{k}={v:.4g}" for k, v in result.best.items()), fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)
