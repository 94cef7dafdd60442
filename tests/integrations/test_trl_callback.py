"""The TRL callback of issue 49 (`pgrpo_sim.integrations.trl.ForecastCallback`) and its trainer-independent half
(`pgrpo_sim.integrations`): imports that load no trainer, the settings' checks, the scheduling of the forecasts on fake
futures, the worker-side reading of a trainer's records and arguments, and the worker's stop. The slow tests train a
tiny randomly initialised model with TRL's `GRPOTrainer` on the CPU (the `peer` extra; skipped without TRL), the
forecast replaced by a stand-in of this module run in the real worker process (the real one takes minutes: the slow
study's, docs/guide/watch.md)."""

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.calibration.run_config_files import load_run_config
from pgrpo_sim.integrations import (
    ALERT_METRIC,
    METRICS,
    ForecastSettings,
    ForecastWorker,
    LiveForecasts,
    forecast_history,
    forecast_metrics,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_callback's tiny trainer


def _entry(p: float, step: float = 10.0, final: float | None = 0.5) -> dict:
    return dict(step=step, until=40.0, collapse_probability=p, collapse_probability_stderr=0.1, verdict="learns",
                final_reward=final, final_lower=0.4, final_upper=0.6, peak_reward=0.5, runs=12,
                seconds=1.0)  # fmt: skip


def _records(first: int, last: int) -> list[dict]:
    """TRL-like logged records of steps first..last, each with a reward."""
    return [dict(loss=0.0, reward=0.01 * s, reward_std=0.1, step=s) for s in range(first, last + 1)]


def test_importing_pgrpo_sim_or_its_integrations_loads_no_trainer():
    probe = (
        "import sys, pgrpo_sim, pgrpo_sim.integrations; "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_without_transformers_the_trl_callback_says_how_to_install_it():
    probe = (
        "import sys; sys.modules['transformers'] = None\n"
        "try:\n    import pgrpo_sim.integrations.trl\nexcept ImportError as exc:\n    print(repr(str(exc)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert "pip install 'pgrpo-sim[trl]'" in out and "\\n" not in out


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(every=0), "every must be >= 1, got 0"),
        (dict(every=2.5), "every must be an integer"),
        (dict(alert=0.0), r"alert must be in \(0, 1\], got 0"),
        (dict(alert=1.5), r"alert must be in \(0, 1\]"),
        (dict(until=0), "until must be >= 1"),
        (dict(seed=-1), "seed must be"),
        (dict(band=1.0), r"band must be in \(0, 1\)"),
        (dict(stop_on_alert="yes"), "stop_on_alert must be True or False"),
        (dict(forecast=lambda log, run_config: {}), "forecast must be a module-level function"),
    ],
)
def test_bad_settings_are_refused_in_one_line_naming_them(settings, message):
    with pytest.raises(PgrpoSimError, match=message) as info:
        ForecastSettings(**settings)
    assert "\n" not in str(info.value)
    assert ForecastSettings(every=1, alert=1.0, until=5, forecast=time.sleep).alert == 1.0


class _Submit:
    """A fake worker: each forecast a future that the test finishes; the snapshots it was given."""

    def __init__(self):
        self.snapshots: list[list[dict]] = []
        self.futures: list[Future] = []

    def __call__(self, records):
        self.snapshots.append(records)
        self.futures.append(Future())
        return self.futures[-1]


def test_a_snapshot_is_forecast_every_few_rewarded_records_one_at_a_time_the_newest_waiting():
    submit, said, warned = _Submit(), [], []
    live = LiveForecasts(submit, every=3, alert=0.5, say=said.append, warn=warned.append)
    live.add([*_records(1, 2), dict(eval_reward=0.2, step=2), dict(train_runtime=1.0, step=2)])
    assert submit.snapshots == []  # two rewarded records: not yet (eval and summary records have no reward)
    live.add(_records(3, 3))
    assert [len(s) for s in submit.snapshots] == [5]
    live.add(_records(4, 6))  # a second snapshot waits for the running forecast...
    live.add([*_records(7, 9), dict(reward=None, step=10)])  # ...and a newer one replaces it (None: no reward)
    assert len(submit.snapshots) == 1 and live.collect() == []  # nothing finished: collect never waits
    submit.futures[0].set_result(_entry(0.6, step=3))
    assert live.collect() == [(_entry(0.6, step=3), False)]  # one forecast above the threshold: no alert yet
    assert [s[-1]["step"] for s in submit.snapshots] == [3, 10]  # the waiting snapshot is the newest one
    submit.futures[1].set_result(_entry(0.7, step=9))
    assert live.collect() == [(_entry(0.7, step=9), True)] and live.queue.alerted  # two in a row: the alert holds
    assert len(said) == 2 and "collapse probability 0.70 ± 0.10" in said[1] and not warned
    assert live.forecasts == [_entry(0.6, step=3), _entry(0.7, step=9)]


