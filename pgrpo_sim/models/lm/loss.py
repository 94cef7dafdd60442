"""The token-level GRPO loss of one mini-batch, as TRL 1.x `GRPOTrainer._compute_loss` computes it.

Read from TRL 1.16.0 (`trl/trainer/grpo_trainer.py`). Per token, ρ = exp(logp − old_logp) (token level) or
exp of the masked mean of the log-ratios of its sequence (sequence level, GSPO); the PPO-clipped term
−min(min(ρ, δ)·A, clip(ρ, 1−ε_low, 1+ε_high)·A), or CISPO's −sg(min(ρ, ε_high))·A·logp; plus β × k3 against the
reference policy; then the `loss_type`'s aggregation over the masked tokens:

- "grpo": per sequence Σ_t l·m / max(Σ_t m, 1), mean over the sequences;
- "bnpo": Σ l·m / max(Σ m, 1) over the mini-batch;
- "dr_grpo": Σ l·m / (B · max_completion_length), with max_completion_length the width L of the completions;
- "dapo" and "cispo": Σ l·m / (max(num_items_in_batch, 1) / steps_per_generation), `num_items_in_batch` being the
  masked tokens of the whole generation batch (TRL's default loss type is "dapo");
- "luspo": Σ_t l·m summed per sequence, mean over the sequences.

One optimiser step per mini-batch (TRL `gradient_accumulation_steps = 1`). Advantages come from
`models.grpo.group_advantages` (TRL's ε 1e-4), the KL from `models.grpo.kl_estimate` ("k3" is TRL's
exp(ref − logp) − (ref − logp) − 1, unclamped). The clipped term is written here rather than taken from
`grpo.clipped_surrogate`, which follows verl: it clamps the log-ratio to ±20 before exponentiating (TRL does not),
refuses ε = ∞ (no clip), and counts its clip fraction as verl's pg_clipfrac, not TRL's low/high split.
Not implemented: `sapo`/`vespo` loss types, `top_entropy_quantile` < 1, `entropy_coef`, `use_bias_correction_kl`,
`off_policy_mask_threshold` and vLLM importance-sampling corrections.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import as_float, check_choice, check_range, check_shapes, is_concrete
from ...base.errors import PgrpoSimError
from ..grpo import LOSS_TYPES, kl_estimate

IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")


def loss_type_code(loss_type: str | ArrayLike) -> Array:
    """The int32 code of a loss type, its index in `LOSS_TYPES`: traced, so one compilation serves every loss type
    and a sweep can vmap over them. Names are checked; concrete codes range-checked.

    Args:
        loss_type: a name in `LOSS_TYPES`, or an integer code in [0, len(LOSS_TYPES) − 1] (an array, or traced).

    Returns:
        The code; int32, the shape of `loss_type` (a scalar for a name).

    Raises:
        PgrpoSimError: an unknown name, or a concrete code out of range.
    """
    if loss_type is None or isinstance(loss_type, str):
        check_choice("loss_type", loss_type, LOSS_TYPES)
        return jax.device_put(np.int32(LOSS_TYPES.index(loss_type)))
    check_range(f"loss_type (a code in LOSS_TYPES = {LOSS_TYPES})", loss_type, 0, len(LOSS_TYPES) - 1, integer=True)
    return jnp.asarray(loss_type, jnp.int32)


class LossStats(NamedTuple):
    """TRL's read-outs of one mini-batch, each a mean over its masked tokens (0 where there are none):
    `clip_low` (ρ < 1 − ε_low with A < 0: `clip_ratio/low_mean`), `clip_high` (ρ > 1 + ε_high with A > 0;
    for "cispo" ρ > ε_high with A > 0, TRL's `cispo_clip_ratio`), `clip_region` (either), `kl` (k3 against the
    reference, nats), `entropy` (nats; NaN when no entropies were given).

    Attributes:
        clip_low: share of tokens (of sequences, at the sequence level) clipped below; scalar in [0, 1].
        clip_high: share clipped above; scalar in [0, 1].
        clip_region: share clipped either way; scalar in [0, 1].
        kl: the masked mean k3 KL against the reference; scalar, nats; NaN without `ref_logp`.
        entropy: the masked mean per-token entropy; scalar, nats; NaN without `entropy`.
    """

    clip_low: Array
    clip_high: Array
    clip_region: Array
    kl: Array
    entropy: Array


def _masked_mean(x: Array, mask: Array) -> Array:
    """TRL's `global_masked_mean` on one process: Σ x·m / max(Σ m, 1)."""
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def grpo_loss(
    logp: ArrayLike,
    old_logp: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    *,
    loss_type: str | ArrayLike = "dapo",
    epsilon: ArrayLike | None = 0.2,
    epsilon_high: ArrayLike | None = None,
    delta: ArrayLike | None = None,
    beta: ArrayLike = 0.0,
    ref_logp: ArrayLike | None = None,
    entropy: ArrayLike | None = None,
    num_items_in_batch: ArrayLike | None = None,
    steps_per_generation: int = 1,
    importance_sampling_level: str = "token",
) -> tuple[Array, LossStats]:
    """TRL's GRPO loss of one mini-batch of B completions of width L, and its read-outs.

    Gradients flow through `logp` only (TRL detaches old and reference log-probabilities). Hyperparameters may be
    traced; concrete ones are range-checked.

    Args:
        logp: per-token log-probabilities under the current policy; (B, L); nats.
        old_logp: per-token log-probabilities under π_old, the rollout policy; (B, L); nats.
        advantages: one advantage per completion; (B,); dimensionless.
        mask: 1 for tokens in the loss, 0 otherwise; (B, L).
        loss_type: a name in `LOSS_TYPES` or its `loss_type_code` (traced allowed).
        epsilon: ε_low of the clip; ≥ 0; None or +∞: no clip.
        epsilon_high: ε_high (for "cispo" the cap on ρ); ≥ 0; None: ε_low; +∞: no clip.
        delta: TRL's two-sided clip (INTELLECT-2: ρ capped at δ in the unclipped term); > 1; None or +∞: off.
        beta: the k3 KL coefficient; ≥ 0.
        ref_logp: per-token log-probabilities under the reference policy; (B, L); nats; needed when β may be nonzero.
        entropy: per-token entropies of the sampling distribution, for the read-out only; (B, L); nats; or None.
        num_items_in_batch: the masked tokens of the generation batch this mini-batch is one of
            `steps_per_generation` slices of (dapo/cispo normaliser); ≥ 0; default Σ mask · steps_per_generation.
        steps_per_generation: mini-batches per generation batch; integer ≥ 1.
        importance_sampling_level: "token" (ρ per token) or "sequence" (GSPO: one ρ per sequence).

    Returns:
        (loss, stats): the scalar loss (the `loss_type`'s aggregation of the per-token terms) and the `LossStats`.

    Raises:
        PgrpoSimError: an unknown name, a concrete hyperparameter out of range, mismatched shapes, `logp` not 2-D,
            `advantages` not (B,), or a concrete β > 0 without `ref_logp`.
    """
    code = loss_type_code(loss_type)
    check_choice("importance_sampling_level", importance_sampling_level, IMPORTANCE_SAMPLING_LEVELS)
    check_range("steps_per_generation", steps_per_generation, 1, integer=True)
    check_range("epsilon", epsilon, 0.0, allow_inf=True)
    check_range("epsilon_high", epsilon_high, 0.0, allow_inf=True)
    check_range("delta", delta, 1.0, low_open=True, allow_inf=True)
    check_range("beta", beta, 0.0)
    check_range("num_items_in_batch", num_items_in_batch, 0.0)
    check_shapes(logp=logp, old_logp=old_logp, mask=mask, ref_logp=ref_logp, entropy=entropy)
    logp, mask = as_float(logp), as_float(mask)
    if logp.ndim != 2:
        raise PgrpoSimError(f"logp must have shape (completions, tokens), got {logp.shape}")
    advantages = as_float(advantages)
    if advantages.shape != logp.shape[:1]:
        raise PgrpoSimError(
            f"advantages must have shape ({logp.shape[0]},) (one per completion), got {advantages.shape}"
        )
    if ref_logp is None and is_concrete(beta) and np.any(np.asarray(beta) != 0):
        raise PgrpoSimError("beta > 0 needs ref_logp (the reference policy's per-token log-probabilities)")
    dtype = logp.dtype  # hyperparameters take the log-probabilities' precision
    bound = lambda x: as_float(np.inf if x is None else x).astype(dtype)  # a clip bound; None: none (+∞)
    eps_low = bound(epsilon)
    eps_high = eps_low if epsilon_high is None else bound(epsilon_high)
    optional = lambda x: None if x is None else as_float(x).astype(dtype)
    return _loss(
        logp, optional(old_logp), advantages.astype(dtype), mask.astype(dtype), optional(ref_logp), optional(entropy),
        code, eps_low, eps_high, bound(delta), as_float(beta).astype(dtype), optional(num_items_in_batch),
        steps_per_generation, importance_sampling_level,
    )  # fmt: skip


