"""A forecast of a run that is still being written, and the rule that calls it alarming: the library half of
`pgrpo-sim watch` and of the TRL callback (issue 49; docs/guide/watch.md).

`watch_forecast` calibrates the language-model level on the log as it stands (`language_model.calibrate`, the fit
window all of it) and forecasts the run to its end (`lm_scenarios.forecast`): the share of the level's runs that
collapse by then is the collapse probability, with its binomial standard error. The bandit cannot collapse
(docs/design.md §6), so a watch asks the level. `alerting` is the alert rule: the probability at or above a
threshold in the last `consecutive` forecasts, so that one noisy forecast does not stop a run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from ..base.progress import Progress
from ..logs.readers import TrainingLog
from . import language_model, lm_scenarios
from .inputs import calibration_inputs


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
        progress: told the calibration's stages (`base.progress`; a `StageLines` crosses to a worker process);
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
    entry = result["forecast"]
    band = entry["band"]
    return dict(
        step=cal.fit_until,
        until=result["until"],
        collapse_probability=result["collapse_probability"],
        collapse_probability_stderr=result["collapse_probability_stderr"],
        verdict=result["verdict"],
        final_reward=entry["final_reward"],
        final_lower=band["lower"][-1],
        final_upper=band["upper"][-1],
        peak_reward=entry["peak_reward"],
        runs=entry["runs"],
        seconds=time.perf_counter() - start,
    )


def alerting(forecasts: Sequence[Mapping], threshold: float, *, consecutive: int = 2) -> bool:
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
