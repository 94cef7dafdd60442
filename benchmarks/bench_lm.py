"""Workload 8: the language-model level's GRPO loop (a `report`, no comparison-table cases).

One configuration of `lm.config`'s defaults (32 prompts × G 8, responses ≤ 16 tokens, width 64, 2 layers) trained
for `STEPS` GRPO steps, each measurement in a fresh process: the seconds of a run after its compilation (the
second call of the compiled program; issue 47 target ≤ 8 s on 2 cores for 100 steps), the compile seconds, the
cost of R runs vmapped in one program (R seeds) against one run (target ≤ 16× at R = 32), and the same loop written
in PyTorch (`torch_lm`, every core, one run; target: pgrpo-sim ≥ 2× faster per run; skipped with a message without
torch). The SFT start is trained once and cached before the timed processes start. Each row also gives the achieved
FLOP/s (`analysis.lm_sweep.step_flops` × steps × runs over the run's seconds) against a float32 matmul peak measured
in the same benchmark run on the same machine (`measure_peak`: a jitted `PEAK_SIZE`² matmul; issue 47's target: ≥ 30 %
of it). On an accelerator (JAX's default backend not the CPU) R also takes `ACCELERATOR_RUNS` (≥ 1000 runs in one
program, issue 47): `python benchmarks/run.py --only bench_lm` on a lent GPU measures them as it stands.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import harness
import numpy as np

STEPS = 100
RUNS = (1, 8, 32)
ACCELERATOR_RUNS = (256, 1024)
"""Further R measured where JAX's default backend is an accelerator (on 2 CPU cores 32 runs take minutes already)."""
PEAK_SIZE = 1024
"""Side of the square float32 matrices whose product measures the machine's matmul peak (2·n³ operations, 2 GFLOP)."""
PEAK_REPEATS = 20


def _config():
    from pgrpo_sim import lm

    return lm.config()


def measure_backend() -> dict:
    """JAX's default backend in a fresh process: {"backend": "cpu", "gpu" or "tpu"}."""
    import jax

    return dict(backend=jax.default_backend())


def measure_runs(runs: int, steps: int) -> dict:
    """Compile and run `runs` vmapped seeds of `steps` GRPO steps, then run again (timed): seconds of each."""
    import jax

    from pgrpo_sim import lm

    config = _config()
    start = time.perf_counter()
    first = lm.simulate(config, steps, seeds=runs, key=0)
    jax.block_until_ready(first.readouts["reward"])
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    again = lm.simulate(config, steps, seeds=runs, key=1)
    jax.block_until_ready(again.readouts["reward"])
    run_s = time.perf_counter() - start
    return dict(runs=runs, steps=steps, first_s=first_s, run_s=run_s, compile_s=first_s - run_s)


def _best_seconds(call, repeats: int) -> float:
    """The fastest of `repeats` timed calls of a compiled `call` (waited for), after one untimed warm-up call."""
    import jax

    jax.block_until_ready(call())
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        best = min(best, time.perf_counter() - start)
    return best


def measure_peak(size: int, repeats: int) -> dict:
    """FLOP/s of a jitted float32 `size`² matmul on this machine's default JAX device: the best of `repeats` timed
    products after a warm-up (the peak the level's achieved FLOP/s is compared with)."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
    product = jax.jit(jnp.matmul)
    best = _best_seconds(lambda: product(a, b), repeats)
    return dict(size=size, seconds=best, flops_per_s=2.0 * size**3 / best)


def measure_shaped_peak(rows: int, width: int, chain: int, repeats: int) -> dict:
    """FLOP/s of the level's own matmul shapes: `chain` products (rows, width) @ (width, 4·width) @ (4·width, width)
    in one jitted loop (the MLP's shapes at one sampled token of a generation batch of `rows`), the best of
    `repeats` timed calls after a warm-up. Small matrices cannot reach `measure_peak`'s rate: this is the ceiling of
    the level's shapes on this machine."""
    import jax
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.key(0), (rows, width), jnp.float32)
    up = jax.random.normal(jax.random.key(1), (width, 4 * width), jnp.float32) / width**0.5
    down = jax.random.normal(jax.random.key(2), (4 * width, width), jnp.float32) / (4 * width) ** 0.5

    @jax.jit
    def products(x):
        return jax.lax.fori_loop(0, chain, lambda _, h: (h @ up) @ down, x)

    best = _best_seconds(lambda: products(x), repeats)
    return dict(seconds=best, flops_per_s=chain * 2 * (2.0 * rows * width * 4 * width) / best)


