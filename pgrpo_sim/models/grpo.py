"""GRPO building blocks as pure functions: advantages, clipped surrogate, KL estimators, entropy.

Conventions follow verl (`core_algos.compute_grpo_outcome_advantage`, `compute_policy_loss_vanilla`,
`kl_penalty`) and TRL (`GRPOTrainer`); worked test vectors are in docs/conventions.md.
Batch dimensions lead; a group is the last axis. Values are per sample: averaging is the caller's. Shapes are
written in jaxtyping's notation (`*batch group`: any leading axes, then the group; `#` marks an axis that broadcasts).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike
from jaxtyping import Float, Real

from ..base.checks import as_float, check_choice, check_range, check_shapes
from ..base.errors import PgrpoSimError
from ..base.small_axes import axis_sum

ADVANTAGES = ("std", "mean", "rloo", "batch")
"""Advantage kinds (`group_advantages`), verl's names; TRL's `scale_rewards` names three of them (`SCALE_REWARDS`)."""
SCALE_REWARDS = MappingProxyType({"group": "std", "batch": "batch", "none": "mean"})
"""TRL `scale_rewards` → the advantage kind."""
TOKEN_AGGREGATIONS = ("grpo", "bnpo", "dr_grpo", "dapo")
"""TRL loss types that differ only in how they average the clipped surrogate over tokens: on one-token completions
(the bandit's) they coincide."""
LOSS_TYPES = (*TOKEN_AGGREGATIONS, "luspo", "cispo")
"""TRL `loss_type`s the language-model level implements (`models.lm.grpo_loss`): the token aggregations and two that
change the surrogate (a loss type is traced as its index here, `loss_type_code`)."""
KL_ESTIMATORS = ("k1", "k2", "k3")
LOG_RATIO_CLAMP = 20.0
"""verl clamps the log importance ratio to [−20, 20] before exponentiating."""


def advantage_code(kind: str | ArrayLike) -> Array:
    """The int32 code of an advantage kind, its index in `ADVANTAGES`: a jit-safe enumeration, so kinds can be
    traced (one compilation serves every kind) and vmapped. Names are checked; concrete codes range-checked.

    Args:
        kind: a name in `ADVANTAGES` ("std", "mean", "rloo", "batch"), or its integer code in [0, 3] (any shape;
            may be traced).

    Returns:
        int32 code(s): a 0-d array for a name, else an array of the shape of `kind`.

    Raises:
        PgrpoSimError: for an unknown name (or None), or a concrete code that is not an integer in [0, 3].
    """
    if kind is None or isinstance(kind, str):
        check_choice("advantage", kind, ADVANTAGES)
        return jax.device_put(np.int32(ADVANTAGES.index(kind)))  # no eager conversion program
    check_range(f"advantage (a code in ADVANTAGES = {ADVANTAGES})", kind, 0, len(ADVANTAGES) - 1, integer=True)
    return kind if isinstance(kind, jax.Array) and kind.dtype == jnp.int32 else jnp.asarray(kind, jnp.int32)


def _sqrt_flat_at_zero(x: Array) -> Array:
    """√x (x ≥ 0) whose derivative at x = 0 is 0, not ∞: the std of an all-equal group is the tip of a cone
    in the rewards, and 0 is its subgradient there; ∞·0 made the advantages' gradient NaN."""
    zero = x == 0  # not x > 0: a NaN stays NaN
    return jnp.where(zero, 0.0, jnp.sqrt(jnp.where(zero, 1.0, x)))


def group_advantages(
    rewards: Real[ArrayLike, "*batch group"], kind: str | ArrayLike = "std", eps: ArrayLike = 1e-6
) -> Float[Array, "*batch group"]:
    """Group-relative advantages over the last axis (the group of G samples); `kind` a name or its
    `advantage_code` (traced codes allowed: selects pick the formula).

    - "std" (GRPO): (r − mean)/(unbiased std + eps); a group whose rewards are all equal gives 0.
    - "mean" (Dr. GRPO): r − mean.
    - "rloo" (leave-one-out): r − mean of the other G − 1 rewards.
    - "batch" (TRL `scale_rewards="batch"`): (r − group mean)/(unbiased std over every reward of the array +
      eps): the groups of one batch share the scale.

    Args:
        rewards: rewards, shape (..., G): leading batch axes, the group of G >= 2 samples last; usually in [0, 1]
            (not checked).
        kind: a name in `ADVANTAGES` or its code (`advantage_code`; may be traced).
        eps: added to the std in "std" and "batch" (reward units); >= 0.

    Returns:
        Advantages, of the shape of `rewards`, in its float dtype (float32 for integers and Python numbers).

    Raises:
        PgrpoSimError: if G < 2, eps < 0 or non-finite, or `kind` is an unknown name or a concrete invalid code.
    """
    code = advantage_code(kind)
    check_range("eps", eps, 0.0)
    rewards = as_float(rewards)
    g = rewards.shape[-1]
    if g < 2:
        raise PgrpoSimError(f"group size (last axis) must be >= 2, got {g}")
    group_mean = axis_sum(rewards, keepdims=True) / g
    centred = rewards - group_mean
    # every kind is r − mean times a factor over a denominator, picked by selects (which fuse): std (GRPO)
    # 1/(std + eps), mean 1/1, rloo (G/(G − 1))/1, batch 1/(batch std + eps). Multiplying or dividing by 1 is
    # exact, so each kind's numbers are those of its own formula.
    squares = axis_sum(centred**2, keepdims=True)
    std = _sqrt_flat_at_zero(squares / (g - 1))
    # the batch's sum of squares from the groups' (Chan et al.'s pairwise update): no pass over every reward,
    # which made sampled sweeps 1.5× slower
    spread = jnp.sum(squares) + g * jnp.sum((group_mean - jnp.mean(group_mean)) ** 2)
    batch_std = _sqrt_flat_at_zero(spread / (rewards.size - 1))
    factor = jnp.where(code == ADVANTAGES.index("rloo"), g / (g - 1), 1.0)
    denominator = jnp.where(
        code == ADVANTAGES.index("std"), std + eps, jnp.where(code == ADVANTAGES.index("batch"), batch_std + eps, 1.0)
    )
    # eps = 0: an all-equal group has 0/0, its advantages 0 as documented (NaN still propagates)
    safe = denominator != 0
    return jnp.where(safe, centred * factor / jnp.where(safe, denominator, 1.0), 0.0)


class Surrogate(NamedTuple):
    """Per-sample clipped-surrogate loss, whether clipping was active, and the IS ratio ρ.

    Attributes:
        loss: the loss per sample (units of the advantages), of the broadcast shape of logp, logp_old, advantages.
        clipped: 1.0 where the clipped branch is strictly larger, else 0.0; shape and dtype of `loss`.
        ratio: importance ratio ρ (> 0, dimensionless), of the broadcast shape of logp and logp_old.
    """

    loss: Float[Array, "*shape"]
    clipped: Float[Array, "*shape"]
    ratio: Float[Array, "*shape"]


def clipped_surrogate(
    logp: Float[ArrayLike, "*#shape"],
    logp_old: Float[ArrayLike, "*#shape"],
    advantages: Float[ArrayLike, "*#shape"],
    epsilon: ArrayLike = 0.2,
    epsilon_high: ArrayLike = 0.2,
    dual_clip: ArrayLike | None = None,
) -> Surrogate:
    """Per-sample PPO/GRPO loss −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)·A), ρ = exp(clamp(logp−logp_old, ±20)).

    With `dual_clip=c` (c > 1; None or +inf disables it) the loss of samples with A < 0 is capped at −c·A,
    as in verl. `clipped` is 1.0 where the clipped branch is strictly larger (verl's pg_clipfrac), so
    `clipped.mean()` is the clip fraction.

    Args:
        logp: log-probabilities of the sampled actions under the current policy π_θ (nats); any shape, broadcasting
            with logp_old and advantages.
        logp_old: log-probabilities under the rollout policy π_old (nats); broadcasts.
        advantages: advantages A (e.g. `group_advantages`); broadcasts.
        epsilon: ε_low; ρ is clipped below at 1 − ε_low; > 0; scalar or broadcasting.
        epsilon_high: ε_high; ρ is clipped above at 1 + ε_high; > 0; scalar or broadcasting.
        dual_clip: c > 1 (or +inf), bound of the loss of samples with A < 0; None: off.

    Returns:
        `Surrogate` (loss, clipped, ratio), in the float dtype of the inputs.

    Raises:
        PgrpoSimError: eagerly, if epsilon or epsilon_high is <= 0 or non-finite, or dual_clip <= 1 or NaN.
    """
    check_range("epsilon", epsilon, 0.0, low_open=True)
    check_range("epsilon_high", epsilon_high, 0.0, low_open=True)
    check_range("dual_clip", dual_clip, 1.0, low_open=True, allow_inf=True)
    logp, logp_old, advantages = as_float(logp), as_float(logp_old), as_float(advantages)
    ratio = jnp.exp(jnp.clip(logp - logp_old, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    unclipped = -advantages * ratio
    clipped = -advantages * jnp.clip(ratio, 1 - epsilon, 1 + epsilon_high)
    loss = jnp.maximum(unclipped, clipped)
    if dual_clip is not None:
        loss = jnp.minimum(loss, jnp.where(advantages < 0, -advantages * dual_clip, jnp.inf))
    return Surrogate(loss, (clipped > unclipped).astype(loss.dtype), ratio)


def kl_estimate(
    logp: Float[ArrayLike, "*#shape"],
    logp_ref: Float[ArrayLike, "*#shape"],
    kind: str = "k3",
    clamp: ArrayLike | None = None,
) -> Float[Array, "*shape"]:
    """Per-sample KL estimator on sampled actions, d = logp − logp_ref (nats).

    k1 = d; k2 = d²/2; k3 = eˣ − x − 1 with x = −d, clamped to [−clamp, clamp] if `clamp` is given
    (verl clamps at 10). On-policy E[∇k3] = ∇KL(π_ref‖π), i.e. π − π_ref in logit space.

    Args:
        logp: log-probabilities of the sampled actions under π (nats); any shape, broadcasting with logp_ref.
        logp_ref: log-probabilities of the same actions under the reference policy π_ref (nats).
        kind: "k1", "k2" or "k3" (`KL_ESTIMATORS`); static.
        clamp: bound of k3 (nats), > 0 (+inf allowed); None: no clamp; k1 and k2 ignore it.

    Returns:
        The estimate per sample (nats), of the broadcast shape of logp and logp_ref, float.

    Raises:
        PgrpoSimError: if `kind` is unknown, or (eagerly) clamp <= 0 or NaN.
    """
    check_choice("kl", kind, KL_ESTIMATORS)
    check_range("kl_clamp", clamp, 0.0, low_open=True, allow_inf=True)
    d = as_float(logp) - as_float(logp_ref)
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d**2
    k3 = jnp.expm1(-d) + d
    return k3 if clamp is None else jnp.clip(k3, jnp.negative(clamp), clamp)


def _p_log_ratio(logp: Array, log_ratio: Array) -> Array:
    """Σ p·log_ratio over the last axis with p = exp(logp), where an arm of probability 0 adds 0 (0·log 0 = 0),
    also when its log_ratio is −∞ or NaN — a finite logit gap beyond the float range gives logp = −∞ — with
    finite gradients."""
    p = jnp.exp(logp)
    return jnp.sum(p * jnp.where(p > 0, log_ratio, 0.0), axis=-1)


def entropy(logits: Float[ArrayLike, "*batch arms"]) -> Float[Array, "*batch"]:
    """Entropy H(softmax(z)) = −Σ p log p over the last axis (nats); arms of probability 0 add 0.

    Args:
        logits: logits z, shape (..., N) with the N arms last; −inf allowed (an arm of probability 0).

    Returns:
        H in [0, log N] (nats), shape (...), float.
    """
    logp = jax.nn.log_softmax(as_float(logits), axis=-1)
    return -_p_log_ratio(logp, logp)


def kl_divergence(
    logits: Float[ArrayLike, "*#batch arms"], logits_ref: Float[ArrayLike, "*#batch arms"]
) -> Float[Array, "*batch"]:
    """Exact KL(softmax(z) ‖ softmax(z_ref)) over the last axis (nats); arms of probability 0 under π add 0.

    Args:
        logits: logits z of π, shape (..., N) with the N arms last.
        logits_ref: logits z_ref of π_ref; a shape broadcasting with that of `logits`.

    Returns:
        KL >= 0 (nats; +inf where π puts mass on an arm π_ref excludes), of the broadcast shape without the last
            axis, in the float dtype of `logits`.

    Raises:
        PgrpoSimError: if the shapes of logits and logits_ref do not broadcast.
    """
    check_shapes(logits=logits, logits_ref=logits_ref)
    logp = jax.nn.log_softmax(as_float(logits), axis=-1)
    logq = jax.nn.log_softmax(as_float(logits_ref).astype(logp.dtype), axis=-1)
    return _p_log_ratio(logp, logp - logq)
