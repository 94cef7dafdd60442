"""Sampled mode: drawn groups (docs/design.md §3, "Two modes, one update rule"). `draw_rollout` draws G arms per
prompt and their rewards, one Threefry uniform a sample; `sampled_loss` is the GRPO loss of drawn groups (mini-batches
and DAPO's dynamic sampling included), `sampled_on_policy_grad` its gradient written out for groups drawn at the
evaluation point (docs/conventions.md)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import Array

from ...base import threefry as _random
from ...base.small_axes import UNROLL_MAX, axis_sum, softmax
from ..grpo import clipped_surrogate, group_advantages, kl_divergence, kl_estimate
from .common import UpdateStats, kl_slope, kl_term
from .configuration import Config


def _group_std(rewards: Array) -> Array:
    """Unbiased std of each group (last axis) of rewards."""
    g = rewards.shape[-1]
    centred = rewards - axis_sum(rewards, keepdims=True) / g
    return jnp.sqrt(axis_sum(centred**2) / (g - 1))


def sampled_loss(
    logits: Array,
    behaviour_logits: Array,
    arms: Array,
    rewards: Array,
    config: Config,
    prompt_weights: Array | None = None,
) -> tuple[Array, UpdateStats]:
    """GRPO loss of drawn groups: `arms`, `rewards` of shape (P, G), drawn from softmax(`behaviour_logits`).

    The loss is the mean over prompts, or Σ_p w_p·loss_p with `prompt_weights` w (P,) (a mini-batch: 1/|batch|
    on its prompts, 0 elsewhere; the read-outs are then over the mini-batch's prompts too). With
    `config.dynamic_sampling` (DAPO) groups whose rewards are all equal get weight 0 and the others share it.

    Args:
        logits: θ, the policy whose loss it is; (P, N) logits (nats).
        behaviour_logits: π_old's logits, from which the groups were drawn; (P, N).
        arms: the drawn arms, (P, G) integers in [0, N).
        rewards: their rewards, (P, G) floats (0/1 for Bernoulli draws).
        config: the configuration of these P prompts (`Config`, e.g. `batch_config`'s): the KL reference
            `init_logits` (P, N) and the loss's hyperparameters.
        prompt_weights: w, (P,) nonnegative weights of the prompts (a mini-batch: `minibatch_weights`); None: the
            mean over prompts (default).

    Returns:
        (loss, stats): the loss, a 0-d float (group-mean surrogate plus β × KL estimator per prompt, weighted
        over prompts); and its read-outs (`UpdateStats`, 0-d averages over the (mini-)batch's samples or groups).
    """
    logp = jax.nn.log_softmax(logits)
    pick = functools.partial(jnp.take_along_axis, indices=arms, axis=-1)
    lp, lp_old, lp_ref = (
        pick(logp),
        pick(jax.nn.log_softmax(behaviour_logits)),
        pick(jax.nn.log_softmax(config.init_logits)),
    )
    adv = group_advantages(rewards, config.advantage, config.adv_eps)
    sur = clipped_surrogate(lp, lp_old, adv, config.epsilon, config.epsilon_high, config.dual_clip)
    uniform = jnp.full(lp.shape, 1.0 / lp.shape[-1], lp.dtype)
    kl_logits = logits if config.kl == "exact" else None
    kl = kl_term(config, kl_logits, lp, lp_ref, uniform)
    per_prompt = jnp.mean(sur.loss, axis=-1) + config.beta * kl
    zero_std = jnp.all(rewards == rewards[..., :1], axis=-1).astype(lp.dtype)
    extra = dict(
        batch_reward=jnp.mean(rewards, axis=-1),
        group_reward_std=_group_std(rewards),
        clip_low_frac=jnp.mean(jnp.where(adv < 0, sur.clipped, 0.0), axis=-1),
        clip_high_frac=jnp.mean(jnp.where(adv > 0, sur.clipped, 0.0), axis=-1),
        kl=kl,
    )
    if prompt_weights is None and not config.dynamic_sampling:
        stats = UpdateStats(
            ratio_max=jnp.max(sur.ratio),
            ratio_mean=jnp.mean(sur.ratio),
            clip_frac=jnp.mean(sur.clipped),
            zero_adv_frac=jnp.mean(zero_std),
            adv_var=jnp.mean(adv**2),
            **{k: jnp.mean(v) for k, v in extra.items()},
        )
        return jnp.mean(per_prompt), stats
    shown = jnp.full(lp.shape[:1], 1.0 / lp.shape[0], lp.dtype) if prompt_weights is None else prompt_weights
    weights = shown
    if config.dynamic_sampling:  # DAPO: only groups with a reward signal count
        kept = shown * (1 - zero_std)
        weights = kept / jnp.maximum(jnp.sum(kept), jnp.finfo(lp.dtype).tiny)
    w = shown[:, None] / lp.shape[-1]  # per sample, for the read-outs of the (mini-)batch
    stats = UpdateStats(
        ratio_max=jnp.max(jnp.where(w > 0, sur.ratio, -jnp.inf)),
        ratio_mean=jnp.sum(w * sur.ratio),
        clip_frac=jnp.sum(w * sur.clipped),
        zero_adv_frac=jnp.sum(shown * zero_std),
        adv_var=jnp.sum(w * adv**2),
        **{k: jnp.sum(shown * v) for k, v in extra.items()},
    )
    return jnp.sum(weights * per_prompt), stats


def _pick(arms: Array, per_arm: Array) -> Array:
    """per_arm[p, arms[p, g]]: the (P, G) values of the drawn arms from a (P, N) table."""
    n_arms = per_arm.shape[-1]
    if n_arms > UNROLL_MAX:
        return jnp.take_along_axis(per_arm, arms, axis=-1)
    out = jnp.broadcast_to(per_arm[:, :1], arms.shape)
    for a in range(1, n_arms):
        out = jnp.where(arms == a, per_arm[:, a : a + 1], out)
    return out


def _sum_by_arm(arms: Array, values: Array, n_arms: int) -> Array:
    """Σ_g values[p, g]·1{arms[p, g] = a}: (P, N)."""
    if n_arms > UNROLL_MAX:
        return jnp.sum(values[..., None] * (arms[..., None] == jnp.arange(n_arms)), axis=-2)
    return jnp.stack([axis_sum(jnp.where(arms == a, values, 0)) for a in range(n_arms)], axis=-1)


def _cumsum_arms(x: Array) -> Array:
    if x.shape[-1] > UNROLL_MAX:
        return jnp.cumsum(x, axis=-1)
    parts = [x[..., :1]]
    for a in range(1, x.shape[-1]):
        parts.append(parts[-1] + x[..., a : a + 1])
    return jnp.concatenate(parts, axis=-1)


def draw_rollout(config: Config, behaviour_logits: Array, key: Array) -> tuple[Array, Array]:
    """G arms per prompt from softmax(behaviour_logits) and their Bernoulli rewards, shape (P, G).

    One uniform u per sample: the arm is the inverse CDF at u, and the position of u inside that arm's
    CDF interval, (u − F_{a−1})/π_a, is again uniform and independent of the arm, so it draws the reward.

    Args:
        config: the configuration of the P prompts drawn for (`Config`, e.g. `batch_config`'s): P =
            `n_prompts`, G = `num_generations`, rewards (P, N) the success probabilities.
        behaviour_logits: the sampling policy's logits, (P, N).
        key: a JAX PRNG key (Threefry keys take the fused counter-based draw of `base.threefry`).

    Returns:
        (arms, rewards): arms (P, G), integers (int32 unless x64) in [0, N); rewards (P, G), 0.0 or 1.0 in the
        logits' float dtype.
    """
    pi = softmax(behaviour_logits)
    cdf = _cumsum_arms(pi)
    u = _random.uniform(key, (config.n_prompts, config.num_generations), pi.dtype) * cdf[:, -1:]
    arms = jnp.minimum(jnp.sum(u[..., None] >= cdf[:, None, :], axis=-1), config.n_arms - 1)
    width = _pick(arms, pi)
    within = jnp.clip((u - _pick(arms, cdf - pi)) / jnp.where(width > 0, width, 1), 0, 1)
    return arms, (within < _pick(arms, config.rewards)).astype(pi.dtype)


def sampled_on_policy_grad(logits: Array, arms: Array, rewards: Array, config: Config) -> tuple[Array, UpdateStats]:
    """Gradient of `sampled_loss` when the groups were drawn from θ = `logits` itself (lag models "none"
    and "stale"), written out: at ρ = 1 no clip is active, so sample i contributes w_i (e_{a_i} − π)/G with
    w_i = −A_i + β·∂k/∂log π(a_i) (unclamped k3: 1 − π_ref(a_i)/π(a_i); exact KL adds β π (d − Σ π d),
    d = log π − log π_ref, whatever the samples). Equal to `jax.grad(sampled_loss)(θ, θ, …)`, without
    autodiff, gathers or scatters. Plain mean over prompts: no prompt weights, no dynamic sampling.

    Args:
        logits: θ = π_old's logits, from which the groups were drawn; (P, N) logits (nats).
        arms: the drawn arms, (P, G) integers in [0, N).
        rewards: their rewards, (P, G) floats.
        config: the configuration of these P prompts (`Config`): the KL reference `init_logits` (P, N),
            G and the loss's hyperparameters.

    Returns:
        (grad, stats): ∂L/∂θ of the mean-over-prompts loss, (P, N) in the logits' dtype; and the read-outs
        (`UpdateStats`, 0-d; ratios 1 and clip fractions 0 on policy).
    """
    pi = softmax(logits)
    adv = group_advantages(rewards, config.advantage, config.adv_eps)
    w = -adv
    kl_grad = 0.0
    if config.kl == "k3" and config.kl_clamp is None:
        w = w + config.beta * (1 - _pick(arms, softmax(config.init_logits)) / _pick(arms, pi))
    else:
        d = jax.nn.log_softmax(logits) - jax.nn.log_softmax(config.init_logits)
        if config.kl == "exact":
            kl_grad = config.beta * pi * (d - jnp.sum(pi * d, axis=-1, keepdims=True))
        else:
            w = w + config.beta * kl_slope(_pick(arms, d), config)
    per_arm = _sum_by_arm(arms, w, config.n_arms) - pi * axis_sum(w, keepdims=True)
    grad = (per_arm / config.num_generations + kl_grad) / config.n_prompts
    one = jnp.ones((), pi.dtype)
    if config.kl == "exact":
        kl = kl_divergence(logits, config.init_logits)
    else:
        log_ratio = _pick(arms, jax.nn.log_softmax(logits) - jax.nn.log_softmax(config.init_logits))
        kl = jnp.mean(kl_estimate(log_ratio, 0.0, config.kl, config.kl_clamp), axis=-1)
    stats = UpdateStats(
        ratio_max=one,
        ratio_mean=one,
        clip_frac=0 * one,
        zero_adv_frac=jnp.mean(jnp.all(rewards == rewards[..., :1], axis=-1).astype(pi.dtype)),
        adv_var=jnp.mean(adv**2),
        batch_reward=jnp.mean(rewards),
        group_reward_std=jnp.mean(_group_std(rewards)),
        clip_low_frac=0 * one,
        clip_high_frac=0 * one,
        kl=jnp.mean(kl),
    )
    return grad, stats