def test_the_callback_s_own_metrics_are_not_forecast():
    submit = _Submit()
    live = LiveForecasts(submit, every=1, alert=0.5)
    live.add([dict(reward=0.1, step=1, **{METRICS["collapse_probability"]: 0.3, ALERT_METRIC: 0.0})])
    assert submit.snapshots == [[dict(reward=0.1, step=1)]]


def test_a_failed_forecast_is_said_and_a_lost_worker_ends_the_forecasts():
    submit, warned = _Submit(), []
    live = LiveForecasts(submit, every=1, alert=0.5, say=lambda line: None, warn=warned.append)
    live.add(_records(1, 1))
    submit.futures[0].set_exception(PgrpoSimError("the log has 1 rewarded step up to step 1; the level needs 2"))
    live.add(_records(2, 2))
    assert live.collect() == [] and "needs 2" in warned[0] and len(submit.snapshots) == 2  # the next one started
    submit.futures[1].set_exception(BrokenProcessPool("a worker died"))
    assert live.collect() == [] and live.stopped and "worker is gone" in warned[1]
    live.add(_records(3, 5))
    assert len(submit.snapshots) == 2  # none started again

    def broken(records):
        raise BrokenProcessPool("a worker died")

    lost = LiveForecasts(broken, every=1, alert=0.5, warn=warned.append)
    lost.add(_records(1, 1))
    assert lost.stopped and lost.collect() == [] and "worker is gone" in warned[2]  # said at the next collect


def test_a_forecast_is_logged_as_its_metrics():
    assert forecast_metrics(_entry(0.25, step=7), alerted=True) == {
        "pgrpo/collapse_probability": 0.25,
        "pgrpo/collapse_probability_stderr": 0.1,
        "pgrpo/forecast_final_reward": 0.5,
        "pgrpo/forecast_final_lower": 0.4,
        "pgrpo/forecast_final_upper": 0.6,
        "pgrpo/forecast_step": 7.0,
        "pgrpo/alert": 1.0,
    }
    assert "pgrpo/forecast_final_reward" not in forecast_metrics(_entry(0.9, final=None), alerted=False)


def test_the_worker_reads_the_records_as_trl_s_log_and_the_arguments_as_its_run_config():
    seen = {}

    def stand_in(log, run_config, **settings):
        seen.update(format=log.format, steps=log.series("reward")[0].tolist(), keys=load_run_config(run_config).keys,
                    settings=settings, folder=Path(run_config).parent)  # fmt: skip
        return _entry(0.1)

    dump = dict(output_dir="out", per_device_train_batch_size=8, gradient_accumulation_steps=1, num_generations=4,
                generation_batch_size=8, steps_per_generation=1, max_steps=50, learning_rate=1e-6,
                logging_steps=1)  # fmt: skip
    records = [*_records(1, 4), dict(eval_reward=0.3, step=4), dict(train_runtime=2.0, step=4)]
    assert forecast_history(stand_in, records, dump, until=50, level=0.8, seed=3) == _entry(0.1)
    assert seen["format"] == "trl" and seen["steps"] == [1.0, 2.0, 3.0, 4.0]
    assert seen["keys"]["prompts_per_step"] == 2 and seen["keys"]["max_steps"] == 50
    assert seen["settings"] == dict(until=50, level=0.8, seed=3)
    assert not seen["folder"].exists()  # the temporary files are gone
    with pytest.raises(PgrpoSimError, match="no record with a finite reward"), pytest.warns(UserWarning, match="skip"):
        forecast_history(stand_in, [dict(loss=0.1, step=1, reward=None)], None)  # TRL logs None for NaN


def test_the_worker_runs_jax_on_the_cpu_and_stops_without_waiting_for_a_forecast(monkeypatch):
    """A running job (an hour's sleep) is ended at `close`, which returns at once and leaves no process behind."""
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    before = set(multiprocessing.active_children())
    worker = ForecastWorker()
    assert worker.submit(os.getenv, "JAX_PLATFORMS").result() == "cpu"
    assert "JAX_PLATFORMS" not in os.environ  # this process's environment is as it was
    job = worker.submit(time.sleep, 3600)
    closing = threading.Thread(target=worker.close)
    closing.start()
    closing.join(timeout=120)  # a guard against a hang, not a timing: close waits for no forecast
    assert not closing.is_alive() and job.done()
    assert set(multiprocessing.active_children()) <= before
    worker.close()  # again: nothing


