"""Forecast a run from its calibrated model, score it on held-out steps, and answer what-if scenarios.

`forecast`: the calibrated model continued to `until` with its band; where the log goes past the fit window, the
held-out steps score it (MAE, band coverage) beside five baselines fitted to the same window: persistence (mean
of the last 10 % of the window), the saturation, critical and oscillator laws, and ScaleRL's sigmoid.

`goodness_of_fit`: whether the calibration describes its own fit window — the shares of the window's rewards below
and above the predictive band, each within `GOF_Z` binomial standard errors of the nominal tail. A calibration that
fails it is no basis for a forecast or a verdict (the command line refuses them unless forced).

`what_if`: the calibrated θ (and its uncertainty) rerun with changed run-config keys; each scenario's mean curve
gets a verdict by `analysis.summaries.verdict` (diverges | collapses | flat | oscillates | plateaus | learns; the MAP
run's divergence is `diverges`); `scenario_note` says when a scenario's change cannot act (the clip on-policy).
A posterior draw that diverges has no curve: the mean and band are over the draws that did not, and the fraction
that did (`diverged_fraction`) is reported beside them (`draws_note`).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from ..analysis.summaries import summarize_curve, verdict
from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from ..base.progress import Progress, report
from ..base.serialise import finite_or_none
from ..logs.laws import KNOWN_LAWS, fit_law
from ..logs.readers import TrainingLog, check_log
from .inference import DRAWS, Band, Calibration, check_calibration, model_steps, predictive_band
from .model import population_model
from .results import Forecast, Scenario, WhatIf
from .run_config import RunConfig

_summarize = jax.jit(summarize_curve)
"""`summarize_curve`, compiled once per curve length (op by op it costs ~0.3 s a scenario)."""
BASELINE_LAWS = tuple(law for law in KNOWN_LAWS)
"""Law baselines of a held-out score (besides persistence)."""


MAX_HORIZON = 10
"""A forecast or what-if reaches at most this many fit windows past the log's first step: further out, the model
would predict more than ten times what it was calibrated on (and a run of 10⁵ steps takes minutes)."""


def horizon_limit(first_step: float, fit_until: float) -> float:
    """The last step a forecast or what-if may reach for a fit on the log's steps `first_step`…`fit_until`.

    Args:
        first_step: the log's first rewarded step (model step 0); finite.
        fit_until: the fit window's last step; finite, ≥ `first_step`.

    Returns:
        first_step + `MAX_HORIZON` × max(fit_until − first_step, 1), in the log's steps.

    Raises:
        PgrpoSimError: a step is not finite, or `fit_until` < `first_step`.
    """
    check_range("first_step", first_step)
    check_range("fit_until", fit_until, first_step)
    return float(first_step + MAX_HORIZON * max(fit_until - first_step, 1.0))


def extend(calibration: Calibration, until_step: float, run: RunConfig | None = None) -> Calibration:
    """The calibration's model simulated up to the log's step `until_step` (and with another run config), at most
    `horizon_limit`.

    Args:
        calibration: a `Calibration`.
        until_step: the last step to simulate, in the log's steps; in (first_step, `horizon_limit`].
        run: the run config to simulate instead of the calibrated one (a scenario); None: the calibrated one.

    Returns:
        The `Calibration` with θ̂ and covariance unchanged and its model over model steps
        0 … round(until_step − first_step).

    Raises:
        PgrpoSimError: `calibration` is not a `Calibration`, or `until_step` is out of range.
    """
    check_calibration(calibration)
    check_range("until", until_step)
    steps = round(float(until_step - calibration.first_step))
    if steps < 1:
        raise PgrpoSimError(f"until must be after the log's first step {calibration.first_step:g}, got {until_step:g}")
    limit = horizon_limit(calibration.first_step, calibration.fit_until)
    if until_step > limit:
        raise PgrpoSimError(
            f"until must be <= {limit:g} ({MAX_HORIZON} fit windows past the log's first step), got {until_step:g}"
        )
    # rebuilt, not replaced: another run config can change the schedule's length (max_steps), the optimiser steps
    # per logged step (num_iterations, steps_per_generation) and the number of prompts
    model = population_model(
        run or calibration.model.run, steps, log_format=calibration.log_format, horizon=calibration.model.horizon
    )
    return calibration.with_model(model)


def heldout_score(
    log: TrainingLog, calibration: Calibration, band: Band, *, progress: Progress | None = None
) -> dict | None:
    """MAE and band coverage of the forecast on the log's rewards after the fit window, with the baselines' MAE;
    None when the log has no steps after it (within the band's range). A diverged forecast has no MAE and no
    coverage (None): it is not a number to compare. The baselines' fit is told to `progress`.

    Args:
        log: the training log the calibration was fitted to (`TrainingLog`).
        calibration: the `Calibration`.
        band: its reward `Band`, reaching past the fit window.
        progress: told when the baselines are fitted; None: silent.

    Returns:
        None, or {"mae": mean absolute error of the band's mean (the log's reward units), "coverage": share of
        held-out rewards inside the band (in [0, 1]), "n": held-out steps, "baselines": {"persistence" and each of
        `BASELINE_LAWS`: its MAE, None where its fit failed}}.
    """
    steps, reward = log.series("reward")
    fit = steps <= calibration.fit_until
    held = (steps > calibration.fit_until) & (steps <= band.steps[-1])
    if not held.any():
        return None
    idx = model_steps(steps[held], calibration.first_step)
    y = reward[held]
    mean, lo, hi = band.mean[idx], band.lo[idx], band.hi[idx]
    t_fit, y_fit = steps[fit], reward[fit]
    baselines: dict[str, float | None] = {
        "persistence": float(np.mean(np.abs(y - y_fit[-max(len(y_fit) // 10, 1) :].mean())))
    }
    report(progress, f"fitting {len(BASELINE_LAWS)} baseline laws to the fit window")
    for law in BASELINE_LAWS:
        try:
            curve = fit_law(law, t_fit, y_fit).curve(steps[held])
            baselines[law] = float(np.mean(np.abs(y - curve))) if np.all(np.isfinite(curve)) else None
        except PgrpoSimError:
            baselines[law] = None
    return dict(
        mae=None if band.diverged else float(np.mean(np.abs(y - mean))),
        coverage=None if band.diverged else float(np.mean((y >= lo) & (y <= hi))),
        n=int(held.sum()),
        baselines=baselines,
    )


GOF_Z = 3.0
"""Tolerance of `goodness_of_fit`, in binomial standard errors: a band that describes its data leaves a share
below it (and one above) farther than this from the nominal tail with probability < 0.3 % each."""


@dataclasses.dataclass(frozen=True)
class GoodnessOfFit:
    """How a calibration's predictive band fits the logged rewards of its own fit window (`goodness_of_fit`): the
    shares `below` and `above` the central `level` band, each to be within its `tolerance` of the nominal tail
    q = (1 − level)/2. A side counts only the `n_below` (`n_above`) rewards where that edge of the band is off the
    reward's range (`Calibration.reward_bounds`: [0, reward_scale], or [a, a + b]): at the bound nothing can lie
    beyond it (a reward of 0 is common); a side with none is not checked (its share NaN). A calibrated run
    that `diverged` fails, and so does a band left undefined at some of the window's rewards (fewer than two of its
    posterior draws stay finite there): nothing is compared there, which must not pass for a fit.

    Attributes:
        n: logged rewards in the fit window.
        level: the band's central probability; in (0, 1).
        below: share of the counted rewards below the band; in [0, 1], NaN when none is counted.
        n_below: rewards counted for `below` (where the band's lower edge is above the reward's lower bound).
        above: share of the counted rewards above the band; in [0, 1], NaN when none is counted.
        n_above: rewards counted for `above` (where the band's upper edge is below the reward's upper bound).
        diverged: whether the calibrated (MAP) run diverged in the window.
        n_undefined: rewards of the window where the band's edges are undefined (NaN) though the MAP run is finite.
    """

    n: int
    level: float
    below: float
    n_below: int
    above: float
    n_above: int
    diverged: bool
    n_undefined: int = 0

    @property
    def expected(self) -> float:
        """The nominal share on each side, (1 − level)/2."""
        return (1 - self.level) / 2

    def tolerance(self, n: int) -> float:
        """GOF_Z binomial standard errors of a share of n rewards, GOF_Z·√(q(1 − q)/n).

        Args:
            n: the rewards the share is over; ≥ 0.

        Returns:
            The tolerance, a share; +∞ when n = 0.
        """
        q = self.expected
        return GOF_Z * math.sqrt(q * (1 - q) / n) if n else math.inf

    @property
    def passed(self) -> bool:
        """Whether the run did not diverge and each counted side's share is within its tolerance of `expected`."""
        sides = ((self.below, self.n_below), (self.above, self.n_above))
        within = all(not n or abs(share - self.expected) <= self.tolerance(n) for share, n in sides)
        return not self.diverged and not self.n_undefined and within

    def describe(self) -> str:
        """One clause: what was compared, the numbers and the verdict."""
        if self.diverged:
            return f"misses its fit window: the calibrated run diverges there ({self.n} logged rewards)"
        if self.n_undefined:
            return (
                f"misses its fit window: its band is undefined at {self.n_undefined} of {self.n} logged rewards (fewer "
                "than two of its posterior draws stay finite there)"
            )

        clauses = []
        for share, n, word in ((self.below, self.n_below, "below"), (self.above, self.n_above, "above")):
            if not n:
                clauses.append(f"none can lie {word} it (that edge is at the reward's bound)")
                continue
            of = "" if n == self.n else f", of {n} counted"
            clauses.append(f"{share:.0%} lie {word} it ({self.expected:.0%} ± {self.tolerance(n):.1%} expected{of})")
        return (
            f"{'fits' if self.passed else 'misses'} its fit window: of its {self.n} logged rewards and its "
            f"{self.level:.0%} band, {clauses[0]} and {clauses[1]}"
        )

    def as_dict(self) -> dict:
        """JSON-ready: the counts, shares, expected share, tolerances, the rule and the verdict."""
        return dict(
            check="shares of the fit window's logged rewards below and above the predictive band",
            n=self.n,
            band=self.level,
            below=finite_or_none(self.below),
            n_below=self.n_below,
            above=finite_or_none(self.above),
            n_above=self.n_above,
            expected_each_side=self.expected,
            tolerance_below=finite_or_none(self.tolerance(self.n_below)),
            tolerance_above=finite_or_none(self.tolerance(self.n_above)),
            rule=f"each share within {GOF_Z:g} binomial standard errors √(q(1 − q)/n) of q = (1 − band)/2, counted "
            "where the band's edge is off the reward's bounds",
            diverged=self.diverged,
            n_undefined=self.n_undefined,
            passed=self.passed,
        )


