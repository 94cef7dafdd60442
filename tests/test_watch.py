"""`pgrpo-sim watch` (issue 49): the alert rule, the run's end, and the command's loop on a log written while it
watches, with the forecasts replaced by a stand-in run in threads (the real forecast, the language-model level's,
takes minutes: its numbers are the slow study's, docs/guide/watch.md)."""

import contextlib
import json
import os
import pickle
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pgrpo_sim.calibration.watch as watch_module
import pgrpo_sim.runtime.workers as workers
from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.calibration.watch import alerting, run_end
from pgrpo_sim.cli import main
from pgrpo_sim.cli.watch import ALERT_EXIT
from pgrpo_sim.runtime.stage_lines import stage_lines


def _entry(p: float, step: float = 10.0) -> dict:
    return dict(step=step, until=40.0, collapse_probability=p, collapse_probability_stderr=0.1, verdict="learns",
                final_reward=0.5, final_lower=0.4, final_upper=0.6, peak_reward=0.5, runs=12, seconds=1.0)  # fmt: skip


def test_the_alert_needs_two_forecasts_in_a_row_at_or_above_the_threshold():
    assert not alerting([_entry(0.9)], 0.5)  # one forecast is not enough
    assert alerting([_entry(0.2), _entry(0.5), _entry(0.6)], 0.5)  # at the threshold counts
    assert not alerting([_entry(0.6), _entry(0.4)], 0.5)
    assert not alerting([_entry(0.6), _entry(0.4), _entry(0.7)], 0.5)  # not in a row
    assert alerting([_entry(0.7)], 0.5, consecutive=1)
    with pytest.raises(PgrpoSimError, match="alert must be in"):
        alerting([], 0.0)


def test_a_watch_forecasts_to_the_run_s_end():
    assert run_end(200) == 200  # the optimiser step max_steps, wherever the log's steps start (0, 1, logging_steps)
    assert run_end(200, until=50) == 50
    with pytest.raises(PgrpoSimError, match="until must be given"):
        run_end(None)


@pytest.fixture
def stand_in(monkeypatch):
    """The forecast replaced by `collapse(rewarded steps)` run in threads (a worker process would not see it)."""
    calls = []

    def install(collapse):
        def forecast(log, run_config=None, *, until=None, level=0.8, seed=0, eval_size=None, progress=None):
            steps = log.series("reward")[0]
            calls.append(steps.size)
            return _entry(collapse(steps.size), step=float(steps[-1]))

        monkeypatch.setattr(watch_module, "watch_forecast", forecast)
        monkeypatch.setattr(workers, "worker_pool", lambda n: contextlib.nullcontext(ThreadPoolExecutor(n)))
        return calls

    return install


def _write_slowly(path: Path, rows: int, pause: float) -> threading.Thread:
    """A run writing a CSV log, one row every `pause` seconds."""

    def write():
        with path.open("w") as f:
            f.write("step,reward\n")
            f.flush()
            for step in range(1, rows + 1):
                time.sleep(pause)
                f.write(f"{step},{0.02 * step}\n")
                f.flush()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


FLAGS = ["--until", "60", "--every", "8", "--poll", "0.02", "--idle", "0.6", "--quiet"]


def test_a_watch_alerts_with_its_own_exit_code_and_keeps_its_status(tmp_path, stand_in, capsys):
    calls = stand_in(lambda n: 0.9 if n >= 16 else 0.1)
    log, out = tmp_path / "log.csv", tmp_path / "w"
    writer = _write_slowly(log, 40, 0.03)
    assert main(["watch", str(log), *FLAGS, "--alert", "0.5", "--out", str(out)]) == ALERT_EXIT
    writer.join()
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "alert" and status["alert"] == 0.5
    assert [f["collapse_probability"] for f in status["forecasts"]][-2:] == [0.9, 0.9]
    assert len(status["forecasts"]) == len(calls) and calls[0] >= 8  # never before `--every` rewarded steps
    assert (out / "watch.png").stat().st_size > 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("step ") and "collapse probability 0.10 ± 0.10 (12 runs)" in lines[0]
    assert "first forecast" in lines[0] and any("+0.80 since step" in line for line in lines[1:])
    assert lines[-1].startswith("ALERT: collapse probability ≥ 0.5 in 2 forecasts in a row")


def test_a_watch_ends_when_the_log_stops_growing(tmp_path, stand_in, capsys):
    calls = stand_in(lambda n: 0.1)
    log, out = tmp_path / "log.csv", tmp_path / "w"
    _write_slowly(log, 20, 0.02).join()
    assert main(["watch", str(log), *FLAGS, "--out", str(out)]) == 0
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "ended" and len(status["forecasts"]) == len(calls) >= 1
    assert status["forecasts"][-1]["step"] == 20  # the whole log is forecast before the watch ends
    assert capsys.readouterr().out.splitlines()[-1] == f"the log stopped growing; {len(calls)} forecasts, no alert"


def test_a_failed_forecast_is_said_and_the_watch_goes_on(tmp_path, stand_in, capsys):
    def collapse(n):
        if n < 16:
            raise PgrpoSimError("the log is too short")
        return 0.2

    stand_in(collapse)
    log = tmp_path / "log.csv"
    writer = _write_slowly(log, 30, 0.03)
    assert main(["watch", str(log), *FLAGS]) == 0  # no --out: status lines only
    writer.join()
    out = capsys.readouterr().out
    assert "forecast failed: the log is too short" in out and "collapse probability 0.20" in out


def test_a_watch_whose_forecast_worker_died_ends_in_one_line_with_exit_2(tmp_path, stand_in, capsys):
    from concurrent.futures.process import BrokenProcessPool

    def collapse(n):
        raise BrokenProcessPool("a worker died (killed for memory?)")

    stand_in(collapse)
    log, out = tmp_path / "log.csv", tmp_path / "w"
    writer = _write_slowly(log, 30, 0.02)
    assert main(["watch", str(log), *FLAGS, "--out", str(out)]) == 2
    writer.join()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the forecast worker is gone (BrokenProcessPool: a worker died" in err[0]
    status = json.loads((out / "status.json").read_text())
    assert status["failures"] == [dict(error="BrokenProcessPool: a worker died (killed for memory?)")]


def test_ctrl_c_ends_a_watch_with_130_and_its_status_kept(tmp_path, stand_in, capsys):
    stand_in(lambda n: 0.1)
    log, out = tmp_path / "log.csv", tmp_path / "w"
    writer = _write_slowly(log, 200, 0.01)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    assert main(["watch", str(log), *FLAGS, "--out", str(out)]) == 130
    writer.join()
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "interrupted" and status["forecasts"]
    err = capsys.readouterr().err
    assert err.strip() == f"pgrpo-sim: interrupted; {out}/status.json holds the forecasts so far"


def test_the_stage_lines_reach_a_worker_process(capsys):
    """The forecast runs in a worker: the watch's progress is handed to it, so it must survive pickling."""
    say = pickle.loads(pickle.dumps(stage_lines("watch")))
    say("grid runs")
    err = capsys.readouterr().err
    assert err.startswith("watch [") and err.endswith("s] grid runs…\n"), err
