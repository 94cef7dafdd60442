"""Forecasts of a run while it trains, logged beside its reward: the trainer-independent half of the trainer callbacks
(`trl.ForecastCallback`). Importing it imports no trainer, torch or JAX.

`LiveForecasts` takes the records a trainer logs as they come and every `every` rewarded ones forecasts a snapshot of
them (`forecast_history`: the records read as TRL's trainer_state.json, then `calibration.watch.watch_forecast`,
minutes of CPU) in one worker process (`ForecastWorker`), scheduled as `pgrpo-sim watch` schedules its own
(`calibration.watch.Forecasts`: at most one running, the newest snapshot waiting, finished ones collected without
waiting, the same alert rule); `forecast_metrics` names their numbers as the trainer logs them (`METRICS`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import math
import os
import pickle
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from ..base.errors import PgrpoSimError

PREFIX = "pgrpo/"
"""The prefix of the metrics a callback adds to the trainer's logs (W&B and TensorBoard group them under it)."""
METRICS = MappingProxyType(
    {
        "collapse_probability": PREFIX + "collapse_probability",
        "collapse_probability_stderr": PREFIX + "collapse_probability_stderr",
        "final_reward": PREFIX + "forecast_final_reward",
        "final_lower": PREFIX + "forecast_final_lower",
        "final_upper": PREFIX + "forecast_final_upper",
        "step": PREFIX + "forecast_step",
    }
)
"""`watch_forecast` field → its name in the trainer's logs: the collapse probability (share of the level's runs that
collapse or diverge by the run's end, in [0, 1]) and its standard error; the forecast final reward (reward /
reward_scale: a success rate) with its band's ends; the last logged step the forecast saw (it is logged some steps
later, when it has finished). Besides, `pgrpo/alert` is 1 when the alert holds after the forecast, else 0."""
ALERT_METRIC = PREFIX + "alert"
"""The name in the trainer's logs of whether the alert holds (1) or not (0) after a forecast."""


@dataclasses.dataclass(frozen=True)
class ForecastSettings:
    """The settings of a trainer callback's forecasts, checked when made.

    Attributes:
        every: logged reward steps between two forecasts; integer ≥ 1.
        alert: the collapse probability that alarms in consecutive forecasts (`calibration.watch.alerting`);
            in (0, 1].
        stop_on_alert: whether the alert stops the training.
        until: the last logged step (the trainer's global step) to forecast to; integer ≥ 1; None: the trainer's
            max_steps.
        seed: seed of the forecasts' runs; integer in [0, 2³² − 1].
        band: the central probability of the forecast final reward's band; in (0, 1).
        forecast: `calibration.watch.watch_forecast` (None), or a module-level function taking its arguments (a
            stand-in: it is pickled into the worker process).

    Raises:
        PgrpoSimError: a setting out of its range (one line naming it and the range), or a `forecast` that cannot be
            pickled.
    """

    every: int = 10
    alert: float = 0.5
    stop_on_alert: bool = False
    until: int | None = None
    seed: int = 0
    band: float = 0.8
    forecast: Callable | None = None

    def __post_init__(self):
        from ..base.checks import check_range, check_seed

        check_range("every", self.every, 1, integer=True)
        check_range("alert", self.alert, 0.0, 1.0, low_open=True)
        if not isinstance(self.stop_on_alert, bool):
            raise PgrpoSimError(f"stop_on_alert must be True or False, got {self.stop_on_alert!r}")
        if self.until is not None:
            check_range("until", self.until, 1, integer=True)
        check_seed(self.seed)
        check_range("band", self.band, 0.0, 1.0, low_open=True, high_open=True)
        if self.forecast is not None:
            try:
                pickle.dumps(self.forecast)
            except Exception as exc:
                raise PgrpoSimError(
                    f"forecast must be a module-level function (it is pickled into the worker process): {exc}"
                ) from None


def forecast_metrics(entry: Mapping, alerted: bool) -> dict[str, float]:
    """A forecast's numbers as the trainer logs them (`METRICS`, `ALERT_METRIC`); a final reward of None (every run
    diverged) is left out, as loggers refuse None.

    Args:
        entry: a `watch_forecast` entry.
        alerted: whether the alert holds after it.

    Returns:
        Log name → value (floats).
    """
    metrics = {name: float(entry[field]) for field, name in METRICS.items() if entry.get(field) is not None}
    metrics[ALERT_METRIC] = float(alerted)
    return metrics