def goodness_of_fit(
    log: TrainingLog, calibration: Calibration, band: Band | None = None, *, level: float = 0.8, seed: int = 0
) -> GoodnessOfFit:
    """Whether the calibration describes its own fit window: the shares of the window's logged rewards below and
    above its central predictive band, against the nominal (1 − level)/2 each (`GoodnessOfFit`). `band`: a
    `predictive_band` of this calibration reaching the window's end (its level is used); else one is drawn with
    `level` and `seed`.

    Args:
        log: the training log the calibration was fitted to (`TrainingLog`).
        calibration: the `Calibration`.
        band: its reward `Band`, or None (one is drawn).
        level: the drawn band's central probability; in (0, 1).
        seed: the drawn band's seed; integer in [0, 2³² − 1].

    Returns:
        The `GoodnessOfFit`.

    Raises:
        PgrpoSimError: `log` or `calibration` has the wrong type, or `level` or `seed` is out of range.
    """
    check_log(log)
    check_calibration(calibration)
    if band is None or band.steps[-1] < calibration.fit_until:
        band = predictive_band(extend(calibration, calibration.fit_until), level=level, seed=seed)
    steps, reward = log.series("reward")
    window = (steps >= calibration.first_step) & (steps <= calibration.fit_until)
    idx = model_steps(steps[window], calibration.first_step)
    y, lo, hi = reward[window], band.lo[idx], band.hi[idx]  # the band is in the log's units too
    n = int(y.size)
    if band.diverged:
        return GoodnessOfFit(n, band.level, math.nan, 0, math.nan, 0, True)
    bottom, top = calibration.reward_bounds
    undefined = int(np.sum(~(np.isfinite(lo) & np.isfinite(hi))))
    open_lo, open_hi = lo > bottom, hi < top  # an edge at a bound has nothing beyond
    share = lambda beyond, where: float(np.mean(beyond[where])) if where.any() else math.nan
    below, above = share(y < lo, open_lo), share(y > hi, open_hi)
    return GoodnessOfFit(n, band.level, below, int(open_lo.sum()), above, int(open_hi.sum()), False, undefined)


