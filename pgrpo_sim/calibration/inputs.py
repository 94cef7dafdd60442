"""What a calibration starts from, as the command line builds it (`calibrate`, `forecast`, `what-if`): the log with
its reward as a success rate where it can be, the run's configuration with the source of each value, and the fit
window.

`calibration_inputs`: the run config file's keys over the settings the log states over TRL's defaults
(`resolve_run_config`), with notes of what was assumed and a warning where the log contradicts one
(`kl_warning`), then the log's success-rate column when its reward is none (`success_rate_log`).
`fit_window_end`: the last step of the fit window from `fit_until` or a fraction of the logged rewards.
A logged learning rate's schedule is read by `log_settings` (`logs.readers.logged_schedule`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from ..logs.readers import SCHEDULE_TOLERANCE, TrainingLog, check_log
from ..models.schedules import LR_SCHEDULES
from .run_config import RunConfig, check_run_config, log_settings, resolve_run_config
from .run_config_files import RunConfigFile, load_run_config
from .success import success_rate_log


def calibration_inputs(
    log: TrainingLog, run_config: str | Path | None = None, *, success_rate: bool = True
) -> tuple[TrainingLog, RunConfig, RunConfigFile | None]:
    """(log, run, the loaded run config file or None) for a calibration on `log` (module docstring). `run_config`: a
    TRL/verl/pgrpo-sim config file; `success_rate`: look for a success-rate column when the reward leaves
    [0, reward_scale] (False: the caller chose the reward column).

    Args:
        log: the training log (`TrainingLog`).
        run_config: path of a JSON or YAML run-config file (`load_run_config`), or None (log settings and TRL's
            defaults only).
        success_rate: whether to swap in the log's success-rate column when its reward is none
            (`success_rate_log`).

    Returns:
        (log, run, loaded): the log, with its success-rate column as `reward` where one was used; the `RunConfig`
        with each key's source and the notes (the file's summary, a KL warning, a logged learning rate that follows
        no schedule, the reward's reading); the loaded `RunConfigFile`, or None without `run_config`.

    Raises:
        PgrpoSimError: the file cannot be read or holds a bad key or value, or `log` is not a `TrainingLog`.
    """
    loaded = load_run_config(run_config) if run_config else None
    max_steps = loaded.keys.get("max_steps") if loaded else None  # the schedule's length, when the file gives it
    run = resolve_run_config(loaded and loaded.keys, log_settings(log, max_steps=max_steps))
    run = run.with_notes(*(loaded.summary() if loaded else ()))
    run = run.with_notes(kl_warning(run, log, run_config), _unread_schedule(run, log, run_config))
    if success_rate:
        log, run, _ = success_rate_log(log, run)
    return log, run, loaded


def fit_window_end(log: TrainingLog, fit_until: float | None = None, fit_fraction: float | None = None) -> float | None:
    """The fit window's last step: `fit_until` (a step within the log's rewarded steps), or the logged reward step
    that closes the first `fit_fraction` of them, or None (the whole log). `PgrpoSimError` for both, or a value
    out of range.

    Args:
        log: the training log (`TrainingLog`).
        fit_until: the window's last step, in the log's steps; within [first, last] rewarded step; or None.
        fit_fraction: the share of the logged rewards the window holds; in (0, 1]; or None.

    Returns:
        The window's last step (the log's steps), or None when neither is given (the whole log).

    Raises:
        PgrpoSimError: the log has no reward, both are given, or either is out of range.
    """
    steps = log.series("reward")[0] if "reward" in log else np.array([])
    if steps.size == 0:
        raise PgrpoSimError("the log has no reward to calibrate on")
    if fit_until is not None and fit_fraction is not None:
        raise PgrpoSimError("give fit_until or fit_fraction, not both")
    if fit_fraction is not None:
        check_range("fit-fraction", fit_fraction, 0.0, 1.0, low_open=True)
        fit_until = float(steps[max(math.ceil(fit_fraction * steps.size) - 1, 0)])
    if fit_until is not None:
        check_range("fit-until", fit_until, float(steps[0]), float(steps[-1]))
    return fit_until


def kl_warning(run: RunConfig, log, run_config: str | Path | None = None) -> str:
    """A warning (text starting "warning:") when `log` records a non-zero KL to the reference while `run` has β = 0,
    so the calibration has no KL penalty the run may have had; "" otherwise. (TRL logs `kl` only when β ≠ 0.)

    Args:
        run: the run's configuration (`RunConfig`).
        log: the training log (`TrainingLog`).
        run_config: the run-config file the run was read from, or None (then the warning says to pass one).

    Returns:
        The warning, one sentence, or "".

    Raises:
        PgrpoSimError: `run` or `log` has the wrong type.
    """
    check_run_config(run)
    check_log(log)
    if run.beta != 0 or "kl" not in log:
        return ""
    kl = log.series("kl")[1]
    if not np.any(kl != 0):
        return ""
    return (
        f"warning: the log records a non-zero KL (median {np.median(np.abs(kl)):.3g}) but β = 0 "
        f"({run.sources.get('beta', 'given')}): calibrated without a KL penalty; if the run had one, "
        + ("pass its beta in run_config=FILE" if run_config is None else f"set its beta in {Path(run_config).name}")
    )


def _unread_schedule(run: RunConfig, log, run_config: str | Path | None) -> str:
    """A warning when `log` records a learning rate that `logged_schedule` could not read, so that the run's
    learning rate is TRL's default; "" otherwise. `run_config`: the file given, or None."""
    if run.sources["learning_rate"] != "default" or "learning_rate" not in log:
        return ""
    lr = log.series("learning_rate")[1]
    if lr.size == 0:
        return ""
    return (
        f"warning: the log's learning rate (peak {np.max(lr):.3g}) follows none of the schedules "
        f"{', '.join(LR_SCHEDULES)} within {SCHEDULE_TOLERANCE:.0%} of its peak (or has fewer than 3 values): "
        "learning_rate and its schedule are assumed; "
        + ("pass them in run_config=FILE" if run_config is None else f"set them in {Path(run_config).name}")
    )
