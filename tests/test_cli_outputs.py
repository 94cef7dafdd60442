"""What the commands leave behind: marked output directories that never clobber each other, a corrected rerun
after a failed validation, one-line interrupts (exit 130) that keep resumable work and remove partial results,
and what `fit` and `oscillator` report about their inputs."""

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pgrpo_sim.analysis import sweep as sweep_module
from pgrpo_sim.analysis.sweep import load_sweep
from pgrpo_sim.cli import main, sweep as sweep_command
from pgrpo_sim.reports.validate import sections as validate_sections
from pgrpo_sim.runtime import jax_setup
from pgrpo_sim.runtime.outputs import MARK, read_mark
from pgrpo_sim.runtime.sweep_store import ChunkStore

SWEEP = [
    "sweep",
    "--grid",
    "learning_rate=0.05,0.1,0.2",
    "--beta",
    "0.5",
    "--steps",
    "20",
    "--chunk-size",
    "1",
    "--quiet",
]


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_failed_validation_leaves_nothing_and_the_corrected_rerun_runs(tmp_path, capsys):
    out = tmp_path / "d"
    for bad in (
        ["--grid", "learning_rate=0,0.1"],
        ["--grid", "learning_rate=0.1", "--grid", "num_generations=1,2"],
        ["--momentum", "1.0"],
    ):
        assert main(["sweep", "--beta", "0.5", "--steps", "20", "--quiet", "--out", str(out), *bad]) == 2
        _one_line(capsys.readouterr().err)
        assert not out.exists()
    assert (
        main(
            [
                "sweep",
                "--grid",
                "learning_rate=0.05,0.1",
                "--beta",
                "0.5",
                "--steps",
                "20",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert read_mark(out)["command"] == "sweep" and (out / "sweep.nc").exists()


def test_rejected_sweep_error_is_not_glued_to_a_progress_bar(tmp_path, capsys):
    """Without --quiet the progress bar is not even started before everything is validated."""
    assert (
        main(["sweep", "--grid", "momentum=0:1:5", "--beta", "0.5", "--steps", "20", "--out", str(tmp_path / "d")]) == 2
    )
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("pgrpo-sim: error: grid axis 'momentum=0:1:5'")


def test_sweep_of_only_static_axes(tmp_path):
    assert (
        main(
            [
                "sweep",
                "--grid",
                "num_generations=2,4",
                "--beta",
                "0.5",
                "--steps",
                "20",
                "--quiet",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert load_sweep(tmp_path).regime.dims == ("num_generations",)


def _validate_dir(path: Path) -> Path:
    """A directory as `validate` leaves it, plus a file of the user's."""
    path.mkdir()
    (path / MARK).write_text(json.dumps({"command": "validate", "outputs": ["report.md", "results.json", "*.png"]}))
    for name in ("report.md", "results.json", "fluctuations.png", "notes.txt"):
        (path / name).write_text(name)
    return path


@pytest.mark.slow  # four commands each writing a real result: ~10 s
def test_a_command_refuses_another_commands_directory_unless_overwrite(tmp_path, capsys):
    out = _validate_dir(tmp_path / "validation")
    fit = ["fit", str(Path(__file__).parent / "data" / "simulate.csv"), "--out", str(out)]
    assert main(fit) == 2
    assert "pgrpo-sim validate" in _one_line(capsys.readouterr().err)
    assert (out / "report.md").read_text() == "report.md"  # untouched
    assert main([*fit, "--overwrite"]) == 0
    assert read_mark(out)["command"] == "fit"
    assert "Fit report" in (out / "report.md").read_text() and (out / "fit.json").exists()
    assert not (out / "results.json").exists() and not (out / "fluctuations.png").exists()  # validate's are gone
    assert (out / "notes.txt").read_text() == "notes.txt"  # what pgrpo-sim did not write stays
    assert main(fit) == 0  # a command reuses its own directory


def test_interrupted_validate_leaves_the_previous_results(tmp_path, monkeypatch, capsys):
    def first(res, seed, plot):
        case = dict(lag_model="stale", learning_rate=0.1, momentum=0.0, measured=3, exact=3, continuous=3.0)
        return {"verdict": {"holds": True, "text": "first"}, "figure": plot("lag_threshold", [case])}

    def second(res, seed, plot):  # the first section's figure is drawn by now: there is partial output
        assert any(p.suffix == ".png" for p in out.rglob("*"))
        raise KeyboardInterrupt

    monkeypatch.setattr(validate_sections, "SECTIONS", {"a": ("A", first), "b": ("B", second)})
    monkeypatch.setattr(jax_setup, "cpu_cores", lambda: 1)  # in this process, where the sections are replaced
    out = tmp_path / "validation"
    assert main(["validate", "--quick", "--out", str(out)]) == 130
    err = _one_line(capsys.readouterr().err)
    assert "interrupted" in err and "nothing was written" in err
    assert not out.exists()
    # a rerun into its own directory, interrupted, leaves the previous result as it was (and no temporaries)
    out.mkdir()
    (out / MARK).write_text(json.dumps({"command": "validate", "outputs": ["report.md", "results.json", "*.png"]}))
    for name in ("report.md", "results.json", "old.png", "notes.txt"):
        (out / name).write_text(name)
    before = {p.name: p.read_text() for p in out.iterdir()}
    assert main(["validate", "--quick", "--out", str(out)]) == 130
    assert "previous results" in _one_line(capsys.readouterr().err)
    assert {p.name: p.read_text() for p in out.iterdir()} == before


def _count_chunks(monkeypatch, interrupt_at: int | None = None) -> dict:
    """Patch the sweep's `run_chunk` to count its calls (`["n"]`), with Ctrl-C at call `interrupt_at`; returns the
    counter and the real function (`["real"]`)."""
    calls = {"n": 0, "real": sweep_module.run_chunk}

    def counted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == interrupt_at:
            raise KeyboardInterrupt
        return calls["real"](*args, **kwargs)

    monkeypatch.setattr(sweep_module, "run_chunk", counted)
    return calls


def test_interrupted_sweep_keeps_chunks_and_resumes_identically(tmp_path, monkeypatch, capsys):
    real = _count_chunks(monkeypatch, interrupt_at=2)["real"]
    out, full = tmp_path / "d", tmp_path / "full"
    assert main([*SWEEP, "--out", str(out)]) == 130
    err = _one_line(capsys.readouterr().err)
    assert "interrupted" in err and "chunks are kept" in err and "resume" in err
    assert len(list((out / "chunks").glob("*.npz"))) == 1
    monkeypatch.setattr(sweep_module, "run_chunk", real)
    assert main([*SWEEP, "--out", str(out)]) == 0
    assert main([*SWEEP, "--out", str(full)]) == 0
    a, b = load_sweep(out), load_sweep(full)
    for field in a.data_vars:
        np.testing.assert_array_equal(a[field].values, b[field].values)


FORMER = {"learning_rate": "eta", "num_generations": "group_size", "epsilon": "clip", "epsilon_high": "clip_high",
          "max_grad_norm": "grad_clip"}  # fmt: skip
"""TRL's name → the name the command line's records (--out's mark, the chunks' spec) used for it before 0.1.0."""


def _as_formerly_recorded(value):
    """`value` as the version before the bandit took TRL's names recorded it (keys and grid axes)."""
    if isinstance(value, dict):
        return {FORMER.get(k, k): _as_formerly_recorded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_formerly_recorded(v) for v in value]
    if isinstance(value, str) and value.partition("=")[0] in FORMER:
        name, _, values = value.partition("=")
        return f"{FORMER[name]}={values}"
    return value


def test_a_sweep_begun_under_the_former_names_resumes_from_its_chunks(tmp_path, monkeypatch, capsys):
    """A folder whose mark and chunk spec hold the former names (eta, clip, group_size, …) is the same sweep: the
    rerun keeps its finished chunk, and the result equals a fresh sweep's. A grid axis typed under the alias or
    TRL's name is one setting."""
    _count_chunks(monkeypatch, interrupt_at=2)
    out, full = tmp_path / "d", tmp_path / "full"
    aliased = [*SWEEP[:2], "eta=0.05,0.1,0.2", *SWEEP[3:]]
    assert main([*aliased, "--grid", "clip=0.1,0.2", "--out", str(out)]) == 130
    capsys.readouterr()
    for record in (out / MARK, out / "chunks" / "sweep.json"):
        record.write_text(json.dumps(_as_formerly_recorded(json.loads(record.read_text()))))
    assert '"eta=0.05,0.1,0.2"' in (out / "chunks" / "sweep.json").read_text()
    calls = _count_chunks(monkeypatch)
    assert main([*SWEEP, "--grid", "epsilon=0.1,0.2", "--out", str(out)]) == 0, capsys.readouterr().err
    assert calls["n"] == 5  # six grid points in chunks of one: the finished one is read back
    assert main([*aliased, "--grid", "clip=0.1,0.2", "--out", str(full)]) == 0
    a, b = load_sweep(out), load_sweep(full)
    assert list(a.coords["learning_rate"].values) == [0.05, 0.1, 0.2]
    for field in a.data_vars:
        np.testing.assert_array_equal(a[field].values, b[field].values)
    assert main([*SWEEP, "--grid", "epsilon=0.1,0.2", "--out", str(full)]) == 0  # TRL's name: the same setting
    dashed = [*SWEEP[:2], "learning-rate=0.05,0.1,0.2", *SWEEP[3:]]
    assert main([*dashed, "--grid", "epsilon=0.1,0.2", "--out", str(full)]) == 0  # dashes: the same setting


@pytest.mark.slow
def test_ctrl_c_on_a_real_sweep_process(tmp_path):
    """SIGINT to the console process: one line on stderr, exit 130, and the resumed sweep equals a full one."""
    cmd = [sys.executable, "-m", "pgrpo_sim.cli", "sweep", "--grid", "learning_rate=log:0.01:0.5:12", "--beta", "0.5"]
    cmd += ["--mode", "sampled", "--seeds", "64", "--steps", "1500", "--chunk-size", "1", "--quiet"]
    killed, full = tmp_path / "killed", tmp_path / "full"
    proc = subprocess.Popen([*cmd, "--out", str(killed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    chunks = lambda: list((killed / "chunks").glob("*.npz")) if (killed / "chunks").exists() else []
    deadline = time.time() + 120
    while not chunks() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.count("\n") == 1 and "Traceback" not in err, err
    assert 1 <= len(chunks()) < 12
    assert subprocess.run([*cmd, "--out", str(killed)], capture_output=True).returncode == 0
    assert subprocess.run([*cmd, "--out", str(full)], capture_output=True).returncode == 0
    a, b = load_sweep(killed), load_sweep(full)
    for field in a.data_vars:
        np.testing.assert_array_equal(a[field].values, b[field].values)


@pytest.mark.slow
def test_ctrl_c_on_a_real_validate_process(tmp_path):
    out = tmp_path / "validation"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgrpo_sim.cli", "validate", "--quick", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    deadline = time.time() + 120
    while not (out.exists() and any(out.rglob("*.png"))) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~10 s on 2 cores)
def test_fit_counts_every_skipped_row(tmp_path, capsys):
    rows = ["step,reward"] + [
        f"{i},{'n/a' if i % 7 == 3 else f'{0.2 + 0.6 * (1 - math.exp(-i / 20)):.4f}'}" for i in range(100)
    ]
    log = tmp_path / "log.csv"
    log.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(log), "--quiet", "--out", str(tmp_path / "f")]) == 0  # no stage lines: stderr empty
    captured = capsys.readouterr()
    assert "fitted 86 points" in captured.out and "14 row(s) without a usable reward" in captured.out
    assert captured.err == ""
    result = json.loads((tmp_path / "f" / "fit.json").read_text())
    assert result["n_points"] == 86 and result["rows_without_reward"]["count"] == 14
    assert result["rows_without_reward"]["steps"][:2] == [3.0, 10.0]
    assert "rows without a usable reward: 14" in (tmp_path / "f" / "report.md").read_text()


def test_fit_on_a_text_reward_column_says_so(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("step,reward\n" + "".join(f"{i},pending\n" for i in range(20)))
    assert main(["fit", str(log), "--out", str(tmp_path / "f")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "no reward column" not in err and "no finite number" in err and "20 record" in err


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~12 s on 2 cores)
def test_fit_on_constant_data_prefers_no_law(tmp_path, capsys):
    log = tmp_path / "flat.csv"
    log.write_text("step,reward\n" + "".join(f"{i},0.5\n" for i in range(60)))
    assert main(["fit", str(log), "--out", str(tmp_path / "f")]) == 0
    result = json.loads((tmp_path / "f" / "fit.json").read_text())
    pred = result["prediction"]
    assert pred["preferred_law"] is None and "BIC is undefined" in pred["preferred_law_missing_reason"]
    assert pred["regime"] == "undetermined"
    for f in result["fits"].values():
        assert f["bic"] is None and all(p["stderr"] is None for p in f["params"].values())
    report = (tmp_path / "f" / "report.md").read_text()
    assert "Preferred law: none" in report and "lowest BIC" not in report and "± 0 " not in report


def test_oscillator_adapts_its_step_to_the_dynamics(tmp_path, capsys):
    """μ = 0.99 (ζ ≈ 0.04) needs Euler steps of 1/16; the default adapts, and the ensemble mean follows the
    closed form instead of a flat line."""
    out = tmp_path / "osc.csv"
    argv = ["oscillator", "--eta", "0.05", "--momentum", "0.99", "--stiffness", "0.3", "--noise", "0.0"]
    argv += ["--group-size", "8", "--e0", "-0.5", "--steps", "200", "--paths", "2", "--out", str(out)]
    assert main(argv) == 0
    assert "Euler step 0.0625" in capsys.readouterr().out
    with open(out) as f:
        rows = list(csv.DictReader(f))
    import pgrpo_sim as ps

    closed = np.asarray(ps.trajectory(np.arange(201.0), -0.5, 0.0, 0.05, 0.99, 0.0, 0.3))
    mean = np.array([float(r["mean"]) for r in rows])
    assert np.max(np.abs(mean - closed)) < 0.05 * 0.5
    assert list(rows[0]) == ["step", "mean", "std", "path_0", "path_1"]


def test_plot_paths_are_checked_before_running(tmp_path, capsys):
    (tmp_path / "figs").mkdir()
    argv = ["simulate", "--steps", "5", "--out", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "figs")]
    assert main(argv) == 2
    assert "--plot" in _one_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figs"] and not list((tmp_path / "figs").iterdir())


def test_sweep_that_would_not_fit_or_is_large_is_refused_before_it_starts(tmp_path, monkeypatch, capsys):
    out = tmp_path / "d"
    argv = ["sweep", "--grid", "learning_rate=log:0.01:0.5:40", "--beta", "0.5", "--steps", "20", "--out", str(out)]
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1000))
    assert main(argv) == 2
    err = _one_line(capsys.readouterr().err)
    assert "GB free in" in err and "summary.csv" in err and "sweep.nc" in err and "chunks" in err
    monkeypatch.undo()
    monkeypatch.setattr(sweep_command, "CONFIRM_BYTES", 1000)
    assert main(argv) == 2
    assert "pass --yes" in _one_line(capsys.readouterr().err)
    assert not out.exists()
    assert main([*argv, "--yes"]) == 0  # with its progress while writing, and the chunks removed at the end
    assert "writing" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [MARK, "summary.csv", "sweep.json", "sweep.nc"]


def test_output_size_estimate(tmp_path):
    """`output_bytes` against the files a sweep writes (chunks kept: the final files go to another folder)."""
    axes = [sweep_module.parse_axis("learning_rate=log:0.001:1:40"), sweep_module.parse_axis("momentum=0:0.9:25")]
    options = dict(steps=20, decimate=5)
    estimate = sweep_module.output_bytes({"beta": 0.5}, axes, **options)
    (tmp_path / "final").mkdir()
    base = {"beta": 0.5}
    store = ChunkStore(tmp_path, results_dir=tmp_path / "final")
    sweep_module.compute_sweep(base, axes, store=store, progress=False, **options)
    actual = {
        "summary.csv": (tmp_path / "final" / "summary.csv").stat().st_size,
        "sweep.nc": (tmp_path / "final" / "sweep.nc").stat().st_size,
        "chunks": sum(p.stat().st_size for p in (tmp_path / "chunks").glob("*.npz")),
    }
    # binary files: exact but for headers (~1 kB of 30 kB); text: typical widths, within a third
    for name, tolerance in (("sweep.nc", 0.05), ("chunks", 0.05), ("summary.csv", 0.35)):
        assert abs(estimate[name] - actual[name]) <= tolerance * actual[name], (name, estimate, actual)
