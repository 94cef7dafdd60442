"""The two-arm reduction of a class-symmetric bandit and its fixed point: η_eff, the expected logit drive X(x),
p* (`fixed_point`, optimistix with implicit differentiation), the stiffness K and the noise D (the package docstring
has the convention)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax import Array

from ..base.checks import is_concrete
from ..base.errors import PgrpoSimError
from ..models import bandit
from ..models.bandit import (
    binomial_pmf,
    on_policy_grad,
    sampled_loss,
)
from ..models.bandit.configuration import check_config
from ..models.bandit.hyperparameters import set_hyperparameters

_X_MAX, _N_GRID, _MAX_BISECT = 30.0, 1201, 128  # the fixed point's bracket |logit p| ≤ 30, its grid, bisections


def _classes(config: bandit.Config) -> tuple[np.ndarray, int, int]:
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
    if not 0 < correct.sum() < correct.size:
        raise PgrpoSimError(
            f"prediction needs correct and incorrect arms (1 <= correct arms <= N − 1), got {int(correct.sum())} "
            f"correct of {correct.size}: without both the reward is constant and there is no dynamics to predict"
        )
    return correct, correct.size, int(correct.sum())


def eta_scale(config: bandit.Config) -> float:
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


def two_arm_reduction(config: bandit.Config) -> bandit.Config:
    """The 2-arm configuration whose expected p-curve equals `config`'s (class-symmetric, binary, one prompt).

    Its step is η·N/(2c(N−c)), so its η_eff = 2η₂ equals η·N/(c(N−c)); everything else is shared. A population
    of D prompts with one class structure (per-prompt parameters) reduces to its mean field: the single prompt
    at the mean start p̄ = mean_d p_d with step η/D, each prompt's share of the mean loss — exact when every
    prompt starts alike (tested), an approximation as the difficulty spread grows (`pgrpo-sim validate`,
    section 9, measures how good). Raises `PgrpoSimError` for Adam, shared parameters, rewards that are not 0/1
    or differ between prompts, or a start that is not class-symmetric. Works with traced hyperparameters (the
    rewards must be concrete).

    Args:
        config: the N-arm configuration (`bandit.Config`): binary rewards shared by its prompts, a class-symmetric
            start, SGD or Nesterov, no features.

    Returns:
        A `bandit.Config` with rewards [[1, 0]], init_logits (1, 2) (the log masses of the two classes, or log p̄,
            log(1 − p̄)), η scaled by `eta_scale(config)`, one mini-batch, no true_rewards or batch_prompts.

    Raises:
        PgrpoSimError: in the cases above, for traced rewards, or if `config` is not a `bandit.Config`.
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
        learning_rate=config.learning_rate * eta_scale(config),
    )


def effective_eta(config2: bandit.Config) -> Array:
    """η_eff = 2η of a 2-arm configuration: the step that logit(p) takes per unit of the drive X (its two
    logits move by ∓η·∂L/∂θ, and X is half their difference's gradient).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).

    Returns:
        η_eff (per optimiser step), 0-d, in the dtype of its η (traced if η is).
    """
    return 2 * config2.learning_rate


def two_arm_logits(x: Array) -> Array:
    """The logits (1, 2) of a two-arm policy with logit(p) = x: arm 0 (correct) at x, arm 1 at 0."""
    return jnp.stack([x, jnp.zeros_like(x)])[None]


def expected_drive(config2: bandit.Config, x: Array) -> Array:
    """X(x): expected on-policy change of logit(p) per unit η_eff, for a 2-arm configuration.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).
        x: logit x = logit(p) of the correct arm's probability p; a 0-d float (may be traced; vmap for several).

    Returns:
        X(x) (logit per optimiser step, per unit η_eff), 0-d float.
    """
    g = on_policy_grad(two_arm_logits(x), config2)[0][0]
    return -(g[0] - g[1]) / 2


