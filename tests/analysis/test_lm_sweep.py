"""Sweeps of the language-model level: settings parsed by name, grid order, summaries against the read-outs they
come from, verdicts, resumption and the command line (tiny task and model, a few steps: compilation dominates)."""

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from pgrpo_sim import lm
from pgrpo_sim.analysis import lm_sweep, summaries
from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.runtime.sweep_store import PointFolder

TINY = dict(
    prompts_per_step=4, num_generations=4, modulus=5, operands=2, max_completion_length=8, width=16, layers=1,
    heads=2, eval_size=16, eval_every=2, start_accuracy=0.3,
)  # fmt: skip
TINY_FLAGS = [f"--set={k}={v}" for k, v in TINY.items()]


def test_settings_and_grids_are_parsed_by_kind():
    assert lm_sweep.parse_settings(["learning_rate=3e-3", "epsilon=none", "loss_type=dr_grpo", "layers=2"]) == dict(
        learning_rate=3e-3, epsilon=None, loss_type="dr_grpo", layers=2
    )
    grid = lm_sweep.parse_grid(["learning_rate=log:1e-4:1e-2:3", "num_iterations=1,2"])
    np.testing.assert_allclose(grid["learning_rate"], [1e-4, 1e-3, 1e-2], rtol=1e-12)
    assert grid["num_iterations"] == [1, 2]
    for bad, match in [
        (["learning_rat=1"], "unknown language-model setting 'learning_rat'"),
        (["layers=1.5"], "layers must be an integer"),
        (["beta=none"], "beta must be a number, got 'none'"),
        (["epsilon=wide"], "epsilon must be a number or none"),
        (["beta=0.1", "beta=0.2"], "given twice"),
        (["beta"], "KEY=VALUE"),
    ]:
        with pytest.raises(PgrpoSimError, match=match):
            lm_sweep.parse_settings(bad)
    with pytest.raises(PgrpoSimError, match="needs a real setting"):
        lm_sweep.parse_grid(["layers=log:1:4:3"])
    with pytest.raises(PgrpoSimError, match="unknown language-model setting 'foo'"):  # was a KeyError
        lm_sweep.parse_grid(["foo=log:1:2:3"])
    with pytest.raises(PgrpoSimError, match=re.escape("needs an integer NUM, got '2.5'")):  # was named eval_every
        lm_sweep.parse_grid(["learning_rate=log:1e-4:1e-3:2.5"])
    with pytest.raises(PgrpoSimError, match="both set and a grid axis"):
        lm_sweep.grid_points(dict(beta=0.1), dict(beta=[0.0]))
    with pytest.raises(PgrpoSimError, match="epsilon must be >= 0"):
        lm_sweep.grid_points({}, dict(epsilon=[0.2, -1.0]))
    points = lm_sweep.grid_points({}, dict(learning_rate=[1e-3, 2e-3], epsilon=[0.2, None]))
    assert [tuple(p.values()) for p in points] == [(1e-3, 0.2), (1e-3, None), (2e-3, 0.2), (2e-3, None)]


def test_running_mean_is_trailing():
    curve = np.array([[1.0, 3.0, 5.0, 7.0, 9.0]])
    np.testing.assert_allclose(lm_sweep.running_mean(curve, 2), [[1.0, 2.0, 4.0, 6.0, 8.0]])
    np.testing.assert_allclose(lm_sweep.running_mean(curve, 1), curve)


CONFIG = lm.config(**TINY)  # modulus 5: a guessed well-formed answer is right 1 time in 5
BATCH = TINY["prompts_per_step"] * TINY["num_generations"]


def _run(reward, diverged=False, entropy=0.5, length=6.0, format_ok=0.0):
    reward = np.atleast_2d(reward)
    seeds, steps = reward.shape
    readouts = {name: np.full((seeds, steps), 0.0) for name in lm.READOUTS}
    readouts["reward"] = reward
    readouts["format_ok"][:] = format_ok
    readouts["entropy"][:] = entropy
    readouts["completions/mean_length"][:] = length
    readouts["eval_accuracy"][:] = np.nan
    readouts["eval_accuracy"][:, ::10] = np.linspace(0.2, 0.4, len(range(0, steps, 10)))
    return lm.Run(readouts, None, np.full(seeds, diverged), np.full(seeds, 3 if diverged else -1))


