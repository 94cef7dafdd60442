"""Expected mode: the exact expectation of the GRPO update over the group, no Monte Carlo (docs/design.md §3, "Two
modes, one update rule"). The other G − 1 samples of a group hold j ~ Binomial(G − 1, p_old) successes, so the loss
(`expected_loss`, off-policy included) and the written-out on-policy gradient (`on_policy_grad`) are binomial
expectations (`binomial_pmf`, `binomial_mean`) over the advantages of one sample (`advantage_table`)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import Array
from jax.custom_derivatives import SymbolicZero
from jax.scipy.special import gammaln, xlog1py, xlogy

from ...base.small_axes import axis_sum, softmax
from ..grpo import ADVANTAGES, clipped_surrogate, group_advantages, kl_divergence, kl_estimate
from .common import UpdateStats, check_mode, kl_slope, kl_term
from .configuration import Config


def advantage_table(config: Config) -> Array:
    """(2, G) advantages of one sample: row 0 if it succeeded and j of the others did (A(1, j+1 successes)),
    row 1 if it failed and j others succeeded; built by `group_advantages` on canonical 0/1 groups.

    Args:
        config: the configuration (`Config`): G, the advantage code and adv_eps.

    Returns:
        (2, G) advantages in the rewards' float dtype; NaN for a (traced) "batch" code.

    Raises:
        PgrpoSimError: for a configuration `check_mode` refuses in expected mode.
    """
    check_mode(config, "expected")
    g = config.num_generations
    successes = jnp.arange(g + 1)[:, None]
    groups = (jnp.arange(g)[None, :] < successes).astype(config.rewards.dtype)
    adv = group_advantages(groups, config.advantage, config.adv_eps)
    table = jnp.stack([adv[1:, 0], adv[:-1, g - 1]])
    return jnp.where(config.advantage == ADVANTAGES.index("batch"), jnp.nan, table)


_PRODUCT_PMF_MAX_N = 60
"""Up to this n the pmf is C(n, j)·p^j·q^(n−j) by running products (C(60, 30) ≈ 1.2e17 fits float32);
beyond it, in log space. Products avoid exp/log/lgamma per element: the expected-mode hot path."""


def binomial_pmf(n: int, p: Array) -> Array:
    """B(j; n, p) for j = 0..n on a new last axis (n static).

    Args:
        n: trials, a static integer >= 0.
        p: success probabilities in [0, 1], an array of any shape.

    Returns:
        The pmf, shape p.shape + (n + 1,), in p's dtype.
    """
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

    Args:
        n: trials, a static integer >= 0.
        p: success probabilities in [0, 1], an array of any shape.
        values: (K, n + 1), K rows of values at j = 0..n.

    Returns:
        The K binomial expectations, shape p.shape + (K,), in p's dtype.
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


def expected_loss(logits: Array, behaviour_logits: Array, config: Config) -> tuple[Array, UpdateStats]:
    """Exact expectation over the group of the GRPO loss at θ = `logits`, samples from softmax(`behaviour_logits`).

    Differentiate with respect to the first argument only: π_old is the sampling distribution, not
    part of the objective (the GRPO gradient is E_{π_old}[∇ℓ], not ∇E[ℓ]).

    Args:
        logits: θ, the policy whose loss it is; (P, N) logits (nats), the rows of `config.rewards`.
        behaviour_logits: π_old's logits, the groups' sampling distribution; (P, N).
        config: the configuration (`Config`): rewards (P, N), the KL reference `init_logits` (P, N), G and
            the loss's hyperparameters.

    Returns:
        (loss, stats): the loss, a 0-d float, the mean over prompts of each prompt's expected group-mean
        surrogate plus β × KL term; and its read-outs, 0-d expectations over the group, means over prompts
        (`UpdateStats`).

    Raises:
        PgrpoSimError: for a configuration `check_mode` refuses in expected mode (checked while tracing, by
            `advantage_table`).
    """
    g = config.num_generations
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
        logp[..., None, None], logp_old[..., None, None], adv, config.epsilon, config.epsilon_high, config.dual_clip
    )
    per_prompt = jnp.sum(weights * sur.loss, axis=(1, 2, 3)) + config.beta * kl_term(
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
        kl=jnp.mean(kl_term(config, logits, logp, logp_ref, pi_old)),
    )
    return jnp.mean(per_prompt), stats


def expected_group_std(g: int, p: Array) -> Array:
    """E[unbiased std of a group of G Bernoulli(p) rewards] = Σ_k B(k; G, p)·√(k(G − k)/(G(G − 1))).

    Args:
        g: G, the group size; a static integer >= 2.
        p: success probabilities in [0, 1], an array of any shape.

    Returns:
        The expected std (reward units), of p's shape and dtype.
    """
    k = jnp.arange(g + 1, dtype=p.dtype)
    return binomial_mean(g, p, jnp.sqrt(k * (g - k) / (g * (g - 1)))[None])[..., 0]


def on_policy_grad(logits: Array, config: Config) -> tuple[Array, UpdateStats]:
    """Exact expected gradient of the GRPO loss when samples come from θ = `logits` itself (lag models
    "none" and "stale"): the fast path of `jax.grad(expected_loss)(θ, θ, config)`, written out.

    At ρ = 1 no clip is active (dual clip included, c > 1), so a sample of arm a contributes
    w_a·∇log π_a with w_a = −E[A | a] + β·∂k/∂log π_a, where E[A | a] = r_a·α₊(p) + (1 − r_a)·α₋(p),
    α± = Σ_j B(j; G−1, p) A±(j), and k the KL estimator (exact KL: w = log π − log π_ref). Then
    ∂L/∂θ_b = π_b (w_b − Σ_a π_a w_a): O(N + G) per prompt, no autodiff. For unclamped k3 the KL part
    is β(π − π_ref) (∂k3/∂log π = 1 − π_ref/π), which needs no logarithm. As a function of θ it is the
    true on-policy gradient, so derivatives of a trajectory with respect to hyperparameters stay exact.

    Args:
        logits: θ = π_old's logits, where the gradient is taken; (P, N) logits (nats).
        config: the configuration (`Config`): rewards (P, N), the KL reference `init_logits` (P, N), G and
            the loss's hyperparameters.

    Returns:
        (grad, stats): ∂L/∂θ of the mean-over-prompts expected loss, (P, N) in the logits' dtype; and the
        read-outs (`UpdateStats`, 0-d; ratios 1 and clip fractions 0 on policy).

    Raises:
        PgrpoSimError: for a configuration `check_mode` refuses in expected mode (checked while tracing, by
            `advantage_table`).
    """
    pi = softmax(logits)  # softmax, not exp(log_softmax): the log is the costliest op of the step
    r = config.rewards
    p = axis_sum(pi * r)
    adv = advantage_table(config)  # (2, G): own success / failure
    alpha = binomial_mean(config.num_generations - 1, p, adv)  # (P, 2)
    alpha_sq = binomial_mean(config.num_generations - 1, p, adv**2)
    w = -(r * alpha[:, :1] + (1 - r) * alpha[:, 1:])
    if config.kl == "k3" and config.kl_clamp is None:
        kl_grad = pi - softmax(config.init_logits)
    else:
        d = jax.nn.log_softmax(logits) - jax.nn.log_softmax(config.init_logits)
        slope = d if config.kl == "exact" else kl_slope(d, config)
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
        zero_adv_frac=jnp.mean(p**config.num_generations + (1 - p) ** config.num_generations),
        adv_var=jnp.mean(p * alpha_sq[:, 0] + (1 - p) * alpha_sq[:, 1]),
        batch_reward=jnp.mean(p),
        group_reward_std=jnp.mean(expected_group_std(config.num_generations, p)),
        clip_low_frac=0 * one,
        clip_high_frac=0 * one,
        kl=jnp.mean(kl),
    )
    return grad, stats