def test_attach_puts_the_callback_ahead_of_the_reporting_integrations():
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from transformers import DefaultFlowCallback, PrinterCallback
    from transformers.integrations import TensorBoardCallback

    from pgrpo_sim.integrations.trl import ForecastCallback

    flow, printer, callback = DefaultFlowCallback(), PrinterCallback(), ForecastCallback()
    reporter = TensorBoardCallback.__new__(TensorBoardCallback)  # no tensorboard needed: its place is all that counts
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[flow, reporter, callback, printer]))
    assert callback.attach(trainer) is callback
    assert trainer.callback_handler.callbacks == [flow, callback, reporter, printer]


def test_stop_on_alert_is_refused_in_a_run_of_several_processes():
    """Only the main process forecasts: the others would not stop, and the run would hang."""
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from pgrpo_sim.integrations.trl import ForecastCallback

    args, state = SimpleNamespace(world_size=2), SimpleNamespace(is_world_process_zero=False)
    with pytest.raises(PgrpoSimError, match="stop_on_alert needs a run of one process"):
        ForecastCallback(stop_on_alert=True).on_train_begin(args, state, SimpleNamespace())
    assert ForecastCallback().on_train_begin(args, state, SimpleNamespace()) is None  # not the main process: idle


# The slow tests: a real GRPOTrainer


def alarming_forecast(log, run_config=None, *, until=None, level=0.8, seed=0, eval_size=None):
    """A stand-in for `watch_forecast` (it runs in the worker process): collapse probability 0.9 from the log's last
    rewarded step to `until`, the run config's max_steps as its `runs`."""
    steps = log.series("reward")[0]
    max_steps = load_run_config(run_config).keys["max_steps"]
    return dict(_entry(0.9, step=float(steps[-1])), until=float(until), runs=max_steps)


def _trainer(output_dir: Path, max_steps: int, **settings):
    """The benchmark's tiny GRPOTrainer (`benchmarks/bench_callback.tiny_trainer`: a one-layer Qwen2 of width 16 on the
    CPU, nothing downloaded)."""
    from bench_callback import tiny_trainer

    return tiny_trainer(max_steps, str(output_dir), **settings)


@pytest.fixture
def importable(monkeypatch):
    """This module importable by name in the spawned worker (it unpickles `alarming_forecast` from it)."""
    monkeypatch.syspath_prepend(str(ROOT))


@pytest.mark.slow
def test_a_grpo_trainer_logs_the_forecasts_beside_the_reward_and_tensorboard_receives_them(tmp_path, importable,
                                                                                           monkeypatch):  # fmt: skip
    pytest.importorskip("trl")
    pytest.importorskip("tensorboard")
    from pgrpo_sim.integrations.trl import ForecastCallback
    from pgrpo_sim.logs.readers import read_log

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
    trainer = _trainer(tmp_path / "out", max_steps=40, report_to="tensorboard")
    callback = ForecastCallback(every=4, alert=0.95, forecast=alarming_forecast).attach(trainer)
    trainer.train()
    assert trainer.state.global_step == 40  # no alert at 0.95: the run goes on to its end
    logged = [r for r in trainer.state.log_history if "pgrpo/collapse_probability" in r]
    assert logged and all("reward" in r for r in logged)  # in the records of training steps, beside the reward
    assert all(r["pgrpo/collapse_probability"] == 0.9 and r["pgrpo/alert"] == 0.0 for r in logged)
    assert all(r["pgrpo/forecast_step"] <= r["step"] for r in logged)
    assert callback.forecasts and all(f["until"] == 40 and f["runs"] == 40 for f in callback.forecasts)
    events = read_log(tmp_path / "tb", format="tensorboard")
    assert "train/pgrpo/collapse_probability" in events.other


@pytest.mark.slow
def test_the_alert_stops_the_training_with_stop_on_alert(tmp_path, importable):
    pytest.importorskip("trl")
    from pgrpo_sim.integrations.trl import ForecastCallback

    before = set(multiprocessing.active_children())
    callback = ForecastCallback(every=2, alert=0.5, stop_on_alert=True, forecast=alarming_forecast)
    trainer = _trainer(tmp_path / "out", max_steps=200)
    trainer.add_callback(callback)  # after the reporters: the records get the metrics all the same
    trainer.train()
    assert trainer.state.global_step < 200 and len(callback.forecasts) >= 2
    alerts = [r["pgrpo/alert"] for r in trainer.state.log_history if "pgrpo/alert" in r]
    assert alerts[-1] == 1.0
    assert set(multiprocessing.active_children()) <= before  # the worker has stopped
