"""Workload 10: a what-if on the language-model level, as a user waits for it (issue 47; a `report`, no comparison-table
cases).

`pgrpo-sim what-if` on the shared CS336 clip (0.2, 0.2) run (`ANCHORS`, its run config from
`examples/run_configs/`) with `--model lm`, each side a fresh process with an empty level cache (`PGRPO_SIM_CACHE`:
SFT starts and level runs made anew, beyond the starts the package ships) and no compilation cache, the sides taking
turns over rounds:
- "one device": `JAX_NUM_CPU_DEVICES=1`, the level's jobs one after another (the baseline: how it ran before the jobs
  were dealt over devices);
- "every core": the command line's default, one XLA CPU device per core, the level's jobs (a start format's runs,
  one program each) dealt over them (`calibration.language_model.cached_runs_each`);
- "cached": "every core" again with the first side's caches (level runs and compiled programs): the same what-if
  asked twice.
Where the time goes is read from the command's progress lines, each timed as it arrives: before the level (imports,
reading, the bandit's checks), the calibration's coarse grid (the SFT starts made first), its refinement, and the
scenarios' runs with the writing after them. The issue's workload (`FULL`: 5 scenarios to the log's step 200) takes
most of an hour a side on 2 cores; `--quick` and the recorded runs on 2 cores use `QUICK` (2 scenarios, the fit
window to logged step 20, 40 steps simulated: 11-15 minutes a side with empty caches, two thirds of it the
calibration's coarse grid with its SFT starts). Skipped with a message where the shared anchors are not beside the
repository. Standalone: `python benchmarks/bench_whatif.py [--quick]` (one round).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANCHORS = Path(os.environ.get("PGRPO_SIM_ANCHORS", HERE.parent.parent / "shared" / "anchors"))
"""The shared anchors folder (environment variable `PGRPO_SIM_ANCHORS`, else `../shared/anchors`)."""
LOG = "sweeps/cs336_clip_ablation/GRPO-Clip_0p20_0p20_e2_tb256.metrics.jsonl"
RUN_CONFIG = HERE.parent / "examples" / "run_configs" / "cs336_clip_ablation" / "GRPO-Clip_0p20_0p20_e2_tb256.yaml"
SCENARIOS = ("epsilon=none", "epsilon_high=0.28", "learning_rate=2e-6", "num_iterations=1", "num_iterations=4")
FULL = dict(scenarios=SCENARIOS, args=())
QUICK = dict(scenarios=SCENARIOS[:2], args=("--fit-until", "20", "--steps", "40"))
SIDES = ("one device", "every core", "cached")
STAGES = (
    ("before the level", None),
    ("calibration, coarse grid", "running the level from start format"),
    ("calibration, refinement", "running the level from start format"),
    ("scenario runs and writing", "the calibrated run and"),
)
"""Each stage's name and the start of the progress line that begins it ("what-if [  12 s] STAGE…" on stderr), in
order; the last runs to the process's end (the command says nothing between its runs' end and its files)."""
LINE = re.compile(r"^\S+ \[\s*\d+ s\] (.*)$")


def available() -> bool:
    return (ANCHORS / LOG).is_file()


def measure(side: str, workload: dict, caches: Path, out: Path) -> dict:
    """One side's what-if (module docstring) in a fresh process; wall seconds and each stage's seconds."""
    env = dict(os.environ, PGRPO_SIM_CACHE=str(caches / "level"), JAX_COMPILATION_CACHE_DIR=str(caches / "jax"))
    env.pop("XLA_FLAGS", None)  # the command line's own device count, unless one device is asked for
    if side == "one device":
        env["JAX_NUM_CPU_DEVICES"] = "1"
    argv = [sys.executable, "-m", "pgrpo_sim.cli", "what-if", str(ANCHORS / LOG), "--run-config", str(RUN_CONFIG),
            "--model", "lm", *workload["args"], "--out", str(out), "--overwrite"]  # fmt: skip
    for scenario in workload["scenarios"]:
        argv += ["--scenario", scenario]
    if side != "cached":
        argv.append("--no-compile-cache")
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    lines = [(time.perf_counter() - start, line.strip()) for line in proc.stderr]
    if proc.wait() != 0:
        raise RuntimeError(f"what-if ({side}) failed:\n" + "\n".join(line for _, line in lines[-20:]))
    wall = time.perf_counter() - start
    return dict(wall_s=wall, stages=stage_seconds(lines, wall))


def stage_seconds(lines: list[tuple[float, str]], wall: float) -> dict[str, float]:
    """Seconds of each of `STAGES` from the progress lines' arrival times (seconds since the start; a stage whose
    line is absent lasts 0 s)."""
    stages = [(at, match.group(1)) for at, line in lines if (match := LINE.match(line))]
    starts, after = [0.0], 0
    for _, prefix in STAGES[1:]:
        found = next((i for i in range(after, len(stages)) if stages[i][1].startswith(prefix)), None)
        if found is not None:
            after = found + 1
        starts.append(stages[found][0] if found is not None else starts[-1])
    ends = [*starts[1:], wall]
    return {name: end - begin for (name, _), begin, end in zip(STAGES, starts, ends, strict=True)}


def check() -> list[tuple[str, bool]]:
    """The progress lines split a what-if into its stages (a made-up list of lines; nothing run)."""
    lines = [(1.0, "what-if [   0 s] answered by the language-model level (--model lm)…"), (1.5, "a warning"),
             (2.0, "what-if [   1 s] running the level from start formats 0.9, 0.3 at 6 learning rates × 3 seeds…"),
             (5.0, "what-if [   4 s] running the level from start format 0.3 at 6 learning rates × 3 seeds…"),
             (6.0, "what-if [   5 s] the calibrated run and 2 scenarios on the level: 36 runs…")]  # fmt: skip
    got = stage_seconds(lines, 10.0)
    want = {"before the level": 2.0, "calibration, coarse grid": 3.0, "calibration, refinement": 1.0,
            "scenario runs and writing": 4.0}  # fmt: skip
    return [("what-if: stage seconds from the progress lines", got == want)]


def report(quick: bool, rounds: int, out_dir) -> str:
    """Seconds of a what-if on one device, dealt over every core, and asked again (module docstring)."""
    title = "## A what-if on the language-model level: where the time goes"
    if not available():
        return f"{title}\n\nSkipped: the shared anchors are not at {ANCHORS} (set PGRPO_SIM_ANCHORS)."
    workload = QUICK if quick or os.cpu_count() in (None, 1, 2) else FULL
    runs = {side: [] for side in SIDES}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as every:
            runs["one device"].append(measure("one device", workload, Path(one), Path(one) / "out"))
            runs["every core"].append(measure("every core", workload, Path(every), Path(every) / "out"))
            runs["cached"].append(measure("cached", workload, Path(every), Path(every) / "out"))
    wall = {side: statistics.median(r["wall_s"] for r in rs) for side, rs in runs.items()}
    ratio = statistics.median(
        o["wall_s"] / e["wall_s"] for o, e in zip(runs["one device"], runs["every core"], strict=True)
    )
    names = [name for name, _ in STAGES]
    rows = [
        f"| {side} | {wall[side]:.0f} | "
        + " | ".join(f"{statistics.median(r['stages'][n] for r in runs[side]):.0f}" for n in names)
        + " |"
        for side in SIDES
    ]
    scenarios = ", ".join(f"`{s}`" for s in workload["scenarios"])
    args = " ".join(workload["args"]) or "the log's whole window"
    return "\n".join([
        title,
        "",
        f"`pgrpo-sim what-if` on the shared CS336 clip (0.2, 0.2) run (`--model lm`, {args}; scenarios {scenarios}), "
        f"each side a fresh process, empty level and compilation caches but for \"cached\"; median of {rounds} "
        f"round(s), sides taking turns. Seconds:",
        "",
        "| Side | whole command | " + " | ".join(names) + " |",
        "|---" * (len(names) + 2) + "|",
        *rows,
        "",
        f"- Dealing the level's jobs over every core: {ratio:.2f}× faster than one device (median of the rounds' "
        f"ratios); asked again from the caches: {wall['cached']:.0f} s (issue 47's targets: ≤ 3 min with empty caches "
        "for 5 scenarios on a 200-step log, ≤ 1 min cached).",
    ])  # fmt: skip


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(report(quick, 1, None))