def fixed_point(config2: bandit.Config) -> tuple[Array, Array, Array]:
    """(x* = logit p*, found, unique) of a 2-arm configuration: the first + → − crossing of X on a grid of
    logit(p) in ±30, solved in its grid cell by `optimistix.Bisection`; x* is differentiable in every float
    leaf of `config2` (implicit function theorem, `optimistix.ImplicitAdjoint`). Without a crossing x* = 0
    (with zero derivative) and found is False.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).

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


def stiffness(config2: bandit.Config, x: Array) -> Array:
    """K = −X'(x) at logit x of a 2-arm configuration (per unit η_eff).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).
        x: logit x = logit(p) of the correct arm's probability p; a 0-d float (may be traced; vmap for several).

    Returns:
        K (per unit η_eff), 0-d float.
    """
    return -jax.grad(functools.partial(expected_drive, config2))(x)


def noise_scale(config2: bandit.Config, x: Array) -> Array:
    """The oscillator's diffusion D = G·Var(Δp/η_eff) over k ~ Binomial(G, p) successes in a sampled group at
    logit x of a 2-arm configuration.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).
        x: logit x = logit(p) of the correct arm's probability p; a 0-d float (may be traced; vmap for several).

    Returns:
        D >= 0 (probability² per unit η_eff²), 0-d float.
    """
    g = config2.num_generations
    theta = two_arm_logits(x)
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


@jax.jit
def _fixed_point_stiffness(config2: bandit.Config) -> tuple[Array, Array, Array]:
    x, found, _ = fixed_point(config2)
    return x, found, stiffness(config2, x)


def _on_policy(config2: bandit.Config) -> bandit.Config:
    """The configuration without lag: the on-policy drive reads neither lag model nor buffer length."""
    return config2.replace(lag_model="none", lag=0, max_lag=0)


def fixed_point_stiffness(config2: bandit.Config) -> tuple[Array, Array, Array]:
    """(x*, found, K) of a 2-arm configuration, compiled once for every lag model and buffer length (the
    on-policy drive reads neither); for concrete configurations outside a trace.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).

    Returns:
        (x*, found, K): x* = logit p*, 0-d float; found, 0-d bool; K (per unit η_eff), 0-d float.
    """
    return _fixed_point_stiffness(_on_policy(config2))


def substitute(config2: bandit.Config, values, scale) -> bandit.Config:
    """The 2-arm configuration with hyperparameters replaced by name, given in the N-arm configuration's units
    (η is multiplied by `scale` = `eta_scale(config)`); traced values allowed (`set_hyperparameters`).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).
        values: mapping of hyperparameter names (`HYPERPARAMETERS`) to single numbers, in the N-arm configuration's
            units (η per optimiser step of that configuration).
        scale: η₂/η, `eta_scale` of the N-arm configuration; a positive number.

    Returns:
        The changed 2-arm `bandit.Config`.

    Raises:
        PgrpoSimError: as `set_hyperparameters` (unknown name, a value out of range, ...).
    """
    values = dict(values)
    if "learning_rate" in values:
        values["learning_rate"] = values["learning_rate"] * scale
    return set_hyperparameters(config2, values)


_DRIVE_FIELDS = ("rewards", "init_logits", "beta", "kl_clamp", "adv_eps")
"""The leaves the on-policy drive (`bandit.on_policy_grad`) reads: η, μ, clip and lag do not move p*."""


def constant_fixed_point(config2: bandit.Config) -> tuple[Array, Array] | None:
    """(x*, found) computed once, eagerly, when no leaf the drive reads is traced (so p* cannot move); else None.

    Keeps the fixed-point search (a 1201-point grid and a bisection) out of the traced programs of gradients
    with respect to η, μ and clip.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).

    Returns:
        (x*, found), a 0-d float and a 0-d bool, or None when a leaf the drive reads is traced.
    """
    if not is_concrete([getattr(config2, f) for f in _DRIVE_FIELDS]):
        return None
    # validated while the traced leaves are still tracers: a placeholder (μ = 1) need not be a valid value
    placeholder = lambda v: v if is_concrete(v) else np.ones(v.shape, v.dtype)
    return _fixed_point_stiffness(jax.tree.map(placeholder, _on_policy(config2)))[:2]
