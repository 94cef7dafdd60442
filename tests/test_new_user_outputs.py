"""Issue #50, "What a new user hit", the outputs' items: a language-model sweep is checked for size and time before
it starts (item 2), Ctrl-C stops a sweep within two seconds and names a folder that exists, SIGTERM leaves no
staging folder (item 2), a rerun with other settings does not replace a folder's results without --overwrite
(item 3), an empty --out is refused by name (item 5), and a sweep's files print short grid values, a per-point share
of the seeds' verdicts and an explanation of every column (item 7). Where a test needs no real language-model run,
the sweep's runs are stood in for (`_stand_in`)."""

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from pgrpo_sim import lm
from pgrpo_sim.analysis import lm_sweep, sweep as sweep_module
from pgrpo_sim.analysis.sweep_grid import parse_axis
from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.cli import main
from pgrpo_sim.cli.common import claim
from pgrpo_sim.runtime.outputs import MARK, STAGE_PREFIX, staged_outputs

TINY = dict(
    prompts_per_step=4, num_generations=4, modulus=5, operands=2, max_completion_length=8, width=16, layers=1,
    heads=2, eval_size=16, eval_every=2, start_accuracy=0.3,
)  # fmt: skip
TINY_FLAGS = [f"--set={k}={v}" for k, v in TINY.items()]
LM = ["sweep", "--model", "lm", *TINY_FLAGS, "--steps", "3", "--seeds", "2", "--quiet"]
VERDICTS = {1e-3: ["collapses", "learns"], 2e-3: ["diverges", "diverges"]}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _stand_in(base, grid, *, seeds, steps, seed=0, store=None, progress=None):
    """`lm_sweep.sweep_rows` without runs: rows with `VERDICTS` by learning rate, curves of zeros."""
    rows = []
    for point in lm_sweep.grid_points(base, grid):
        for s in range(seeds):
            verdict = VERDICTS.get(point.get("learning_rate"), ["learns"] * seeds)[s]
            summary = dict.fromkeys(lm_sweep.SUMMARY_FIELDS, 0.5) | {"diverged_step": -1, "verdict": verdict}
            rows.append({**point, "seed": s, **summary})
    points = len(rows) // seeds
    return rows, {name: np.zeros((points, seeds, steps), np.float32) for name in lm.READOUTS}


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(lm_sweep, "sweep_rows", _stand_in)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")  # the time estimate is of a CPU


def test_a_large_lm_sweep_needs_yes_and_is_told_its_size_and_time(tmp_path, stand_in, monkeypatch, capsys):
    """The default level, 10 learning rates × 64 seeds × 100 steps: about 3 h of runs (a few MB of files) on a
    CPU; refused without --yes, naming both, and nothing created. Files beyond the free disk space: refused even
    with --yes, as the bandit's sweep is."""
    import shutil

    out = tmp_path / "big"
    argv = ["sweep", "--model", "lm", "--grid", "learning_rate=log:1e-4:1e-2:10", "--seeds", "64", "--out", str(out)]
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert "pass --yes" in line and "curves.csv" in line and re.search(r"roughly [\d.]+ (h|days)", line), line
    assert not out.exists()
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1000))
    assert main([*argv, "--yes"]) == 2
    assert "GB free in" in _one_line(capsys.readouterr().err) and not out.exists()
    monkeypatch.undo()
    monkeypatch.setattr(lm_sweep, "sweep_rows", _stand_in)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert main([*argv, "--yes", "--quiet"]) == 0  # confirmed, it runs
    assert (out / "summary.csv").exists()