def band_dict(band: Band) -> dict:
    """JSON-ready band: steps, mean, lo, hi (None where undefined, and everywhere when the MAP run diverged).

    Args:
        band: the `Band`.

    Returns:
        {"steps", "mean", "lo", "hi"}: lists of T+1 floats (the log's steps; the observable's units) or None.
    """
    clean = lambda a: [float(v) if np.isfinite(v) and not band.diverged else None for v in a]
    return dict(steps=[float(s) for s in band.steps], mean=clean(band.mean), lo=clean(band.lo), hi=clean(band.hi))


def forecast(
    log: TrainingLog,
    calibration: Calibration,
    *,
    until: float | None = None,
    level: float = 0.8,
    seed: int = 0,
    progress: Progress | None = None,
) -> Forecast:
    """The calibrated bandit's forecast from the log's first step to `until`, scored on the log's rewards after the
    fit window; each stage (the band, the baselines) is told to `progress`.

    Args:
        log: the training log the calibration was fitted to (`TrainingLog`).
        calibration: the `Calibration` (`calibrate`).
        until: the last step to forecast, in the log's steps, at most `horizon_limit`; None: the log's last step.
        level: the band's central probability; in (0, 1).
        seed: the band's seed; integer in [0, 2³² − 1].
        progress: told at each stage; None: silent.

    Returns:
        The `Forecast` (model "bandit"; no verdict or collapse probability: the bandit cannot collapse); its
        `heldout` is `heldout_score`'s, and its record (forecast.json) holds model, fit_until, until, the band level,
        `band_dict`'s lists, diverged, diverged_fraction and heldout (None when the log ends in the fit window).

    Raises:
        PgrpoSimError: `log` or `calibration` has the wrong type, or `until`, `level` or `seed` is out of range.
    """
    check_log(log)
    check_calibration(calibration)
    until = float(log["step"][-1]) if until is None else float(until)
    report(progress, f"drawing the {level:.0%} band to step {until:g} ({DRAWS + 1} runs)")
    band = predictive_band(extend(calibration, until), level=level, seed=seed)
    score = heldout_score(log, calibration, band, progress=progress)
    record = dict(
        model="bandit",
        fit_until=calibration.fit_until,
        until=until,
        band=level,
        **band_dict(band),
        diverged=band.diverged,
        diverged_fraction=band.diverged_fraction,
        heldout=score,
    )
    return Forecast("bandit", band, calibration.fit_until, until, None, None, None, score, record)


