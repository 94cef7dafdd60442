"""The exact per-step spectral radius of the expected bandit update at its fixed point: the Floquet multiplier of
largest modulus of the one-cycle map (refresh period, stale-buffer rotation, or one step), from `jax.jacfwd`."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax import Array

from ..models import bandit
from ..models.bandit import collapse_branches, initial_state, make_optimizer, reuse_branch_step, rollout_outcomes, step
from .reduction import two_arm_logits


def _cycle_length(config: bandit.Config):
    if config.lag_model in ("refresh", "refresh_fresh"):
        return jnp.maximum(config.lag, 1)
    if config.lag_model == "stale":
        return config.max_lag + 1  # the stale-lag ring buffer realigns after this many steps
    return 1


def floquet_radius(config2: bandit.Config, x: Array) -> Array:
    """Per-step spectral radius of the one-cycle map of the expected update of a 2-arm configuration at the
    fixed point x (docs/design.md §2: Floquet analysis).

    The state that the dynamics use (logits, optimiser trace, and π_old for "refresh_fresh" or the history for
    "stale") is taken in difference coordinates (arm 0 − arm 1): common shifts of the logits are neutral. With
    rollout reuse ("refresh") the map is the rollout-averaged cycle (`bandit.reuse_branch_step`), taken at its
    own fixed point; its rollouts are enumerated for binary rewards (`two_arm_reduction`'s are 1 and 0; other
    concrete rewards are refused by `bandit.rollout_outcomes`): 9 multisets of arms at G = 8 instead of 165 of
    (arm, reward), the same map (radii equal to ~1e-16), 6× faster.

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).
        x: logit of the fixed point, x* = logit p* (`fixed_point`); a 0-d float.

    Returns:
        The radius per optimiser step (>= 0; < 1 is stable), 0-d float; NaN for "refresh" when the averaged cycle's
            fixed point is not found.

    Raises:
        PgrpoSimError: for "refresh" with rewards that are not 0/1, several prompts, or too many distinct rollouts
            (`bandit.rollout_outcomes`).
    """
    optimizer = make_optimizer(config2)
    base = initial_state(config2, optimizer, two_arm_logits(x))
    lag_field = {"refresh_fresh": "old_logits", "stale": "history"}.get(config2.lag_model)
    fields = ("logits", "opt_state") + ((lag_field,) if lag_field else ())
    dynamic = {f: getattr(base, f) for f in fields}
    leaves, treedef = jax.tree.flatten(dynamic)
    sizes = [leaf[..., 0].size for leaf in leaves]
    length = _cycle_length(config2)
    if config2.lag_model == "refresh":  # rollout reuse: the rollout-averaged cycle, from a refresh
        outcomes = rollout_outcomes(config2, binary_rewards=True)
        size = outcomes[0].shape[0]

        def advance(state: bandit.State) -> bandit.State:
            branches = jax.tree.map(lambda v: jnp.broadcast_to(v, (size, *jnp.shape(v))), state)
            carry = (branches, jnp.full(size, 1.0 / size, x.dtype))
            carry = jax.lax.fori_loop(
                0, length, lambda _, c: reuse_branch_step(config2, optimizer, c[0], c[1], outcomes)[:2], carry
            )
            return collapse_branches(*carry)
    else:
        update = functools.partial(step, config2, optimizer, "expected")
        key = jax.random.key(0)  # unused in expected mode

        def advance(state: bandit.State) -> bandit.State:
            return jax.lax.fori_loop(0, length, lambda _, s: update(s, key)[0], state)

    def cycle(z):
        chunks = jnp.split(z, np.cumsum(sizes)[:-1])
        half = [d.reshape(leaf.shape[:-1]) / 2 for leaf, d in zip(leaves, chunks, strict=True)]
        moved = [leaf + jnp.stack([h, -h], -1) for leaf, h in zip(leaves, half, strict=True)]
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