def test_lm_sweep_files_share_verdicts_per_point_and_explain_every_column(tmp_path, stand_in):
    out = tmp_path / "s"
    assert main([*LM, "--grid", "learning_rate=1e-3,2e-3", "--out", str(out)]) == 0
    with open(out / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    shares = [(r["learning_rate"], r["verdict"], r["collapse_share"], r["diverge_share"]) for r in rows]
    assert shares == [
        ("0.001", "collapses", "0.5", "0"),
        ("0.001", "learns", "0.5", "0"),
        ("0.002", "diverges", "0", "1"),
        ("0.002", "diverges", "0", "1"),
    ]
    readme = (out / "README.md").read_text()
    with open(out / "curves.csv") as handle:
        curve_columns = next(csv.reader(handle))
    for column in [*rows[0], *curve_columns]:
        assert f"`{column}`" in readme, column
    assert "k = max(r − f/m, 0)/(1 − 1/m)" in readme  # final_knowledge, explained


def test_a_rerun_with_other_settings_is_refused_unless_overwrite(tmp_path, stand_in, capsys):
    """Another grid into the same --out: refused in one line naming --overwrite, the results as they were; the same
    settings rerun as before; with --overwrite the new results replace the old."""
    out = tmp_path / "s"
    first = [*LM, "--grid", "learning_rate=1e-3,2e-3", "--out", str(out)]
    assert main(first) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = [*LM, "--grid", "learning_rate=1e-3,3e-3", "--out", str(out)]
    assert main(other) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--overwrite" in line and "other settings" in line and "--grid" in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main(first) == 0  # the same settings: as today
    assert main([*other, "--overwrite"]) == 0
    assert "0.003" in (out / "summary.csv").read_text()
    assert json.loads((out / MARK).read_text())["settings"]["grid"] == ["learning_rate=1e-3,3e-3"]


def test_every_command_that_claims_a_folder_records_its_settings(tmp_path, monkeypatch):
    """`claim`, which every command that writes a folder calls: a forecast rerun with another --fit-fraction is
    refused (naming it and --overwrite), the same one is not (nor one whose only difference is a newer option left
    at None, or the log named by another path), and --overwrite replaces it."""
    out = tmp_path / "f"
    monkeypatch.chdir(tmp_path)

    def run(fraction: float, overwrite: bool = False, log: str = "run.csv", **more) -> None:
        args = argparse.Namespace(out=str(out), overwrite=overwrite, log=log, fit_fraction=fraction, quiet=True, **more)
        with staged_outputs() as staged:
            (claim(args, staged, "forecast", ["forecast.json"]) / "forecast.json").write_text(str(fraction))

    run(0.5)
    run(0.5)
    run(0.5, new_option=None)  # a mark written before an option existed
    run(0.5, log=str(tmp_path / "run.csv"))  # the same file named from elsewhere
    with pytest.raises(PgrpoSimError, match=r"--fit-fraction 0\.5 there, 0\.7 now.*--overwrite"):
        run(0.7)
    assert (out / "forecast.json").read_text() == "0.5"
    run(0.7, overwrite=True)
    assert (out / "forecast.json").read_text() == "0.7"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["sweep", "--grid", "learning_rate=0.1,0.2"], "--out must name a folder, got an empty string"),
        (["simulate", "--steps", "3"], "--out must name a file, got an empty string"),
        (["validate", "--quick"], "--out must name a folder, got an empty string"),  # refused before any section
    ],
)
def test_an_empty_out_is_refused_by_name(argv, words, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")  # the working folder is not empty ("--out . is not empty")
    assert main([*argv, "--out", ""]) == 2
    assert words in _one_line(capsys.readouterr().err)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_grid_values_are_short_and_read_back_exactly():
    """Spaced grid values to 6 significant digits (more only where 6 would merge two): what runs is what prints."""
    lm_values = lm_sweep.parse_grid(["learning_rate=log:1e-4:1e-2:5"])["learning_rate"]
    assert lm_values == [1e-4, 0.000316228, 0.001, 0.00316228, 0.01]
    assert parse_axis("learning_rate=log:1e-4:1e-2:5").values == tuple(lm_values)
    assert parse_axis("momentum=0:0.99:34").values[3] == 0.09  # not 0.09000000000000001
    close = parse_axis("learning_rate=log:1:1.000001:3").values  # 6 digits would merge the first two
    assert len(set(close)) == 3 and all(len(repr(v)) <= 10 for v in close)
    for value in (*lm_values, *close):
        assert float(repr(value)) == value
    long = parse_axis("learning_rate=log:1e-3:1:200001").values  # beyond SHORT_MAX_VALUES: as computed, at once
    assert long == tuple(np.geomspace(1e-3, 1.0, 200001).tolist())


def _interrupt_after(seconds: float) -> None:
    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT)).start()


