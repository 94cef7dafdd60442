"""NumPy baseline: the bandit GRPO dynamics as a researcher would script them in an afternoon.

The setting of pgrpo-sim's default run (docs/design.md §3): on-policy (lag model "none"), N arms of which
the first c are correct (reward 1, the rest 0), class-symmetric start from p_ref (which is also the
reference policy), "std" group advantages, k3 KL penalty with coefficient β, heavy-ball SGD as
optax.sgd (v ← μv + g, θ ← θ − ηv). Every array has a leading configuration axis C (η, μ, β given
per configuration); only the steps are a Python loop. The functions return expected-reward curves
p(θ_n) = Σ_a π_a r_a for n = 0..steps, like `pgrpo_sim.simulate(...).reward`.

`reuse_rewards` is rollout reuse instead (lag model "refresh", sampled mode): one rollout every K steps,
K optimiser steps on it with the clipped, importance-weighted surrogate against the policy of the refresh.
"""

from __future__ import annotations

import math

import numpy as np

LOG_RATIO_CLAMP = 20.0
"""As pgrpo-sim (and verl): the log importance ratio is clamped to [−20, 20] before exponentiating."""


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(z):
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def start(n_arms, n_correct, p_ref, dtype=np.float64):
    """0/1 rewards of the arms (first c correct) and the class-symmetric start logits, both (N,)."""
    correct = np.arange(n_arms) < n_correct
    logits = np.where(correct, np.log(p_ref / n_correct), np.log((1 - p_ref) / (n_arms - n_correct)))
    return correct.astype(dtype), logits.astype(dtype)


def std_advantages(num_generations, eps=1e-6, dtype=np.float64):
    """A⁺(j+1) and A⁻(j) for j = 0..G−1: the "std" advantage of a success (failure) whose G−1 group
    mates have j successes. With k successes in all, s_k = sqrt(k(G−k)/(G(G−1))) and
    A⁺(k) = (1 − k/G)/(s_k + eps), A⁻(k) = −(k/G)/(s_k + eps); an all-equal group gives 0."""
    g = num_generations
    k = np.arange(g + 1)
    std = np.sqrt(k * (g - k) / (g * (g - 1)))
    return ((1 - k / g) / (std + eps))[1:].astype(dtype), (-(k / g) / (std + eps))[:-1].astype(dtype)


def _setup(learning_rate, momentum, beta, n_arms, n_correct, p_ref, dtype):
    """Per-configuration hyperparameters as (C, 1) columns, then `start`."""
    learning_rate, momentum, beta = (
        np.asarray(x, dtype)[:, None] for x in np.broadcast_arrays(learning_rate, momentum, beta)
    )
    return learning_rate, momentum, beta, *start(n_arms, n_correct, p_ref, dtype)


def expected_rewards(
    learning_rate,
    momentum,
    beta=0.0,
    *,
    n_arms=2,
    n_correct=1,
    p_ref=0.2,
    num_generations=8,
    steps=1000,
    eps=1e-6,
    dtype=np.float64,
    curves=True,
):
    """Expected mode: the exact expectation of the update over the group; returns (C, steps+1), or with
    `curves=False` only the final rewards (C,) (no per-step storage).

    A sample of arm a succeeds with probability r_a; the other G−1 samples have j ~ Binomial(G−1, p)
    successes, so E[A | a] = r_a Σ_j B(j) A⁺(j+1) + (1−r_a) Σ_j B(j) A⁻(j) (see `std_advantages`).
    With w_a = −E[A | a] + β(1 − π_ref(a)/π(a)) (the last term is ∂k3/∂log π), the gradient wrt the
    logits is g_b = π_b (w_b − Σ_a π_a w_a).
    """
    learning_rate, momentum, beta, r, theta0 = _setup(learning_rate, momentum, beta, n_arms, n_correct, p_ref, dtype)
    g = num_generations
    adv_success, adv_failure = std_advantages(g, eps, dtype)
    j = np.arange(g, dtype=dtype)
    choose = np.array([math.comb(g - 1, i) for i in range(g)], dtype)
    pi_ref = _softmax(theta0)

    theta = np.tile(theta0, (learning_rate.shape[0], 1))
    velocity = np.zeros_like(theta)
    out = np.empty((learning_rate.shape[0], steps + 1), dtype) if curves else None
    for n in range(steps):
        pi = _softmax(theta)
        p = pi @ r
        if curves:
            out[:, n] = p
        pmf = choose * p[:, None] ** j * (1 - p[:, None]) ** (g - 1 - j)  # (C, G)
        mean_adv = r * (pmf @ adv_success)[:, None] + (1 - r) * (pmf @ adv_failure)[:, None]
        w = -mean_adv + beta * (1 - pi_ref / pi)
        grad = pi * (w - np.sum(pi * w, axis=-1, keepdims=True))
        velocity = momentum * velocity + grad
        theta = theta - learning_rate * velocity
    if not curves:
        return _softmax(theta) @ r
    out[:, steps] = _softmax(theta) @ r
    return out