@functools.partial(jax.jit, static_argnums=(12, 13))  # one program per shape: eager calls do not compile per op
def _loss(
    logp, old_logp, advantages, mask, ref_logp, entropy, code, eps_low, eps_high, delta, beta, num_items_in_batch,
    steps_per_generation, importance_sampling_level,
):  # fmt: skip
    """`grpo_loss` on checked arrays."""
    old_logp = jax.lax.stop_gradient(old_logp)
    adv = advantages[:, None]
    n_seq, width = logp.shape

    log_ratio = logp - old_logp
    if importance_sampling_level == "sequence":
        log_ratio = (jnp.sum(log_ratio * mask, -1) / jnp.maximum(jnp.sum(mask, -1), 1.0))[:, None]
    ratio = jnp.exp(log_ratio)
    clipped_term = -jnp.minimum(jnp.minimum(ratio, delta) * adv, jnp.clip(ratio, 1 - eps_low, 1 + eps_high) * adv)
    cispo_term = -jax.lax.stop_gradient(jnp.minimum(ratio, eps_high)) * adv * logp
    cispo = code == LOSS_TYPES.index("cispo")
    per_token = jnp.where(cispo, cispo_term, clipped_term)
    # no reference: no KL read-out, and a traced β > 0 gives a NaN loss
    kl = jnp.full_like(logp, jnp.nan) if ref_logp is None else kl_estimate(logp, jax.lax.stop_gradient(ref_logp), "k3")
    per_token = per_token + jnp.where(beta == 0, 0.0, beta * kl)  # β = 0: TRL skips the term (and its NaN/∞)

    masked = per_token * mask
    per_sequence = jnp.sum(masked, -1)
    tokens = jnp.sum(mask)
    items = tokens * steps_per_generation if num_items_in_batch is None else num_items_in_batch
    normalised = {
        "grpo": jnp.mean(per_sequence / jnp.maximum(jnp.sum(mask, -1), 1.0)),
        "bnpo": jnp.sum(per_sequence) / jnp.maximum(tokens, 1.0),
        "dr_grpo": jnp.sum(per_sequence) / (n_seq * width),
        "dapo": jnp.sum(per_sequence) / (jnp.maximum(items, 1.0) / steps_per_generation),
        "luspo": jnp.mean(per_sequence),
    }
    normalised["cispo"] = normalised["dapo"]
    loss = jnp.select([code == i for i in range(len(LOSS_TYPES))], [normalised[name] for name in LOSS_TYPES], jnp.nan)

    low = jnp.where(cispo, False, (ratio < 1 - eps_low) & (adv < 0))  # TRL reports only the high cap for cispo
    high = jnp.where(cispo, ratio > eps_high, ratio > 1 + eps_high) & (adv > 0)
    # TRL's `global_masked_mean`: over the masked tokens, or over the sequences for sequence-level ratios
    per_sequence_mean = lambda x: jnp.mean(x.astype(logp.dtype))
    clip_mean = per_sequence_mean if ratio.shape[1] == 1 else lambda x: _masked_mean(x.astype(logp.dtype), mask)
    stats = LossStats(
        clip_low=clip_mean(low),
        clip_high=clip_mean(high),
        clip_region=clip_mean(low | high),
        kl=jax.lax.stop_gradient(_masked_mean(kl, mask)),
        entropy=jnp.full((), jnp.nan, logp.dtype) if entropy is None else _masked_mean(entropy, mask),
    )
    return loss, stats