def test_ctrl_c_stops_a_bandit_sweep_within_two_seconds(tmp_path, monkeypatch, capsys):
    """Ctrl-C while a chunk of several seconds runs: exit 130 at once (it waited for the chunk), and the line says
    that no chunk had finished rather than naming a folder."""
    real = sweep_module.run_chunk
    sent = {}

    def run_then_interrupt(*args, **kwargs):
        out = real(*args, **kwargs)  # compiled and dispatched: the chunk runs on
        sent["at"] = time.monotonic() + 0.3
        _interrupt_after(0.3)
        return out

    monkeypatch.setattr(sweep_module, "run_chunk", run_then_interrupt)
    argv = [
        "sweep",
        "--grid",
        "learning_rate=0.1",
        "--beta",
        "0.5",
        "--mode",
        "sampled",
        "--seeds",
        "64",
        "--steps",
        "400000",
    ]
    assert main([*argv, "--quiet", "--out", str(tmp_path / "s")]) == 130
    took = time.monotonic() - sent["at"]
    line = _one_line(capsys.readouterr().err)
    assert took < 2.0, took
    assert line.endswith("interrupted; no chunk had finished, so none is kept; rerun the same command to start again")


def test_sigterm_leaves_no_staging_folder(tmp_path):
    """`kill` (SIGTERM) during a sweep: the same clean-up as Ctrl-C, one line, and no `.pgrpo-sim-new-<pid>`."""
    out = tmp_path / "s"
    argv = ["sweep", "--grid", "learning_rate=0.1,0.2", "--beta", "0.5", "--mode", "sampled", "--seeds", "64"]
    argv += ["--steps", "2000000", "--chunk-size", "1", "--quiet", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "pgrpo_sim.cli", *argv], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(STAGE_PREFIX) for p in (out.iterdir() if out.exists() else ())):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and _one_line(err).startswith("pgrpo-sim: interrupted; "), (proc.returncode, err)
    assert not [p.name for p in out.iterdir() if p.name.startswith(STAGE_PREFIX)]


def test_interruptible_work_keeps_the_callers_jax_settings():
    """The worker thread runs with the settings of the caller's `with` blocks (JAX keeps them per thread)."""
    from pgrpo_sim.base.waiting import interruptible

    with jax.enable_x64(False):
        assert interruptible(lambda: jax.numpy.ones(1).dtype) == np.float32
    with jax.enable_x64(True):
        assert interruptible(lambda: jax.numpy.ones(1).dtype) == np.float64
    with pytest.raises(ZeroDivisionError):
        interruptible(lambda: 1 / 0)


@pytest.mark.slow  # a real language-model sweep: its compilation (~25 s on 2 busy cores) and a point of ~5 s
def test_ctrl_c_stops_an_lm_sweep_within_two_seconds_keeping_finished_points(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the second grid point runs (a compiled call of seconds): exit 130 within two seconds, one line
    naming the chunks folder, which exists and holds the first point."""
    real, calls, sent = lm_sweep.lm.simulate, [], {}

    def simulate(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            real(*args, **kwargs)  # compiled: the interrupt comes during the run itself
            sent["at"] = time.monotonic() + 0.5
            _interrupt_after(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(lm_sweep.lm, "simulate", simulate)
    out = tmp_path / "s"
    argv = ["sweep", "--model", "lm", *TINY_FLAGS, "--grid", "learning_rate=1e-3,2e-3", "--steps", "8000"]
    assert main([*argv, "--seeds", "1", "--quiet", "--out", str(out)]) == 130
    took = time.monotonic() - sent["at"]
    line = _one_line(capsys.readouterr().err)
    assert took < 2.0, took
    folder = re.search(r"are kept in (\S+) \(1\); rerun the same command to resume$", line)
    assert folder and Path(folder.group(1)).is_dir(), line
    assert len(list(Path(folder.group(1)).glob("point-*.npz"))) == 1


def test_fit_refuses_a_rerun_with_other_settings_before_its_work(tmp_path, monkeypatch, capsys):
    """`fit` checks its --out against the recorded settings up front: a rerun with another --samples-per-step is one
    line naming it, exit 2, and the fit is never started (the laws are not fitted)."""
    import pgrpo_sim.reports.log_report as log_report

    out = tmp_path / "fit"
    log = str(Path(__file__).parent / "data" / "trl_state.json")
    assert main(["fit", log, "--out", str(out), "--quiet"]) == 0
    assert "fit.png and diagnostics.png" in capsys.readouterr().out  # the summary line names every file written
    before = sorted(p.name for p in out.iterdir())
    monkeypatch.setattr(log_report, "analyse_log", lambda *a, **k: pytest.fail("the fit ran"))
    assert main(["fit", log, "--samples-per-step", "64", "--out", str(out), "--quiet"]) == 2
    assert "--samples-per-step" in capsys.readouterr().err and sorted(p.name for p in out.iterdir()) == before
