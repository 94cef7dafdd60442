"""Workload 7: the cost of a reused-rollout optimiser step (a `report`).

Rollout reuse (lag model "refresh": one rollout per refresh, K optimiser steps on it) against the sampled
step it replaced (lag model "refresh_fresh": a fresh group from the stale π_old every step) and against the
on-policy sampled step (lag model "none"), in one process, the same sizes: 256 configurations × 16 seeds,
N = 2, G = 8, 200 steps, K = 4 (and P = 8 prompts in 4 mini-batches), float32, jitted and compiled ahead of
time; nanoseconds per run-step (best of 3), and the ratio to the fresh-sample step measured in the same
process. The issue asks that a reused-rollout step cost no more than today's sampled step.
"""

from __future__ import annotations

import time

import harness
import numpy as np

VARIANTS = {
    "on-policy (none)": dict(lag_model="none", lag=0),
    "fresh samples (refresh_fresh, K = 4)": dict(lag_model="refresh_fresh", lag=4),
    "rollout reuse (refresh, K = 4)": dict(lag_model="refresh", lag=4),
    "fresh samples, P = 8 prompts": dict(lag_model="refresh_fresh", lag=4, n_prompts=8),
    "rollout reuse, P = 8 prompts, 4 mini-batches": dict(lag_model="refresh", lag=4, n_prompts=8, minibatches=4),
}
BASELINE = {"rollout reuse (refresh, K = 4)": "fresh samples (refresh_fresh, K = 4)"}
BASELINE["rollout reuse, P = 8 prompts, 4 mini-batches"] = "fresh samples, P = 8 prompts"


def _runner(variant: dict, configs: int, seeds: int, steps: int):
    import jax
    import jax.numpy as jnp

    import pgrpo_sim as ps

    base = ps.bandit_config(p_ref=0.2, group_size=8, clip=0.2, **variant)
    etas = jnp.asarray(10 ** np.linspace(-2, 0, configs), jnp.float32)

    def one(eta):
        config = ps.set_hyperparameters(base, {"eta": eta})
        keys = jax.random.split(jax.random.key(0), seeds)
        return jax.vmap(lambda k: ps.run(config, k, steps, "sampled").reward)(keys)

    return jax.jit(lambda e: jax.lax.map(one, e, batch_size=16)).lower(etas).compile(), etas


def measure_steps(configs: int, seeds: int, steps: int) -> dict:
    """Nanoseconds per run-step of every variant, best of 3, in this one process."""
    import jax

    out = {}
    for name, variant in VARIANTS.items():
        compiled, etas = _runner(variant, configs, seeds, steps)
        jax.block_until_ready(compiled(etas))
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            jax.block_until_ready(compiled(etas))
            best = min(best, time.perf_counter() - start)
        out[name] = 1e9 * best / (configs * seeds * steps)
    return out


def check() -> list[tuple[str, bool]]:
    """With one step per rollout (K = 1) reuse and fresh samples are the same update on the same draws."""
    import pgrpo_sim as ps

    runs = [
        ps.simulate(ps.bandit_config(p_ref=0.2, eta=0.5, lag_model=m, lag=1), 20, mode="sampled", seeds=8)
        for m in ("refresh", "refresh_fresh")
    ]
    diff = float(np.max(np.abs(np.asarray(runs[0].reward) - np.asarray(runs[1].reward))))
    return [(f"K = 1: rollout reuse = fresh samples, max |Δ reward| {diff:.1e} (limit 1e-6)", diff <= 1e-6)]


def report(quick: bool, rounds: int, out_dir) -> str:
    sizes = dict(configs=64, seeds=16, steps=50) if quick else dict(configs=256, seeds=16, steps=200)
    ns = harness.run_measure(__file__, "steps", **sizes)
    lines = [
        "## Rollout reuse: cost of an optimiser step",
        "",
        f"{sizes['configs']} configurations × {sizes['seeds']} seeds × {sizes['steps']} steps, N = 2, G = 8, "
        "float32, one process, best of 3 (`bench_rollouts.py`).",
        "",
        "| Variant | ns per run-step | vs the fresh-sample step |",
        "| --- | --- | --- |",
    ]
    for name in VARIANTS:
        ratio = f"{ns[name] / ns[BASELINE[name]]:.2f}×" if name in BASELINE else "—"
        lines.append(f"| {name} | {ns[name]:.3g} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    harness.use_all_cores()
    harness.side_main(None, dict(steps=measure_steps))  # a report only: no timed cases
