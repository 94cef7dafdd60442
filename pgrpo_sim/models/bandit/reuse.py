"""Expected-mode rollout reuse (lag model "refresh"; docs/design.md §3, "Off-policy lag: three models"): one branch
per distinct rollout of a cycle (`enumeration`), each taking the cycle's inner steps on its own rollout, weighted by
the rollout's probability under π_old; at every refresh the branches collapse into their weighted mean state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array
from jax.scipy.special import gammaln

from ...base.small_axes import softmax
from .configuration import Config
from .state import State, policy_metrics, rollout_step, synced


def _rollout_probabilities(config: Config, logits: Array, counts: Array) -> Array:
    """P(rollout) under softmax(`logits`) (one prompt): multinomial over the 2N (arm, reward) outcomes."""
    pi = softmax(logits)[0]
    r = config.rewards[0]
    q = jnp.stack([pi * (1 - r), pi * r], -1).reshape(-1)  # category 2a + reward
    g = config.num_generations
    log_coef = gammaln(g + 1.0) - jnp.sum(gammaln(counts + 1.0), -1)
    impossible = jnp.any((counts > 0) & (q == 0), -1)  # e.g. reward 1 from a wrong arm: probability 0, not 0·∞
    log_q = jnp.log(jnp.where(q > 0, q, 1.0))
    return jnp.where(impossible, 0.0, jnp.exp(log_coef + counts @ log_q))


def collapse_branches(branches: State, weights: Array) -> State:
    """The rollout-average of branch states: weighted mean of the float leaves (logits, optimiser state, …);
    diverged if any branch diverged (at the earliest such step).

    Args:
        branches: one `State` per rollout, stacked: a leading branch axis O on every leaf.
        weights: (O,) the branches' probabilities (summing to 1).

    Returns:
        A `State` without the branch axis: float leaves the weighted mean, integer leaves (step, cursor,
        rollout arms, orders) branch 0's, `diverged` whether any branch diverged, `diverged_step` the earliest
        such step (−1 if none).
    """
    mean = jax.tree.map(
        lambda x: jnp.tensordot(weights, x, 1) if jnp.issubdtype(x.dtype, jnp.floating) else x[0], branches
    )
    steps = jnp.where(branches.diverged_step >= 0, branches.diverged_step, jnp.iinfo(jnp.int32).max)
    first = jnp.where(jnp.any(branches.diverged), jnp.min(steps), -1)
    return mean._replace(diverged=jnp.any(branches.diverged), diverged_step=first.astype(jnp.int32))


def reuse_branch_step(config: Config, optimizer, branches: State, weights: Array, outcomes):
    """(Low-level API) one step of expected-mode rollout reuse: the exact average over rollouts of the cycle.

    `branches` holds one state per enumerated rollout (`rollout_outcomes`), with probabilities `weights`. At a
    refresh the branches collapse to their weighted mean (the rollout-averaged cycle map) and are re-weighted by
    the probabilities of the new rollouts under π_old = that mean; each branch then takes its inner step on its
    own rollout. Read-outs are weighted means over branches (exact expectations within a cycle).

    Args:
        config: the configuration (`Config`): one prompt, lag model "refresh".
        optimizer: its optax transformation (`make_optimizer(config)`).
        branches: the branch states of step n, a `State` with a leading branch axis O on every leaf.
        weights: (O,) the branches' probabilities; replaced at a refresh (n a multiple of `lag`).
        outcomes: (arms, rewards, counts) of `rollout_outcomes(config)`: (O, G), (O, G) and (O, 2N).

    Returns:
        (branches, weights, metrics): the branch states of step n + 1 (O leading), the weights (O,) they were
        taken with, and the read-outs of step n, a dict keyed by `STEP_READOUTS` of 0-d weighted means
        (`true_reward` None without true rewards).
    """
    arms, rewards, counts = outcomes
    n = branches.step[0]
    refresh = n % jnp.maximum(config.lag, 1) == 0
    # the policy read-outs of step n are E[f(θ_n)] over the branches before a refresh collapses them
    nan = jnp.asarray(jnp.nan, weights.dtype)
    per_branch = jax.vmap(lambda s: policy_metrics(synced(config, s)[0], s.logits))(branches)
    per_branch = jax.tree.map(lambda v: jnp.where(branches.diverged, nan, v), per_branch)
    policy = jax.tree.map(lambda v: jnp.tensordot(weights, v, 1), per_branch)
    mean = collapse_branches(branches, weights)
    mean = mean._replace(old_logits=mean.logits)
    new_weights = _rollout_probabilities(config, mean.logits, counts)
    weights = jnp.where(refresh, new_weights, weights)
    branches = jax.tree.map(lambda b, m: jnp.where(refresh, m[None], b), branches, mean)
    order = jnp.zeros(1, jnp.int32)
    branches, metrics = jax.vmap(lambda s, a, r: rollout_step(config, optimizer, s, a[None], r[None], order))(
        branches, arms, rewards
    )
    metrics = dict(jax.tree.map(lambda m: jnp.tensordot(weights, m, 1), metrics), **policy)
    return branches, weights, metrics