def draw(pi, r, num_generations, rng, dtype=np.float64):
    """G arms per row of π (…, N) by inverse CDF on uniforms from `rng` (a `numpy.random.Generator`), and
    their 0/1 rewards r[a]: two (…, G) arrays."""
    u = rng.random((*pi.shape[:-1], num_generations), dtype=dtype)
    cdf = np.cumsum(pi, axis=-1)
    arms = np.minimum((u[..., None] >= cdf[..., None, :]).sum(axis=-1), pi.shape[-1] - 1)
    return arms, r[arms]


def group_advantages(rewards, eps=1e-6):
    """ "std" advantages of drawn groups (last axis): (r − group mean)/(unbiased group std + eps)."""
    centred = rewards - rewards.mean(axis=-1, keepdims=True)
    return centred / (np.sqrt(np.sum(centred**2, axis=-1, keepdims=True) / (rewards.shape[-1] - 1)) + eps)


def score_grad(w, arms, pi):
    """mean_i w_i (e_{a_i} − π), (…, N): the gradient wrt the logits of a group mean of per-sample terms
    f_i(log π(a_i)), with w_i = f_i' (∂ log π(a)/∂θ = e_a − π)."""
    onehot = (arms[..., None] == np.arange(pi.shape[-1])).astype(pi.dtype)  # (…, G, N)
    return (np.einsum("...g,...gn->...n", w, onehot) - w.sum(axis=-1, keepdims=True) * pi) / w.shape[-1]


def _sampled_run(learning_rate, momentum, beta, seeds, grad, *, n_arms, n_correct, p_ref, steps, dtype):
    """The loop of a sampled run over configurations × seeds: `grad(n, θ, π, β, r, θ_0)` is the step-n
    gradient (C, seeds, N), then heavy-ball SGD; returns the reward curves (C, seeds, steps+1)."""
    learning_rate, momentum, beta, r, theta0 = _setup(learning_rate, momentum, beta, n_arms, n_correct, p_ref, dtype)
    learning_rate, momentum, beta = (
        learning_rate[:, None],
        momentum[:, None],
        beta[:, None],
    )  # (C, 1, 1) against (C, S, ·)
    theta = np.tile(theta0, (learning_rate.shape[0], seeds, 1))
    velocity = np.zeros_like(theta)
    out = np.empty((learning_rate.shape[0], seeds, steps + 1), dtype)
    for n in range(steps):
        pi = _softmax(theta)
        out[..., n] = pi @ r
        velocity = momentum * velocity + grad(n, theta, pi, beta, r, theta0)
        theta = theta - learning_rate * velocity
    out[..., steps] = _softmax(theta) @ r
    return out


def sampled_rewards(
    learning_rate,
    momentum,
    beta=0.0,
    *,
    seeds,
    rng,
    n_arms=2,
    n_correct=1,
    p_ref=0.2,
    num_generations=8,
    steps=1000,
    eps=1e-6,
    dtype=np.float64,
):
    """Sampled mode: real draws of G arms per configuration and seed; returns (C, seeds, steps+1).

    Arms come from π by inverse CDF on uniforms from `rng` (a `numpy.random.Generator`); the gradient is
    that of the group mean of −A_i log π(a_i) + β k3(a_i) (on-policy, so the IS ratio is 1):
    g = mean_i w_i (e_{a_i} − π) with w_i = −A_i + β(1 − π_ref(a_i)/π(a_i)).
    """

    def grad(n, theta, pi, beta, r, theta0):
        arms, rewards = draw(pi, r, num_generations, rng, dtype)
        pi_ref = _softmax(theta0)
        w = -group_advantages(rewards, eps) + beta * (1 - pi_ref[arms] / np.take_along_axis(pi, arms, axis=-1))
        return score_grad(w, arms, pi)

    structure = dict(n_arms=n_arms, n_correct=n_correct, p_ref=p_ref, steps=steps, dtype=dtype)
    return _sampled_run(learning_rate, momentum, beta, seeds, grad, **structure)


