"""Where the time goes in pgrpo-sim's expected mode: nanoseconds per config-step, one core, next to NumPy.

    python benchmarks/profile_expected.py [configs] [steps]

Float32 on one XLA CPU device (bench_bandit also shards over the cores), bench_bandit's (η, μ, β)
sweep, N = 2, G = 8; the best of 3 interleaved runs. Variants:
- numpy: `numpy_bandit.expected_rewards`.
- pgrpo-sim vmap: `jit(vmap(simulate))` over all configurations at once.
- pgrpo-sim chunked: `lax.map` over vmapped chunks (bench_bandit's form, less the sharding).
- fused jnp: the on-policy update written out by hand (the NumPy formulas in jnp, the library's pmf),
  chunked: the headroom left to the library.
"""

from __future__ import annotations

import functools
import math
import sys
import time

import bench_bandit
import jax
import jax.numpy as jnp
import numpy as np
import numpy_bandit

import pgrpo_sim as ps
from pgrpo_sim.base.autodiff import scan
from pgrpo_sim.models import bandit


def fused_rewards(learning_rate, momentum, beta, *, steps, n_arms, n_correct, p_ref, num_generations):
    """Reward curve of one configuration: `numpy_bandit.expected_rewards`'s update in jnp, product pmf."""
    r, theta0 = numpy_bandit.start(n_arms, n_correct, p_ref, np.float32)
    adv_success, adv_failure = numpy_bandit.std_advantages(num_generations, dtype=np.float32)
    pi_ref = jax.nn.softmax(theta0)

    def step(state, _):
        theta, velocity = state
        pi = jax.nn.softmax(theta)
        p = pi @ r
        pmf = bandit.binomial_pmf(num_generations - 1, p)
        w = -(r * (pmf @ adv_success) + (1 - r) * (pmf @ adv_failure)) + beta * (1 - pi_ref / pi)
        velocity = momentum * velocity + pi * (w - pi @ w)
        return (theta - learning_rate * velocity, velocity), p

    (theta, _), rewards = jax.lax.scan(step, (theta0, jnp.zeros_like(theta0)), length=steps)
    return jnp.append(rewards, jax.nn.softmax(theta) @ r)


def fused_two_arm_rewards(learning_rate, momentum, beta, *, steps, p_ref, num_generations, checkpoint=False):
    """`fused_rewards` of the two-arm bandit (arm 0 correct) with each arm's logit and velocity its own array: no
    arm axis, so under vmap every operation is elementwise over the configurations and reverse mode transposes no
    broadcast or slice of one. `checkpoint`: the steps in √steps blocks (`base.autodiff.scan`)."""
    r, theta0 = numpy_bandit.start(2, 1, p_ref, np.float32)
    adv_success, adv_failure = numpy_bandit.std_advantages(num_generations, dtype=np.float32)
    table = np.stack([adv_success, adv_failure])
    pi_ref = np.exp(theta0) / np.exp(theta0).sum()

    def step(state, _):
        t0, t1, v0, v1 = state
        pi0 = jax.nn.sigmoid(t0 - t1)
        pi1 = 1 - pi0
        p = pi0 * r[0] + pi1 * r[1]
        alpha = bandit.binomial_mean(num_generations - 1, p, table)
        w0 = -(r[0] * alpha[..., 0] + (1 - r[0]) * alpha[..., 1]) + beta * (1 - pi_ref[0] / pi0)
        w1 = -(r[1] * alpha[..., 0] + (1 - r[1]) * alpha[..., 1]) + beta * (1 - pi_ref[1] / pi1)
        mean = pi0 * w0 + pi1 * w1
        v0, v1 = momentum * v0 + pi0 * (w0 - mean), momentum * v1 + pi1 * (w1 - mean)
        return (t0 - learning_rate * v0, t1 - learning_rate * v1, v0, v1), p

    zero = jnp.zeros_like(learning_rate)
    (t0, t1, _, _), rewards = scan(
        step, (zero + theta0[0], zero + theta0[1], zero, zero), None, steps, checkpoint=checkpoint
    )
    pi0 = jax.nn.sigmoid(t0 - t1)
    return jnp.append(rewards, pi0 * r[0] + (1 - pi0) * r[1])


def main(configs: int = 2**15, steps: int = 200) -> None:
    case = bench_bandit.make_case("expected", configs, steps)
    structure = {k: case[k] for k in ("n_arms", "n_correct", "p_ref", "num_generations")}
    sweep = tuple(np.asarray(x, np.float32) for x in bench_bandit.sweep(configs))
    config = ps.bandit.config(**structure)

    def simulate(learning_rate, momentum, beta):
        return ps.simulate(config.replace(learning_rate=learning_rate, momentum=momentum, beta=beta), steps).reward

    def chunked(one):
        return lambda *args: jax.lax.map(lambda a: one(*a), args, batch_size=bench_bandit.CHUNK["expected"])

    def compiled(fn):
        run = jax.jit(fn).lower(*sweep).compile()
        return lambda: np.asarray(run(*sweep))

    variants = {
        "numpy": lambda: numpy_bandit.expected_rewards(*sweep, dtype=np.float32, steps=steps, **structure),
        "pgrpo-sim vmap": compiled(jax.vmap(simulate)),
        "pgrpo-sim chunked": compiled(chunked(simulate)),
    }
    variants["fused jnp"] = compiled(chunked(functools.partial(fused_rewards, steps=steps, **structure)))

    best = dict.fromkeys(variants, math.inf)
    results = {}
    for _ in range(3):
        for name, run in variants.items():
            start = time.perf_counter()
            results[name] = run()
            best[name] = min(best[name], time.perf_counter() - start)
    print(f"{configs} configurations × {steps} steps, N = 2, G = 8, float32, one core")
    print(f"{'variant':32s} {'ns/config-step':>14s} {'vs numpy':>9s} {'max |Δ reward|':>15s}")
    for name, seconds in best.items():
        diff = np.nanmax(np.abs(results[name] - results["numpy"]))
        print(f"{name:32s} {1e9 * seconds / (configs * steps):14.1f} {best['numpy'] / seconds:8.1f}× {diff:15.1e}")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