def draws_note(band: Band) -> str | None:
    """What a band leaves out, in words (None when every posterior draw ran): the fraction of draws that diverged,
    over which the mean and band are not taken, and whether it is more than the band's own tail, (1 − level)/2,
    so that the band is no central interval of all draws.

    Args:
        band: the `Band`.

    Returns:
        The note, or None when no draw diverged or the MAP run did.
    """
    if band.diverged_fraction == 0 or band.diverged:
        return None
    share, tail = f"{band.diverged_fraction:.0%} of the posterior draws diverge", (1 - band.level) / 2
    if band.diverged_fraction <= tail:
        return f"{share}; mean and band are over the others"
    return (
        f"{share}, more than the band's {tail:.0%} tail: mean and band are over the others, and the band is no "
        f"central {band.level:.0%} interval of all draws"
    )


def scenario_summary(band: Band) -> dict:
    """Verdict, final reward with its band, plateau, and the log's step at which the mean has covered 90 % of the
    way from its start to the plateau (`summarize_curve`'s plateau and time_to_90, which counts from the start). A
    scenario whose calibrated (MAP) run diverges has no numbers (None): the surviving draws would be a biased few.

    Args:
        band: the scenario's reward `Band`.

    Returns:
        {"verdict": one of `VERDICTS`, "final_reward", "final_lo", "final_hi" (the log's reward units),
        "plateau" (same units), "time_to_90" (a log step), "diverged_fraction" (in [0, 1])}; None where undefined.
    """
    if band.diverged:
        return dict(
            verdict="diverges",
            final_reward=None,
            final_lo=None,
            final_hi=None,
            plateau=None,
            time_to_90=None,
            diverged_fraction=band.diverged_fraction,
        )
    mean = band.mean
    plateau, reached, summary = None, None, None
    if np.all(np.isfinite(mean)):  # the plateau and time to 90 % of `summarize_curve`, the latter as a log step
        summary = _summarize(mean)
        plateau, step = float(summary.plateau), int(summary.time_to_90)
        reached = float(band.steps[step]) if step >= 0 else None
    return dict(
        verdict=verdict(mean, band.diverged, summary),
        final_reward=finite_or_none(mean[-1]),
        final_lo=finite_or_none(band.lo[-1]),
        final_hi=finite_or_none(band.hi[-1]),
        plateau=plateau,
        time_to_90=reached,
        diverged_fraction=band.diverged_fraction,
    )


FIXED_KEYS = ("optimizer", "reward_scale")
"""Run-config keys a scenario may not change: the calibrated step scale and reward units belong to them."""