def test_summaries_and_verdicts_of_known_curves():
    t = np.arange(100)
    learns = lm_sweep.summarize_runs(_run(0.2 + 0.6 * t / 99), CONFIG)[0]
    assert learns["verdict"] == "learns" and learns["final_reward"] == pytest.approx(np.mean(0.2 + 0.6 * t[90:] / 99))
    assert learns["final_eval_accuracy"] == pytest.approx(0.4) and learns["final_mean_length"] == 6.0
    # rises to 0.6 by step 30, then falls to 0.02: the running mean's peak (window 10) and a collapse
    rise_fall = np.where(t < 30, 0.2 + 0.4 * t / 30, np.maximum(0.6 - 0.04 * (t - 30), 0.02))
    collapsed = lm_sweep.summarize_runs(_run(rise_fall), CONFIG)[0]
    assert collapsed["verdict"] == "collapses"
    assert collapsed["peak_reward"] == pytest.approx(lm_sweep.running_mean(rise_fall[None], 10).max())
    diverged = lm_sweep.summarize_runs(_run(np.full(100, 0.3), diverged=True), CONFIG)[0]
    assert diverged["verdict"] == "diverges" and diverged["diverged_step"] == 3 and math.isnan(diverged["final_reward"])


def test_answers_at_chance_are_a_collapse_and_noise_is_not():
    """Chance-corrected reward k = max(r − f/m, 0)/(1 − 1/m), at the level's default batch (16 prompts × G 8) and
    modulus (10), 8 seeds sharing their start: a run that learns the format (f 0.2 → 1) while its answers fall from
    right half the time to a guess (r 0.1 → 1/m = 0.1, flat) has k 0.089 → 0 — the level's form of an LLM's reward
    → 0 — and collapses; the same rise with answers still right half the time (k → 0.44) rises and holds. Flat runs at
    k = 0.056 with a batch's binomial noise end below half their noisy peak by chance (over a tenth of 200 here);
    within COLLAPSE_Z standard errors of the difference (the start pooled over the seeds that share it, the end
    over the last quarter) at most 5 % are called collapses (the peak is picked among ~10 windows, so the rate
    exceeds the one-sided 0.13 % of 3 s.e.; measured 1.5 %)."""
    config = lm.config(prompts_per_step=16, num_generations=8, modulus=10)
    np.testing.assert_allclose(lm_sweep.knowledge([0.1, 0.1, 0.5], [1.0, 0.2, 1.0], 10), [0.0, 0.08 / 0.9, 4 / 9])
    t, batch = np.arange(41), 128
    fmt = np.tile(np.minimum(0.2 + t / 10, 1.0), (8, 1))
    chance = lm_sweep.summarize_runs(_run(np.maximum(0.1, fmt / 10), format_ok=fmt), config)
    assert [row["verdict"] for row in chance] == ["collapses"] * 8
    knows = lm_sweep.summarize_runs(_run(0.5 * fmt, format_ok=fmt), config)
    assert [row["verdict"] for row in knows] == ["plateaus"] * 8  # it rises for 8 steps, then holds
    noisy = np.random.default_rng(0).binomial(batch, 0.15, size=(200, 41)) / batch  # f = 1: k = 0.056
    fell = [
        row["verdict"] for row in lm_sweep.summarize_runs(_run(noisy, format_ok=1.0), config, starts=np.arange(200))
    ]
    known = lm_sweep.knowledge(lm_sweep.running_mean(noisy, 4), 1.0, 10)
    naive = np.mean([summaries.collapsed(k) for k in known])  # no noise guard
    assert naive > 0.1 and fell.count("collapses") <= 0.05 * 200, (naive, fell.count("collapses"))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A 2-point sweep of 2 seeds, run straight through."""
    grid = dict(learning_rate=[1e-3, 3e-3])
    rows, curves = lm_sweep.sweep_rows(TINY, grid, seeds=2, steps=4, seed=5)
    return grid, rows, curves


def test_a_sweep_row_is_the_run_of_its_setting(sweep):
    _grid, rows, curves = sweep
    assert [(r["learning_rate"], r["seed"]) for r in rows] == [(1e-3, 0), (1e-3, 1), (3e-3, 0), (3e-3, 1)]
    alone = lm.simulate(lm.config(**TINY, learning_rate=3e-3), 4, seeds=2, key=5)
    np.testing.assert_array_equal(curves["reward"][1], np.asarray(alone.readouts["reward"]))
    strip = lambda row: {k: v for k, v in row.items() if k not in ("learning_rate", "seed")}
    assert lm_sweep.summarize_runs(alone, lm.config(**TINY, learning_rate=3e-3)) == [strip(r) for r in rows[2:]]


def test_an_interrupted_sweep_resumes_with_the_same_results(sweep, tmp_path):
    grid, rows, curves = sweep
    chunks = tmp_path / "chunks"

    def stop_at_second(stage):
        if stage.startswith("grid point 2/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lm_sweep.sweep_rows(TINY, grid, seeds=2, steps=4, seed=5, store=PointFolder(chunks), progress=stop_at_second)
    assert len(list(chunks.glob("point-*.npz"))) == 1
    ran = []
    again, curves_again = lm_sweep.sweep_rows(
        TINY, grid, seeds=2, steps=4, seed=5, store=PointFolder(chunks), progress=ran.append
    )
    assert len(ran) == 1 and ran[0].startswith("grid point 2/")  # the first point was found, not run again
    assert again == rows
    for name in lm.READOUTS:
        np.testing.assert_array_equal(curves_again[name], curves[name])


@pytest.mark.slow  # two command-line processes, each training its start's compilation (~30 s)
def test_cli_simulate_and_sweep(tmp_path):
    cli = [sys.executable, "-m", "pgrpo_sim.cli"]
    out = tmp_path / "lm.csv"
    done = subprocess.run([*cli, "simulate", "--model", "lm", *TINY_FLAGS, "--steps", "4", "--seeds", "2",
                           "--quiet", "--out", str(out)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    header = out.read_text().splitlines()[0].split(",")
    assert header[:2] == ["step", "reward"] and "completions/mean_length" in header and "reward_seed_std" in header
    sweep_dir = tmp_path / "sweep"
    done = subprocess.run([*cli, "sweep", "--model", "lm", *TINY_FLAGS, "--grid", "learning_rate=1e-3,3e-3",
                           "--steps", "4", "--seeds", "2", "--quiet", "--out", str(sweep_dir)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = (sweep_dir / "summary.csv").read_text().splitlines()
    assert lines[0].split(",")[:3] == ["learning_rate", "seed", "final_reward"] and len(lines) == 5
    assert not (sweep_dir / "chunks").exists() and (sweep_dir / "curves.csv").exists()


@pytest.mark.slow  # four command-line processes, each compiling the level's run (~30 s)
def test_a_sweep_over_two_processes_equals_the_one_process_sweep(two_processes, tmp_path):
    """`sweep --model lm --coordinator …`: two processes on this host, each with a device per core (2 in CI), share a
    3-point grid (a round takes a point per device of each process, blanks where the grid runs out) and process 0
    writes files equal, byte for byte, to a one-process sweep's, whose points are dealt over its devices, and to a
    sweep on one device (`JAX_NUM_CPU_DEVICES=1`: the points one after another); process 1 writes and says
    nothing."""
    argv = ["sweep", "--model", "lm", *TINY_FLAGS, "--grid", "learning_rate=1e-3,3e-3,1e-2", "--steps", "3",
            "--seeds", "2", "--quiet"]  # fmt: skip
    for out, env in (("one", os.environ), ("one device", dict(os.environ, JAX_NUM_CPU_DEVICES="1"))):
        alone = subprocess.run([sys.executable, "-m", "pgrpo_sim.cli", *argv, "--out", str(tmp_path / out)],
                               capture_output=True, text=True, env=env)  # fmt: skip
        assert alone.returncode == 0, alone.stderr
    (zero, said0, err0), (one, said1, err1) = two_processes([*argv, "--out", str(tmp_path / "two")])
    assert (zero, one) == (0, 0), (err0, err1)
    for name in ("summary.csv", "curves.csv"):
        assert (tmp_path / "two" / name).read_text() == (tmp_path / "one" / name).read_text(), name
        assert (tmp_path / "one device" / name).read_text() == (tmp_path / "one" / name).read_text(), name
    assert "grid point(s)" in said0[-1] and not said1


RESUME_SCRIPT = """
import argparse, json, jax, numpy as np
parser = argparse.ArgumentParser()
parser.add_argument("mode"); parser.add_argument("out"); parser.add_argument("chunks"); parser.add_argument("tiny")
parser.add_argument("--coordinator"); parser.add_argument("--num-processes", type=int)
parser.add_argument("--process-id", type=int)
args = parser.parse_args()
if args.coordinator:
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
from pgrpo_sim.analysis import lm_sweep
from pgrpo_sim.runtime.sweep_store import PointFolder
ran = []
def progress(stage):
    ran.append(stage)
    if args.mode == "interrupted" and stage.startswith("grid point 2/"):
        raise KeyboardInterrupt
