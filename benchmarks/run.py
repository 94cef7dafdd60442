"""Benchmark driver: pgrpo-sim against hand-written baselines, one script per workload.

    python benchmarks/run.py [--quick] [--check] [--only NAME,...]

First checks that every baseline computes what pgrpo-sim computes (and that pgrpo-sim's numbers are
right where a closed form exists), and exits with status 1 if one does not; `--check` stops there.
Then times every case of every workload (pgrpo-sim and the baseline each in a fresh process), runs
the workloads' own measurements (seconds to first result, compile counts, scaling, gradients),
prints the tables and writes benchmarks/RESULTS.md (and the plots the workloads draw); a report that
fails is written as a failure section and the exit status is 1. `--quick`
times small sizes once and writes nothing; `--only` runs some workloads and writes nothing either,
unless `--record` appends their results to RESULTS.md as a dated section naming the command.

A workload module provides `check()` (list of (description, passed)) and a `harness.side_main`
entry point, and either or both of:
- `cases(quick)` (its docstring describes the sizes in RESULTS.md) with `TARGETS` (speed-up asked
  for, per workload): rows of the comparison table, sides "pgrpo-sim" and "numpy"; a case may name
  its `baseline` (column text, default "NumPy");
- `report(quick, rounds, out_dir)`: a Markdown section (a "## " title first) of measurements that
  are not a pgrpo-sim-against-baseline timing; figures go to `out_dir` (None: draw none).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

import harness

harness.use_all_cores()  # before JAX is imported, so the checks run on the devices the timings use

WORKLOADS = (
    "bench_bandit",
    "bench_sde",
    "bench_compile",
    "bench_scaling",
    "bench_grad",
    "bench_rollouts",
    "bench_sweep",
)
HERE = Path(__file__).resolve().parent
SIDES = ("pgrpo-sim", "numpy")
ROUNDS = 3
"""Timed runs per side and case in a full run (median reported); --quick times one."""
COLUMNS = (
    "Workload",
    "Size",
    "Steps",
    "pgrpo-sim /s",
    "Baseline /s",
    "Baseline",
    "Speed-up",
    "Target",
    "Compile s",
    "Peak RSS MiB (pgrpo-sim / baseline)",
)


def run_checks(modules) -> bool:
    ok = True
    for module in modules:
        start = time.perf_counter()
        for description, passed in module.check():
            print(f"[{'ok' if passed else 'FAIL'}] {module.__name__}: {description}", flush=True)
            ok &= passed
        print(f"  ({module.__name__} checks: {time.perf_counter() - start:.1f} s)", flush=True)
    return ok


def time_cases(modules, quick: bool) -> list[dict]:
    """Time every case; the two sides take turns, one run (in a fresh process) each per round."""
    rows = []
    for module in modules:
        for case in getattr(module, "cases", lambda quick: [])(quick):
            results = harness.time_sides(module.__file__, case, SIDES, 1 if quick else ROUNDS)
            ours, base = (results[side] for side in SIDES)
            ratio = base["seconds"] / ours["seconds"]
            rows.append(dict(case=case, ours=ours, base=base, ratio=ratio, target=module.TARGETS[case["workload"]]))
            print(f"timed {case['workload']} {case['size']}: {ratio:.2f}×", file=sys.stderr, flush=True)
    return rows


def format_row(row: dict) -> list[str]:
    case, ours, base, target = row["case"], row["ours"], row["base"], row["target"]
    return [
        case["workload"],
        case["size"],
        str(case["steps"]),
        f"{case['work'] / ours['seconds']:.3g} {case['unit']}",
        f"{case['work'] / base['seconds']:.3g}",
        case.get("baseline", "NumPy"),
        f"{row['ratio']:.2g}×" if row["ratio"] < 10 else f"{row['ratio']:.0f}×",
        f"{target:g}× {'met' if row['ratio'] >= target else 'missed'}",
        harness.fmt(ours["compile_s"], 2),
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


def write_results(rows: list[dict], reports: list[str], modules, load, minutes: float, path: Path) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cores = os.cpu_count()
    sizes = "\n".join(
        f"- `{m.__name__}`: " + " ".join(inspect.cleandoc(m.cases.__doc__).split())
        for m in modules
        if hasattr(m, "cases")
    )
    sections = "\n\n".join(reports)
    text = f"""# Benchmark results

Written by `python benchmarks/run.py` on {now} ({minutes:.1f} minutes in all).

