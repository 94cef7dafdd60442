"""The one bridge from bandit to oscillator: the two-arm reduction, the fixed point, stiffness, noise, the
exact Floquet radius and the continuous lag of a bandit configuration (docs/design.md §3–§4).

Convention. From a class-symmetric start (c correct arms of N, binary rewards, one prompt) the expected
N-arm dynamics are exactly those of x = logit(p) with effective step η_eff = η·N/(c(N−c)) (docs/design.md §3):
x_{n+1} − x_n = η_eff·X(x_n) for SGD, X the expected logit drive per unit η_eff. All oscillator quantities
use η_eff as "η":
- p* = σ(x*), X(x*) = 0, the stable (X decreasing) root: bracketed on a grid of logit(p) in ±30, then
  solved by `optimistix.Bisection` with implicit differentiation (`optimistix.ImplicitAdjoint`), so p*, K
  and everything built on them have exact derivatives with respect to every float leaf of the configuration;
- K = −dX/dx at x* (= −(1/η_eff)·∂Δe/∂e with e = p − p*; dimensionless per unit η_eff);
- D = G·Var(Δp/η_eff) at p* in sampled mode, exact over k ~ Binomial(G, p*) successes (to first order in
  η_eff, which makes it exact for N > 2 arms as well) — the diffusion of the oscillator;
- the lag of the continuous model is τ for "stale", the mean staleness (K_ref − 1)/2 for "refresh", 0
  for "none" (`continuous_lag`); the exact discrete map reads "none" as stale lag 0 (`discrete_lag`). The
  critical lag is reported on the configuration's own `lag` axis (`config_lag`): τ* for "stale" (and "none"),
  2τ* + 1 optimiser steps per rollout for "refresh";
- `spectral_radius` is exact for the full nonlinear expected update: the per-step Floquet multiplier
  of largest modulus of the one-cycle map (refresh period, stale-buffer rotation, or one step) at the
  fixed point, from `jax.jacfwd` — for any lag model, SGD or Nesterov.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax import Array

from .base.checks import check_choice, check_range, is_concrete
from .base.errors import PgrpoSimError
from .base.regimes import REGIMES, Damping
from .models import linear, theory
from .models.bandit import (
    binomial_pmf,
    check_mode,
    collapse_branches,
    initial_state,
    make_optimizer,
    on_policy_grad,
    reuse_branch_step,
    rollout_outcomes,
    sampled_loss,
    step,
)
from .models.config import LAG_MODELS, BanditConfig, check_config
from .models.hyperparameters import set_hyperparameters

REASONS = (
    "stable",
    "no interior fixed point",
    "damping C <= 0 (lag at or beyond the critical lag)",
    "exact discrete map unstable (spectral radius >= 1)",
    "spectral radius undetermined: no fixed point of the rollout-averaged cycle was found (the run may cycle, "
    "e.g. held by the clip: outside the linear model)",
    "spectral radius undetermined at this precision: within rounding of 1 (|r - 1| <= 4 eps, a small learning "
    "rate); enable float64 (jax_enable_x64), as the command line does",
)
"""Names of `Prediction.reason` codes: index = code."""
QUANTITIES = (
    "p_star",
    "stiffness",
    "noise",
    "damping_ratio",
    "natural_frequency",
    "critical_lag",
    "stationary_variance",
)
"""The oscillator quantities of `oscillator` (and rows of `sensitivities`)."""

_X_MAX, _N_GRID, _MAX_BISECT = 30.0, 1201, 128


class Prediction(NamedTuple):
    """The oscillator of a bandit configuration (see the module docstring for conventions).

    `regime` is a `base.regimes.Damping` code (names in `REGIMES`), `reason` a code into `REASONS`; `stable` is
    True when an interior fixed point exists, C > 0 and the exact spectral radius is below 1. Quantities that do
    not exist (no interior fixed point; the stationary variance of a configuration not `stable`) are NaN and
    flagged by `stable`/`reason`, never to be read as numbers. `critical_lag` is on the axis of the
    configuration's `lag` (`config_lag`), `lag_eff` the continuous model's τ.

    Every field is 0-d for one configuration (with leading axes under `vmap`); floats are the configuration's dtype.
    The fields that need the fixed point (p*, K, D, M, C, ζ, ω_n, the critical lag) are NaN without one.

    Attributes:
        p_star: fixed point p* of the correct mass; probability in (0, 1).
        unique: bool; the fixed point was found and the drive X changes sign once on the grid of logit(p).
        stiffness: K = −X'(x*), per unit η_eff.
        noise: diffusion D = G·Var(Δp/η_eff) at p* (probability² per unit η_eff²).
        eta_eff: η_eff, the oscillator's learning rate, per optimiser step (`effective_eta` of the reduction).
        lag_eff: the continuous model's lag τ, in optimiser steps (`continuous_lag`).
        mass: M (steps²).
        damping: C (steps); <= 0 means the continuous model is unstable.
        damping_ratio: ζ, dimensionless.
        natural_frequency: ω_n, radians per optimiser step.
        regime: int32 `Damping` code; UNSTABLE without a fixed point, `INVALID` (−1) where ζ is undefined.
        critical_lag: the critical lag on the axis of the configuration's `lag`: τ* optimiser steps ("stale",
            "none"), 2τ* + 1 optimiser steps per rollout ("refresh", "refresh_fresh").
        stationary_variance: Var(p) of sampled training at p* (probability²); NaN unless `stable`.
        spectral_radius: per-step spectral radius of the exact expected map (`floquet_radius`); < 1 is stable; NaN
            without a fixed point (for "refresh": of the rollout-averaged cycle).
        stable: bool; `reason` == 0.
        reason: int32 code into `REASONS` (0: stable).
    """

    p_star: Array
    unique: Array
    stiffness: Array
    noise: Array
    eta_eff: Array
    lag_eff: Array
    mass: Array
    damping: Array
    damping_ratio: Array
    natural_frequency: Array
    regime: Array
    critical_lag: Array
    stationary_variance: Array
    spectral_radius: Array
    stable: Array
    reason: Array

    def as_dict(self) -> dict:
        """Plain Python values (names for `regime` and `reason`, None for NaN) for printing or JSON.

        Returns:
            A dict of every field name to a Python float, int or bool, or None for NaN; "regime" is a name of
                `REGIMES` (or "undefined"), "reason" a sentence of `REASONS`. For one configuration (0-d fields) only:
                a batched `Prediction` raises numpy's ValueError.
        """
        out = {}
        for name, value in self._asdict().items():
            v = np.asarray(value).item()
            out[name] = None if isinstance(v, float) and np.isnan(v) else v
        out["regime"] = REGIMES[out["regime"]] if out["regime"] >= 0 else "undefined"
        out["reason"] = REASONS[out["reason"]]
        return out


def _classes(config: BanditConfig) -> tuple[np.ndarray, int, int]:
    """(correct mask, N, c) of a concrete binary-reward configuration whose prompts share one class structure;
    refuses the others."""
    check_config(config)
    if config.optimizer == "adam":
        raise PgrpoSimError(
            "optimizer adam is not supported: Adam rescales each logit separately, so the exact two-arm reduction "
            "(and the p*, K, ζ and spectral radius it gives) does not hold; use sgd or nesterov"
        )
    if config.features is not None:
        raise PgrpoSimError("prediction needs per-prompt logits: shared parameters (features) are not reduced")
    if not is_concrete(config.rewards):
        raise PgrpoSimError("the class structure (rewards) must be concrete: vmap over hyperparameters, not rewards")
    rewards = np.asarray(config.rewards)
    if np.any(rewards != rewards[:1]):
        raise PgrpoSimError(
            "prediction needs the prompts to share one class structure (equal reward vectors); a population of "
            "different bandits is one oscillator per prompt: predict each prompt's configuration"
        )
    if not np.all((rewards == 0) | (rewards == 1)):
        raise PgrpoSimError("prediction needs binary (0/1) rewards")
    correct = rewards[0] == 1
    return correct, correct.size, int(correct.sum())


def eta_scale(config: BanditConfig) -> float:
    """η₂/η = N/(2c(N−c))/D: the two-arm reduction's step per unit of the configuration's η (η_eff = 2η₂); a
    population of D prompts shares the mean loss, so each prompt moves with η/D.

    Args:
        config: a binary-reward configuration whose prompts share one class structure (N arms, c correct).

    Returns:
        η₂/η, a positive Python float (dimensionless).

    Raises:
        PgrpoSimError: for a configuration `two_arm_reduction` refuses on its class structure: Adam, shared
            parameters (features), traced rewards, rewards that are not 0/1 or differ between prompts.
    """
    _, n, c = _classes(config)
    return n / (2 * c * (n - c)) / config.n_prompts


def two_arm_reduction(config: BanditConfig) -> BanditConfig:
    """The 2-arm configuration whose expected p-curve equals `config`'s (class-symmetric, binary, one prompt).

    Its step is η·N/(2c(N−c)), so its η_eff = 2η₂ equals η·N/(c(N−c)); everything else is shared. A population
    of D prompts with one class structure (per-prompt parameters) reduces to its mean field: the single prompt
    at the mean start p̄ = mean_d p_d with step η/D, each prompt's share of the mean loss — exact when every
    prompt starts alike (tested), an approximation as the difficulty spread grows (`pgrpo-sim validate`,
    section 9, measures how good). Raises `PgrpoSimError` for Adam, shared parameters, rewards that are not 0/1
    or differ between prompts, or a start that is not class-symmetric. Works with traced hyperparameters (the
    rewards must be concrete).

    Args:
        config: the N-arm configuration (`BanditConfig`): binary rewards shared by its prompts, a class-symmetric
            start, SGD or Nesterov, no features.

    Returns:
        A `BanditConfig` with rewards [[1, 0]], init_logits (1, 2) (the log masses of the two classes, or log p̄,
            log(1 − p̄)), η scaled by `eta_scale(config)`, one mini-batch, no true_rewards or batch_prompts.

    Raises:
        PgrpoSimError: in the cases above, for traced rewards, or if `config` is not a `BanditConfig`.
    """
    correct, n, c = _classes(config)
    if is_concrete(config.init_logits):
        z = np.asarray(config.init_logits)
        spread = 1e-12 * (1 + np.abs(z).max())
        if np.any(np.ptp(z[:, correct], -1) > spread) or np.any(np.ptp(z[:, ~correct], -1) > spread):
            raise PgrpoSimError("prediction needs a class-symmetric start (equal logits within each reward class)")
    if config.n_prompts == 1:
        logp = jax.nn.log_softmax(config.init_logits[0])
        z2 = jnp.stack([logp[np.argmax(correct)] + np.log(c), logp[np.argmin(correct)] + np.log(n - c)])[None]
    else:  # mean field: the mean start
        p_bar = jnp.mean(jnp.sum(jax.nn.softmax(config.init_logits) * correct, -1))
        z2 = jnp.stack([jnp.log(p_bar), jnp.log1p(-p_bar)])[None]
    return config.replace(
        rewards=jnp.asarray([[1.0, 0.0]], config.rewards.dtype),
        init_logits=z2,
        true_rewards=None,
        batch_prompts=None,
        minibatches=1,
        eta=config.eta * eta_scale(config),
    )


def effective_eta(config2: BanditConfig) -> Array:
    """η_eff = 2η of a 2-arm configuration: the step that logit(p) takes per unit of the drive X (its two
    logits move by ∓η·∂L/∂θ, and X is half their difference's gradient).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).

    Returns:
        η_eff (per optimiser step), 0-d, in the dtype of its η (traced if η is).
    """
    return 2 * config2.eta


def _logits(x: Array) -> Array:
    return jnp.stack([x, jnp.zeros_like(x)])[None]


def expected_drive(config2: BanditConfig, x: Array) -> Array:
    """X(x): expected on-policy change of logit(p) per unit η_eff, for a 2-arm configuration.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).
        x: logit x = logit(p) of the correct arm's probability p; a 0-d float (may be traced; vmap for several).

    Returns:
        X(x) (logit per optimiser step, per unit η_eff), 0-d float.
    """
    g = on_policy_grad(_logits(x), config2)[0][0]
    return -(g[0] - g[1]) / 2


def fixed_point(config2: BanditConfig) -> tuple[Array, Array, Array]:
    """(x* = logit p*, found, unique) of a 2-arm configuration: the first + → − crossing of X on a grid of
    logit(p) in ±30, solved in its grid cell by `optimistix.Bisection`; x* is differentiable in every float
    leaf of `config2` (implicit function theorem, `optimistix.ImplicitAdjoint`). Without a crossing x* = 0
    (with zero derivative) and found is False.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).

    Returns:
        (x*, found, unique): x* = logit p*, 0-d float; found, 0-d bool; unique, 0-d bool (X changes sign exactly once
            on the grid).
    """
    dtype = config2.init_logits.dtype
    grid = jnp.linspace(-_X_MAX, _X_MAX, _N_GRID, dtype=dtype)
    drive = jax.vmap(functools.partial(expected_drive, jax.lax.stop_gradient(config2)))(grid)
    down = (drive[:-1] > 0) & (drive[1:] <= 0)
    up = (drive[:-1] < 0) & (drive[1:] >= 0)
    found, i = jnp.any(down), jnp.argmax(down)
    # without a crossing, solve −x = 0 on [−1, 1] instead: a harmless root with zero derivative
    lower = jnp.where(found, grid[i], -1.0)
    upper = jnp.where(found, grid[i + 1], 1.0)

    def residual(x, cfg):
        return jnp.where(found, expected_drive(cfg, x), -x)

    eps = float(jnp.finfo(dtype).eps)
    solver = optx.Bisection(rtol=16 * eps, atol=16 * eps, flip=True)
    sol = optx.root_find(
        residual,
        solver,
        (lower + upper) / 2,
        config2,
        options=dict(lower=lower, upper=upper),
        max_steps=_MAX_BISECT,
        throw=False,
        adjoint=optx.ImplicitAdjoint(),
    )
    return sol.value, found, jnp.sum(down) + jnp.sum(up) == 1


def stiffness(config2: BanditConfig, x: Array) -> Array:
    """K = −X'(x) at logit x of a 2-arm configuration (per unit η_eff).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).
        x: logit x = logit(p) of the correct arm's probability p; a 0-d float (may be traced; vmap for several).

    Returns:
        K (per unit η_eff), 0-d float.
    """
    return -jax.grad(functools.partial(expected_drive, config2))(x)


def noise_scale(config2: BanditConfig, x: Array) -> Array:
    """The oscillator's diffusion D = G·Var(Δp/η_eff) over k ~ Binomial(G, p) successes in a sampled group at
    logit x of a 2-arm configuration.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).
        x: logit x = logit(p) of the correct arm's probability p; a 0-d float (may be traced; vmap for several).

    Returns:
        D >= 0 (probability² per unit η_eff²), 0-d float.
    """
    g = config2.group_size
    theta = _logits(x)
    arms = (jnp.arange(g)[None, :] >= jnp.arange(g + 1)[:, None]).astype(jnp.int32)  # row k: k zeros (correct)
    rewards = (arms == 0).astype(theta.dtype)

    def drive(a, r):
        grad = jax.grad(lambda t: sampled_loss(t, theta, a[None], r[None], config2)[0])(theta)[0]
        return -(grad[0] - grad[1]) / 2

    drives = jax.vmap(drive)(arms, rewards)
    p = jax.nn.sigmoid(x)
    w = binomial_pmf(g, p)
    mean = jnp.sum(w * drives)
    return g * (p * (1 - p)) ** 2 * jnp.sum(w * (drives - mean) ** 2)


def continuous_lag(lag, lag_model: str) -> Array:
    """Lag τ of the continuous model from a (real or integer) lag: τ ("stale"), the mean staleness
    (K_ref − 1)/2 ("refresh"), 0 ("none").

    Args:
        lag: the configuration's lag (τ for "stale", refresh period K_ref for the refresh models), in optimiser
            steps; any shape; may be traced.
        lag_model: one of `LAG_MODELS` ("refresh_fresh" as "refresh").

    Returns:
        τ (optimiser steps, >= 0 for lags >= 0), float, of the shape of `lag`.
    """
    lag = jnp.asarray(lag, jnp.result_type(lag, float))
    staleness = (jnp.maximum(lag, 1) - 1) / 2
    return {"none": 0 * lag, "stale": lag, "refresh": staleness, "refresh_fresh": staleness}[lag_model]


def config_lag(tau, lag_model: str) -> Array:
    """The configuration's `lag` whose continuous lag (`continuous_lag`) is τ = `tau`: τ ("stale", and "none",
    which has no lag of its own), 2τ + 1 optimiser steps per rollout ("refresh", "refresh_fresh").

    Args:
        tau: continuous lag τ (optimiser steps); any shape; may be traced.
        lag_model: one of `LAG_MODELS`.

    Returns:
        The lag on the configuration's axis (optimiser steps), float, of the shape of `tau`.

    Raises:
        PgrpoSimError: if `lag_model` is unknown.
    """
    check_choice("lag_model", lag_model, LAG_MODELS)
    tau = jnp.asarray(tau, jnp.result_type(tau, float))
    return 2 * tau + 1 if lag_model in ("refresh", "refresh_fresh") else tau


def discrete_lag(lag, lag_model: str) -> tuple[int, str]:
    """(integer lag, model) of the exact discrete map (`linear`) for a concrete lag: "none" is stale lag 0; both
    refresh models (rollout reuse and fresh samples) share the frozen-force map, their common linearisation.

    Args:
        lag: the configuration's lag (optimiser steps); a concrete integer scalar >= 0 (not checked here).
        lag_model: one of `LAG_MODELS`.

    Returns:
        (lag, model) for `linear`: a Python int and "stale" or "refresh".
    """
    if lag_model == "none":
        return 0, "stale"
    return int(np.asarray(lag)), "stale" if lag_model == "stale" else "refresh"


def _cycle_length(config: BanditConfig):
    if config.lag_model in ("refresh", "refresh_fresh"):
        return jnp.maximum(config.lag, 1)
    if config.lag_model == "stale":
        return config.max_lag + 1  # the stale-lag ring buffer realigns after this many steps
    return 1


def floquet_radius(config2: BanditConfig, x: Array) -> Array:
    """Per-step spectral radius of the one-cycle map of the expected update of a 2-arm configuration at the
    fixed point x (docs/design.md §2: Floquet analysis).

    The state that the dynamics use (logits, optimiser trace, and π_old for "refresh_fresh" or the history for
    "stale") is taken in difference coordinates (arm 0 − arm 1): common shifts of the logits are neutral. With
    rollout reuse ("refresh") the map is the rollout-averaged cycle (`bandit.reuse_branch_step`), taken at its
    own fixed point; its rollouts are enumerated for binary rewards (`two_arm_reduction`'s are 1 and 0; other
    concrete rewards are refused by `bandit.rollout_outcomes`): 9 multisets of arms at G = 8 instead of 165 of
    (arm, reward), the same map (radii equal to ~1e-16), 6× faster.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).
        x: logit of the fixed point, x* = logit p* (`fixed_point`); a 0-d float.

    Returns:
        The radius per optimiser step (>= 0; < 1 is stable), 0-d float; NaN for "refresh" when the averaged cycle's
            fixed point is not found.

    Raises:
        PgrpoSimError: for "refresh" with rewards that are not 0/1, several prompts, or too many distinct rollouts
            (`bandit.rollout_outcomes`).
    """
    optimizer = make_optimizer(config2)
    base = initial_state(config2, optimizer, _logits(x))
    lag_field = {"refresh_fresh": "old_logits", "stale": "history"}.get(config2.lag_model)
    fields = ("logits", "opt_state") + ((lag_field,) if lag_field else ())
    dynamic = {f: getattr(base, f) for f in fields}
    leaves, treedef = jax.tree.flatten(dynamic)
    sizes = [leaf[..., 0].size for leaf in leaves]
    length = _cycle_length(config2)
    if config2.lag_model == "refresh":  # rollout reuse: the rollout-averaged cycle, from a refresh
        outcomes = rollout_outcomes(config2, binary_rewards=True)
        size = outcomes[0].shape[0]

        def advance(state):
            branches = jax.tree.map(lambda v: jnp.broadcast_to(v, (size, *jnp.shape(v))), state)
            carry = (branches, jnp.full(size, 1.0 / size, x.dtype))
            carry = jax.lax.fori_loop(
                0, length, lambda _, c: reuse_branch_step(config2, optimizer, *c, outcomes)[:2], carry
            )
            return collapse_branches(*carry)
    else:
        update = functools.partial(step, config2, optimizer, "expected")
        key = jax.random.key(0)  # unused in expected mode

        def advance(state):
            return jax.lax.fori_loop(0, length, lambda _, s: update(s, key)[0], state)

    def cycle(z):
        chunks = jnp.split(z, np.cumsum(sizes)[:-1])
        half = [d.reshape(leaf.shape[:-1]) / 2 for leaf, d in zip(leaves, chunks)]
        moved = [leaf + jnp.stack([h, -h], -1) for leaf, h in zip(leaves, half)]
        state = base._replace(**jax.tree.unflatten(treedef, moved))
        state = advance(state)
        out = jax.tree.leaves({f: getattr(state, f) for f in fields})
        return jnp.concatenate([(o[..., 0] - o[..., 1]).ravel() for o in out])

    z = jnp.zeros(sum(sizes), x.dtype)
    if config2.lag_model == "refresh":
        # with a finite reused rollout the averaged cycle has its own fixed point, away from the on-policy p*:
        # approach it by iterating the cycle from there (optimistix FixedPointIteration), polish it by Newton on
        # cycle(z) = z; NaN (no proof of stability) if that does not converge
        offset = jnp.concatenate([(leaf[..., 0] - leaf[..., 1]).ravel() for leaf in leaves])
        tol = float(jnp.finfo(x.dtype).eps) ** 0.75
        near = optx.fixed_point(
            lambda v, _: cycle(v) - offset,
            optx.FixedPointIteration(rtol=1e-4, atol=1e-4),
            z,
            max_steps=2000,
            throw=False,
        )
        sol = optx.root_find(
            lambda v, _: cycle(v) - offset - v,
            optx.Newton(rtol=tol, atol=tol),
            near.value,
            max_steps=64,
            throw=False,
        )
        z = jnp.where(sol.result == optx.RESULTS.successful, sol.value, jnp.nan)
    multipliers = jnp.linalg.eigvals(jax.jacfwd(cycle)(z))
    return jnp.max(jnp.abs(multipliers)) ** (1.0 / length)


@jax.jit
def _fixed_point_stiffness(config2: BanditConfig) -> tuple[Array, Array, Array]:
    x, found, _ = fixed_point(config2)
    return x, found, stiffness(config2, x)


def _on_policy(config2: BanditConfig) -> BanditConfig:
    """The configuration without lag: the on-policy drive reads neither lag model nor buffer length."""
    return config2.replace(lag_model="none", lag=0, max_lag=0)


def fixed_point_stiffness(config2: BanditConfig) -> tuple[Array, Array, Array]:
    """(x*, found, K) of a 2-arm configuration, compiled once for every lag model and buffer length (the
    on-policy drive reads neither); for concrete configurations outside a trace.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).

    Returns:
        (x*, found, K): x* = logit p*, 0-d float; found, 0-d bool; K (per unit η_eff), 0-d float.
    """
    return _fixed_point_stiffness(_on_policy(config2))


def substitute(config2: BanditConfig, values, scale) -> BanditConfig:
    """The 2-arm configuration with hyperparameters replaced by name, given in the N-arm configuration's units
    (η is multiplied by `scale` = `eta_scale(config)`); traced values allowed (`set_hyperparameters`).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).
        values: mapping of hyperparameter names (`HYPERPARAMETERS`) to single numbers, in the N-arm configuration's
            units (η per optimiser step of that configuration).
        scale: η₂/η, `eta_scale` of the N-arm configuration; a positive number.

    Returns:
        The changed 2-arm `BanditConfig`.

    Raises:
        PgrpoSimError: as `set_hyperparameters` (unknown name, a value out of range, ...).
    """
    values = dict(values)
    if "eta" in values:
        values["eta"] = values["eta"] * scale
    return set_hyperparameters(config2, values)


_DRIVE_FIELDS = ("rewards", "init_logits", "beta", "kl_clamp", "adv_eps")
"""The leaves the on-policy drive (`bandit.on_policy_grad`) reads: η, μ, clip and lag do not move p*."""


def constant_fixed_point(config2: BanditConfig) -> tuple[Array, Array] | None:
    """(x*, found) computed once, eagerly, when no leaf the drive reads is traced (so p* cannot move); else None.

    Keeps the fixed-point search (a 1201-point grid and a bisection) out of the traced programs of gradients
    with respect to η, μ and clip.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).

    Returns:
        (x*, found), a 0-d float and a 0-d bool, or None when a leaf the drive reads is traced.
    """
    if not is_concrete([getattr(config2, f) for f in _DRIVE_FIELDS]):
        return None
    # validated while the traced leaves are still tracers: a placeholder (μ = 1) need not be a valid value
    placeholder = lambda v: np.ones(v.shape, v.dtype) if isinstance(v, jax.core.Tracer) else v  # noqa: E731
    return _fixed_point_stiffness(jax.tree.map(placeholder, _on_policy(config2)))[:2]


def oscillator(config2: BanditConfig, tau, fixed: tuple[Array, Array] | None = None) -> dict[str, Array]:
    """`QUANTITIES` of a 2-arm configuration with continuous lag τ = `tau`, NaN without an interior p*
    (`critical_lag` is τ*, in the continuous lag's units: `predict` reports it on the configuration's axis);
    differentiable in every float leaf. `fixed`: (x*, found) when p* is known not to move (skips the search).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `BanditConfig`).
        tau: continuous lag τ (optimiser steps, `continuous_lag`); a 0-d float; may be traced.
        fixed: (x*, found) from `constant_fixed_point` or `fixed_point`; None: search for it.

    Returns:
        A dict of the `QUANTITIES` names to 0-d floats: p_star (probability), stiffness (per unit η_eff),
            noise (probability² per unit η_eff²), damping_ratio, natural_frequency (radians per step), critical_lag
            τ* (steps) and stationary_variance (probability²; +inf where C <= 0).
    """
    x, found = fixed if fixed is not None else fixed_point(config2)[:2]
    k = stiffness(config2, x)
    eta_eff = effective_eta(config2)
    osc = (eta_eff, config2.momentum, tau, k)
    noise = noise_scale(config2, x)
    out = dict(
        p_star=jax.nn.sigmoid(x),
        stiffness=k,
        noise=noise,
        damping_ratio=theory.damping_ratio(*osc),
        natural_frequency=theory.natural_frequency(*osc),
        critical_lag=theory.critical_lag(eta_eff, config2.momentum, k),
        stationary_variance=theory.stationary_variance(*osc, noise, jnp.asarray(config2.group_size, eta_eff.dtype)),
    )
    return {name: jnp.where(found, v, jnp.nan) for name, v in out.items()}


@jax.jit
def _predict(config2: BanditConfig) -> Prediction:
    eta_eff = effective_eta(config2)
    x, found, unique = fixed_point(config2)
    lag_eff = continuous_lag(config2.lag, config2.lag_model).astype(eta_eff.dtype)
    q = oscillator(config2, lag_eff, (x, found))
    osc = (eta_eff, config2.momentum, lag_eff, q["stiffness"])
    coef = theory.coefficients(*osc)
    radius = floquet_radius(config2, x)
    # the exact map's verdict (NaN: no fixed point of the averaged cycle, no proof of stability) before the
    # continuous model's C <= 0
    # the multipliers are 1 + O(η) in floating point: a radius within a few ulps of 1 is rounding, not a verdict
    rounding = jnp.abs(radius - 1) <= 4 * jnp.finfo(radius.dtype).eps
    reason = jnp.where(coef.damping <= 0, 2, jnp.where(rounding, 5, jnp.where(radius >= 1, 3, 0)))
    reason = jnp.where(~found, 1, jnp.where(jnp.isnan(radius), 4, reason))
    return Prediction(
        p_star=q["p_star"],
        unique=found & unique,
        stiffness=q["stiffness"],
        noise=q["noise"],
        eta_eff=eta_eff,
        lag_eff=lag_eff,
        mass=jnp.where(found, coef.mass, jnp.nan),
        damping=jnp.where(found, coef.damping, jnp.nan),
        damping_ratio=q["damping_ratio"],
        natural_frequency=q["natural_frequency"],
        regime=jnp.where(found, theory.regime_code(*osc), Damping.UNSTABLE),
        critical_lag=config_lag(q["critical_lag"], config2.lag_model),
        stationary_variance=jnp.where(reason == 0, q["stationary_variance"], jnp.nan),  # no stationary state
        spectral_radius=jnp.where(found, radius, jnp.nan),
        stable=reason == 0,
        reason=reason,
    )


def predict(config: BanditConfig) -> Prediction:
    """Fixed point p*, stiffness K, noise D, the oscillator (M, C, ζ, ω_n, regime, τ*, stationary variance)
    and the exact per-step spectral radius of a class-symmetric, binary-reward, single-prompt bandit
    configuration (SGD or Nesterov); vmappable over its hyperparameter leaves. See the module docstring.

    Args:
        config: the configuration (`BanditConfig`): binary rewards, a class-symmetric start, SGD or Nesterov, a
            constant learning rate; several prompts with one class structure reduce to their mean field
            (`two_arm_reduction`). Hyperparameter leaves may be traced; rewards must be concrete.

    Returns:
        `Prediction`, fields 0-d (leading axes under `vmap`).

    Raises:
        PgrpoSimError: for a learning-rate schedule other than "constant", a configuration `two_arm_reduction`
            refuses, one that expected mode has no exact form for (dynamic sampling, "batch" advantages, too many
            distinct rollouts to enumerate for "refresh"), or a stale max_lag above `linear.MAX_LAG`.
    """
    check_config(config)
    if config.lr_schedule != "constant":  # its optimiser state counts steps: the map changes from step to step
        raise PgrpoSimError(
            f"predict needs a constant learning rate (lr_schedule 'constant'), got {config.lr_schedule!r}: its "
            "spectral radius is that of the map at one η; predict the run at its peak η, or simulate it"
        )
    reduced = two_arm_reduction(config)
    check_mode(reduced, "expected")  # the reduction's: a population or N arms reduce to one 2-arm prompt
    if config.lag_model == "stale":  # the Floquet map carries the lag buffer: its Jacobian grows as max_lag²
        check_range("max_lag (the stale lag buffer; lag unless given)", config.max_lag, 0, linear.MAX_LAG, integer=True)
    return _predict(reduced)
