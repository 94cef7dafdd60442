"""Ctrl-C and failures never cost the previous results: a rerun into a finished output folder that is interrupted
(a real SIGINT, at many moments: during the imports, the compilation, the run, the writing) or fails ends with
one line, exit 130 or 2, and leaves the old files as they were, or ends with exit 0 and the complete new ones."""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pgrpo_sim.cli import main
from pgrpo_sim.reports import calibration_report, log_report
from pgrpo_sim.runtime import outputs as outputs_module
from pgrpo_sim.runtime.interrupts import interrupt_handling, interrupt_requested
from pgrpo_sim.runtime.outputs import MARK, STAGE_PREFIX, read_mark

DATA = Path(__file__).parent / "data"
CALIBRATE = ["calibrate", str(DATA / "generic.csv"), "--column", "reward=my_reward"]
FIT = ["fit", str(DATA / "generic.csv"), "--column", "reward=my_reward"]
SIMULATE = ["simulate", "--mode", "sampled", "--seeds", "64", "--steps", "1000000"]


def _old_results(path: Path, command: str, names) -> dict[str, bytes]:
    """A finished output folder of `command` (stand-in files, and one of the user's); returns its contents."""
    path.mkdir()
    (path / MARK).write_text(json.dumps({"command": command, "outputs": sorted(names)}))
    for name in (*names, "notes.txt"):
        (path / name).write_bytes(f"old {name}".encode())
    return _contents(path)


def _contents(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir()} if path.exists() else {}


def _one_line(err: str) -> str:
    """The command's one line on stderr (its error or interrupt), the last one."""
    lines = err.replace("\r", "\n").strip().splitlines()
    assert "Traceback" not in err and "Exception ignored" not in err, err
    endings = [x for x in lines if x.startswith(("pgrpo-sim: error:", "pgrpo-sim: interrupted;"))]
    assert endings and endings == lines[-1:], err  # one, the last (warnings and progress lines may come before)
    return lines[-1]


FIT_OUTPUTS = ["report.md", "fit.json", "fit.png", "diagnostics.png"]
COMMANDS = {  # argv, outputs, one written before `failing` fails, one to block, `failing`'s module and name
    "fit": (FIT, FIT_OUTPUTS, "fit.png", "report.md", log_report, "json_text"),
    "calibrate": (
        CALIBRATE,
        list(calibration_report.CALIBRATE_OUTPUTS),
        "calibration.json",
        "report.md",
        calibration_report,
        "plot_bands",
    ),
}


@pytest.mark.slow  # three runs of the command: ~20 s (fit) to ~60 s (calibrate) on 2 busy cores
@pytest.mark.parametrize("command", ["fit", "calibrate"])
def test_failing_rerun_leaves_the_previous_results(tmp_path, monkeypatch, capsys, command):
    """A rerun into a finished folder: Ctrl-C or an error after the first new output is written (the figure
    fails), or an old output that cannot be moved away (a non-removable report.md): exit 130 or 2 with one line,
    or the error; every old file as it was, and no temporaries."""
    argv, names, first, blocked, module, failing = COMMANDS[command]
    out = tmp_path / "out"
    old = _old_results(out, command, names)
    argv = [*argv, "--out", str(out)]
    for failure in (KeyboardInterrupt, RuntimeError):

        def fail(*args, failure=failure, **kwargs):
            assert any(p.name == first for p in out.rglob("*"))  # a new output is written by now
            raise failure

        with monkeypatch.context() as patch:
            patch.setattr(module, failing, fail)
            if failure is KeyboardInterrupt:
                assert main(argv) == 130
                assert "previous results" in _one_line(capsys.readouterr().err)
            else:
                with pytest.raises(RuntimeError):
                    main(argv)
        assert _contents(out) == old
    real = os.replace

    def refuse(src, dst):
        if Path(src) == out / blocked:
            raise PermissionError(13, "Permission denied", str(src))
        return real(src, dst)

    monkeypatch.setattr(outputs_module.os, "replace", refuse)
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert blocked in line and "Permission denied" in line and "unchanged" in line
    assert _contents(out) == old


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    for argv in (
        ["simulate", "--steps", "5", "--out", "x.png", "--plot", "x.png"],
        ["simulate", "--steps", "5", "--out", "./d/../x.png", "--plot", "x.png"],
        [
            "oscillator",
            "--eta",
            "0.1",
            "--stiffness",
            "1",
            "--noise",
            "0",
            "--group-size",
            "8",
            "--out",
            "x.png",
            "--plot",
            "x.png",
        ],
    ):
        (tmp_path / "d").mkdir(exist_ok=True)
        os.chdir(tmp_path)
        assert main(argv) == 2
        assert "name the same file" in _one_line(capsys.readouterr().err)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_staged_outputs_replace_only_when_complete(tmp_path):
    """Two single files and a folder's outputs: replaced together; a failure, nothing replaced and no
    temporaries; the outputs of the command the folder held before go with the commit."""
    (tmp_path / "a.csv").write_text("old a")
    out = tmp_path / "d"
    _old_results(out, "fit", ["report.md", "fit.json"])
    with pytest.raises(RuntimeError), outputs_module.staged_outputs() as staged:
        staged.file(tmp_path / "a.csv").write_text("new a")
        (staged.directory(out, "tune", ["summary.json"], overwrite=True) / "summary.json").write_text("new")
        raise RuntimeError
    assert (tmp_path / "a.csv").read_text() == "old a" and read_mark(out)["command"] == "fit"
    assert not any(p.name.startswith(STAGE_PREFIX) for p in [*tmp_path.iterdir(), *out.iterdir()])
    with outputs_module.staged_outputs() as staged:
        staged.file(tmp_path / "a.csv").write_text("new a")
        (staged.directory(out, "tune", ["summary.json"], overwrite=True) / "summary.json").write_text("new")
        assert (tmp_path / "a.csv").read_text() == "old a" and not (out / "summary.json").exists()
    assert (tmp_path / "a.csv").read_text() == "new a"
    assert sorted(p.name for p in out.iterdir()) == [MARK, "notes.txt", "summary.json"]
    assert read_mark(out) == {"command": "tune", "outputs": ["summary.json"]}


