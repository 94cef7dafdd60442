"""Benchmark driver: pgrpo-sim against hand-written baselines, one script per workload.

    python benchmarks/run.py [--quick] [--check]

First checks that every baseline computes what pgrpo-sim computes, and exits with status 1 if one does
not; `--check` stops there. Then times every case of every workload (pgrpo-sim and the baseline each
in a fresh process), prints a table and writes benchmarks/RESULTS.md. `--quick` times small sizes
once (under a minute) and prints the table without writing RESULTS.md.

A workload module provides `TARGETS` (speed-up asked for, per workload), `cases(quick)` (its
docstring describes the sizes in RESULTS.md), `check()`, and a `harness.side_main(prepare_side)`
entry point; the sides are "pgrpo-sim" and "numpy".
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import os
import platform
import statistics
import sys
from importlib.metadata import version
from pathlib import Path

import harness

harness.use_all_cores()  # before JAX is imported, so the checks run on the devices the timings use

WORKLOADS = ("bench_bandit",)
HERE = Path(__file__).resolve().parent
SIDES = ("pgrpo-sim", "numpy")
ROUNDS = 3
"""Timed runs per side and case in a full run (median reported); --quick times one."""
COLUMNS = (
    "Workload", "Size", "Steps", "pgrpo-sim /s", "NumPy /s", "Speed-up", "Target", "Compile s",
    "Peak RSS MiB (pgrpo-sim / NumPy)",
)


def run_checks(modules) -> bool:
    ok = True
    for module in modules:
        for description, passed in module.check():
            print(f"[{'ok' if passed else 'FAIL'}] {module.__name__}: {description}", flush=True)
            ok &= passed
    return ok


def summarise(runs: list[dict]) -> dict:
    """Median seconds and compile seconds, and the largest peak RSS, of one side's runs."""
    compile_s = [run["compile_s"] for run in runs if run["compile_s"] is not None]
    return dict(
        seconds=statistics.median(run["seconds"] for run in runs),
        compile_s=statistics.median(compile_s) if compile_s else None,
        rss_mib=max(run["rss_mib"] for run in runs),
    )


def time_cases(modules, quick: bool) -> list[dict]:
    """Time every case; the two sides take turns, one run (in a fresh process) each per round."""
    rows = []
    for module in modules:
        for case in module.cases(quick):
            runs = {side: [] for side in SIDES}
            for _ in range(1 if quick else ROUNDS):
                for side in SIDES:
                    runs[side].append(harness.run_side(module.__file__, case, side))
            ours, base = (summarise(runs[side]) for side in SIDES)
            ratio = base["seconds"] / ours["seconds"]
            rows.append(dict(case=case, ours=ours, base=base, ratio=ratio, target=module.TARGETS[case["workload"]]))
            print(f"timed {case['workload']} {case['size']}: {ratio:.1f}×", file=sys.stderr, flush=True)
    return rows


def format_row(row: dict) -> list[str]:
    case, ours, base = row["case"], row["ours"], row["base"]
    return [
        case["workload"],
        case["size"],
        str(case["steps"]),
        f"{case['work'] / ours['seconds']:.3g} {case['unit']}",
        f"{case['work'] / base['seconds']:.3g}",
        f"{row['ratio']:.1f}×",
        f"{row['target']:g}× {'met' if row['ratio'] >= row['target'] else 'missed'}",
        f"{ours['compile_s']:.1f}",
        f"{ours['rss_mib']:.0f} / {base['rss_mib']:.0f}",
    ]


def markdown_table(rows: list[dict]) -> str:
    lines = [COLUMNS, ["---"] * len(COLUMNS), *(format_row(row) for row in rows)]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def write_results(rows: list[dict], modules, load: tuple[float, float], path: Path) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cores = os.cpu_count()
    sizes = "\n".join(f"- `{m.__name__}`: " + " ".join(inspect.cleandoc(m.cases.__doc__).split()) for m in modules)
    text = f"""# Benchmark results

Written by `python benchmarks/run.py` on {now}.

Machine: {cpu_model()}, {cores} cores, Linux {platform.release()}; Python {platform.python_version()},
jax {version('jax')}, jaxlib {version('jaxlib')}, numpy {version('numpy')}. CPU only: **GPU numbers are
missing** (no GPU was available for this run). One-minute load average {load[0]:.1f} before the
timings and {load[1]:.1f} after; the benchmark itself accounts for about 1, more means that other jobs
shared the cores and the numbers are noisy.

{markdown_table(rows)}

- Throughput is work per second of wall time: config-steps (expected mode, one configuration advanced
  one step) or run-steps (sampled mode, one configuration × seed advanced one step). Speed-up is NumPy
  time / pgrpo-sim time; "Target" is what the issue asks for.
- Both sides in float32, checked to agree before timing (`run.py --check`). pgrpo-sim runs shard the
  configurations over {cores} XLA CPU devices (one per core) and `lax.map` over vmapped chunks on
  each; the NumPy baselines are plain single-process scripts, vectorised over configurations with a
  Python loop over steps.
- Median over {ROUNDS} rounds in which the two sides take turns, each run in a fresh process after
  compilation; compile time (median) is reported separately. Peak RSS is the largest over the rounds
  and includes the interpreter and, for pgrpo-sim, the JAX runtime.

Sizes:
{sizes}
"""
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; print only, do not write RESULTS.md")
    parser.add_argument("--check", action="store_true", help="only check that the baselines agree with pgrpo-sim")
    args = parser.parse_args()
    modules = [importlib.import_module(name) for name in WORKLOADS]
    if not run_checks(modules):
        print("baselines disagree with pgrpo-sim", file=sys.stderr)
        return 1
    if args.check:
        return 0
    load_before = os.getloadavg()[0]
    rows = time_cases(modules, args.quick)
    print(markdown_table(rows))
    if not args.quick:
        write_results(rows, modules, (load_before, os.getloadavg()[0]), HERE / "RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
