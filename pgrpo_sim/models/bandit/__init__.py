"""The exact softmax-bandit GRPO environment (docs/design.md §3).

Policy π = softmax(θ) over N arms per prompt, reference π_ref = softmax(θ_0). Each optimiser step
draws a group of G arms from the behaviour policy π_old, rewards them (Bernoulli with the arm's mean;
0/1 rewards are the binary case), forms group-relative advantages, and descends the group-mean
clipped surrogate plus β × a KL estimator, with an optax optimiser on θ.

- mode "expected": the exact expectation over the group. A sample's reward is 1 with probability
  p_old = Σ_a π_old(a) r_a whatever the other samples are, so the other G − 1 samples contribute
  j ~ Binomial(G−1, p_old) successes and the expected loss is Σ_a π_old(a) Σ_{r,j} P(r|a) B(j) ℓ(a, A(r, j)).
  No Monte Carlo.
- mode "sampled": real categorical draws, independent PRNG streams per seed.

Lag models: "none" (on-policy); "refresh" (π_old refreshed every `lag` steps, importance-weighted
clipped surrogate in between, as TRL's num_iterations / verl's ppo_epochs); "stale" (samples,
advantages and gradient computed at θ_{n−τ}, applied at step n without correction).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from jax.custom_derivatives import SymbolicZero
from jax.scipy.special import gammaln, xlog1py, xlogy

from ...base import threefry as _random
from ...base.autodiff import scan, where_frozen
from ...base.checks import as_key, check_choice, check_seeds, check_steps, in_range, is_concrete, nan_unless
from ...base.errors import PgrpoSimError
from ...base.small_axes import UNROLL_MAX, axis_sum, softmax
from ..config import LEAF_RANGES, BanditConfig, check_config
from ..grpo import ADVANTAGES, clipped_surrogate, entropy, group_advantages, kl_divergence, kl_estimate

MODES = ("expected", "sampled")


class UpdateStats(NamedTuple):
    """Per-step read-outs of one GRPO update (expectations in expected mode, group averages when sampled).

    What TRL logs, as (ours: TRL's): batch_reward: `reward` (mean sampled reward of the rollout's groups);
    group_reward_std: `reward_std` (mean within-group unbiased std); zero_adv_frac: `frac_reward_zero_std`;
    clip_low_frac / clip_high_frac: `clip_ratio/low_mean` / `high_mean` (samples clipped with A < 0 below
    1 − ε_low, with A > 0 above 1 + ε_high); kl: `kl` (mean KL estimator on the samples, or the exact KL);
    grad_norm (in `BanditRun`): `grad_norm`."""

    ratio_max: Array
    ratio_mean: Array
    clip_frac: Array
    zero_adv_frac: Array
    adv_var: Array
    batch_reward: Array
    group_reward_std: Array
    clip_low_frac: Array
    clip_high_frac: Array
    kl: Array


class BanditRun(NamedTuple):
    """Result of `simulate`. Per-step arrays have shape (steps+1,) in expected mode and
    (seeds, steps+1) in sampled mode; index n describes the policy θ_n (n = 0 is the start) and the
    update taken from it. After a run diverges (`diverged`, at update `diverged_step`, −1 if never)
    its per-step values are NaN. Expected-mode rollout reuse (lag model "refresh") follows one branch per
    possible rollout of the current cycle: its read-outs are averages over the branches (the expected reward
    E[p(θ_n)]), and at each refresh the branches collapse into their weighted mean state
    (`collapse_branches`), from which the next cycle starts; so `final_logits` is that mean, and p(final_logits)
    differs from the last `reward` by the branches' spread.

    reward: expected success probability p = Σ π_a r_a, mean over prompts; `true_reward` the same for
    the true reward vector (None if not given); entropy, kl_ref = KL(π‖π_ref) (nats); grad_norm (global
    L2 norm of the loss gradient); ratio_max/ratio_mean (IS ratio π/π_old; in expected mode the max over
    arms and the π_old-weighted mean); clip_frac; zero_adv_frac (fraction of groups whose rewards are
    all equal); adv_var (mean squared advantage); batch_reward, group_reward_std, clip_low_frac, clip_high_frac, kl:
    the rollout's read-outs under TRL's names (`UpdateStats`); prompt_spread: std over the dataset's prompts of
    their success probabilities (0 for one prompt).
    """

    reward: Array
    true_reward: Array | None
    entropy: Array
    kl_ref: Array
    grad_norm: Array
    ratio_max: Array
    ratio_mean: Array
    clip_frac: Array
    zero_adv_frac: Array
    adv_var: Array
    batch_reward: Array
    group_reward_std: Array
    clip_low_frac: Array
    clip_high_frac: Array
    kl: Array
    prompt_spread: Array
    final_logits: Array
    final_opt_state: optax.OptState
    diverged: Array
    diverged_step: Array


class BanditState(NamedTuple):
    """State of one run between steps (low-level API): logits θ_n, the shared parameters W (F, N) when prompts
    have features (θ = θ_0 + Φ W; empty otherwise), optimiser state, π_old's logits ("refresh"),
    the stale-lag ring buffer of past logits ("stale"), the KL reference's logits (moved by reference sync), the
    current rollout (arms and rewards (P, G) and the epoch's prompt order (P,), for reuse), the rollout's
    prompts (P indices into the dataset), the dataset epoch's order (D,) and how far it has been used (cursor),
    step counter n and the divergence flag and step."""

    logits: Array
    params: Array
    opt_state: optax.OptState
    old_logits: Array
    history: Array
    ref_logits: Array
    rollout_arms: Array
    rollout_rewards: Array
    rollout_order: Array
    batch: Array
    dataset_order: Array
    cursor: Array
    step: Array
    diverged: Array
    diverged_step: Array


def learning_rate_factor(config: BanditConfig, count: Array) -> Array:
    """The schedule's factor on η at optimiser step `count` (Hugging Face `get_scheduler`: linear warm-up from 0
    over `warmup_steps`, then 1, linear decay or cosine decay to 0 at `decay_steps`); 1 for "constant"."""
    count = jnp.asarray(count, config.eta.dtype)
    warmup, total = config.warmup_steps, config.decay_steps
    rising = count / jnp.maximum(warmup, 1)
    progress = jnp.clip((count - warmup) / jnp.maximum(total - warmup, 1), 0.0, 1.0)
    after = {
        "constant": jnp.ones_like(count),
        "constant_with_warmup": jnp.ones_like(count),
        "linear": 1.0 - progress,
        "cosine": 0.5 * (1.0 + jnp.cos(jnp.pi * progress)),
    }[config.lr_schedule]
    return after if config.lr_schedule == "constant" else jnp.where(count < warmup, rising, after)


def make_optimizer(config: BanditConfig) -> optax.GradientTransformation:
    """optax optimiser on the logits: optional global-norm clipping, then heavy-ball SGD (optax.sgd with momentum μ),
    Nesterov, or Adam (b1 = μ, b2 = 0.999), at step η × `learning_rate_factor` (a plain η for "constant")."""
    check_config(config)
    eta = config.eta
    if config.lr_schedule != "constant":
        eta = lambda count: config.eta * learning_rate_factor(config, count)  # noqa: E731
    if config.optimizer == "adam":
        base = optax.adam(eta, b1=config.momentum)
    else:
        base = optax.sgd(eta, momentum=config.momentum, nesterov=config.optimizer == "nesterov")
    return base if config.grad_clip is None else optax.chain(optax.clip_by_global_norm(config.grad_clip), base)


def check_mode(config: BanditConfig, mode: str) -> None:
    """Raise `PgrpoSimError` if `mode` has no exact form for `config`: expected mode refuses dynamic sampling and
    batch-scaled advantages, which couple the groups of a batch, and rollout reuse (lag model "refresh") of
    several prompts or of more than `MAX_OUTCOMES` distinct rollouts, which it would enumerate. Entry points call
    it on concrete configurations; a traced "batch" advantage code cannot be refused, so `advantage_table` makes
    its expected run NaN (and traced rewards are counted as binary, the smaller enumeration)."""
    check_config(config)
    check_choice("mode", mode, MODES)
    if mode != "expected":
        return
    batch = is_concrete(config.advantage) and np.any(np.asarray(config.advantage) == ADVANTAGES.index("batch"))
    if config.dynamic_sampling or batch:
        raise PgrpoSimError(
            "dynamic sampling and batch-scaled advantages couple the groups of a batch: expected mode has no "
            "exact form for them; use mode 'sampled'"
        )
    if config.lag_model == "refresh":  # rollout reuse: enumerated, so one prompt and a bounded count
        rollout_count(config, rewards_are_binary(config) or not is_concrete(config.rewards))


def advantage_table(config: BanditConfig) -> Array:
    """(2, G) advantages of one sample: row 0 if it succeeded and j of the others did (A(1, j+1 successes)),
    row 1 if it failed and j others succeeded; built by `group_advantages` on canonical 0/1 groups."""
    check_mode(config, "expected")
    g = config.group_size
    successes = jnp.arange(g + 1)[:, None]
    groups = (jnp.arange(g)[None, :] < successes).astype(config.rewards.dtype)
    adv = group_advantages(groups, config.advantage, config.adv_eps)
    table = jnp.stack([adv[1:, 0], adv[:-1, g - 1]])
    return jnp.where(config.advantage == ADVANTAGES.index("batch"), jnp.nan, table)


_PRODUCT_PMF_MAX_N = 60
"""Up to this n the pmf is C(n, j)·p^j·q^(n−j) by running products (C(60, 30) ≈ 1.2e17 fits float32);
beyond it, in log space. Products avoid exp/log/lgamma per element: the expected-mode hot path."""


def binomial_pmf(n: int, p: Array) -> Array:
    """B(j; n, p) for j = 0..n on a new last axis (n static)."""
    if n > _PRODUCT_PMF_MAX_N:
        j = jnp.arange(n + 1, dtype=p.dtype)
        log_choose = gammaln(n + 1.0) - gammaln(j + 1) - gammaln(n - j + 1)
        return jnp.exp(log_choose + xlogy(j, p[..., None]) + xlog1py(n - j, -p[..., None]))
    choose = jnp.asarray([math.comb(n, j) for j in range(n + 1)], p.dtype)
    p_pow, q_pow = [jnp.ones_like(p)], [jnp.ones_like(p)]
    for _ in range(n):  # n static multiplies, fused by XLA (jnp.cumprod lowers to a slower windowed scan)
        p_pow.append(p_pow[-1] * p)
        q_pow.append(q_pow[-1] * (1 - p))
    return choose * jnp.stack(p_pow, -1) * jnp.stack(q_pow[::-1], -1)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def binomial_mean(n: int, p: Array, values: Array) -> Array:
    """Σ_j B(j; n, p)·values[k, j] for j = 0..n: shape p.shape + (K,) for `values` of shape (K, n + 1), n static.

    Horner's rule in x = min(p, q)/max(p, q) ≤ 1 (so no power overflows) times max(p, q)^n:
    B(j; n, p) = q^n·C(n, j)·(p/q)^j = p^n·C(n, j)·(q/p)^(n−j). About 2n multiply-adds per row and no
    (…, n + 1) array, which the pmf-then-dot form builds: the expected-mode hot path at large G.
    Its derivative is the Bernstein one (`_binomial_mean_jvp`), not the Horner chain's.
    """
    if n > _PRODUCT_PMF_MAX_N:
        return binomial_pmf(n, p) @ jnp.asarray(values, p.dtype).T
    coeffs = jnp.asarray([math.comb(n, j) for j in range(n + 1)], p.dtype) * jnp.asarray(values, p.dtype)
    q = 1 - p
    low = p <= q  # where, not minimum/maximum: their derivative splits at p = q
    big = jnp.where(low, q, p)
    x = jnp.where(low, p, q) / big
    rows = []
    for row in coeffs:  # one chain per row, on p's shape: under vmap a trailing K axis would be innermost,
        acc = jnp.zeros_like(p)  # which XLA's CPU backend does not vectorise (G = 16 ran 4× slower so)
        for m in range(n, -1, -1):
            acc = acc * x + jnp.where(low, row[m], row[n - m])
        rows.append(acc)
    return jnp.stack(rows, -1) * jax.lax.integer_pow(big, n)[..., None]


def _binomial_mean_jvp(n: int, primals, tangents):
    """d/dp Σ_j B(j; n, p)·v_j = n·Σ_j B(j; n − 1, p)·(v_{j+1} − v_j) (Bernstein polynomials' derivative),
    from the primal alone: forward mode with k tangents evaluates it once, not per tangent, and reverse mode
    keeps this slope per step instead of the Horner chain (benchmarks/RESULTS.md, "Gradients through a run")."""
    (p, values), (p_dot, values_dot) = primals, tangents
    out = binomial_mean(n, p, values)
    out_dot = jnp.zeros_like(out)
    if n > 0 and type(p_dot) is not SymbolicZero:
        v = jnp.asarray(values, p.dtype)
        out_dot = n * binomial_mean(n - 1, p, v[:, 1:] - v[:, :-1]) * p_dot[..., None]
    if type(values_dot) is not SymbolicZero:
        out_dot = out_dot + binomial_mean(n, p, values_dot)
    return out, out_dot


binomial_mean.defjvp(_binomial_mean_jvp, symbolic_zeros=True)


def _kl_term(config: BanditConfig, logits: Array, logp: Array, logp_ref: Array, weights: Array) -> Array:
    """Per-prompt KL penalty: exact KL(π‖π_ref), or the estimator averaged with `weights` over samples."""
    if config.kl == "exact":
        return kl_divergence(logits, config.init_logits)
    return jnp.sum(weights * kl_estimate(logp, logp_ref, config.kl, config.kl_clamp), axis=-1)


def expected_loss(logits: Array, behaviour_logits: Array, config: BanditConfig) -> tuple[Array, UpdateStats]:
    """Exact expectation over the group of the GRPO loss at θ = `logits`, samples from softmax(`behaviour_logits`).

    Differentiate with respect to the first argument only: π_old is the sampling distribution, not
    part of the objective (the GRPO gradient is E_{π_old}[∇ℓ], not ∇E[ℓ]).
    """
    g = config.group_size
    logp = jax.nn.log_softmax(logits)
    logp_old = jax.nn.log_softmax(behaviour_logits)
    logp_ref = jax.nn.log_softmax(config.init_logits)
    pi_old = jnp.exp(logp_old)
    r = config.rewards
    p_old = jnp.sum(pi_old * r, axis=-1)
    # weight of (arm a, own outcome success/failure, j other successes): (P, N, 2, G)
    outcome = jnp.stack([r, 1 - r], axis=-1)
    weights = (pi_old[..., None] * outcome)[..., None] * binomial_pmf(g - 1, p_old)[:, None, None, :]
    adv = advantage_table(config)
    sur = clipped_surrogate(
        logp[..., None, None], logp_old[..., None, None], adv, config.clip_low, config.clip_high, config.dual_clip
    )
    per_prompt = jnp.sum(weights * sur.loss, axis=(1, 2, 3)) + config.beta * _kl_term(
        config, logits, logp, logp_ref, pi_old
    )
    ratio = sur.ratio[..., 0, 0]
    clipped = weights * sur.clipped
    stats = UpdateStats(
        ratio_max=jnp.max(jnp.where(pi_old > 0, ratio, -jnp.inf)),
        ratio_mean=jnp.mean(jnp.sum(pi_old * ratio, axis=-1)),
        clip_frac=jnp.mean(jnp.sum(clipped, axis=(1, 2, 3))),
        zero_adv_frac=jnp.mean(p_old**g + (1 - p_old) ** g),
        adv_var=jnp.mean(jnp.sum(weights * adv**2, axis=(1, 2, 3))),
        batch_reward=jnp.mean(p_old),
        group_reward_std=jnp.mean(expected_group_std(g, p_old)),
        clip_low_frac=jnp.mean(jnp.sum(jnp.where(adv < 0, clipped, 0.0), axis=(1, 2, 3))),
        clip_high_frac=jnp.mean(jnp.sum(jnp.where(adv > 0, clipped, 0.0), axis=(1, 2, 3))),
        kl=jnp.mean(_kl_term(config, logits, logp, logp_ref, pi_old)),
    )
    return jnp.mean(per_prompt), stats


def expected_group_std(g: int, p: Array) -> Array:
    """E[unbiased std of a group of G Bernoulli(p) rewards] = Σ_k B(k; G, p)·√(k(G − k)/(G(G − 1)))."""
    k = jnp.arange(g + 1, dtype=p.dtype)
    return binomial_mean(g, p, jnp.sqrt(k * (g - k) / (g * (g - 1)))[None])[..., 0]


def _group_std(rewards: Array) -> Array:
    """Unbiased std of each group (last axis) of rewards."""
    g = rewards.shape[-1]
    centred = rewards - axis_sum(rewards, keepdims=True) / g
    return jnp.sqrt(axis_sum(centred**2) / (g - 1))


def _kl_slope(d: Array, config: BanditConfig) -> Array:
    """∂k/∂log π of the KL estimator at d = log π − log π_ref, elementwise."""
    slope = jax.vmap(jax.grad(lambda x: kl_estimate(x, 0.0, config.kl, config.kl_clamp)))(d.ravel())
    return slope.reshape(d.shape)


def on_policy_grad(logits: Array, config: BanditConfig) -> tuple[Array, UpdateStats]:
    """Exact expected gradient of the GRPO loss when samples come from θ = `logits` itself (lag models
    "none" and "stale"): the fast path of `jax.grad(expected_loss)(θ, θ, config)`, written out.

    At ρ = 1 no clip is active (dual clip included, c > 1), so a sample of arm a contributes
    w_a·∇log π_a with w_a = −E[A | a] + β·∂k/∂log π_a, where E[A | a] = r_a·α₊(p) + (1 − r_a)·α₋(p),
    α± = Σ_j B(j; G−1, p) A±(j), and k the KL estimator (exact KL: w = log π − log π_ref). Then
    ∂L/∂θ_b = π_b (w_b − Σ_a π_a w_a): O(N + G) per prompt, no autodiff. For unclamped k3 the KL part
    is β(π − π_ref) (∂k3/∂log π = 1 − π_ref/π), which needs no logarithm. As a function of θ it is the
    true on-policy gradient, so derivatives of a trajectory with respect to hyperparameters stay exact.
    """
    pi = softmax(logits)  # softmax, not exp(log_softmax): the log is the costliest op of the step
    r = config.rewards
    p = axis_sum(pi * r)
    adv = advantage_table(config)  # (2, G): own success / failure
    alpha = binomial_mean(config.group_size - 1, p, adv)  # (P, 2)
    alpha_sq = binomial_mean(config.group_size - 1, p, adv**2)
    w = -(r * alpha[:, :1] + (1 - r) * alpha[:, 1:])
    if config.kl == "k3" and config.kl_clamp is None:
        kl_grad = pi - softmax(config.init_logits)
    else:
        d = jax.nn.log_softmax(logits) - jax.nn.log_softmax(config.init_logits)
        slope = d if config.kl == "exact" else _kl_slope(d, config)
        kl_grad = pi * (slope - jnp.sum(pi * slope, axis=-1, keepdims=True))
    grad = (pi * (w - axis_sum(pi * w, keepdims=True)) + config.beta * kl_grad) / config.n_prompts
    one = jnp.ones((), logits.dtype)
    if config.kl == "exact" or config.kl == "k1" or (config.kl == "k3" and config.kl_clamp is None):
        # E_π[k1] = E_π[k3] = KL(π‖π_ref) exactly; summed as π·k3 an arm with π = 0 gave 0·∞ = NaN
        kl = kl_divergence(logits, config.init_logits)
    else:  # E_π[k(log π − log π_ref)]
        d = jax.nn.log_softmax(logits) - jax.nn.log_softmax(config.init_logits)
        kl = jnp.sum(pi * kl_estimate(d, 0.0, config.kl, config.kl_clamp), axis=-1)
    stats = UpdateStats(
        ratio_max=one,
        ratio_mean=one,
        clip_frac=0 * one,
        zero_adv_frac=jnp.mean(p**config.group_size + (1 - p) ** config.group_size),
        adv_var=jnp.mean(p * alpha_sq[:, 0] + (1 - p) * alpha_sq[:, 1]),
        batch_reward=jnp.mean(p),
        group_reward_std=jnp.mean(expected_group_std(config.group_size, p)),
        clip_low_frac=0 * one,
        clip_high_frac=0 * one,
        kl=jnp.mean(kl),
    )
    return grad, stats


def sampled_loss(
    logits: Array,
    behaviour_logits: Array,
    arms: Array,
    rewards: Array,
    config: BanditConfig,
    prompt_weights: Array | None = None,
) -> tuple[Array, UpdateStats]:
    """GRPO loss of drawn groups: `arms`, `rewards` of shape (P, G), drawn from softmax(`behaviour_logits`).

    The loss is the mean over prompts, or Σ_p w_p·loss_p with `prompt_weights` w (P,) (a mini-batch: 1/|batch|
    on its prompts, 0 elsewhere; the read-outs are then over the mini-batch's prompts too). With
    `config.dynamic_sampling` (DAPO) groups whose rewards are all equal get weight 0 and the others share it."""
    logp = jax.nn.log_softmax(logits)
    pick = functools.partial(jnp.take_along_axis, indices=arms, axis=-1)
    lp, lp_old, lp_ref = (
        pick(logp),
        pick(jax.nn.log_softmax(behaviour_logits)),
        pick(jax.nn.log_softmax(config.init_logits)),
    )
    adv = group_advantages(rewards, config.advantage, config.adv_eps)
    sur = clipped_surrogate(lp, lp_old, adv, config.clip_low, config.clip_high, config.dual_clip)
    uniform = jnp.full(lp.shape, 1.0 / lp.shape[-1], lp.dtype)
    kl_logits = logits if config.kl == "exact" else None
    kl = _kl_term(config, kl_logits, lp, lp_ref, uniform)
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


def draw_rollout(config: BanditConfig, behaviour_logits: Array, key: Array) -> tuple[Array, Array]:
    """G arms per prompt from softmax(behaviour_logits) and their Bernoulli rewards, shape (P, G).

    One uniform u per sample: the arm is the inverse CDF at u, and the position of u inside that arm's
    CDF interval, (u − F_{a−1})/π_a, is again uniform and independent of the arm, so it draws the reward.
    """
    pi = softmax(behaviour_logits)
    cdf = _cumsum_arms(pi)
    u = _random.uniform(key, (config.n_prompts, config.group_size), pi.dtype) * cdf[:, -1:]
    arms = jnp.minimum(jnp.sum(u[..., None] >= cdf[:, None, :], axis=-1), config.n_arms - 1)
    width = _pick(arms, pi)
    within = jnp.clip((u - _pick(arms, cdf - pi)) / jnp.where(width > 0, width, 1), 0, 1)
    return arms, (within < _pick(arms, config.rewards)).astype(pi.dtype)


def sampled_on_policy_grad(
    logits: Array, arms: Array, rewards: Array, config: BanditConfig
) -> tuple[Array, UpdateStats]:
    """Gradient of `sampled_loss` when the groups were drawn from θ = `logits` itself (lag models "none"
    and "stale"), written out: at ρ = 1 no clip is active, so sample i contributes w_i (e_{a_i} − π)/G with
    w_i = −A_i + β·∂k/∂log π(a_i) (unclamped k3: 1 − π_ref(a_i)/π(a_i); exact KL adds β π (d − Σ π d),
    d = log π − log π_ref, whatever the samples). Equal to `jax.grad(sampled_loss)(θ, θ, …)`, without
    autodiff, gathers or scatters.
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
            w = w + config.beta * _kl_slope(_pick(arms, d), config)
    per_arm = _sum_by_arm(arms, w, config.n_arms) - pi * axis_sum(w, keepdims=True)
    grad = (per_arm / config.group_size + kl_grad) / config.n_prompts
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


def _expected_reward(logits: Array, rewards: Array) -> Array:
    return jnp.mean(axis_sum(softmax(logits) * rewards))


def minibatch_weights(config: BanditConfig, phase: Array, order: Array) -> Array | None:
    """Prompt weights of mini-batch `phase mod m` of the epoch whose prompt order is `order` (a permutation
    of the P prompts): the j-th block of P/m prompts in that order, weight m/P each; None for m = 1."""
    m = config.minibatches
    if m == 1:
        return None
    size = config.n_prompts // m
    position = jnp.argsort(order)  # where each prompt stands in this epoch's order
    chosen = position // size == phase % m
    return chosen.astype(config.rewards.dtype) / size


def _policy_metrics(config: BanditConfig, theta: Array) -> dict[str, Array]:
    """The read-outs of the policy θ itself: reward, true reward, entropy and KL(π‖π_ref)."""
    success = axis_sum(softmax(theta) * config.rewards)
    return dict(
        prompt_spread=jnp.std(success),
        reward=jnp.mean(success),
        true_reward=None if config.true_rewards is None else _expected_reward(theta, config.true_rewards),
        entropy=jnp.mean(entropy(theta)),
        kl_ref=jnp.mean(kl_divergence(theta, config.init_logits)),
    )


def _apply(config: BanditConfig, optimizer, state: BanditState, grad: Array, stats: UpdateStats, **changes):
    """Take the optimiser step `grad` from state θ_n (frozen once diverged) and the read-outs of step n. The freeze
    keeps a diverged run's final state finite; derivatives are the update's own (`where_frozen`): exact for a run
    that has not diverged, not meaningful for one that has, whose read-outs are NaN."""
    n, theta = state.step, state.logits
    params = state.params
    if config.features is None:  # the logits are the parameters
        updates, opt_state = optimizer.update(grad, state.opt_state, theta)
        proposed = optax.apply_updates(theta, updates)
    else:  # shared parameters W: θ = θ_0 + Φ W, so ∂L/∂W = Φᵀ ∂L/∂θ
        grad = config.features.T @ grad
        updates, opt_state = optimizer.update(grad, state.opt_state, params)
        params = optax.apply_updates(params, updates)
        proposed = theta + config.features @ updates
    blown = ~jnp.all(jnp.isfinite(proposed))
    diverged = state.diverged | blown
    keep = lambda new, cur: where_frozen(diverged, cur, new)  # noqa: E731
    nxt = state._replace(
        logits=keep(proposed, theta),
        params=keep(params, state.params),
        opt_state=jax.tree.map(keep, opt_state, state.opt_state),
        step=n + 1,
        diverged=diverged,
        diverged_step=jnp.where(blown & ~state.diverged, n, state.diverged_step),
        **changes,
    )
    metrics = dict(_policy_metrics(config, theta), grad_norm=optax.tree_utils.tree_norm(grad), **stats._asdict())
    nan = jnp.asarray(jnp.nan, theta.dtype)
    metrics = jax.tree.map(lambda v: jnp.where(state.diverged, nan, v.astype(theta.dtype)), metrics)
    return nxt, metrics


def _synced(config: BanditConfig, state: BanditState) -> tuple[BanditConfig, Array]:
    """Reference sync (TRL `sync_ref_model`): every `ref_sync_steps` steps (n > 0) π_ref ← α·π + (1 − α)·π_ref
    on the logits; returns the configuration whose reference (`init_logits`) is the current one, and it."""
    if config.ref_sync_steps is None:
        return config, state.ref_logits
    n, alpha = state.step, config.ref_sync_alpha
    sync = (n > 0) & (n % config.ref_sync_steps == 0)
    ref = jnp.where(sync, alpha * state.logits + (1 - alpha) * state.ref_logits, state.ref_logits)
    return config.replace(init_logits=ref), ref


def batch_config(config: BanditConfig, batch: Array | None) -> BanditConfig:
    """The configuration of the rollout's prompts `batch` (indices into the dataset; None: all of them)."""
    if batch is None:
        return config
    true = None if config.true_rewards is None else config.true_rewards[batch]
    features = None if config.features is None else config.features[batch]
    return config.replace(
        rewards=config.rewards[batch],
        init_logits=config.init_logits[batch],
        true_rewards=true,
        features=features,
        batch_prompts=None,
    )


def _gathered(batch: Array | None):
    return (lambda x: x) if batch is None else (lambda x: x[batch])


def rollout_step(
    config: BanditConfig,
    optimizer,
    state: BanditState,
    arms: Array,
    rewards: Array,
    order: Array,
    batch: Array | None = None,
):
    """(Low-level API) one optimiser step on a given rollout (`arms`, `rewards` (P, G) of the prompts `batch`,
    drawn from π_old = softmax(`state.old_logits`)), mini-batch `n mod m` in the prompt `order`: the inner step
    of rollout reuse."""
    config, ref = _synced(config, state)
    sub, pick = batch_config(config, batch), _gathered(batch)
    weights = minibatch_weights(sub, state.step % jnp.maximum(config.lag, 1), order)

    def loss(theta):
        return sampled_loss(pick(theta), pick(state.old_logits), arms, rewards, sub, weights)

    grad, stats = jax.grad(loss, has_aux=True)(state.logits)
    changes = dict(rollout_arms=arms, rollout_rewards=rewards, rollout_order=order, ref_logits=ref)
    if batch is not None:
        changes["batch"] = batch
    return _apply(config, optimizer, state, grad, stats, **changes)


def _next_batch(config: BanditConfig, state: BanditState, key: Array, boundary: Array):
    """At a rollout boundary, the next P prompts of the dataset epoch's order (a new permutation of the D
    prompts, from `key`, once the epoch cannot fill a batch): sampling without replacement through epochs."""
    d, p = config.n_prompts, config.batch_prompts
    fresh = boundary & (state.cursor + p > d)
    shuffled = jax.random.permutation(jax.random.fold_in(key, 2), d).astype(jnp.int32)
    order = jnp.where(fresh, shuffled, state.dataset_order)
    cursor = jnp.where(fresh, 0, state.cursor)
    batch = jnp.where(boundary, jax.lax.dynamic_slice(order, (cursor,), (p,)), state.batch)
    return batch, dict(dataset_order=order, cursor=jnp.where(boundary, cursor + p, cursor))


def step(config: BanditConfig, optimizer, mode: str, state: BanditState, key: Array):
    """One optimiser step from θ_n (low-level API, pure): returns the next state and the read-outs of step n
    (the per-step fields of `BanditRun`). `optimizer` is `make_optimizer(config)`; `key` is unused in
    expected mode. Expected mode with rollout reuse (lag model "refresh") is not a single-state step: `run`
    takes it through `reuse_branch_step`. Expected mode averages over batches, so it uses every prompt."""
    n, theta = state.step, state.logits
    check_mode(config, mode)
    batched = mode == "sampled" and config.batch_prompts is not None
    if mode == "sampled" and config.lag_model == "refresh":  # one rollout per refresh, reused
        period = jnp.maximum(config.lag, 1)
        refresh = n % period == 0
        batch, cursor = (None, {}) if not batched else _next_batch(config, state, key, refresh)
        pick, sub = _gathered(batch), batch_config(config, batch)
        old = jnp.where(refresh, theta, state.old_logits)

        def draw(_):
            drawn_arms, drawn_rewards = draw_rollout(sub, pick(theta), key)
            return drawn_arms.astype(jnp.int32), drawn_rewards

        # drawn on refresh steps only, where the step counter is not batched (a vmap over seeds or over
        # hyperparameters other than the lag); a batched counter makes the cond a select of both branches
        arms, rewards = jax.lax.cond(refresh, draw, lambda _: (state.rollout_arms, state.rollout_rewards), None)
        order = state.rollout_order
        if config.minibatches > 1:  # a new prompt order at the start of every epoch
            epoch_start = n % period % config.minibatches == 0
            shuffled = jax.random.permutation(jax.random.fold_in(key, 1), sub.n_prompts).astype(jnp.int32)
            order = jnp.where(epoch_start, shuffled, order)
        moved = state._replace(old_logits=old, **cursor)
        return rollout_step(config, optimizer, moved, arms, rewards, order, batch)
    if mode == "expected" and config.lag_model == "refresh":
        raise PgrpoSimError("expected mode with rollout reuse runs by branches: use run() or reuse_branch_step()")
    config, ref = _synced(config, state)
    old, history = state.old_logits, state.history
    if config.lag_model == "refresh_fresh":
        old = jnp.where(n % jnp.maximum(config.lag, 1) == 0, theta, old)
        at, behaviour = theta, old
    elif config.lag_model == "stale":
        size = history.shape[0]
        history = history.at[n % size].set(theta)
        at = behaviour = history[(n - config.lag) % size]
    else:
        at = behaviour = theta
    changes = dict(old_logits=old, history=history, ref_logits=ref)
    if mode == "expected" and config.lag_model == "refresh_fresh":
        grad, stats = jax.grad(expected_loss, has_aux=True)(at, behaviour, config)
    elif mode == "expected":  # without refresh lag, samples come from the evaluation point: ratio 1
        grad, stats = on_policy_grad(at, config)
    else:
        batch, cursor = (None, {}) if not batched else _next_batch(config, state, key, jnp.asarray(True))
        pick, sub = _gathered(batch), batch_config(config, batch)
        changes.update(cursor, **({} if batch is None else dict(batch=batch)))
        arms, rewards = draw_rollout(sub, pick(behaviour), key)
        if config.lag_model == "refresh_fresh" or config.dynamic_sampling:
            loss = lambda t: sampled_loss(pick(t), pick(behaviour), arms, rewards, sub)  # noqa: E731
            grad, stats = jax.grad(loss, has_aux=True)(at)
        else:  # samples drawn at the evaluation point: the written-out gradient
            grad, stats = sampled_on_policy_grad(pick(at), arms, rewards, sub)
            if batch is not None:
                grad = jnp.zeros_like(at).at[batch].add(grad)
    return _apply(config, optimizer, state, grad, stats, **changes)


MAX_OUTCOMES = 4096
"""Largest number of distinct rollouts that expected mode enumerates for rollout reuse."""


def rewards_are_binary(config: BanditConfig, binary_rewards: bool | None = None) -> bool:
    """Whether expected-mode rollout reuse may enumerate multisets of arms alone: every reward exactly 0 or 1.

    None detects it from concrete rewards (False while they are traced); True asserts it, checked against
    concrete rewards (`PgrpoSimError` if one is not 0 or 1); False enumerates every (arm, reward) multiset."""
    check_config(config)
    if not is_concrete(config.rewards):
        return bool(binary_rewards)
    rewards = np.asarray(config.rewards)
    binary = bool(np.all((rewards == 0) | (rewards == 1)))
    if binary_rewards and not binary:
        raise PgrpoSimError("binary_rewards=True needs every reward to be 0 or 1")
    return binary if binary_rewards is None else bool(binary_rewards)


def rollout_count(config: BanditConfig, binary_rewards: bool) -> int:
    """The number of distinct rollouts of one prompt that expected-mode reuse enumerates (`rollout_outcomes`),
    C(G + k − 1, k − 1) with k = N kinds of sample for binary rewards, else 2N; `PgrpoSimError` for several
    prompts or more than `MAX_OUTCOMES`."""
    check_config(config)
    g, n = config.group_size, config.n_arms
    kinds = n if binary_rewards else 2 * n
    count = math.comb(g + kinds - 1, kinds - 1)
    if config.n_prompts != 1:
        raise PgrpoSimError(
            f"expected mode with rollout reuse enumerates the rollouts of one prompt; got {config.n_prompts} "
            f"prompts ({count}^{config.n_prompts} joint outcomes): use mode 'sampled'"
        )
    if count > MAX_OUTCOMES:
        raise PgrpoSimError(
            f"expected mode with rollout reuse would enumerate {count} rollouts (N = {n} arms, G = {g}), more "
            f"than {MAX_OUTCOMES}: use mode 'sampled'"
        )
    return count


def rollout_outcomes(config: BanditConfig, *, binary_rewards: bool = False) -> tuple[Array, Array, Array]:
    """Every distinct rollout of one prompt: multisets of G samples over the 2N outcomes (arm a, reward 0/1).

    Returns arms and rewards (O, G) (sorted within the group; the GRPO loss does not depend on the order)
    and counts (O, 2N) (category 2a + r). O = C(G + 2N − 1, 2N − 1), e.g. 165 for N = 2, G = 8. With
    `binary_rewards` (every arm's reward is exactly 0 or 1, so an arm's reward is known) only the multisets of
    arms can occur: O = C(G + N − 1, N − 1), e.g. 9 for N = 2, G = 8. Raises `PgrpoSimError` for several
    prompts or more than `MAX_OUTCOMES` outcomes (use sampled mode), and for `binary_rewards` with concrete rewards
    that are not 0 or 1 (traced ones cannot be checked).
    """
    binary_rewards = rewards_are_binary(config, binary_rewards) if binary_rewards else False
    rollout_count(config, binary_rewards)
    g, n = config.group_size, config.n_arms
    kinds = n if binary_rewards else 2 * n
    table = np.asarray(list(itertools.combinations_with_replacement(range(kinds), g)), np.int32)
    dtype = config.rewards.dtype
    if binary_rewards:
        arms = jnp.asarray(table)
        rewards = config.rewards[0][arms].astype(dtype)
        categories = 2 * arms + rewards.astype(jnp.int32)
        counts = jnp.sum(jax.nn.one_hot(categories, 2 * n, dtype=dtype), axis=1)
        return arms, rewards, counts
    counts = np.stack([np.bincount(row, minlength=2 * n) for row in table])
    return jnp.asarray(table // 2), jnp.asarray(table % 2, dtype), jnp.asarray(counts, dtype)


def _rollout_probabilities(config: BanditConfig, logits: Array, counts: Array) -> Array:
    """P(rollout) under softmax(`logits`) (one prompt): multinomial over the 2N (arm, reward) outcomes."""
    pi = softmax(logits)[0]
    r = config.rewards[0]
    q = jnp.stack([pi * (1 - r), pi * r], -1).reshape(-1)  # category 2a + reward
    g = config.group_size
    log_coef = gammaln(g + 1.0) - jnp.sum(gammaln(counts + 1.0), -1)
    impossible = jnp.any((counts > 0) & (q == 0), -1)  # e.g. reward 1 from a wrong arm: probability 0, not 0·∞
    log_q = jnp.log(jnp.where(q > 0, q, 1.0))
    return jnp.where(impossible, 0.0, jnp.exp(log_coef + counts @ log_q))


def collapse_branches(branches: BanditState, weights: Array) -> BanditState:
    """The rollout-average of branch states: weighted mean of the float leaves (logits, optimiser state, …);
    diverged if any branch diverged (at the earliest such step)."""
    mean = jax.tree.map(
        lambda x: jnp.tensordot(weights, x, 1) if jnp.issubdtype(x.dtype, jnp.floating) else x[0], branches
    )
    steps = jnp.where(branches.diverged_step >= 0, branches.diverged_step, jnp.iinfo(jnp.int32).max)
    first = jnp.where(jnp.any(branches.diverged), jnp.min(steps), -1)
    return mean._replace(diverged=jnp.any(branches.diverged), diverged_step=first.astype(jnp.int32))


def reuse_branch_step(config: BanditConfig, optimizer, branches: BanditState, weights: Array, outcomes):
    """(Low-level API) one step of expected-mode rollout reuse: the exact average over rollouts of the cycle.

    `branches` holds one state per enumerated rollout (`rollout_outcomes`), with probabilities `weights`. At a
    refresh the branches collapse to their weighted mean (the rollout-averaged cycle map) and are re-weighted by
    the probabilities of the new rollouts under π_old = that mean; each branch then takes its inner step on its
    own rollout. Read-outs are weighted means over branches (exact expectations within a cycle).
    """
    arms, rewards, counts = outcomes
    n = branches.step[0]
    refresh = n % jnp.maximum(config.lag, 1) == 0
    # the policy read-outs of step n are E[f(θ_n)] over the branches before a refresh collapses them
    nan = jnp.asarray(jnp.nan, weights.dtype)
    per_branch = jax.vmap(lambda s: _policy_metrics(_synced(config, s)[0], s.logits))(branches)
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


def initial_state(config: BanditConfig, optimizer, logits: Array) -> BanditState:
    """(Low-level API) a run at rest at `logits`: zero optimiser state, π_old and the stale-lag history equal to it."""
    history_len = config.max_lag + 1 if config.lag_model == "stale" else 1
    if config.features is None:
        params = jnp.zeros((0, logits.shape[-1]), logits.dtype)
        opt_state = optimizer.init(logits)
    else:
        params = jnp.zeros((config.features.shape[-1], logits.shape[-1]), logits.dtype)
        opt_state = optimizer.init(params)
    return BanditState(
        logits=logits,
        params=params,
        opt_state=opt_state,
        old_logits=logits,
        history=jnp.broadcast_to(logits, (history_len, *logits.shape)),
        ref_logits=config.init_logits,
        rollout_arms=jnp.zeros((config.prompts_per_rollout, config.group_size), jnp.int32),
        rollout_rewards=jnp.zeros((config.prompts_per_rollout, config.group_size), logits.dtype),
        rollout_order=jnp.arange(config.prompts_per_rollout, dtype=jnp.int32),
        batch=jnp.arange(config.prompts_per_rollout, dtype=jnp.int32),
        dataset_order=jnp.arange(config.n_prompts, dtype=jnp.int32),
        cursor=jnp.asarray(config.n_prompts, jnp.int32),  # exhausted: the first rollout starts a shuffled epoch
        step=jnp.asarray(0, jnp.int32),
        diverged=jnp.asarray(False),
        diverged_step=jnp.asarray(-1, jnp.int32),
    )


def valid_hyperparameters(config: BanditConfig) -> Array:
    """Whether every hyperparameter leaf is in the range `BanditConfig` checks eagerly (a bool array): the in-jit
    form of those checks, for traced values (a caller's `vmap` may hold an η ≤ 0, or a stale lag beyond the
    `max_lag` its buffer holds, which would wrap around it)."""
    ok = in_range(config.lag, 0, config.max_lag if config.lag_model == "stale" else None)
    if config.lag_model == "refresh":  # whole epochs of mini-batches
        ok &= config.lag % config.minibatches == 0
    for name, interval in LEAF_RANGES.items():
        if getattr(config, name) is not None:
            ok &= interval.holds(getattr(config, name))
    return ok


def run(
    config: BanditConfig, key: Array, steps: int, mode: str, *, binary_rewards: bool = False, checkpoint: bool = False
) -> BanditRun:
    """(Low-level API) one run of `steps` updates (a single seed), unjitted and unchecked; pure, so it can be
    vmapped over configs and keys inside the caller's own jit (`simulate` is the checked, jitted entry).
    `binary_rewards`: every reward is exactly 0 or 1, which lets expected-mode reuse enumerate fewer rollouts.
    `checkpoint`: reverse-mode derivatives keep O(√steps) states (`base.autodiff.scan`). A run whose (traced)
    hyperparameters are out of range (`valid_hyperparameters`) steps by a NaN η: diverged at step 0, NaN after."""
    carry, update, final_state = run_loop(config, mode, binary_rewards=binary_rewards)
    keys = jax.random.split(key, steps + 1)
    carry, metrics = scan(update, carry, keys[:steps], steps, checkpoint=checkpoint)
    _, last = update(carry, keys[steps])
    metrics = jax.tree.map(lambda seq, end: jnp.concatenate([seq, end[None]]), metrics, last)
    return _bandit_run(metrics, final_state(carry))


def run_loop(config: BanditConfig, mode: str, *, binary_rewards: bool = False):
    """(Low-level API) the loop of `run`: (carry, update, final_state), its carry before step 0, its step
    (carry, key) → (carry, the read-outs of the step) (the key unused in expected mode), and the `BanditState` of a
    carry. Pure and unchecked, as `run`; for a caller that runs the steps in pieces (`simulate_in_chunks`)."""
    config = eqx.tree_at(lambda c: c.eta, config, nan_unless(valid_hyperparameters(config), config.eta))
    optimizer = make_optimizer(config)
    state = initial_state(config, optimizer, config.init_logits)
    if mode == "expected" and config.lag_model == "refresh":
        check_mode(config, mode)
        outcomes = rollout_outcomes(config, binary_rewards=binary_rewards)
        size = outcomes[0].shape[0]
        branches = jax.tree.map(lambda x: jnp.broadcast_to(x, (size, *jnp.shape(x))), state)
        weights = jnp.full(size, 1.0 / size, config.rewards.dtype)  # replaced at the first refresh (step 0)

        def update(carry, _):
            b, w, m = reuse_branch_step(config, optimizer, *carry, outcomes)
            return (b, w), m

        return (branches, weights), update, lambda carry: collapse_branches(*carry)
    return state, functools.partial(step, config, optimizer, mode), lambda carry: carry


def _bandit_run(metrics: dict, final: BanditState) -> BanditRun:
    return BanditRun(
        **metrics,
        final_logits=final.logits,
        final_opt_state=final.opt_state,
        diverged=final.diverged,
        diverged_step=final.diverged_step,
    )


STEP_READOUTS = BanditRun._fields[: BanditRun._fields.index("final_logits")]
"""The per-step read-outs of `BanditRun` (reward … prompt_spread), the names `simulate(readouts=…)` takes."""


@functools.partial(jax.jit, static_argnames=("steps", "mode", "seeds", "binary_rewards", "readouts", "checkpoint"))
def _simulate(
    config: BanditConfig,
    key: Array,
    steps: int,
    mode: str,
    seeds: int,
    binary_rewards: bool = False,
    readouts: tuple[str, ...] = STEP_READOUTS,
    checkpoint: bool = False,
) -> BanditRun:
    if mode == "expected":
        out = run(config, key, steps, mode, binary_rewards=binary_rewards, checkpoint=checkpoint)
    else:
        out = jax.vmap(lambda k: run(config, k, steps, mode, checkpoint=checkpoint))(jax.random.split(key, seeds))
    return out._replace(**{name: None for name in STEP_READOUTS if name not in readouts})  # dead code for XLA


def simulate(
    config: BanditConfig,
    steps: int,
    *,
    mode: str = "expected",
    seeds: int = 1,
    key: Array | None = None,
    binary_rewards: bool | None = None,
    readouts: Sequence[str] | None = None,
    checkpoint: bool = False,
) -> BanditRun:
    """Run GRPO on the bandit for `steps` optimiser steps; see `BanditRun` for the outputs.

    `mode="expected"` is deterministic (one run; `seeds` and `key` are ignored); `mode="sampled"`
    runs `seeds` independent seeds from `key`, a JAX PRNG key or an int seed (default `jax.random.key(0)`).
    Jitted once per static structure (config's static fields, steps, mode, seeds): other hyperparameter values reuse the
    compiled code, and callers may `jax.vmap` over config leaves. `binary_rewards` (expected-mode reuse only):
    every reward is exactly 0 or 1, so fewer rollouts are enumerated; None detects it from concrete rewards (a
    caller whose rewards are traced, e.g. inside its own jit, may assert it; concrete rewards are checked).
    `readouts`: the per-step read-outs to compute (names in `STEP_READOUTS`; default all), the others are None:
    a run that keeps only what it needs compiles faster (the reward alone: in a third of the XLA time in
    expected mode, half in sampled mode) and holds seeds × (steps + 1) floats per read-out less.
    `checkpoint=True` for reverse-mode derivatives (`jax.grad`) of long runs: the steps run in blocks of about
    √steps, rematerialised on the backward pass, so it holds O(√steps) states instead of every step's; through a
    wide `vmap` it is also about twice as fast as the full tape, whose residuals stream through memory
    (benchmarks/RESULTS.md, run of 2026-12-02, "Gradients through a run"). It compiles a little more slowly.
    Values and forward-mode derivatives are the same either way. Derivatives are exact for runs that do not
    diverge; a diverged run's (its read-outs NaN, its final state frozen) are not meaningful.
    """
    key, binary, keep = _simulate_args(config, steps, mode, seeds, key, binary_rewards, readouts)
    return _simulate(
        config,
        key,
        steps=int(steps),
        mode=mode,
        seeds=int(seeds),
        binary_rewards=binary,
        readouts=keep,
        checkpoint=bool(checkpoint),
    )


def _simulate_args(config, steps, mode, seeds, key, binary_rewards, readouts):
    """`simulate`'s checks; returns its key, whether expected-mode reuse takes rewards as binary, and the read-outs
    to keep."""
    check_steps(steps)
    if isinstance(readouts, str):  # one name
        readouts = (readouts,)
    if readouts is not None:
        for name in readouts:
            check_choice("readouts", name, STEP_READOUTS)
    check_seeds(seeds)
    check_mode(config, mode)
    key = as_key(0 if key is None else key)
    binary = rewards_are_binary(config, binary_rewards) and mode == "expected" and config.lag_model == "refresh"
    keep = STEP_READOUTS if readouts is None else tuple(name for name in STEP_READOUTS if name in readouts)
    return key, binary, keep


CHUNK_WORK = 2**20
"""Run-steps (steps × seeds) per piece of `simulate_in_chunks`: well under a second of sampled steps on a CPU."""


def simulate_in_chunks(
    config: BanditConfig,
    steps: int,
    *,
    mode: str = "expected",
    seeds: int = 1,
    key: Array | None = None,
    binary_rewards: bool | None = None,
    readouts: Sequence[str] | None = None,
    chunk: int | None = None,
) -> BanditRun:
    """`simulate` (same arguments and numbers), its steps run in pieces of `chunk` steps (default: `CHUNK_WORK`
    run-steps a piece) that carry the state: one compiled program called once a piece, whose read-outs are
    brought to the host (as NumPy arrays) before the next starts. Python runs between pieces, so Ctrl-C stops a
    long run within a piece, where `simulate` is one call that runs to its end. The same keys drive the same
    steps: the numbers equal `simulate`'s, up to float rounding where XLA compiles the loop differently."""
    key, binary, keep = _simulate_args(config, steps, mode, seeds, key, binary_rewards, readouts)
    steps, seeds = int(steps), int(seeds)
    runs = seeds if mode == "sampled" else 1
    chunk = min(steps + 1, chunk or max(1, CHUNK_WORK // runs))
    padded = -(-(steps + 1) // chunk) * chunk
    carry, keys = _chunks_start(config, key, steps, padded, mode, seeds, binary)
    pieces = []
    for first in range(0, steps + 1, chunk):
        carry, metrics = _chunk_advance(config, carry, keys, first, steps, chunk, mode, binary, keep)
        pieces.append(jax.tree.map(np.asarray, metrics))  # waits for the piece: an interrupt is raised here
    axis = 1 if mode == "sampled" else 0  # the step axis
    within = (slice(None),) * axis + (slice(steps + 1),)
    joined = {k: np.concatenate([p[k] for p in pieces], axis)[within] for k in keep if pieces[0][k] is not None}
    final = _chunks_final(config, carry, mode, binary)
    return _bandit_run({name: joined.get(name) for name in STEP_READOUTS}, final)


@functools.partial(jax.jit, static_argnames=("steps", "padded", "mode", "seeds", "binary"))
def _chunks_start(config, key, steps, padded, mode, seeds, binary):
    """The carry before step 0 and the keys of every step (as `_simulate` splits them), padded to `padded` steps."""
    carry = lambda: run_loop(config, mode, binary_rewards=binary)[0]  # noqa: E731
    pad = lambda k: jnp.concatenate([k, jnp.broadcast_to(k[-1:], (padded - steps - 1,))])  # noqa: E731
    if mode == "expected":
        return carry(), pad(jax.random.split(key, steps + 1))
    seed_keys = jax.random.split(key, seeds)
    return jax.vmap(lambda _: carry())(seed_keys), jax.vmap(lambda k: pad(jax.random.split(k, steps + 1)))(seed_keys)


@functools.partial(jax.jit, static_argnames=("chunk", "mode", "binary", "keep"))
def _chunk_advance(config, carry, keys, first, steps, chunk, mode, binary, keep):
    """Steps `first` … `first + chunk - 1` of the run(s) and their read-outs; the state stays at step `steps`."""
    _, update, _ = run_loop(config, mode, binary_rewards=binary)

    def piece(carry, keys):
        def body(carry, x):
            n, k = x
            new, metrics = update(carry, k)
            carry = jax.tree.map(lambda a, b: jnp.where(n < steps, a, b), new, carry)  # step `steps`: read only
            return carry, {name: metrics[name] for name in keep}

        return jax.lax.scan(body, carry, (first + jnp.arange(chunk), jax.lax.dynamic_slice_in_dim(keys, first, chunk)))

    return jax.vmap(piece)(carry, keys) if mode == "sampled" else piece(carry, keys)


@functools.partial(jax.jit, static_argnames=("mode", "binary"))
def _chunks_final(config, carry, mode, binary):
    final = run_loop(config, mode, binary_rewards=binary)[2]
    return jax.vmap(final)(carry) if mode == "sampled" else final(carry)
