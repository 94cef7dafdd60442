"""Differentiable outcomes of a simulated reward curve: final reward, smooth time-to-threshold, overshoot,
area and the predicted late variance, through the `lax.scan` of the exact expected-mode bandit.

Works on the exact two-arm reduction (`prediction.two_arm_reduction`; SGD or Nesterov): its expected-mode
reward curve equals the N-arm one. `jax.grad` and `jax.jacfwd` go through the whole run.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from ..base.checks import check_range, check_steps
from ..models import bandit
from ..models.bandit import simulate
from ..prediction import constant_fixed_point, continuous_lag, oscillator, two_arm_reduction


class Outcomes(NamedTuple):
    """Differentiable read-outs of the expected-mode reward curve p_0 … p_steps.

    final_reward: p_steps. time_to_threshold (steps): the smooth time spent short of the threshold,
    T = ∫₀^steps σ((f − u(t))/s) dt, with u(t) = (p(t) − p_0)/(p* − p_0) the fraction of the way to p*
    (linearly interpolated between steps; u = 1 for a start at p*), f = `fraction`, s = `smoothing` and
    σ(x) = ½(1 + x/√(1+x²)). As s → 0, T → the time u spends below f, which for a monotone curve is its
    (interpolated) first-passage time; an oscillating curve also counts its later dips below f. Two choices
    keep T usable by a gradient: integrating over the interpolated curve (a plain Σ_t σ((f − u_t)/s) is a
    staircase in the hyperparameters when one step moves u by much more than s), and an algebraic sigmoid,
    whose tails decay as 1/x² rather than e^{−x}, so a run that stays far short of the threshold still has a
    gradient towards it. overshoot: max(0, max_t sign(p* − p_0)(p_t − p*)), reward units.
    area: trapezoidal ∫ p dt over the run (reward × steps). late_variance: the predicted stationary Var(p) of
    sampled training, D/(2GCK) (reward²), of the continuous oscillator (+inf for C ≤ 0); it does not see the
    exact discrete map's own instability at large steps (η_eff·K ≳ 2(1 + μ) on policy): `predict(config)` does
    (`stable`, and its `stationary_variance` is NaN there). p_star: the fixed point. reward: the curve itself.

    Every field is a scalar except `reward`; the read-outs of the curve are NaN for a run that diverges.

    Attributes:
        final_reward: p at the last step; probability in [0, 1].
        time_to_threshold: the smooth time short of the threshold, T; optimiser steps, in [0, steps].
        overshoot: how far the curve went past p*; reward units (probability), ≥ 0.
        area: trapezoidal ∫ p dt over the run; reward × steps.
        late_variance: predicted stationary Var(p) of sampled training; reward²; +inf for C ≤ 0.
        p_star: the fixed point p*; probability in [0, 1].
        reward: the expected-mode curve p_0 … p_steps; shape (steps + 1,); probabilities in [0, 1].
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


def read_outcomes(reward: Array, q: dict[str, Array], fraction, smoothing) -> Outcomes:
    """`Outcomes` of a reward curve p_0 … p_steps given its oscillator quantities `q` (`prediction.oscillator`).

    Args:
        reward: the expected reward per step; shape (steps + 1,); probabilities in [0, 1].
        q: `prediction.oscillator`'s quantities (reads "p_star" and "stationary_variance"); scalars.
        fraction: threshold as a fraction of the way from p_0 to p*; in (0, 1).
        smoothing: width of the threshold's relaxation, in the same units as `fraction`; > 0.

    Returns:
        `Outcomes`.
    """
    p0, p_star = reward[0], q["p_star"]
    there = p_star == p0  # a start at p*: no way to go, all of it covered (u = 1), not 0/0
    progress = jnp.where(there, 1.0, (reward - p0) / jnp.where(there, 1.0, p_star - p0))
    return Outcomes(
        final_reward=reward[-1],
        time_to_threshold=_time_short_of(progress, fraction, smoothing),
        overshoot=jnp.maximum(jnp.max(jnp.sign(p_star - p0) * (reward - p_star)), 0.0),
        area=jnp.trapezoid(reward),
        late_variance=q["stationary_variance"],
        p_star=p_star,
        reward=reward,
    )


@functools.partial(jax.jit, static_argnames=("steps", "checkpoint"))
def _outcomes_kernel(cfg2, fixed, fraction, smoothing, steps, checkpoint):
    # the two-arm reduction's rewards are 0/1 (traced here, so `simulate` cannot see it)
    reward = simulate(cfg2, steps, readouts=("reward",), checkpoint=checkpoint, binary_rewards=True).reward
    return read_outcomes(reward, oscillator(cfg2, continuous_lag(cfg2.lag, cfg2.lag_model), fixed), fraction, smoothing)


def outcomes(
    config: bandit.Config, steps: int, *, fraction: float = 0.9, smoothing: float = 0.02, checkpoint: bool = False
) -> Outcomes:
    """Differentiable outcomes (`Outcomes`) of `steps` expected-mode steps of `config` (its exact two-arm
    reduction, the same reward curve); `jax.grad` / `jax.jacfwd` work with respect to config's float leaves
    (η, μ, β, clip, init_logits; use `with_hyperparameters` for p_ref), through the whole `lax.scan`.

    `fraction` ∈ (0, 1) sets the threshold, `smoothing` > 0 the width of the relaxation, both in units of the
    way from p_0 to p*. A run that diverges gives NaN, never a number. `checkpoint=True` for `jax.grad` through
    long runs: memory grows with √steps, not steps (`simulate`'s `checkpoint`).

    Args:
        config: the bandit configuration (SGD or Nesterov, reducible to two arms: `prediction.two_arm_reduction`).
        steps: optimiser steps simulated; integer in [1, `base.checks.MAX_STEPS`].
        fraction: threshold as a fraction of the way from p_0 to p*; in (0, 1).
        smoothing: width of the threshold's relaxation, in units of that way; > 0.
        checkpoint: checkpoint the scan so that reverse-mode memory grows with √steps.

    Returns:
        `Outcomes` (its `reward` of shape (steps + 1,)).

    Raises:
        PgrpoSimError: `steps`, `fraction` or `smoothing` out of range, or a `config` without an exact two-arm
            reduction (e.g. Adam).
    """
    check_steps(steps)
    check_range("fraction", fraction, 0.0, 1.0, low_open=True, high_open=True)
    check_range("smoothing", smoothing, 0.0, low_open=True)
    cfg2 = two_arm_reduction(config)
    dtype = cfg2.learning_rate.dtype
    fixed = constant_fixed_point(cfg2)
    threshold = jnp.asarray(fraction, dtype), jnp.asarray(smoothing, dtype)
    return _outcomes_kernel(cfg2, fixed, *threshold, int(steps), bool(checkpoint))
