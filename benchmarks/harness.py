"""Benchmark plumbing shared by the workload scripts: XLA on every core, timing, peak RSS, subprocesses.

Each timed run of a side of a case (pgrpo-sim or a baseline) happens in a fresh process, so that its
peak RSS is its own: `run_side` starts `python <workload script> <case JSON> <side>`, and the script's
`side_main` prints one JSON line back. `time_sides` alternates the sides over rounds, so that load from
other jobs on the machine falls on both alike.

Measurements that are not one timed run (seconds to first result, compile counts, scaling series)
use `run_measure`: `python <workload script> --measure <name> <JSON>` calls the script's function
`name` in a fresh process (`side_main`'s `measures`) and returns its JSON result with the wall time
of the whole process, seen from outside, and its peak RSS.

`CompileRecorder` collects JAX's compile events (tracing, lowering, XLA compilation) with their
function names, through `jax.monitoring`: compile time inside a timed run is moved out of the run's
seconds into its compile seconds, and compilations can be counted.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path


def cpu_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def use_all_cores() -> None:
    """Expose one XLA CPU device per core (set before JAX is imported); pgrpo-sim runs shard over them."""
    flag = f"--xla_force_host_platform_device_count={os.cpu_count()}"
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB.

    Linux's getrusage maxrss survives exec, so a child would report its parent's peak if that is
    higher; VmHWM in /proc/self/status is the child's own. getrusage where /proc is missing.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class CompileRecorder:
    """Context manager recording JAX's compile events while it is open (imports JAX).

    Events are the time spans `jax.monitoring` reports for tracing a jitted function to a jaxpr,
    lowering it to MLIR and compiling it with XLA, each with the function's name. Eagerly executed
    operations count too: each new primitive and shape is compiled once (names like "jit(add)").
    """

    TRACE = "/jax/core/compile/jaxpr_trace_duration"
    LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
    BACKEND = "/jax/core/compile/backend_compile_duration"

    def __init__(self):
        self.spans: list[tuple[str, float, float, str]] = []

    def _listen(self, event, start, end, **kwargs):
        if event in (self.TRACE, self.LOWER, self.BACKEND):
            self.spans.append((event, start, end, str(kwargs.get("fun_name", "?"))))

    def __enter__(self):
        import jax

        jax.monitoring.register_event_time_span_listener(self._listen)
        return self

    def __exit__(self, *exc):
        import jax

        jax.monitoring.unregister_event_time_span_listener(self._listen)

    def seconds(self) -> float:
        """Wall time covered by compile events (the union of their spans; nested spans count once)."""
        total, end = 0.0, -float("inf")
        for _, lo, hi, _ in sorted(self.spans, key=lambda s: s[1]):
            if hi > end:
                total += hi - max(lo, end)
                end = hi
        return total

    def slowest(self, n: int = 3) -> list[tuple[str, int, float]]:
        """(function name, XLA compilations, their seconds) of the `n` names with the most XLA compile time."""
        seconds, counts = Counter(), Counter()
        for event, lo, hi, name in self.spans:
            if event == self.BACKEND:
                seconds[name] += hi - lo
                counts[name] += 1
        return [(name, counts[name], sec) for name, sec in seconds.most_common(n)]

    def compilations(self, pattern: str | None = None) -> Counter:
        """XLA compilations by function name (optionally only names matching the regex `pattern`)."""
        names = (name for event, _, _, name in self.spans if event == self.BACKEND)
        return Counter(n for n in names if pattern is None or re.search(pattern, n))


def side_main(prepare_side, measures: dict | None = None) -> None:
    """Entry point of a workload script; prints one JSON line.

    `script.py <case JSON> <side>`: `prepare_side(case, side)` returns (run, compile seconds or None);
    `run()` must block until its result is ready, and is timed once. If JAX is loaded by then, compile
    events during `run()` (a first call that compiles) are recorded and their time moved from the
    run's seconds to its compile seconds. Prints seconds, compile_s, rss_mib.

    `script.py --measure <name> <JSON>`: prints `measures[name](**JSON)` (a JSON-able dict) with
    rss_mib added.
    """
    if sys.argv[1] == "--measure":
        result = measures[sys.argv[2]](**json.loads(sys.argv[3]))
        print(json.dumps(dict(result, rss_mib=peak_rss_mib())))
        return
    case, side = json.loads(sys.argv[1]), sys.argv[2]
    run, compile_s = prepare_side(case, side)
    recorder = CompileRecorder() if "jax" in sys.modules else None
    start = time.perf_counter()
    if recorder:
        with recorder:
            run()
    else:
        run()
    seconds = time.perf_counter() - start
    if recorder and recorder.spans:
        seconds -= recorder.seconds()
        compile_s = (compile_s or 0.0) + recorder.seconds()
    print(json.dumps(dict(seconds=seconds, compile_s=compile_s, rss_mib=peak_rss_mib())))


def _run_json(argv: list[str], what: str, env: dict | None = None) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), wall_s=wall)


def run_side(script: str, case: dict, side: str) -> dict:
    """Run one side of `case` in a fresh process and return its JSON result: seconds of the timed run,
    compile seconds (None if nothing is compiled), peak RSS in MiB (and wall_s, the whole process)."""
    return _run_json([sys.executable, script, json.dumps(case), side], f"{script} {side} on {case}")


def run_measure(script: str, name: str, env: dict | None = None, **kwargs) -> dict:
    """`measures[name](**kwargs)` of `script` in a fresh process: its JSON result, with rss_mib (peak
    RSS) and wall_s (the whole process from outside: interpreter start, imports, compilation, run)."""
    argv = [sys.executable, script, "--measure", name, json.dumps(kwargs)]
    return _run_json(argv, f"{Path(script).name} --measure {name} {kwargs}", env)


def summarise(runs: list[dict]) -> dict:
    """Median seconds and compile seconds, and the largest peak RSS, of one side's runs."""
    compile_s = [run["compile_s"] for run in runs if run["compile_s"] is not None]
    return dict(
        seconds=statistics.median(run["seconds"] for run in runs),
        compile_s=statistics.median(compile_s) if compile_s else None,
        rss_mib=max(run["rss_mib"] for run in runs),
    )


def time_sides(script: str, case: dict, sides, rounds: int) -> dict[str, dict]:
    """`summarise` of each side of `case` over `rounds` rounds, in which the sides take turns (one run
    each per round, each in a fresh process)."""
    runs = {side: [] for side in sides}
    for _ in range(rounds):
        for side in sides:
            runs[side].append(run_side(script, case, side))
    return {side: summarise(r) for side, r in runs.items()}


def out_of_the_box_env() -> dict:
    """This process's environment without `use_all_cores`' flag: JAX on one CPU device, as a user gets it."""
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", env.get("XLA_FLAGS", "")).strip()
    if flags:
        env["XLA_FLAGS"] = flags
    else:
        env.pop("XLA_FLAGS", None)
    return env


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a Markdown table: `digits` significant digits, "—" for None."""
    return "—" if x is None else f"{x:.{digits}g}"