chunks = None if args.chunks == "none" else args.chunks
try:
    rows, curves = lm_sweep.sweep_rows(json.loads(args.tiny), dict(learning_rate=[1e-3, 3e-3, 1e-2]), seeds=2, steps=3,
                                  seed=5, store=chunks and PointFolder(chunks), progress=progress)
except KeyboardInterrupt:
    raise SystemExit(0)
print(json.dumps(ran))
if jax.process_index() == 0:
    np.savez(args.out, rows=json.dumps(rows), **{k.replace("/", "_"): v for k, v in curves.items()})
"""


@pytest.mark.slow  # four processes, each compiling the level's run
def test_a_two_process_sweep_resumes_from_process_0s_points(two_processes, tmp_path):
    """An interrupted one-process sweep leaves its first point in `chunks`; two processes resume it: process 0 reads
    the point and shares it, neither runs it again, and the result equals a straight one-process sweep's."""
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    tiny, chunks = json.dumps(TINY), str(tmp_path / "chunks")
    for mode, out, kept in (("straight", "straight.npz", "none"), ("interrupted", "-", chunks)):
        done = subprocess.run([sys.executable, str(script), mode, str(tmp_path / out), kept, tiny],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "chunks").glob("point-*.npz"))) == 1
    said = two_processes(["resumed", str(tmp_path / "resumed.npz"), chunks, tiny], program=(str(script),))
    assert [code for code, _, _ in said] == [0, 0], [err for _, _, err in said]
    ran = [json.loads(lines[-1]) for _, lines, _ in said]
    assert [[stage.split(":")[0] for stage in stages] for stages in ran] == [["grid point 2/3"], ["grid point 3/3"]]
    straight, resumed = np.load(tmp_path / "straight.npz"), np.load(tmp_path / "resumed.npz")
    assert str(resumed["rows"]) == str(straight["rows"])
    for name in straight.files:
        np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["simulate", "--model", "lm", "--set", "learning_rat=1"], "unknown language-model setting 'learning_rat'"),
        (["simulate", "--model", "lm", "--eta", "0.1"], "--eta is a bandit flag"),
        (["simulate", "--set", "learning_rate=1"], "--set sets language-model settings: it needs --model lm"),
        (["simulate", "--model", "lm", "--set", "epsilon=-1"], "epsilon must be >= 0"),
        (["simulate", "--model", "lm", "--steps", "0"], "steps must be"),
        (["sweep", "--model", "lm"], "give at least one --grid"),
        (["sweep", "--model", "lm", "--grid", "beta=0,x"], "beta must be a number"),
        (["sweep", "--model", "lm", "--grid", "beta=0", "--mode", "sampled"], "--mode is a bandit flag"),
    ],
)
def test_cli_bad_input_is_one_line_and_creates_nothing(argv, match, tmp_path, capsys):
    from pgrpo_sim.cli import main

    out = tmp_path / ("x.csv" if argv[0] == "simulate" else "dir")
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
