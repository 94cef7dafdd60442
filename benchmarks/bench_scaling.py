"""Workload 5: how `run_sweep` scales with the number of configurations and of steps (a `report`).

Expected mode, the default bandit (N = 2, G = 8, on-policy), an η × μ grid (η log-spaced in
[0.01, 1], μ in [0, 0.9]) through `run_sweep` with its chunking and memory budget (`max_memory`),
sharded over the XLA CPU devices (one per core, as in `bench_bandit`). Each point is one fresh process
(so its peak RSS is its own), measured once:
- configurations 10^3 … 10^6 at 100 steps (the issue's 10^6-configuration throughput case, run at
  100 steps instead of 1000 to keep the run short), with the default budget (2 GB) and, at 10^6, a
  budget of 0.2 GB (ten times more chunks) and an unlimited one (a single chunk);
- steps 100, 1000, 10 000 at 10^3 configurations (default budget).
Seconds are `run_sweep`'s wall time less its compile time (JAX's compile events), and split into the
chunk computations (`sweep.run_chunk` calls, wrapped to time them) and the rest (validating the
grid, building the dataset). `report` draws `scaling.png` (log-log) in a full run.
"""

from __future__ import annotations

import math
import time

import harness
import numpy as np

DEFAULT_BUDGET = 2e9
SMALL_BUDGET = 2e8
NO_BUDGET = 1e15


def _factor(configs: int) -> tuple[int, int]:
    """(η values, μ values) with product `configs`, as square as possible."""
    n = math.isqrt(configs)
    while configs % n:
        n -= 1
    return configs // n, n


def _axes(configs: int):
    from pgrpo_sim.analysis.sweep import parse_axis

    n_eta, n_mu = _factor(configs)
    return [parse_axis(f"learning_rate=log:1e-2:1:{n_eta}"), parse_axis(f"momentum=0:0.9:{n_mu}")]


class _ChunkTimer:
    """Wraps `pgrpo_sim.sweep.run_chunk` (if it exists) to count its calls and time them (outputs
    ready), less the compile time `recorder` sees during the calls."""

    def __init__(self, sweep_module, recorder: harness.CompileRecorder):
        self.module, self.recorder, self.calls, self.seconds = sweep_module, recorder, 0, 0.0
        self.original = getattr(sweep_module, "run_chunk", None)

    def __enter__(self):
        if self.original is not None:
            import jax

            def timed(*args, **kwargs):
                compiled = self.recorder.seconds()
                start = time.perf_counter()
                out = jax.block_until_ready(self.original(*args, **kwargs))
                self.seconds += time.perf_counter() - start - (self.recorder.seconds() - compiled)
                self.calls += 1
                return out

            self.module.run_chunk = timed
        return self

    def __exit__(self, *exc):
        if self.original is not None:
            self.module.run_chunk = self.original


def measure_point(configs: int, steps: int, max_memory: float) -> dict:
    """One `run_sweep` of `configs` configurations × `steps` in this (fresh) process."""
    import jax

    from pgrpo_sim.analysis import sweep

    rss_before = harness.peak_rss_mib()
    axes = _axes(configs)
    with harness.CompileRecorder() as rec, _ChunkTimer(sweep, rec) as chunks:
        start = time.perf_counter()
        ds = sweep.run_sweep({}, axes, steps=steps, max_memory=max_memory, progress=False)
        seconds = time.perf_counter() - start
    assert ds["final_reward"].size == configs
    return dict(
        seconds=seconds,
        compile_s=rec.seconds(),
        chunk_calls=chunks.calls if chunks.original is not None else None,
        chunk_s=chunks.seconds if chunks.original is not None else None,
        rss_before_mib=rss_before,
        devices=jax.device_count(),
        finite=float(np.isfinite(ds["final_reward"].values).mean()),
    )


MEASURES = dict(point=measure_point)


def points(quick: bool) -> list[dict]:
    """The measured (configs, steps, budget, series) points."""
    if quick:
        sizes, steps_series, base_c = (10**2, 10**3, 10**4), (50, 500), 10**3
        return [
            *(dict(configs=c, steps=50, budget=DEFAULT_BUDGET, series="configs") for c in sizes),
            *(dict(configs=base_c, steps=s, budget=DEFAULT_BUDGET, series="steps") for s in steps_series[1:]),
            dict(configs=10**4, steps=50, budget=1e6, series="small budget"),
        ]
    out = [dict(configs=c, steps=100, budget=DEFAULT_BUDGET, series="configs") for c in (10**3, 10**4, 10**5, 10**6)]
    out += [dict(configs=10**3, steps=s, budget=DEFAULT_BUDGET, series="steps") for s in (1000, 10**4)]
    out += [
        dict(configs=10**6, steps=100, budget=SMALL_BUDGET, series="small budget"),
        dict(configs=10**6, steps=100, budget=NO_BUDGET, series="one chunk"),
    ]
    return out


def check() -> list[tuple[str, bool]]:
    """`run_sweep` on a 6×5 η×μ grid (100 steps) in chunks of 4 configurations (the last one padded)
    equals the same sweep in one chunk, field by field, exactly."""
    from pgrpo_sim.analysis.sweep import run_sweep

    axes = _axes(30)
    chunked = run_sweep({}, axes, steps=100, chunk_size=4, progress=False)
    whole = run_sweep({}, axes, steps=100, progress=False)
    same = all(np.array_equal(chunked[k].values, whole[k].values, equal_nan=True) for k in whole.data_vars)
    fields = ", ".join(whole.data_vars)
    return [(f"run_sweep in chunks of 4 = in one chunk, 30 configurations ({fields})", same)]