def forecast_history(
    forecast: Callable | None, records: list[dict], run_config: Mapping | None = None, **settings
) -> dict:
    """One forecast of a run from the records its trainer logged, in the worker: the records are read as TRL's
    trainer_state.json is (`logs.readers.read_log`, format "trl"), the trainer's arguments as a run-config file (a
    `GRPOConfig` dump: `calibration.run_config_files`), both written to a temporary folder for the time of the
    forecast.

    Args:
        forecast: `calibration.watch.watch_forecast` (None), or a module-level stand-in taking its arguments.
        records: the logged records (`TrainerState.log_history`'s dicts), oldest first.
        run_config: the trainer's arguments (`TrainingArguments.to_dict()`, JSON values), or None (the log's
            settings and TRL's defaults).
        settings: `watch_forecast`'s keyword arguments (until, level, seed, eval_size).

    Returns:
        The forecast's entry (`calibration.watch.WATCH_FIELDS`).

    Raises:
        PgrpoSimError: as `read_log` (no record with a reward yet) and `watch_forecast` (a log too short to
            calibrate on).
    """
    import json
    import tempfile

    from ..logs.readers import read_log

    if forecast is None:
        from ..calibration.watch import watch_forecast

        forecast = watch_forecast
    with tempfile.TemporaryDirectory(prefix="pgrpo-sim-forecast-") as folder:
        state = Path(folder) / "trainer_state.json"
        state.write_text(json.dumps({"log_history": records}, default=str), encoding="utf-8")
        config = None
        if run_config is not None:
            config = Path(folder) / "grpo_config.json"
            config.write_text(json.dumps(dict(run_config), default=str), encoding="utf-8")
        return forecast(read_log(state, format="trl"), config, **settings)


@contextlib.contextmanager
def _cpu_only_children():
    """Processes started within the block run JAX on the CPU (`JAX_PLATFORMS=cpu`) unless the user chose its
    platforms: a forecast must not take the trainer's accelerator memory (JAX preallocates most of a GPU's)."""
    if "JAX_PLATFORMS" in os.environ:
        yield
        return
    os.environ["JAX_PLATFORMS"] = "cpu"
    try:
        yield
    finally:
        os.environ.pop("JAX_PLATFORMS", None)


WORKER_NICENESS = 10
"""How much the worker lowers its CPU priority (POSIX `nice`, 0 to 19): a forecast takes the cores the training leaves
free, and a small share of those it wants too. A real forecast beside a CPU-bound training on the same 2 cores slowed
its 15 ms steps 3.2× at the training's priority and by 9 % at nice 10 (benchmarks/bench_callback.py, a machine loaded
by other jobs, 2026-12-06)."""


def _background() -> int:
    """The worker's first job: its CPU priority lowered by `WORKER_NICENESS` (where the OS has `nice`); its pid."""
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(WORKER_NICENESS)
    return os.getpid()


class ForecastWorker:
    """One worker process for forecasts (`runtime.workers.worker_pool(1)`: spawned, with this process's JAX settings,
    exiting if this process dies), with JAX on the CPU unless `JAX_PLATFORMS` says otherwise and its CPU priority
    lowered by `WORKER_NICENESS`; started at once, so that its start (JAX's import, seconds) overlaps the training's.
    `close` stops it without waiting for a forecast: one still running is ended by terminating the worker (its own
    process only), one not yet started is dropped. `close` also runs when the program ends before the trainer does
    (an exception, Ctrl-C), so that its exit never waits minutes for a forecast. Training scripts need the
    `if __name__ == "__main__":` guard: the spawned worker imports them.
    """

    def __init__(self):
        from ..runtime.workers import worker_pool

        self._stack = contextlib.ExitStack()
        self._pool = self._stack.enter_context(worker_pool(1))
        self._jobs: list[concurrent.futures.Future] = []
        with _cpu_only_children():
            self._pid = self._pool.submit(_background)  # spawns the worker now, with the environment set above
        self.closed = False
        # At the interpreter's exit concurrent.futures waits for running jobs (minutes of forecast) from a hook it
        # registers with threading._register_atexit; `atexit.register` runs only after that wait, so the close must
        # be registered the same way (CPython >= 3.9; hooks run last registered first). Where it is missing, an exit
        # before the trainer's end waits for the running forecast.
        register = getattr(threading, "_register_atexit", None)
        with contextlib.suppress(RuntimeError):  # raised only while the interpreter exits
            if register is not None:
                register(self.close)

    def submit(self, fn: Callable, *args, **kwargs) -> concurrent.futures.Future:
        """Run `fn(*args, **kwargs)` in the worker (`fn` and its arguments picklable); returns its future.

        Args:
            fn: a module-level function.
            args: its positional arguments.
            kwargs: its keyword arguments.

        Returns:
            The job's `concurrent.futures.Future`.

        Raises:
            concurrent.futures.BrokenExecutor: the worker died (e.g. killed for memory); RuntimeError: after `close`.
        """
        future = self._pool.submit(fn, *args, **kwargs)
        self._jobs = [job for job in self._jobs if not job.done()] + [future]
        return future

    def close(self) -> None:
        """Stop the worker now: a job running or queued is ended by terminating the worker (after waiting for its
        start if it is still starting), others are cancelled; then its process is joined. Again: nothing."""
        if self.closed:
            return
        self.closed = True
        if any(not job.done() for job in self._jobs):
            try:
                pid = self._pid.result()  # the worker's first job: done once it has started
            except Exception:  # it died already: nothing to end
                pid = None
            if pid is not None and pid != os.getpid():
                import signal

                with contextlib.suppress(OSError):  # it may have exited meanwhile
                    os.kill(pid, signal.SIGTERM)
        self._pool.shutdown(wait=True, cancel_futures=True)  # at once: its worker is gone or idle
        self._stack.close()


