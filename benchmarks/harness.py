"""Benchmark plumbing shared by the workload scripts: XLA on every core, timing, peak RSS, subprocesses.

Each timed run of a side of a case (pgrpo-sim or a baseline) happens in a fresh process, so that its
peak RSS is its own: `run_side` starts `python <workload script> <case JSON> <side>`, and the script's
`side_main` prints one JSON line back. The driver alternates the sides over rounds, so that load from
other jobs on the machine falls on both alike.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


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


def side_main(prepare_side) -> None:
    """Entry point of a workload script: `script.py <case JSON> <side>`; prints the side's result as JSON.

    `prepare_side(case, side)` returns (run, compile seconds or None); `run()` must block until its
    result is ready, and is timed once.
    """
    case, side = json.loads(sys.argv[1]), sys.argv[2]
    run, compile_s = prepare_side(case, side)
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    print(json.dumps(dict(seconds=seconds, compile_s=compile_s, rss_mib=peak_rss_mib())))


def run_side(script: str, case: dict, side: str) -> dict:
    """Run one side of `case` in a fresh process and return its JSON result: seconds of the timed run,
    compile seconds (None if nothing is compiled), peak RSS in MiB."""
    proc = subprocess.run(
        [sys.executable, script, json.dumps(case), side], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {side} failed on {case}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