def run_flops(steps: int) -> float:
    """Floating-point operations of one default run of `steps` GRPO steps (`analysis.lm_sweep.step_flops`)."""
    from pgrpo_sim.analysis.lm_sweep import step_flops

    return step_flops(_config()) * steps


def measure_torch(steps: int) -> dict:
    """One run of `steps` GRPO steps of the PyTorch loop (`torch_lm`) on every core, after a one-step warm-up."""
    import torch
    import torch_lm

    torch.set_num_threads(harness.cpu_cores())
    torch_lm.run(steps=1)
    start = time.perf_counter()
    torch_lm.run(steps=steps)
    return dict(steps=steps, run_s=time.perf_counter() - start)


def check() -> list[tuple[str, bool]]:
    """Runs vmapped over seeds are each the run of that seed alone (same keys), to float32 rounding."""
    import jax

    from pgrpo_sim import lm

    config = lm.config(prompts_per_step=4, num_generations=4, modulus=5, operands=2, max_completion_length=8,
                          width=16, layers=1, heads=2, eval_size=16, start_accuracy=0.3)  # fmt: skip
    both = lm.simulate(config, 3, seeds=2, key=7)
    keys = jax.random.split(jax.random.key(7), 2)
    run = lm.make_run(config, 3)
    alone = [np.asarray(run(config, k).readouts["reward"]) for k in keys]
    same = np.allclose(np.asarray(both.readouts["reward"]), np.stack(alone), atol=1e-6)
    return [("lm: vmapped seeds equal the runs alone", bool(same))]