def check_scenario(run: RunConfig, changes: dict) -> RunConfig:
    """The run config a scenario makes, or a one-line error (unknown key, bad value, a `FIXED_KEYS` key).

    Args:
        run: the calibrated run's configuration (`RunConfig`).
        changes: run-config key → new value (`parse_scenario`).

    Returns:
        The `RunConfig` with the changes (`RunConfig.replace`).

    Raises:
        PgrpoSimError: a key is unknown or in `FIXED_KEYS`, or a value is invalid.
    """
    fixed = sorted(set(changes) & set(FIXED_KEYS))
    if fixed:
        raise PgrpoSimError(f"a scenario cannot change {fixed[0]}: the calibrated step scale belongs to it")
    return run.replace(**changes)


CLIP_KEYS = ("epsilon", "epsilon_high")
"""Run-config keys of the clip alone (a loss without a clip changes its aggregation too)."""


def scenario_note(run: RunConfig, changes: dict) -> str | None:
    """What a report should say about a scenario whose change cannot act: a changed clip (epsilon, epsilon_high, or a
    loss without one) on a run that is on-policy in the scenario — num_iterations = 1 and steps_per_generation = 1 —
    where the policy ratio is 1 at every update, so the clip never acts.

    Args:
        run: the calibrated run's configuration (`RunConfig`).
        changes: run-config key → new value (`parse_scenario`).

    Returns:
        One sentence without its final full stop, or None when there is nothing to say.

    Raises:
        PgrpoSimError: a key is unknown or a value invalid (`RunConfig.replace`).
    """
    changed = run.replace(**dict(changes))  # a copy: replace adds epsilon for a loss without a clip
    if changed.clip == run.clip or changed.steps_per_rollout != 1:
        return None
    clip = lambda c: "no clip" if c is None else f"clip ({c[0]:g}, {c[1]:g})"
    alone = set(changes) <= set(CLIP_KEYS)
    return (
        f"the clip's change ({clip(run.clip)} → {clip(changed.clip)}) has no effect: the run is on-policy "
        "(num_iterations = 1, steps_per_generation = 1), so the policy ratio is 1 at every update and the clip never "
        "acts" + ("; this scenario is the calibrated run" if alone else "")
    )


def what_if(
    calibration: Calibration,
    scenarios: list[dict],
    *,
    until: float,
    level: float = 0.8,
    seed: int = 0,
    progress: Progress | None = None,
) -> WhatIf:
    """The calibrated bandit run itself and each scenario to `until`; each band's start is told to `progress`.

    Args:
        calibration: the `Calibration` (`calibrate`).
        scenarios: per scenario, run-config key → new value (`parse_scenario`); every one is checked before any runs.
        until: the last step to simulate, in the log's steps; in (first_step, `horizon_limit`].
        level: the bands' central probability; in (0, 1).
        seed: the bands' seed (the same for every scenario); integer in [0, 2³² − 1].
        progress: told at each band's start; None: silent.

    Returns:
        The `WhatIf` (model "bandit"): each `Scenario`'s record is `scenario_summary` and `band_dict` of its band
        (a scenario's with its changes as "set"); no collapse probabilities (the bandit cannot collapse).

    Raises:
        PgrpoSimError: `calibration` is not a `Calibration`, a scenario is invalid (`check_scenario`), or `until`,
            `level` or `seed` is out of range.
    """
    check_calibration(calibration)
    base_run = calibration.model.run
    runs = [check_scenario(base_run, changes) for changes in scenarios]  # every scenario checked before any runs
    total = len(scenarios) + 1
    report(progress, f"drawing the calibrated run's {level:.0%} band (1/{total}, {DRAWS + 1} runs)")
    baseline = _answer({}, predictive_band(extend(calibration, until), level=level, seed=seed))
    answers = []
    for i, (changes, run) in enumerate(zip(scenarios, runs, strict=True)):
        label = ", ".join(f"{k}={v}" for k, v in changes.items())
        report(progress, f"drawing scenario {i + 1}'s band, {label} ({i + 2}/{total})")
        answers.append(_answer(changes, predictive_band(extend(calibration, until, run), level=level, seed=seed)))
    record = dict(model="bandit", band=level, baseline=baseline.record, scenarios=[a.record for a in answers])
    return WhatIf("bandit", baseline, tuple(answers), level, record)


def _answer(changes: dict, band: Band) -> Scenario:
    summary = scenario_summary(band)
    record = (dict(set=changes) if changes else {}) | summary | band_dict(band)
    return Scenario(changes, summary["verdict"], summary["final_reward"], None, None, band, record)
