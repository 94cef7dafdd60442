"""From bandit to oscillator: the fixed point, stiffness, noise and stability of a bandit configuration.

Convention. From a class-symmetric start (c correct arms of N, binary rewards, one prompt) the expected
N-arm dynamics are exactly those of x = logit(p) with effective step η_eff = η·N/(c(N−c)) (DESIGN.md §3):
x_{n+1} − x_n = η_eff·X(x_n) for SGD, X the expected logit drive per unit η_eff. All oscillator quantities
use η_eff as "η":
- p* = σ(x*), X(x*) = 0, the stable (X decreasing) root, found by grid bracketing and bisection;
- K = −dX/dx at x* (= −(1/η_eff)·∂Δe/∂e with e = p − p*; dimensionless per unit η_eff);
- D = G·Var(Δp/η_eff) at p* in sampled mode, exact over k ~ Binomial(G, p*) successes (to first order in
  η_eff, which makes it exact for N > 2 arms as well);
- the lag of the continuous model is τ for "stale", the mean staleness (K_ref − 1)/2 for "refresh", 0
  for "none";
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
from jax import Array

from . import theory
from ._checks import is_concrete
from .bandit import _initial_state, _step, binomial_pmf, make_optimizer, on_policy_grad, sampled_loss
from .config import BanditConfig

REASONS = (
    "stable",
    "no interior fixed point",
    "damping C <= 0 (lag at or beyond the critical lag)",
    "exact discrete map unstable (spectral radius >= 1)",
)
"""Names of `Prediction.reason` codes: index = code."""

_X_MAX, _N_GRID, _N_BISECT = 30.0, 1201, 80


class Prediction(NamedTuple):
    """The oscillator of a bandit configuration (see the module docstring for conventions).

    `regime` is a code into `theory.REGIMES`, `reason` into `REASONS`; `stable` is True when an interior
    fixed point exists, C > 0 and the exact spectral radius is below 1. Quantities that do not exist
    (no interior fixed point) are NaN and flagged by `stable`/`reason`, never to be read as numbers.
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
        """Plain Python values (names for `regime` and `reason`, None for NaN) for printing or JSON."""
        out = {}
        for name, value in self._asdict().items():
            v = np.asarray(value).item()
            out[name] = None if isinstance(v, float) and np.isnan(v) else v
        out["regime"] = theory.REGIMES[out["regime"]] if out["regime"] >= 0 else "undefined"
        out["reason"] = REASONS[out["reason"]]
        return out


def two_arm_reduction(config: BanditConfig) -> BanditConfig:
    """The 2-arm configuration whose expected p-curve equals `config`'s (class-symmetric, binary, one prompt).

    Its step is η·N/(2c(N−c)), so its η_eff = 2η₂ equals η·N/(c(N−c)); everything else is shared.
    Raises `ValueError` for rewards that are not 0/1, a start that is not class-symmetric, or several prompts.
    """
    if not is_concrete(config.rewards):
        raise ValueError("the class structure (rewards) must be concrete: vmap over hyperparameters, not rewards")
    rewards = np.asarray(config.rewards)
    if rewards.shape[0] != 1:
        raise ValueError(f"prediction needs a single prompt, got {rewards.shape[0]}")
    if not np.all((rewards == 0) | (rewards == 1)):
        raise ValueError("prediction needs binary (0/1) rewards")
    correct = rewards[0] == 1
    n, c = correct.size, int(correct.sum())
    if is_concrete(config.init_logits):
        z = np.asarray(config.init_logits)[0]
        if np.ptp(z[correct]) > 1e-12 * (1 + np.abs(z).max()) or np.ptp(z[~correct]) > 1e-12 * (1 + np.abs(z).max()):
            raise ValueError("prediction needs a class-symmetric start (equal logits within each reward class)")
    logp = jax.nn.log_softmax(config.init_logits[0])
    z2 = jnp.stack([logp[jnp.argmax(correct)] + np.log(c), logp[jnp.argmin(correct)] + np.log(n - c)])[None]
    return config.replace(
        rewards=jnp.asarray([[1.0, 0.0]], config.rewards.dtype),
        init_logits=z2,
        true_rewards=None,
        eta=config.eta * n / (2 * c * (n - c)),
    )


def _logits(x: Array) -> Array:
    return jnp.stack([x, jnp.zeros_like(x)])[None]


def expected_drive(config2: BanditConfig, x: Array) -> Array:
    """X(x): expected on-policy change of logit(p) per unit η_eff, for a 2-arm configuration."""
    theta = _logits(x)
    g = on_policy_grad(theta, config2)[0][0]
    return -(g[0] - g[1]) / 2


def _fixed_point(config2: BanditConfig) -> tuple[Array, Array, Array]:
    """(x*, found, unique): first + → − crossing of X on a grid of logit(p) in ±30, refined by bisection."""
    dtype = config2.init_logits.dtype
    grid = jnp.linspace(-_X_MAX, _X_MAX, _N_GRID, dtype=dtype)
    drive = jax.vmap(functools.partial(expected_drive, config2))(grid)
    down = (drive[:-1] > 0) & (drive[1:] <= 0)
    up = (drive[:-1] < 0) & (drive[1:] >= 0)
    i = jnp.argmax(down)

    def bisect(_, bracket):
        lo, hi = bracket
        mid = (lo + hi) / 2
        pos = expected_drive(config2, mid) > 0
        return jnp.where(pos, mid, lo), jnp.where(pos, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _N_BISECT, bisect, (grid[i], grid[i + 1]))
    return (lo + hi) / 2, jnp.any(down), jnp.sum(down) + jnp.sum(up) == 1


