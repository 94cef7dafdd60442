"""An independent NumPy (float64) reference of one TRL 1.x GRPO loss computation, with its gradient w.r.t. the
policy's per-token log-probabilities written out by hand (no autodiff), read from TRL 1.16.0
`GRPOTrainer._generate_and_score_completions` (advantages) and `_compute_loss` (loss, read-outs).
It shares no code with the package."""

from __future__ import annotations

import numpy as np


def trl_advantages(rewards: np.ndarray, num_generations: int, scale_rewards: str) -> np.ndarray:
    """TRL advantages of a flat batch of rewards, groups of `num_generations` consecutive completions: r − group mean,
    divided by (unbiased group std + 1e-4) for "group", by (unbiased batch std + 1e-4) for "batch", not for "none"."""
    grouped = rewards.reshape(-1, num_generations)
    centred = (grouped - grouped.mean(1, keepdims=True)).ravel()
    if scale_rewards == "none":
        return centred
    if scale_rewards == "group":
        std = np.repeat(grouped.std(1, ddof=1), num_generations)
    else:
        std = np.full_like(rewards, rewards.std(ddof=1))
    return centred / (std + 1e-4)


def trl_loss_and_grad(
    logp,
    old_logp,
    ref_logp,
    adv,
    mask,
    *,
    loss_type,
    eps_low,
    eps_high,
    beta,
    level,
    items,
    steps_per_generation,
    delta=np.inf,
):
    """TRL's loss of one mini-batch, d loss / d logp (B, L), and the clip read-outs (low, high, region); `delta`
    TRL's two-sided clip (∞: off)."""
    b, width = logp.shape
    lengths = np.maximum(mask.sum(1), 1)[:, None]
    a = adv[:, None]
    # per token, or the masked mean of a sequence's log-ratios: one weight per sequence
    log_w = logp - old_logp if level == "token" else ((logp - old_logp) * mask).sum(1, keepdims=True) / lengths
    rho = np.exp(log_w)
    if loss_type == "cispo":
        cap = np.minimum(rho, eps_high)
        per_token = -cap * a * logp
    else:
        unclipped, clipped = np.minimum(rho, delta) * a, np.clip(rho, 1 - eps_low, 1 + eps_high) * a
        per_token = -np.minimum(unclipped, clipped) * np.ones_like(logp)
        # the gradient goes through whichever branch is smaller, each moving only where its bound does not bind
        inside = (rho > 1 - eps_low) & (rho < 1 + eps_high)
        dl_dlogw = -a * rho * np.where(unclipped <= clipped, rho < delta, inside)
    x = ref_logp - logp
    if beta != 0:
        per_token = per_token + beta * (np.exp(x) - x - 1)
    weights = {  # d loss / d (per-token loss at t)
        "grpo": mask / lengths / b,
        "bnpo": mask / max(mask.sum(), 1),
        "dr_grpo": mask / (b * width),
        "dapo": mask / (max(items, 1) / steps_per_generation),
        "cispo": mask / (max(items, 1) / steps_per_generation),
        "luspo": mask / b,
    }[loss_type]
    loss = float((per_token * weights).sum())
    if loss_type == "cispo":  # the capped weight is detached: the gradient is the log-probability's own
        grad = -cap * a * weights
    elif level == "token":
        grad = dl_dlogw * weights
    else:  # every token's loss moves with its sequence's log_w, which moves with each token by m_s / n
        grad = (dl_dlogw * weights).sum(1, keepdims=True) * mask / lengths
    if beta != 0:
        grad = grad + beta * (1 - np.exp(x)) * weights
    if loss_type == "cispo":
        low, high = np.zeros_like(rho, bool), (rho > eps_high) & (a > 0)
    else:
        low, high = (rho < 1 - eps_low) & (a < 0), (rho > 1 + eps_high) & (a > 0)
    read = (lambda x: (x * mask).sum() / max(mask.sum(), 1)) if level == "token" else (lambda x: x.mean())
    return loss, grad, (read(low), read(high), read(low | high))
