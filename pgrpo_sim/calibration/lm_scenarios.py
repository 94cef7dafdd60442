"""What-if scenarios and forecasts answered on the language-model level calibrated on a log
(`language_model.calibrate`): a scenario's runs draw (start format, level rate) pairs from the posterior, each with
its own seed, and `collapse_probability` is the share of them whose verdict (`analysis.summaries.verdict`, per run) is
"collapses" or "diverges", with its binomial standard error (docs/lm.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ..analysis.lm_sweep import running_mean, smoothing_window, summarize_runs
from ..analysis.summaries import running_mean_stderr, verdict
from ..base.checks import check_range, check_seed, check_steps
from ..base.errors import PgrpoSimError
from ..base.progress import Progress, report
from ..logs.readers import TrainingLog
from ..models import lm
from ..models.lm import READOUTS
from .inference import Band
from .language_model import Calibration, LevelJob, cached_runs_each
from .lm_level import LEVEL_KEYS, Level, level_config, level_settings
from .results import Forecast, Scenario, WhatIf
from .run_config import RunConfig


def check_scenario(run: RunConfig, changes: Mapping[str, object], level: Level | None = None) -> RunConfig:
    """The run a scenario makes, if the level can run it.

    Args:
        run: the calibrated run's config.
        changes: run-config key → its value in the scenario; keys from `LEVEL_KEYS`.
        level: how the level is run; None: `Level()`.

    Returns:
        `run` with `changes` applied.

    Raises:
        PgrpoSimError: one line: a key the level does not take, a value `RunConfig` refuses, or mini-batches that
            do not divide the level's batch.
    """
    unknown = sorted(set(changes) - set(LEVEL_KEYS))
    if unknown:
        raise PgrpoSimError(
            f"the language-model level cannot change {unknown[0]} (it takes {', '.join(LEVEL_KEYS)}): use the "
            "bandit level"
        )
    changed = run.replace(**changes)
    level_config(changed, 1e-3, 0.5, Level() if level is None else level, 1)
    return changed


def scenario(cal: Calibration, changes: Mapping[str, object], *, steps: int, level: float = 0.8, seed: int = 0) -> dict:
    """A scenario's runs on the calibrated level: `cal.level.draws` runs of `steps` GRPO steps, each at a level rate
    drawn from the posterior × the scenario's rate / the run's, with its own seed. Rewards are in the log's share units
    (each run's level reward × its draw's ceiling c: the log's reward / `reward_scale`, in [0, 1]).

    Args:
        cal: the calibrated level.
        changes: run-config key → its value in the scenario (keys from `LEVEL_KEYS`); {}: the calibrated run.
        steps: GRPO steps per run; integer ≥ 1.
        level: the band's central probability; in (0, 1).
        seed: seed of the posterior draws and the runs; integer ≥ 0.

    Returns:
        The scenario's summary, JSON-ready: `model` ("lm"), `runs` (`cal.level.draws`), `collapse_probability` (the
        share of runs whose verdict is "collapses" or "diverges", in [0, 1]) and `collapse_probability_stderr` (its
        binomial standard error), `verdict` ("collapses" when that share is ≥ ½, else the verdict of the runs' mean
        curve) and `verdicts` (per run), the mean final and peak reward (`final_reward`, `peak_reward`, the peak of
        the smoothed mean curve), the mean final chance-corrected reward (`final_knowledge`: what an LLM would log,
        its chance being 0), `final_entropy` and `final_mean_length` (the runs' means; None where every run's is
        NaN), per run its draw (`level_learning_rates`, `start_formats`, `ceilings`), and the `band`: `level`,
        `steps` (the GRPO steps 0 … steps − 1) and per step the runs' `mean` and central `level` quantiles
        (`lower`, `upper`), lists of length `steps`.

    Raises:
        PgrpoSimError: a scenario the level cannot run (`check_scenario`), or `steps`, `level` or `seed` out of
            its range.
    """
    check_steps(steps)
    _check_band(level, seed)
    plan = _plan(cal, changes, steps, seed)
    return _summary(cal, plan, cached_runs_each(plan.jobs), level)


class _Plan(NamedTuple):
    """A scenario's draws and the level's jobs that run them: one job per start format (a static setting), its runs
    the draws of that format in draw order (`groups`)."""

    run: RunConfig
    formats: np.ndarray
    rates: np.ndarray
    ceilings: np.ndarray
    groups: list[np.ndarray]
    jobs: list[LevelJob]


def _plan(cal: Calibration, changes: Mapping[str, object], steps: int, seed: int) -> _Plan:
    """The scenario's run, its `cal.level.draws` posterior draws (`seed`) at the scenario's rate, and its jobs (each
    start format's with the seed `seed` + its index)."""
    run = check_scenario(cal.run, changes, cal.level)
    formats, rates, ceilings = cal.draw(cal.level.draws, np.random.default_rng(seed))
    rates = rates * run.learning_rate / cal.run.learning_rate
    schedule = cal.schedule_steps(run)
    groups = [np.flatnonzero(formats == start_format) for start_format in np.unique(formats)]
    jobs = [
        LevelJob([
            level_settings(run, float(rates[j]), cal.start_accuracy, cal.level, schedule, float(formats[j]))
            for j in which
        ], steps, seed + i)
        for i, which in enumerate(groups)
    ]  # fmt: skip
    return _Plan(run, formats, rates, ceilings, groups, jobs)


def _summary(cal: Calibration, plan: _Plan, runs: list[lm.Run], level: float) -> dict:
    """`scenario`'s summary of the plan's runs (one `lm.Run` per job)."""
    run, formats, rates, ceilings = plan.run, plan.formats, plan.rates, plan.ceilings
    steps = plan.jobs[0].steps
    result = _draw_order(plan, runs)
    scaled = dict(result.readouts, reward=np.asarray(result.readouts["reward"], float) * ceilings[:, None])
    result = result._replace(readouts=scaled)  # in the log's share units: c × the level's reward
    first = level_config(
        run, float(rates[0]), cal.start_accuracy, cal.level, cal.schedule_steps(run), float(formats[0])
    )
    rows = summarize_runs(result, first, formats)  # the draws share the task and batch of the first
    broke = np.array([row["verdict"] in ("collapses", "diverges") for row in rows])
    share = float(np.mean(broke))
    reward = np.asarray(result.readouts["reward"], float)
    mean = np.nanmean(reward, axis=0)
    smooth = running_mean(mean, smoothing_window(steps))
    tail = (1 - level) / 2
    finals = np.array([row["final_reward"] for row in rows])
    known = np.array([row["final_knowledge"] for row in rows]) * ceilings
    return dict(
        model="lm",
        runs=len(rows),
        collapse_probability=share,
        collapse_probability_stderr=float(np.sqrt(share * (1 - share) / len(rows))),
        verdict="collapses"
        if share >= 0.5
        else verdict(smooth, False, collapse=False, stderr=running_mean_stderr(mean, smoothing_window(steps))),
        verdicts=[row["verdict"] for row in rows],
        final_reward=None if np.all(np.isnan(finals)) else float(np.nanmean(finals)),
        final_knowledge=None if np.all(np.isnan(known)) else float(np.nanmean(known)),
        peak_reward=float(np.max(smooth)),
        final_entropy=_nanmean([row["final_entropy"] for row in rows]),
        final_mean_length=_nanmean([row["final_mean_length"] for row in rows]),
        level_learning_rates=rates.tolist(),
        start_formats=formats.tolist(),
        ceilings=ceilings.tolist(),
        band=dict(
            level=level,
            steps=list(range(steps)),
            mean=mean.tolist(),
            lower=np.nanquantile(reward, tail, axis=0).tolist(),
            upper=np.nanquantile(reward, 1 - tail, axis=0).tolist(),
        ),
    )


def _draw_order(plan: _Plan, runs: list[lm.Run]) -> lm.Run:
    """The jobs' runs (one `lm.Run` per job of `plan`) as one `lm.Run` in draw order."""
    draws, steps = plan.rates.size, plan.jobs[0].steps
    readouts = {name: np.zeros((draws, steps), np.float32) for name in READOUTS}
    diverged, diverged_step = np.zeros(draws, bool), np.zeros(draws, int)
    for which, result in zip(plan.groups, runs, strict=True):
        for name in READOUTS:
            readouts[name][which] = np.asarray(result.readouts[name])
        diverged[which], diverged_step[which] = np.asarray(result.diverged), np.asarray(result.diverged_step)
    return lm.Run(readouts, None, diverged, diverged_step)


def _check_band(level: float, seed: int) -> None:
    """A scenario's band and seed, checked before any run."""
    check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    check_seed(seed)


def _nanmean(values) -> float | None:
    values = np.asarray(values, float)
    return None if np.all(np.isnan(values)) else float(np.nanmean(values))


def what_if(
    calibration: Calibration,
    scenarios: list[Mapping[str, object]],
    *,
    until: float,
    level: float = 0.8,
    seed: int = 0,
    progress: Progress | None = None,
) -> WhatIf:
    """The calibrated run itself and each scenario on the level (`scenario`), each to the logged step `until`
    (`Calibration.grpo_steps` GRPO steps), with the same posterior draws and seeds (common random numbers).

    Args:
        calibration: the calibrated level.
        scenarios: one mapping of run-config changes per scenario (keys from `LEVEL_KEYS`).
        until: the last logged step simulated; ≥ `calibration.first_step`.
        level: the bands' central probability; in (0, 1).
        seed: seed of every scenario's posterior draws and runs (the same draws for each); integer ≥ 0.
        progress: told each scenario as it starts (`base.progress`); None: silent.

    Returns:
        The `WhatIf` (model "lm"): each `Scenario`'s record is its `scenario` summary (a scenario's with its
        changes as "set"): the records' rewards in the log's share units (reward / `reward_scale`), the answers'
        final rewards and bands in the log's units (× `reward_scale`).

    Raises:
        PgrpoSimError: as `scenario`, or `until` before the log's first step; before any run: every scenario
            is checked first.
    """
    _check_band(level, seed)
    for changes in scenarios:
        check_scenario(calibration.run, changes, calibration.level)
    check_range("until", until, calibration.first_step)
    steps = calibration.grpo_steps(until)
    plans = [_plan(calibration, changes, steps, seed) for changes in [{}, *scenarios]]
    jobs = [job for plan in plans for job in plan.jobs]
    report(
        progress,
        f"the calibrated run and {len(scenarios)} scenario{'s' if len(scenarios) != 1 else ''} on the level: "
        f"{len(plans) * calibration.level.draws} runs of {steps} GRPO steps in {len(jobs)} programs",
    )
    runs, answers = iter(cached_runs_each(jobs)), []
    for changes, plan in zip([{}, *scenarios], plans, strict=True):
        summary = _summary(calibration, plan, [next(runs) for _ in plan.jobs], level)
        answers.append(_answer(calibration, dict(changes), summary))
    baseline, answers = answers[0], answers[1:]
    record = dict(model="lm", band=level, baseline=baseline.record, scenarios=[a.record for a in answers])
    return WhatIf("lm", baseline, tuple(answers), level, record)


def _answer(cal: Calibration, changes: dict, summary: dict) -> Scenario:
    """The `Scenario` of a `scenario` summary: its final reward and band in the log's units (the summary's are
    reward / `reward_scale`, as whatif.json keeps them)."""
    record = (dict(set=changes) if changes else {}) | summary
    probability, stderr = summary["collapse_probability"], summary["collapse_probability_stderr"]
    final = None if summary["final_reward"] is None else summary["final_reward"] * cal.run.reward_scale
    return Scenario(changes, summary["verdict"], final, probability, stderr, band(cal, summary), record)


def band(cal: Calibration, entry: Mapping) -> Band:
    """The band of a `scenario` summary at the logged steps of its GRPO steps, in the log's units (the bandit's
    `Band`: the level has no MAP run, so `diverged` says every run diverged, and the level's diverged runs, NaN,
    are left out of the band's mean and quantiles).

    Args:
        cal: the calibration the entry was run on (its logged-step mapping and `reward_scale`).
        entry: a `scenario` summary (or a what-if record, or its JSON).

    Returns:
        The `Band`: T = the entry's GRPO steps; `steps` the logged step of each GRPO step's rollout, `mean`, `lo`,
        `hi` the runs' mean and central `level` quantiles in the log's units (the summary's reward × `reward_scale`),
        float [T] each; `diverged_fraction` the share of runs that diverged.
    """
    band = entry["band"]
    steps = cal.logged_step(np.asarray(band["steps"]))
    diverged = np.array([v == "diverges" for v in entry["verdicts"]])
    scale = cal.run.reward_scale
    mean, lo, hi = (np.asarray(band[k], float) * scale for k in ("mean", "lower", "upper"))
    return Band(steps, mean, lo, hi, band["level"], bool(diverged.all()), float(diverged.mean()))


def forecast(
    log: TrainingLog, calibration: Calibration, *, until: float, level: float = 0.8, seed: int = 0
) -> Forecast:
    """The calibrated run's forecast on the level to the logged step `until`, with the run's own collapse
    probability, scored on the log's rewards after the fit window.

    Args:
        log: the training log `calibration` was fitted on (its rewards after `calibration.fit_until` are held out).
        calibration: the calibrated level.
        until: the last logged step forecast; ≥ `calibration.first_step`.
        level: the band's central probability; in (0, 1).
        seed: seed of the posterior draws and the runs; integer ≥ 0.

    Returns:
        The `Forecast` (model "lm"): its collapse probability is the share of the level's runs that collapse by
        `until` (the run's own foresight), its verdict the calibrated run's; `heldout` scores the band on the log's
        rewards at the logged steps in (`fit_until`, `until`]: `n` (those steps), `mae` (mean absolute error of the
        band's mean, in the log's units, as the bandit's) and `coverage` (the share of held-out rewards inside the
        band, in [0, 1]); None without held-out steps. Its record (forecast.json): {"model": "lm", "band": `level`,
        "until", "fit_until", "collapse_probability", "collapse_probability_stderr", "verdict", "forecast": the
        calibrated run's `scenario` summary over `calibration.grpo_steps(until)` GRPO steps, "heldout" (its `mae` in
        the log's reward / `reward_scale`, as the summary's rewards)}.

    Raises:
        PgrpoSimError: as `scenario`, or `until` before the log's first step.
    """
    check_range("until", until, calibration.first_step)
    entry = scenario(calibration, {}, steps=calibration.grpo_steps(until), level=level, seed=seed)
    steps, values = log.series("reward")
    values = np.asarray(values, float) / calibration.run.reward_scale
    held = (steps > calibration.fit_until) & (steps <= until)
    heldout = None
    if np.any(held):
        index = calibration.grpo_index(steps[held])
        mean, lo, hi = (np.asarray(entry["band"][k])[index] for k in ("mean", "lower", "upper"))
        inside = (values[held] >= lo) & (values[held] <= hi)
        mae = float(np.mean(np.abs(values[held] - mean)))
        heldout = dict(n=int(held.sum()), mae=mae, coverage=float(inside.mean()))
    probability, stderr = entry["collapse_probability"], entry["collapse_probability_stderr"]
    record = dict(
        model="lm",
        band=level,
        until=until,
        fit_until=calibration.fit_until,
        collapse_probability=probability,
        collapse_probability_stderr=stderr,
        verdict=entry["verdict"],
        forecast=entry,
        heldout=heldout,
    )
    scored = None if heldout is None else dict(heldout, mae=heldout["mae"] * calibration.run.reward_scale)
    fit_until, verdict_ = calibration.fit_until, entry["verdict"]
    return Forecast("lm", band(calibration, entry), fit_until, until, verdict_, probability, stderr, scored, record)