def _noise(config2: BanditConfig, x: Array) -> Array:
    """D = G·Var(Δp/η_eff) over k ~ Binomial(G, p) successes in a sampled group at logit x."""
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


def _cycle_length(config: BanditConfig):
    if config.lag_model == "refresh":
        return jnp.maximum(config.lag, 1)
    if config.lag_model == "stale":
        return config.max_lag + 1  # the stale-lag ring buffer realigns after this many steps
    return 1


def _floquet_radius(config2: BanditConfig, x: Array) -> Array:
    """Per-step spectral radius of the one-cycle map of the expected update at the fixed point x.

    The state that the dynamics use (logits, optimiser trace, and π_old for "refresh" or the history for
    "stale") is taken in difference coordinates (arm 0 − arm 1): common shifts of the logits are neutral.
    """
    optimizer = make_optimizer(config2)
    base = _initial_state(config2, optimizer, _logits(x))
    lag_field = {"refresh": "old_logits", "stale": "history"}.get(config2.lag_model)
    fields = ("logits", "opt_state") + ((lag_field,) if lag_field else ())
    dynamic = {f: getattr(base, f) for f in fields}
    leaves, treedef = jax.tree.flatten(dynamic)
    sizes = [leaf[..., 0].size for leaf in leaves]
    length = _cycle_length(config2)
    step = functools.partial(_step, config2, optimizer, "expected")
    key = jax.random.key(0)  # unused in expected mode

    def cycle(z):
        chunks = jnp.split(z, np.cumsum(sizes)[:-1])
        half = [d.reshape(leaf.shape[:-1]) / 2 for leaf, d in zip(leaves, chunks)]
        moved = [leaf + jnp.stack([h, -h], -1) for leaf, h in zip(leaves, half)]
        state = base._replace(**jax.tree.unflatten(treedef, moved))
        state = jax.lax.fori_loop(0, length, lambda _, s: step(s, key)[0], state)
        out = jax.tree.leaves({f: getattr(state, f) for f in fields})
        return jnp.concatenate([(o[..., 0] - o[..., 1]).ravel() for o in out])

    multipliers = jnp.linalg.eigvals(jax.jacfwd(cycle)(jnp.zeros(sum(sizes), x.dtype)))
    return jnp.max(jnp.abs(multipliers)) ** (1.0 / length)


def continuous_lag(config: BanditConfig) -> Array:
    """Lag τ of the continuous model: τ ("stale"), mean staleness (K_ref − 1)/2 ("refresh"), 0 ("none")."""
    lag = config.lag.astype(config.eta.dtype)
    return {"none": 0 * lag, "stale": lag, "refresh": (jnp.maximum(lag, 1) - 1) / 2}[config.lag_model]


def stiffness_at_fixed_point(config2: BanditConfig) -> tuple[Array, Array, Array, Array]:
    """(x* = logit p*, found, unique, K) of a 2-arm configuration (see `two_arm_reduction`); jit/vmap-able."""
    x, found, unique = _fixed_point(config2)
    x = jax.lax.stop_gradient(jnp.where(found, x, 0.0))
    drive = functools.partial(expected_drive, config2)
    slope = jax.grad(drive)(x)
    # one Newton step: the same root to round-off, but differentiable in the hyperparameters (implicit function
    # theorem, dx*/dθ = −∂X/∂θ / ∂X/∂x); bisection alone would give zero derivatives
    x = x - drive(x) / jnp.where(found, slope, 1.0)
    return x, found, unique, -jax.grad(drive)(x)


@jax.jit
def _predict(config2: BanditConfig) -> Prediction:
    eta_eff = 2 * config2.eta
    x, found, unique, stiffness = stiffness_at_fixed_point(config2)
    lag_eff = continuous_lag(config2)
    noise = _noise(config2, x)
    osc = (eta_eff, config2.momentum, lag_eff, stiffness)
    coef = theory.coefficients(*osc)
    radius = _floquet_radius(config2, x)
    reason = jnp.where(~found, 1, jnp.where(coef.damping <= 0, 2, jnp.where(radius >= 1, 3, 0)))
    nan_if_none = lambda v: jnp.where(found, v, jnp.nan)  # noqa: E731
    return Prediction(
        p_star=nan_if_none(jax.nn.sigmoid(x)),
        unique=found & unique,
        stiffness=nan_if_none(stiffness),
        noise=nan_if_none(noise),
        eta_eff=eta_eff,
        lag_eff=lag_eff,
        mass=nan_if_none(coef.mass),
        damping=nan_if_none(coef.damping),
        damping_ratio=nan_if_none(theory.damping_ratio(*osc)),
        natural_frequency=nan_if_none(theory.natural_frequency(*osc)),
        regime=jnp.where(found, theory.regime_code(*osc), 3),
        critical_lag=nan_if_none(theory.critical_lag(eta_eff, config2.momentum, stiffness)),
        stationary_variance=nan_if_none(
            theory.stationary_variance(*osc, noise, jnp.asarray(config2.group_size, eta_eff.dtype))
        ),
        spectral_radius=nan_if_none(radius),
        stable=reason == 0,
        reason=reason,
    )


def predict(config: BanditConfig) -> Prediction:
    """Fixed point p*, stiffness K, noise D, the oscillator (M, C, ζ, ω_n, regime, τ*, stationary variance)
    and the exact per-step spectral radius of a class-symmetric, binary-reward, single-prompt bandit
    configuration; vmappable over its hyperparameter leaves. See the module docstring for conventions.
    """
    if config.optimizer == "adam":
        raise ValueError("optimizer must be sgd or nesterov for a prediction (Adam rescales per coordinate)")
    return _predict(two_arm_reduction(config))