def _fmt_budget(budget: float) -> str:
    return "none" if budget >= NO_BUDGET else f"{budget / 1e9:g} GB"


def _plot(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    series = {}
    for r in rows:
        series.setdefault(r["series"], []).append(r)
    ax = axes[0]
    for name, marker in (("configs", "o"), ("small budget", "s"), ("one chunk", "^")):
        pts = sorted(series.get(name, []), key=lambda r: r["configs"])
        if pts:
            c = np.array([r["configs"] for r in pts])
            ax.loglog(
                c, [r["run_s"] for r in pts], marker=marker, label=f"run_sweep, budget {_fmt_budget(pts[0]['budget'])}"
            )
    base = sorted(series["configs"], key=lambda r: r["configs"])
    c = np.array([r["configs"] for r in base])
    if base[0]["chunk_s"] is not None:
        ax.loglog(c, [r["chunk_s"] for r in base], "o--", color="C0", alpha=0.6, label="inside the chunks, budget 2 GB")
    ax.loglog(c, base[-1]["run_s"] * c / c[-1], "k:", label="slope 1 (linear)")
    ax.set(xlabel="configurations", ylabel="seconds (less compile)", title=f"{base[0]['steps']} steps")
    ax.legend(fontsize=8)
    ax = axes[1]
    pts = sorted(
        [r for r in series["configs"] if r["configs"] == series["steps"][0]["configs"]] + series["steps"],
        key=lambda r: r["steps"],
    )
    s = np.array([r["steps"] for r in pts])
    ax.loglog(s, [r["run_s"] for r in pts], "o-", label="run_sweep")
    if pts[0]["chunk_s"] is not None:
        ax.loglog(s, [r["chunk_s"] for r in pts], "o--", color="C0", alpha=0.6, label="inside the chunks")
    ax.loglog(s, pts[-1]["run_s"] * s / s[-1], "k:", label="slope 1 (linear)")
    ax.set(xlabel="steps", ylabel="seconds (less compile)", title=f"{pts[0]['configs']:.0e} configurations")
    ax.legend(fontsize=8)
    ax = axes[2]
    for name, marker in (("configs", "o"), ("small budget", "s"), ("one chunk", "^")):
        pts = sorted(series.get(name, []), key=lambda r: r["configs"])
        if pts:
            ax.loglog(
                [r["configs"] for r in pts],
                [r["rss_mib"] for r in pts],
                marker=marker,
                label=f"budget {_fmt_budget(pts[0]['budget'])}",
            )
    ax.loglog(c, [base[0]["rss_before_mib"]] * len(c), "k:", label="after imports")
    ax.set(xlabel="configurations", ylabel="peak RSS MiB", title="memory")
    ax.legend(fontsize=8)
    fig.suptitle("run_sweep scaling, expected mode, N=2, G=8 (CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(quick: bool, rounds: int, out_dir) -> str:
    """Time and peak memory of `run_sweep` against configurations and steps (each point measured once)."""
    rows = []
    for p in points(quick):
        r = harness.run_measure(__file__, "point", configs=p["configs"], steps=p["steps"], max_memory=p["budget"])
        r.update(p, run_s=r["seconds"] - r["compile_s"])
        rows.append(r)
    lines = [
        "## Scaling of `run_sweep`: configurations, steps, memory",
        "",
        f"Expected mode, default bandit (N = 2, G = 8), η × μ grid, {rows[0]['devices']} XLA CPU devices; one "
        'fresh process per row, measured once. Seconds exclude compilation (shown apart); "chunks" is '
        "the time inside the chunk computations, the rest of `run_sweep` is validating the grid and "
        "assembling the dataset.",
        "",
        "| Configurations | Steps | Budget | Chunks | Seconds (less compile) | in chunks | rest | "
        "Compile s | config-steps/s | Peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        rate = r["configs"] * r["steps"] / r["run_s"]
        rest = None if r["chunk_s"] is None else r["run_s"] - r["chunk_s"]
        lines.append(
            f"| {r['configs']:.0e} | {r['steps']} | {_fmt_budget(r['budget'])} | "
            f"{harness.fmt(r['chunk_calls'])} | "
            f"{r['run_s']:.2f} | {harness.fmt(r['chunk_s'])} | {harness.fmt(rest)} | "
            f"{r['compile_s']:.1f} | {rate:.3g} | {r['rss_mib']:.0f} |"
        )
    big = max((r for r in rows if r["series"] == "configs"), key=lambda r: r["configs"])
    chunk_rate = big["configs"] * big["steps"] / big["chunk_s"] if big["chunk_s"] else None
    lines += [
        "",
        f"- Largest case ({big['configs']:.0e} configurations × {big['steps']} steps, default budget): "
        f"{big['configs'] * big['steps'] / big['run_s']:.3g} config-steps/s through `run_sweep` "
        f"({harness.fmt(chunk_rate)} inside the chunk computations), {big['seconds']:.1f} s with compilation, "
        f"peak RSS {big['rss_mib']:.0f} MiB ({big['rss_before_mib']:.0f} MiB after imports)."
        + (" Run at 100 steps rather than 1000 to keep the benchmark short." if not quick else ""),
    ]
    if out_dir is not None:
        _plot(rows, out_dir / "scaling.png")
        lines.append("- Plot: [`scaling.png`](scaling.png) (log-log; dashed: inside the chunks; dotted: slope 1).")
    return "\n".join(lines)


if __name__ == "__main__":
    harness.use_all_cores()
    harness.side_main(None, MEASURES)