Machine: {cpu_model()}, {cores} cores, Linux {platform.release()}; Python {platform.python_version()},
jax {version("jax")}, jaxlib {version("jaxlib")}, diffrax {version("diffrax")}, numpy {version("numpy")},
scipy {version("scipy")}. CPU only: **GPU numbers are missing** (no GPU was available for this run).
One-minute load average {load[0]:.1f} before the timings and {load[1]:.1f} after; the benchmark
itself accounts for about 1, more means that other jobs shared the cores and the numbers are noisy.

## pgrpo-sim against baselines

{markdown_table(rows)}

- Throughput is work per second of wall time, in the unit shown: config-steps (expected mode, one
  configuration advanced one step), run-steps (sampled mode, one configuration × seed advanced one
  step) or path-steps (one SDE path advanced one Euler step). Speed-up is baseline time / pgrpo-sim
  time; "Target" is what the issue asks for.
- Each workload checks its numbers before timing (`run.py --check`): the baselines agree with
  pgrpo-sim, the SDE ensembles with the closed-form mean and variance, gradients with finite
  differences. Timed runs are in float32. pgrpo-sim bandit runs shard the configurations over
  {cores} XLA CPU devices (one per core) and `lax.map` over vmapped chunks on each; `solve_ensemble`
  runs on one device. The NumPy baselines are plain single-process scripts, vectorised over
  configurations (or paths) with a Python loop over steps.
- Median over {ROUNDS} rounds in which the two sides take turns, each run in a fresh process; compile
  time (median, pgrpo-sim side) is reported separately and excluded from the timed seconds
  (compilation inside a first call is measured with `jax.monitoring` and subtracted). Peak RSS is
  the largest over the rounds and includes the interpreter and, for pgrpo-sim, the JAX runtime.

Sizes:
{sizes}

{sections}
"""
    path.write_text(text)


def append_results(rows: list[dict], reports: list[str], argv: str, load, minutes: float, path: Path) -> None:
    """Append a run of some workloads (`--only … --record`) to RESULTS.md: a dated section naming the command,
    its comparison rows (if any) and its reports, one heading level down."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [markdown_table(rows)] if rows else []
    body += [report.replace("\n## ", "\n### ").replace("## ", "### ", 1) for report in reports]
    text = (
        f"\n\n## Run of {now}: `python benchmarks/run.py {argv}`\n\n"
        f"{minutes:.1f} minutes; {cpu_model()}, {os.cpu_count()} cores; jax {version('jax')}; one-minute load "
        f"average {load[0]:.1f} before and {load[1]:.1f} after (about 1 is the benchmark itself).\n\n"
        + "\n\n".join(body)
        + "\n"
    )
    with path.open("a") as fh:
        fh.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; print only, do not write RESULTS.md")
    parser.add_argument("--check", action="store_true", help="only check that the baselines agree with pgrpo-sim")
    parser.add_argument("--only", default=None, help="comma-separated workloads to run (print only)")
    parser.add_argument(
        "--record", action="store_true", help="with --only: append the reports to RESULTS.md as a dated section"
    )
    args = parser.parse_args()
    names = WORKLOADS if args.only is None else tuple(args.only.split(","))
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    start = time.perf_counter()
    modules = [importlib.import_module(name) for name in names]
    if not run_checks(modules):
        print("baselines disagree with pgrpo-sim", file=sys.stderr)
        return 1
    if args.check:
        return 0
    load_before = os.getloadavg()[0]
    rows = time_cases(modules, args.quick)
    print(markdown_table(rows), flush=True)
    reports, failed = [], False
    for module in modules:
        if hasattr(module, "report"):
            out_dir = HERE if not args.quick and args.only is None else None
            try:
                reports.append(module.report(args.quick, 1 if args.quick else ROUNDS, out_dir))
            except Exception as exc:  # noqa: BLE001  (one broken measurement must not lose the others)
                failed = True
                detail = "\n".join(f"    {line}" for line in str(exc).strip().splitlines()[-6:])
                reports.append(f"## `{module.__name__}`: FAILED\n\n{type(exc).__name__}:\n\n{detail}")
            print("\n" + reports[-1], flush=True)
    minutes = (time.perf_counter() - start) / 60
    print(f"\n{minutes:.1f} minutes; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after", flush=True)
    if not args.quick and args.only is None:
        write_results(rows, reports, modules, (load_before, os.getloadavg()[0]), minutes, HERE / "RESULTS.md")
    elif args.record and not args.quick:
        load = (load_before, os.getloadavg()[0])
        append_results(rows, reports, " ".join(sys.argv[1:]), load, minutes, HERE / "RESULTS.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