@pytest.mark.parametrize("resumable", [False, True])
def test_an_interrupt_while_a_folder_is_claimed_leaves_no_temporaries(tmp_path, monkeypatch, resumable):
    """Ctrl-C (or SIGTERM) in the moment after the staging folder exists and before its mark is in place (the
    signal a test sent as soon as the folder appeared, in CI): the folder and a half-written mark are removed."""
    real = os.replace

    def interrupted(source, target, *args, **kwargs):
        if Path(target).name == MARK:  # the mark is written to its temporary and not yet moved into place
            raise KeyboardInterrupt
        return real(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", interrupted)
    out = tmp_path / "d"
    with pytest.raises(KeyboardInterrupt), outputs_module.staged_outputs() as staged:
        staged.directory(out, "sweep", ["summary.csv"], resumable=resumable)
    assert not any(p.name.startswith(STAGE_PREFIX) for p in (out.iterdir() if out.exists() else ()))


def test_an_interrupt_dropped_by_a_gc_callback_still_stops(tmp_path):
    """A KeyboardInterrupt raised inside a garbage-collection callback is dropped by Python ("Exception ignored
    in …"): it is recorded, and the outputs are not moved into place."""

    def callback(phase, info):
        if phase == "start":
            raise KeyboardInterrupt

    with interrupt_handling():
        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        assert interrupt_requested()
        with pytest.raises(KeyboardInterrupt), outputs_module.staged_outputs() as staged:
            staged.file(tmp_path / "a.csv").write_text("new")
    assert not list(tmp_path.iterdir())
    with outputs_module.staged_outputs() as staged:  # after the handling, a later command's outputs are committed
        staged.file(tmp_path / "a.csv").write_text("new")
    assert (tmp_path / "a.csv").read_text() == "new"


def _run_and_interrupt(argv: list[str], delay: float, cwd: Path) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgrpo_sim.cli", *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(delay)
    sent = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err.decode(), time.monotonic() - sent


def _check_interrupted(code: int, err: str) -> None:
    """Exit 130 with the one line (after any progress output), or 0."""
    assert code in (0, 130), (code, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    if code == 130:
        assert _one_line(err).startswith("pgrpo-sim: interrupted; "), err


def _interrupt_rerun(tmp_path: Path, argv, command: str, names, delay: float) -> str:
    out = tmp_path / f"out-{delay}"
    old = _old_results(out, command, names)
    code, err, _ = _run_and_interrupt([*argv, "--out", out.name], delay, tmp_path)
    _check_interrupted(code, err)
    new = _contents(out)
    if code == 130 and "had finished" not in err:
        assert new == old, err
    else:  # complete: every output new, the user's file kept
        assert set(new) == {MARK, "notes.txt", *names} and all(new[n] != old[n] for n in names), err
    return err


@pytest.mark.parametrize("delay", [0.6, 4.0])
def test_ctrl_c_on_a_real_fit_rerun(tmp_path, delay):
    """During the imports and during the run."""
    _interrupt_rerun(tmp_path, FIT, "fit", FIT_OUTPUTS, delay)


@pytest.mark.slow  # 20 runs of calibrate and fit: about 3 minutes on 2 busy cores
@pytest.mark.parametrize("delay", [0.4, 0.8, 1.5, 2.5, 3.5, 5.0, 6.0, 7.0, 9.0, 12.0])
@pytest.mark.parametrize("command", ["calibrate", "fit"])
def test_ctrl_c_at_many_moments(tmp_path, command, delay):
    argv, names = COMMANDS[command][:2]
    _interrupt_rerun(tmp_path, argv, command, names, delay)


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings, mode, seeds",
    [
        ({"lag_model": "stale", "lag": 2}, "sampled", 2),
        pytest.param({}, "expected", 1, marks=pytest.mark.slow),  # each case compiles two programs: ~10 s here
        pytest.param({"lag_model": "refresh", "lag": 2, "beta": 0.1}, "expected", 1, marks=pytest.mark.slow),
    ],
)
def test_a_run_in_pieces_equals_the_whole_run(caplog, settings, mode, seeds):
    """`simulate_in_chunks` (what `simulate` runs, so that Ctrl-C stops it between pieces): the same numbers bit for
    bit as one `simulate` call, in expected and sampled mode, with a stale lag and with rollout reuse (its
    branches); one compilation serves all the pieces of a run."""
    import jax
    import numpy as np

    from pgrpo_sim.models import bandit

    config = bandit.config(learning_rate=0.3, **settings)
    whole = bandit.simulate(config, 30, mode=mode, seeds=seeds, key=jax.random.key(1))
    with jax.log_compiles(), caplog.at_level("WARNING"):
        pieces = bandit.simulate_in_chunks(config, 30, mode=mode, seeds=seeds, key=jax.random.key(1), chunk=7)
    assert sum("Compiling" in r.getMessage() and "_chunk_advance" in r.getMessage() for r in caplog.records) == 1
    for name in (*bandit.STEP_READOUTS, "final_logits", "diverged", "diverged_step"):
        a, b = getattr(whole, name), getattr(pieces, name)
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)