def report(quick: bool, rounds: int, out_dir) -> str:
    """Seconds per run after compilation and the vmapped cost ratio (module docstring)."""
    steps = 10 if quick else STEPS
    accelerator = harness.run_measure(__file__, "measure_backend")["backend"] != "cpu"
    runs = (1, 4) if quick else RUNS + (ACCELERATOR_RUNS if accelerator else ())
    env = dict(os.environ, PGRPO_SIM_CACHE=os.environ.get("PGRPO_SIM_CACHE", tempfile.gettempdir() + "/pgrpo-bench"))
    harness.run_measure(__file__, "measure_runs", env=env, runs=1, steps=1)  # the SFT start, trained and cached
    rows = {}
    for r in runs:
        measured = [harness.run_measure(__file__, "measure_runs", env=env, runs=r, steps=steps) for _ in range(rounds)]
        rows[r] = dict(
            run_s=statistics.median(m["run_s"] for m in measured),
            compile_s=statistics.median(m["compile_s"] for m in measured),
            spread=(min(m["run_s"] for m in measured), max(m["run_s"] for m in measured)),
            rss_mib=max(m["rss_mib"] for m in measured),
        )
    one = rows[1]["run_s"]
    peak = statistics.median(
        harness.run_measure(__file__, "measure_peak", size=PEAK_SIZE, repeats=PEAK_REPEATS)["flops_per_s"]
        for _ in range(rounds)
    )
    config = _config()
    shaped = statistics.median(
        harness.run_measure(__file__, "measure_shaped_peak", rows=config.generation_batch, width=config.policy.width,
                            chain=2000, repeats=PEAK_REPEATS)["flops_per_s"]
        for _ in range(rounds)
    )  # fmt: skip
    work = run_flops(steps)
    achieved = {r: work * r / row["run_s"] for r, row in rows.items()}
    import torch_bandit

    torch_s = None
    if torch_bandit.available():
        measured = [harness.run_measure(__file__, "measure_torch", steps=steps) for _ in range(rounds)]
        torch_s = statistics.median(m["run_s"] for m in measured)
    lines = [
        "## The language-model level: one GRPO run and vmapped runs",
        "",
        f"`lm.config()` defaults (32 prompts × G 8, ≤ 16 tokens, width 64, 2 layers), {steps} GRPO steps, "
        f"{harness.cpu_cores()} cores; R runs = R seeds vmapped in one compiled program; each row a fresh process, "
        f"median of {rounds} (range in brackets). Seconds exclude compilation (the second call of the program). "
        f"GFLOP/s: `step_flops` ({work / steps / 1e9:.2f} GFLOP a step and run) over the seconds; % of peak: against "
        f"a float32 {PEAK_SIZE}² matmul measured in this run, {peak / 1e9:.1f} GFLOP/s; % of shaped: against the "
        f"level's own MLP shapes ({config.generation_batch} × {config.policy.width} @ {config.policy.width} × "
        f"{4 * config.policy.width} and back, chained in one program), {shaped / 1e9:.1f} GFLOP/s.",
        "",
        "| Runs R | Seconds [range] | × one run | per run | Compile s | GFLOP/s | % of peak | % of shaped "
        "| Peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r, row in rows.items():
        lines.append(
            f"| {r} | {row['run_s']:.2f} [{row['spread'][0]:.2f}, {row['spread'][1]:.2f}] | "
            f"{row['run_s'] / one:.1f} | {row['run_s'] / r:.2f} | {row['compile_s']:.1f} | "
            f"{achieved[r] / 1e9:.1f} | {achieved[r] / peak:.0%} | {achieved[r] / shaped:.0%} | {row['rss_mib']:.0f} |"
        )
    largest = max(rows)
    lines += [
        "",
        f"- One run: {one:.1f} s for {steps} steps after compilation (target ≤ 8 s for 100 steps on 2 cores); "
        f"{largest} vmapped runs cost {rows[largest]['run_s'] / one:.1f}× one run (target ≤ 16× at 32). Achieved: "
        f"{achieved[1] / peak:.0%} of the matmul peak for one run, {achieved[largest] / peak:.0%} for {largest} "
        f"(target ≥ 30 %); the level's own shapes reach {shaped / peak:.0%} of that peak on this machine, so "
        f"{achieved[1] / shaped:.0%} of theirs.",
        (
            f"- The same loop in PyTorch (`benchmarks/torch_lm.py`, {harness.cpu_cores()} threads, batched over the "
            f"generation batch, median of {rounds}): {torch_s:.1f} s per run, {torch_s / one:.1f}× pgrpo-sim's one "
            f"run and {torch_s / (rows[largest]['run_s'] / largest):.1f}× its per-run cost at R = {largest} "
            "(target ≥ 2×)."
            if torch_s is not None
            else "- PyTorch baseline skipped: torch is not installed (pip install -e '.[bench]')."
        ),
        (
            f"- {'Measured' if largest >= 1000 else 'Not measured (--quick)'}: ≥ 1000 runs on the accelerator "
            "(the % of peak against a default-precision float32 matmul, which an accelerator may run in TF32); "
            "the PyTorch baseline runs on the CPU."
            if accelerator
            else "- Not measured: ≥ 1000 runs on an accelerator (JAX found none here)."
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    harness.side_main(
        lambda case, side: (None, None),
        measures={
            "measure_runs": measure_runs,
            "measure_backend": measure_backend,
            "measure_torch": measure_torch,
            "measure_peak": measure_peak,
            "measure_shaped_peak": measure_shaped_peak,
        },
    )