class LiveForecasts:
    """The forecasts of one training run: it takes the records the trainer logs as they come (`add`), offers a
    snapshot of them every `every` rewarded records to `calibration.watch.Forecasts` (at most one forecast running,
    the newest snapshot waiting), and hands over the finished ones without waiting (`collect`), each said in one line
    (`say`); failures and a lost worker are told to `warn`, and the run goes on.

    Args:
        submit: starts a forecast of a snapshot (a list of records), returning a `concurrent.futures.Future` of its
            `watch_forecast` entry.
        every: rewarded records between two snapshots; integer ≥ 1.
        alert: the collapse probability that alarms in consecutive forecasts (`calibration.watch.alerting`); in (0, 1].
        say: reports a finished forecast, one line.
        warn: reports a failed forecast or a lost worker, one line.

    Raises:
        PgrpoSimError: `every` or `alert` out of its range.
    """

    def __init__(
        self,
        submit: Callable[[list[dict]], concurrent.futures.Future],
        every: int,
        alert: float,
        say: Callable[[str], object] = print,
        warn: Callable[[str], object] = print,
    ):
        from ..base.checks import check_range
        from ..calibration.watch import Forecasts  # imported now, at the training's start, not at a step's end
        from ..logs.readers import CANONICAL

        check_range("every", every, 1, integer=True)
        self.queue = Forecasts(submit, alert)
        self.every, self.say, self.warn = int(every), say, warn
        self.records: list[dict] = []  # the log so far, without this package's metrics
        self.rewarded = 0
        self._reward_names = CANONICAL["reward"]
        self._snapshot_at = 0  # `rewarded` at the last snapshot

    @property
    def forecasts(self) -> list[dict]:
        """The finished forecasts' `watch_forecast` entries, oldest first."""
        return self.queue.forecasts

    @property
    def stopped(self) -> bool:
        """Whether the worker is gone (no forecast starts again)."""
        return self.queue.stopped

    def add(self, records: Iterable[Mapping]) -> None:
        """Take newly logged records (oldest first; this package's `PREFIX` keys are left out), and offer a snapshot
        of the log when `every` more rewarded ones have come.

        Args:
            records: the trainer's new log records (dicts of name → value, as `TrainerState.log_history`'s).
        """
        for record in records:
            kept = {key: value for key, value in record.items() if not str(key).startswith(PREFIX)}
            self.records.append(kept)
            self.rewarded += any(_is_number(kept.get(name)) for name in self._reward_names)
        if self.rewarded - self._snapshot_at >= self.every:
            self._snapshot_at = self.rewarded
            self.queue.offer(list(self.records))

    def collect(self) -> list[tuple[dict, bool]]:
        """The forecasts finished since the last call, oldest first, each with whether the alert holds after it
        (failures and a lost worker are told to `warn`). Never waits.

        Returns:
            (entry, alerted) pairs: the `watch_forecast` entry, and whether the alert holds after it.
        """
        finished = []
        for outcome in self.queue.finished():
            if outcome.entry is None:
                self.warn(f"pgrpo-sim: {outcome.line}")
            else:
                self.say(f"pgrpo-sim forecast, {outcome.line}")
                finished.append((outcome.entry, outcome.alerted))
        return finished


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