def rollout_terms(logits_old, arms, rewards, logits_ref, eps=1e-6):
    """What a rollout fixes for the K steps taken on it: the arms (…, G), their "std" advantages, log π_old(a_i)
    (π_old = softmax(`logits_old`), the policy the rollout was drawn from) and log π_ref(a_i)."""
    logits_ref = np.broadcast_to(logits_ref, logits_old.shape)
    pick = lambda logits: np.take_along_axis(_log_softmax(logits), arms, axis=-1)
    return arms, group_advantages(rewards, eps), pick(logits_old), pick(logits_ref)


def reuse_grad(logits, terms, beta, epsilon):
    """Gradient wrt the logits θ (…, N) of the GRPO loss on a reused rollout (`rollout_terms`), written out.

    Loss: L = mean_i [max(−A_i ρ_i, −A_i clip(ρ_i, 1 − ε, 1 + ε)) + β k3_i], with ρ_i = π_θ(a_i)/π_old(a_i)
    (log ρ clamped to ±20) and k3_i = π_ref(a_i)/π_θ(a_i) − log(π_ref(a_i)/π_θ(a_i)) − 1. Since
    ∂ log π(a)/∂θ = e_a − π: ∂ρ_i/∂θ = ρ_i (e_{a_i} − π); where the clipped branch is the larger one (A_i > 0
    and ρ_i > 1 + ε, or A_i < 0 and ρ_i < 1 − ε; or log ρ beyond the clamp) the sample's surrogate is flat in
    θ; ∂k3_i/∂θ = (1 − π_ref(a_i)/π_θ(a_i)) (e_{a_i} − π). So

        g = mean_i w_i (e_{a_i} − π),  w_i = −A_i ρ_i 1{not clipped} + β (1 − π_ref(a_i)/π_θ(a_i)).
    """
    arms, adv, logp_old, logp_ref = terms
    logp = _log_softmax(logits)
    lp = np.take_along_axis(logp, arms, axis=-1)
    log_ratio = lp - logp_old
    ratio = np.exp(np.clip(log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    live = np.where(adv > 0, ratio <= 1 + epsilon, ratio >= 1 - epsilon) & (np.abs(log_ratio) <= LOG_RATIO_CLAMP)
    w = -adv * ratio * live + beta * (1 - np.exp(logp_ref - lp))
    return score_grad(w, arms, np.exp(logp))


def reuse_rewards(
    learning_rate,
    momentum,
    beta=0.0,
    *,
    seeds,
    rng,
    lag,
    epsilon,
    n_arms=2,
    n_correct=1,
    p_ref=0.2,
    num_generations=8,
    steps,
    eps=1e-6,
    dtype=np.float64,
):
    """Rollout reuse (pgrpo-sim's lag model "refresh", sampled mode); returns (C, seeds, steps+1).

    At every step n with n mod K = 0 (K = `lag`) π_old ← π_θ and one rollout is drawn from it (G arms per
    configuration and seed, as `sampled_rewards`); the K steps n … n+K−1 all take the clipped, importance-
    weighted surrogate (clip ε_low = ε_high = `epsilon`) plus β k3 on that rollout: `reuse_grad`.
    """
    rollout = None

    def grad(n, theta, pi, beta, r, theta0):
        nonlocal rollout
        if n % lag == 0:
            rollout = rollout_terms(theta, *draw(pi, r, num_generations, rng, dtype), theta0, eps)
        return reuse_grad(theta, rollout, beta, epsilon)

    structure = dict(n_arms=n_arms, n_correct=n_correct, p_ref=p_ref, steps=steps, dtype=dtype)
    return _sampled_run(learning_rate, momentum, beta, seeds, grad, **structure)