@pytest.mark.slow  # ~15 s
def test_a_long_simulate_stops_within_two_seconds(tmp_path):
    code, err, took = _run_and_interrupt([*SIMULATE, "--out", "run.csv"], 8.0, tmp_path)
    assert code == 130 and took < 2.0, (code, took, err)
    _check_interrupted(code, err)
    assert not list(tmp_path.iterdir())


def test_the_language_models_runs_are_waited_for_so_that_ctrl_c_is_seen(monkeypatch):
    """A calibration's or a what-if's runs are one compiled call of seconds to minutes, during which Python cannot
    raise KeyboardInterrupt: `cached_runs_each` waits for them in a thread, so Ctrl-C (SIGINT half a second in) stops it
    at once. Stood in for by a compiled loop of about 5 s; a real `forecast --model lm` took 19–53 s to stop before."""
    import jax
    import jax.numpy as jnp

    from pgrpo_sim.calibration import language_model

    spin = jax.jit(lambda x, n: jax.lax.fori_loop(0, n, lambda i, v: jnp.sin(v), x))
    spin(0.5, 1).block_until_ready()  # compiled
    start = time.monotonic()
    spin(0.5, 10**6).block_until_ready()
    loops = min(int(5.0 * 10**6 / (time.monotonic() - start)), 2**31 - 1)  # about 5 s on this machine

    def blocking(*args, **kwargs):
        spin(0.5, loops).block_until_ready()
        raise AssertionError("not interrupted")

    monkeypatch.setattr(language_model.lm, "simulate_each", blocking)
    monkeypatch.setattr(language_model.lm, "pretrained_policy", lambda *args: None)
    monkeypatch.setattr(language_model, "cache_dir", lambda: Path("/nonexistent"))  # nothing cached: it runs
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        language_model.cached_runs_each([language_model.LevelJob([{}], 3, 0)])
    assert time.monotonic() - start < 2.0


def test_an_error_that_a_ctrl_c_caused_is_an_interrupt(tmp_path, monkeypatch, capsys):
    """Ctrl-C inside a class being created (an import) comes out as RuntimeError ("Error calling __set_name__", CI
    saw it during matplotlib's import): exit 130 with the one line. The same error without a Ctrl-C is a bug and
    propagates."""
    from pgrpo_sim.runtime.interrupts import deferred_interrupts

    def interrupted_import(*args, **kwargs):
        with deferred_interrupts():  # the signal is recorded; the import machinery turns it into another error
            os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("Error calling __set_name__ on '_axis_method_wrapper' instance")

    monkeypatch.setattr(log_report, "json_text", interrupted_import)
    assert main([*FIT, "--out", str(tmp_path / "a")]) == 130
    assert _one_line(capsys.readouterr().err) == "pgrpo-sim: interrupted; nothing was written"
    assert not (tmp_path / "a").exists()
    monkeypatch.setattr(log_report, "json_text", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        main([*FIT, "--out", str(tmp_path / "b")])


def test_ctrl_c_before_the_outputs_are_claimed_names_the_previous_results(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the calibration, before the command claims --out: the line says the previous results are
    unchanged (not "nothing was written"), and they are."""
    from pgrpo_sim.calibration import inference

    out = tmp_path / "out"
    old = _old_results(out, "calibrate", list(calibration_report.CALIBRATE_OUTPUTS))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(inference, "calibrate", interrupted)
    assert main([*CALIBRATE, "--out", str(out)]) == 130
    assert _one_line(capsys.readouterr().err) == f"pgrpo-sim: interrupted; the previous results in {out} are unchanged"
    assert _contents(out) == old
    assert main([*CALIBRATE, "--out", str(tmp_path / "new")]) == 130
    assert _one_line(capsys.readouterr().err) == "pgrpo-sim: interrupted; nothing was written"
    assert not (tmp_path / "new").exists()
