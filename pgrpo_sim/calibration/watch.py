"""A forecast of a run that is still being written, and the rule that calls it alarming: the library half of
`pgrpo-sim watch` and of the TRL callback (issue 49; docs/guide/watch.md).

`watch_forecast` calibrates the language-model level on the log as it stands (`language_model.calibrate`, the fit
window all of it) and forecasts the run to its end (`lm_scenarios.forecast`): the share of the level's runs that
collapse by then is the collapse probability, with its binomial standard error. The bandit cannot collapse
(docs/design.md §6), so a watch asks the level. `alerting` is the alert rule: the probability at or above a
threshold in the last `consecutive` forecasts, so that one noisy forecast does not stop a run. `Forecasts` schedules
them for a live run: at most one running, the newest snapshot waiting, finished ones collected without waiting;
`pgrpo-sim watch` and the trainer callbacks (`integrations`) share it.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from ..base.progress import Progress
from ..logs.readers import TrainingLog
from . import language_model, lm_scenarios
from .inputs import calibration_inputs

CONSECUTIVE = 2
"""Forecasts in a row at or above the alert threshold that raise the alert (`alerting`'s default)."""


def run_end(max_steps: int | None, until: float | None = None) -> float:
    """The last logged step a watch forecasts to: `until` when given, else the run's end, its optimiser step
    `max_steps` (a log's steps are optimiser steps, whether it starts at 0, 1 or its first logging step).

    Args:
        max_steps: the run's length in logged steps (the run config's `max_steps`), or None.
        until: the last logged step to forecast, or None.

    Returns:
        The last logged step, a float.

    Raises:
        PgrpoSimError: neither `until` nor `max_steps` is given (a watch must know where the run ends).
    """
    if until is not None:
        return float(until)
    if max_steps is None:
        raise PgrpoSimError(
            "until must be given when the run config has no max_steps: a watch forecasts to the run's end"
        )
    return float(max_steps)


def watch_forecast(
    log: TrainingLog,
    run_config: str | Path | None = None,
    *,
    until: float | None = None,
    level: float = 0.8,
    seed: int = 0,
    eval_size: int | None = None,
    progress: Progress | None = None,
) -> dict:
    """One forecast of a run from its log so far: the level calibrated on all of it, run to the run's end.

    Args:
        log: the log as it stands (`TrainingLog`), at least two rewarded steps.
        run_config: the run's config file (as `calibrate`'s `--run-config`), or None (the log's settings and TRL's
            defaults).
        until: the last logged step to forecast; None: the run's end (`run_end`).
        level: the band's central probability; in (0, 1).
        seed: seed of the calibration's and the forecast's runs; integer ≥ 0.
        eval_size: the eval set's size when the log's reward is an eval accuracy; None: a rollout batch.
        progress: told the calibration's stages (`base.progress`; a picklable one, as the command line's stage
            lines, crosses to a worker process);
            None: silent.

    Returns:
        A JSON-ready dict (status.json's `forecasts`): `step` (the log's last rewarded step: the fit window's
        end), `until`, `collapse_probability` (the share of the level's runs that collapse or diverge by `until`, in
        [0, 1]) and its binomial standard error, the forecast's `verdict`, its `final_reward` and `peak_reward` (the
        runs' mean; reward / `reward_scale`) with the band's `final_lower` and `final_upper`, `runs`, and `seconds`
        (wall time of the calibration and forecast).

    Raises:
        PgrpoSimError: as `calibration_inputs`, `run_end`, `language_model.calibrate` and `lm_scenarios.forecast`
            (a log too short to calibrate on, `until` before the log's first step, a bad `level` or `seed`).
    """
    start = time.perf_counter()
    log, run, _ = calibration_inputs(log, run_config)
    end = run_end(run.max_steps, until)
    cal = language_model.calibrate(log, run, eval_size=eval_size, seed=seed, progress=progress)
    result = lm_scenarios.forecast(log, cal, until=max(end, cal.fit_until), level=level, seed=seed)
    entry = result.record["forecast"]
    band = entry["band"]
    return dict(
        step=cal.fit_until,
        until=result.until,
        collapse_probability=result.collapse_probability,
        collapse_probability_stderr=result.collapse_probability_stderr,
        verdict=result.verdict,
        final_reward=entry["final_reward"],
        final_lower=band["lower"][-1],
        final_upper=band["upper"][-1],
        peak_reward=entry["peak_reward"],
        runs=entry["runs"],
        seconds=time.perf_counter() - start,
    )


def alerting(forecasts: Sequence[Mapping], threshold: float, *, consecutive: int = CONSECUTIVE) -> bool:
    """Whether the last `consecutive` forecasts all put the collapse probability at or above `threshold`.

    Args:
        forecasts: `watch_forecast` entries, oldest first.
        threshold: the collapse probability that alarms; in (0, 1].
        consecutive: how many forecasts in a row must reach it; integer ≥ 1.

    Returns:
        True when the alert holds.

    Raises:
        PgrpoSimError: `threshold` or `consecutive` out of range.
    """
    check_range("alert", threshold, 0.0, 1.0, low_open=True)
    check_range("consecutive", consecutive, 1, integer=True)
    last = list(forecasts)[-consecutive:]
    return len(last) == consecutive and all(f["collapse_probability"] >= threshold for f in last)


def forecast_line(entry: Mapping, previous: Mapping | None = None) -> str:
    """One finished forecast as a status line: the step it was made from, the collapse probability with its standard
    error and runs, the run's end with the forecast final reward and its band, the verdict, the change since the
    `previous` forecast (None: the first) and its seconds.

    Args:
        entry: a `watch_forecast` entry.
        previous: the forecast before it, or None.

    Returns:
        One line.
    """
    final = entry["final_reward"]
    reward = (
        "no final reward (every run diverged)"
        if final is None
        else f"reward {final:.3f} [{entry['final_lower']:.3f}, {entry['final_upper']:.3f}]"
    )
    change = (
        "first forecast"
        if previous is None
        else f"{entry['collapse_probability'] - previous['collapse_probability']:+.2f} since step {previous['step']:g}"
    )
    return (
        f"step {entry['step']:g}: collapse probability {entry['collapse_probability']:.2f} ± "
        f"{entry['collapse_probability_stderr']:.2f} ({entry['runs']} runs); at step {entry['until']:g} {reward}, "
        f"{entry['verdict']}; {change} ({entry['seconds']:.0f} s)"
    )


class Outcome(NamedTuple):
    """What `Forecasts.finished` hands over: a finished forecast, a failed one, or the loss of the worker.

    Attributes:
        entry: the finished forecast's `watch_forecast` entry; None when it failed or the worker was lost.
        line: its status line (`forecast_line`), or what went wrong, one line.
        alerted: whether the alert (`alerting`) holds after it.
    """

    entry: dict | None
    line: str
    alerted: bool


class Forecasts:
    """The forecasts of one live run: `offer` a snapshot of its log, and it is forecast now if no forecast runs, else
    once the running one has finished (a newer snapshot replaces a waiting one), so that at most one runs and the
    caller never waits on one; `finished` hands over what has finished, with the alert rule applied. A forecast that
    fails (a log still too short to calibrate on, a bug in a stand-in) is handed over as a failure and the run goes
    on; once the worker is gone (`concurrent.futures.BrokenExecutor`, or `submit` refusing after its pool closed)
    no forecast starts again (`stopped`).

    Args:
        submit: starts a forecast of a snapshot, returning a `concurrent.futures.Future` of its `watch_forecast`
            entry.
        alert: the collapse probability that alarms in `consecutive` forecasts in a row; in (0, 1].
        consecutive: forecasts in a row that raise the alert; integer ≥ 1.

    Raises:
        PgrpoSimError: `alert` or `consecutive` out of its range.
    """

    def __init__(
        self, submit: Callable[..., concurrent.futures.Future], alert: float, *, consecutive: int = CONSECUTIVE
    ):
        check_range("alert", alert, 0.0, 1.0, low_open=True)
        check_range("consecutive", consecutive, 1, integer=True)
        self.submit, self.alert, self.consecutive = submit, alert, consecutive
        self.forecasts: list[dict] = []  # finished entries, oldest first
        self.failures: list[str] = []
        self.alerted = False  # whether the alert held after the last forecast
        self.stopped = False  # the worker is gone: no more forecasts
        self._waiting = None  # a snapshot not yet forecast
        self._running: concurrent.futures.Future | None = None
        self._lost: list[Outcome] = []  # the worker's loss, found while starting, for `finished` to hand over

    def offer(self, snapshot) -> None:
        """Forecast `snapshot` now if no forecast runs, else once the running one has finished (replacing an older
        waiting snapshot); nothing once `stopped`."""
        self._waiting = snapshot
        self._start()

    def _start(self) -> None:
        if self._running is not None or self._waiting is None or self.stopped:
            return
        snapshot, self._waiting = self._waiting, None
        try:
            self._running = self.submit(snapshot)
        except (concurrent.futures.BrokenExecutor, RuntimeError) as exc:  # the worker died, or its pool was closed
            self._lose_worker(exc)

    def _lose_worker(self, exc: BaseException) -> None:
        self.stopped, self._waiting = True, None
        self.failures.append(f"{type(exc).__name__}: {exc}")
        self._lost.append(
            Outcome(None, f"no more forecasts, the forecast worker is gone ({type(exc).__name__}: {exc})", self.alerted)
        )

    def finished(self, *, wait: bool = False) -> Iterator[Outcome]:
        """The forecasts finished since the last call, oldest first (the waiting snapshot's is started as the running
        one is handed over). Never waits, unless `wait`: then it waits for the running forecast and the waiting
        snapshot's.

        Args:
            wait: whether to wait for the forecasts still to come.

        Yields:
            An `Outcome` per finished or failed forecast, and one when the worker is lost.
        """
        while self._lost:
            yield self._lost.pop(0)
        while self._running is not None and (wait or self._running.done()):
            future, self._running = self._running, None
            try:
                entry = future.result()
            except concurrent.futures.BrokenExecutor as exc:
                self._lose_worker(exc)
            except PgrpoSimError as exc:  # e.g. a log still too short to calibrate on: the next snapshot may do
                self.failures.append(str(exc))
                yield Outcome(None, f"a forecast failed: {exc}", self.alerted)
            except Exception as exc:  # a stand-in's or a bug's: said, and the run goes on
                self.failures.append(f"{type(exc).__name__}: {exc}")
                yield Outcome(None, f"a forecast failed: {type(exc).__name__}: {exc}", self.alerted)
            else:
                line = forecast_line(entry, self.forecasts[-1] if self.forecasts else None)
                self.forecasts.append(entry)
                self.alerted = alerting(self.forecasts, self.alert, consecutive=self.consecutive)
                yield Outcome(entry, line, self.alerted)
            while self._lost:
                yield self._lost.pop(0)
            self._start()
