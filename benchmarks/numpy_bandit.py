"""NumPy baseline: the bandit GRPO dynamics as a researcher would script them in an afternoon.

The setting of pgrpo-sim's default run (docs/design.md §3): on-policy (lag model "none"), N arms of which
the first c are correct (reward 1, the rest 0), class-symmetric start from p_ref (which is also the
reference policy), "std" group advantages, k3 KL penalty with coefficient β, heavy-ball SGD as
optax.sgd (v ← μv + g, θ ← θ − ηv). Every array has a leading configuration axis C (η, μ, β given
per configuration); only the steps are a Python loop. Both functions return expected-reward curves
p(θ_n) = Σ_a π_a r_a for n = 0..steps, like `pgrpo_sim.simulate(...).reward`.
"""

from __future__ import annotations

import math

import numpy as np


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def start(n_arms, n_correct, p_ref, dtype=np.float64):
    """0/1 rewards of the arms (first c correct) and the class-symmetric start logits, both (N,)."""
    correct = np.arange(n_arms) < n_correct
    logits = np.where(correct, np.log(p_ref / n_correct), np.log((1 - p_ref) / (n_arms - n_correct)))
    return correct.astype(dtype), logits.astype(dtype)


def std_advantages(group_size, eps=1e-6, dtype=np.float64):
    """A⁺(j+1) and A⁻(j) for j = 0..G−1: the "std" advantage of a success (failure) whose G−1 group
    mates have j successes. With k successes in all, s_k = sqrt(k(G−k)/(G(G−1))) and
    A⁺(k) = (1 − k/G)/(s_k + eps), A⁻(k) = −(k/G)/(s_k + eps); an all-equal group gives 0."""
    g = group_size
    k = np.arange(g + 1)
    std = np.sqrt(k * (g - k) / (g * (g - 1)))
    return ((1 - k / g) / (std + eps))[1:].astype(dtype), (-(k / g) / (std + eps))[:-1].astype(dtype)


def _setup(eta, momentum, beta, n_arms, n_correct, p_ref, dtype):
    """Per-configuration hyperparameters as (C, 1) columns, then `start`."""
    eta, momentum, beta = (np.asarray(x, dtype)[:, None] for x in np.broadcast_arrays(eta, momentum, beta))
    return eta, momentum, beta, *start(n_arms, n_correct, p_ref, dtype)


def expected_rewards(
    eta,
    momentum,
    beta=0.0,
    *,
    n_arms=2,
    n_correct=1,
    p_ref=0.2,
    group_size=8,
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
    eta, momentum, beta, r, theta0 = _setup(eta, momentum, beta, n_arms, n_correct, p_ref, dtype)
    g = group_size
    adv_success, adv_failure = std_advantages(g, eps, dtype)
    j = np.arange(g, dtype=dtype)
    choose = np.array([math.comb(g - 1, i) for i in range(g)], dtype)
    pi_ref = _softmax(theta0)

    theta = np.tile(theta0, (eta.shape[0], 1))
    velocity = np.zeros_like(theta)
    out = np.empty((eta.shape[0], steps + 1), dtype) if curves else None
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
        theta = theta - eta * velocity
    if not curves:
        return _softmax(theta) @ r
    out[:, steps] = _softmax(theta) @ r
    return out


def sampled_rewards(
    eta,
    momentum,
    beta=0.0,
    *,
    seeds,
    rng,
    n_arms=2,
    n_correct=1,
    p_ref=0.2,
    group_size=8,
    steps=1000,
    eps=1e-6,
    dtype=np.float64,
):
    """Sampled mode: real draws of G arms per configuration and seed; returns (C, seeds, steps+1).

    Arms come from π by inverse CDF on uniforms from `rng` (a `numpy.random.Generator`); the gradient is
    that of the group mean of −A_i log π(a_i) + β k3(a_i) (on-policy, so the IS ratio is 1):
    g = mean_i w_i (e_{a_i} − π) with w_i = −A_i + β(1 − π_ref(a_i)/π(a_i)).
    """
    eta, momentum, beta, r, theta0 = _setup(eta, momentum, beta, n_arms, n_correct, p_ref, dtype)
    eta, momentum, beta = eta[:, None], momentum[:, None], beta[:, None]  # (C, 1, 1) against (C, S, ·)
    g = group_size
    pi_ref = _softmax(theta0)
    arm_ids = np.arange(n_arms)

    theta = np.tile(theta0, (eta.shape[0], seeds, 1))
    velocity = np.zeros_like(theta)
    out = np.empty((eta.shape[0], seeds, steps + 1), dtype)
    for n in range(steps):
        pi = _softmax(theta)
        out[..., n] = pi @ r
        u = rng.random((*theta.shape[:2], g), dtype=dtype)
        cdf = np.cumsum(pi, axis=-1)
        arms = np.minimum((u[..., None] >= cdf[..., None, :]).sum(axis=-1), n_arms - 1)  # (C, S, G)
        rewards = r[arms]
        centred = rewards - rewards.mean(axis=-1, keepdims=True)
        adv = centred / (np.sqrt(np.sum(centred**2, axis=-1, keepdims=True) / (g - 1)) + eps)
        w = -adv + beta * (1 - pi_ref[arms] / np.take_along_axis(pi, arms, axis=-1))
        onehot = (arms[..., None] == arm_ids).astype(dtype)  # (C, S, G, N)
        grad = (np.einsum("csg,csgn->csn", w, onehot) - w.sum(axis=-1, keepdims=True) * pi) / g
        velocity = momentum * velocity + grad
        theta = theta - eta * velocity
    out[..., steps] = _softmax(theta) @ r
    return out
