"""What `calibrate`, `forecast` and `what-if` write: JSON, a markdown report and a figure per command."""

from __future__ import annotations

from pathlib import Path

from ..base.progress import Progress, report
from ..base.serialise import json_text
from ..calibration.forecast import GoodnessOfFit, draws_note, extend, goodness_of_fit, scenario_note
from ..calibration.inference import DRAWS, Calibration, predictive_band
from ..calibration.results import Forecast, WhatIf
from ..logs.readers import TrainingLog
from ..viz.calibration_figures import plot_bands

CALIBRATE_OUTPUTS = ("calibration.json", "report.md", "calibration.png")
FORECAST_OUTPUTS = ("calibration.json", "forecast.json", "report.md", "forecast.png")
WHATIF_OUTPUTS = ("calibration.json", "whatif.json", "report.md", "whatif.png")
FAILED = "calibration failed"
"""The mark of every verdict and score drawn from a calibration that fails its goodness-of-fit check (`--force`)."""


def _warning(fit_check: GoodnessOfFit) -> str | None:
    """A figure's title when the calibration fails its check."""
    return None if fit_check.passed else f"{FAILED}: the model misses the rewards it was fitted to"


def calibration_dict(cal: Calibration, fit_check: GoodnessOfFit) -> dict:
    """calibration.json: the calibration's `as_dict` with its `goodness_of_fit`."""
    return cal.as_dict() | {"goodness_of_fit": fit_check.as_dict()}


def marked(verdict: str, fit_check: GoodnessOfFit) -> str:
    """A verdict as printed: marked `FAILED` when the calibration fails its check."""
    return verdict if fit_check.passed else f"{verdict} ({FAILED})"


def with_fit_check(result: dict, fit_check: GoodnessOfFit) -> dict:
    """forecast.json's or whatif.json's content with the calibration's `goodness_of_fit` and, per what-if entry,
    `calibration_failed`."""
    out: dict = dict(result, goodness_of_fit=fit_check.as_dict())
    if "baseline" in out:
        failed = not fit_check.passed
        out["baseline"] = dict(out["baseline"], calibration_failed=failed)
        out["scenarios"] = [dict(s, calibration_failed=failed) for s in out["scenarios"]]
    return out


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def calibration_markdown(log: TrainingLog, cal: Calibration, fit_check: GoodnessOfFit) -> list[str]:
    """The calibration's part of a report: its goodness of fit, parameters with standard errors, what was assumed
    and used."""
    d = cal.as_dict()
    check = fit_check.describe()
    lines = [
        f"Log: `{log.path}` ({log.format}); fit window steps {d['fit_window']['first_step']:g}–"
        f"{d['fit_window']['fit_until']:g} ({d['fit_window']['points']} rewarded steps).",
        "",
        f"Goodness of fit: the calibration {check}."
        if fit_check.passed
        else f"**Goodness of fit: the calibration "
        f"{check}**: it does not describe the data it was fitted to, so its parameters, forecasts and verdicts are "
        "no findings.",
        f"(Tolerance: {fit_check.as_dict()['rule']}.)",
        "",
        "| parameter | value | s.e. | determined by the log |",
        "|---|---|---|---|",
    ]
    for name, p in d["parameters"].items():
        lines.append(
            f"| {name} | {p['value']:.4g} | {p['stderr']:.2g} | {'no (undetermined)' if p['undetermined'] else 'yes'} |"
        )
    derived = d["derived"]
    lines += [
        "",
        f"Median initial success of the solvable prompts {derived['initial_success_median']:.3f}, logit spread "
        f"{derived['difficulty_spread_logit']:.3g}, unsolvable fraction {derived['unsolvable_fraction']:.3g}, "
        f"bandit step {derived['bandit_step']:.3g} per step at learning rate {cal.model.run.learning_rate:g}. "
        + (
            f"The log's reward is no success rate and has no success-rate column: it is read as "
            f"{derived['reward_offset']:.4g} + {derived['reward_gain']:.4g} × the batch's success rate (fitted). "
            if cal.affine
            else ""
        )
        + f"Overdispersion φ = {d['overdispersion']:.3g} (the log's scatter over a P × G batch's sampling noise; "
        "bands and standard errors include it).",
        (
            f"The MAP is a stationary point (the Newton step from it is {d['map_offset_se']:.2g} standard errors at "
            "most)."
            if d["stationary"]
            else f"**The MAP is not a stationary point**: the Newton step from it is {d['map_offset_se']:.2g} standard "
            "errors, so BFGS stopped at a kink or on a slope of the posterior (the clipped surrogate makes it "
            "piecewise smooth) and the standard errors above describe that point, not a mode."
        ),
        f"Observables used: {', '.join(d['observables_used'])}; not used: "
        + (", ".join(f"{k} ({v})" for k, v in d["observables_skipped"].items()) or "none")
        + ".",
        "",
        "Run configuration (source of each value):",
        "",
    ]
    run = d["run_config"]
    lines += [f"- {k} = {_fmt(run[k])} ({run['sources'][k]})" for k in run if k not in ("sources", "notes")]
    lines += [f"- {note}" for note in run["notes"]]  # derived and unused keys of the file, a contradicting log
    return lines


def write_json(path: Path, data: dict) -> None:
    path.write_text(json_text(data, indent=2))


def calibration_band(
    log: TrainingLog, cal: Calibration, *, level: float = 0.8, seed: int = 0, progress: Progress | None = None
):
    """The calibrated model's band over the whole log (drawn with `seed`) and its `goodness_of_fit`."""
    report(progress, f"drawing the {level:.0%} band ({DRAWS + 1} runs) and checking the fit")
    band = predictive_band(extend(cal, float(log["step"][-1])), level=level, seed=seed)
    return band, goodness_of_fit(log, cal, band)


def write_calibration(log: TrainingLog, cal: Calibration, band, fit_check: GoodnessOfFit, out: Path) -> dict:
    """calibration.json, report.md and calibration.png (the fitted model over the whole log with its `band`, from
    `calibration_band`). Returns calibration.json's content."""
    data = calibration_dict(cal, fit_check)
    write_json(out / "calibration.json", data)
    steps, reward = log.series("reward")
    plot_bands(
        steps,
        reward,
        {"calibrated model": band},
        out / "calibration.png",
        fit_until=cal.fit_until,
        warning=_warning(fit_check),
    )
    lines = ["# pgrpo-sim calibration", "", *calibration_markdown(log, cal, fit_check), *_draws_lines(band)]
    lines += ["", "![calibration](calibration.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return data


def _draws_lines(band) -> list[str]:
    """A report's sentence on the band's diverged posterior draws (`draws_note`), or nothing."""
    note = draws_note(band)
    return ["", f"In the figure's band, {note}."] if note else []


def write_forecast(log: TrainingLog, cal: Calibration, forecast: Forecast, fit_check: GoodnessOfFit, out: Path) -> None:
    """calibration.json, forecast.json (its record with the calibration's `goodness_of_fit`), report.md with the
    held-out table (marked `FAILED` when the check failed), forecast.png."""
    write_json(out / "calibration.json", calibration_dict(cal, fit_check))
    write_json(out / "forecast.json", with_fit_check(forecast.record, fit_check))
    steps, reward = log.series("reward")
    band = forecast.band
    plot_bands(
        steps, reward, {"forecast": band}, out / "forecast.png", fit_until=cal.fit_until, warning=_warning(fit_check)
    )
    lines = ["# pgrpo-sim forecast", "", *calibration_markdown(log, cal, fit_check), ""]
    if not fit_check.passed:
        lines += [f"**Every number below comes from a failed calibration ({FAILED}).**", ""]
    held = forecast.heldout
    if held is None:
        lines.append("No logged steps after the fit window: nothing to score the forecast on.")
    elif held["mae"] is None:
        after = f"{held['n']} held-out steps after {forecast.fit_until:g}"
        lines.append(f"The forecast diverged: no score on the {after}.")
    else:
        lines += [
            f"Held-out steps after {forecast.fit_until:g}: {held['n']}. Band coverage {held['coverage']:.2f} "
            f"(nominal {band.level:.2f}).",
            "",
            "| forecast | MAE on held-out steps |",
            "|---|---|",
            f"| calibrated bandit | {held['mae']:.4f} |",
        ]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in held["baselines"].items()]
    lines += [*_draws_lines(band), "", "![forecast](forecast.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def write_whatif(log: TrainingLog, cal: Calibration, answer: WhatIf, fit_check: GoodnessOfFit, out: Path) -> None:
    """calibration.json, whatif.json (its record with `with_fit_check`), report.md (one row per scenario, verdicts
    marked `FAILED` when the check failed), whatif.png (scenarios over the log)."""
    write_json(out / "calibration.json", calibration_dict(cal, fit_check))
    write_json(out / "whatif.json", with_fit_check(answer.record, fit_check))
    steps, reward = log.series("reward")
    plot_bands(
        steps,
        reward,
        {a.label: a.band for a in answer.answers},
        out / "whatif.png",
        fit_until=cal.fit_until,
        warning=_warning(fit_check),
    )
    lines = [
        "# pgrpo-sim what-if",
        "",
        *calibration_markdown(log, cal, fit_check),
        "",
        "| scenario | verdict | final reward | band | plateau | time to 90 % | draws diverged |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in answer.answers:
        entry = a.record
        lines.append(
            f"| {a.label} | {marked(entry['verdict'], fit_check)} | {_fmt(entry['final_reward'])} | "
            f"[{_fmt(entry['final_lo'])}, {_fmt(entry['final_hi'])}] | {_fmt(entry['plateau'])} | "
            f"{_fmt(entry['time_to_90'])} | {entry['diverged_fraction']:.0%} |"
        )
    notes = [f"- {a.label}: {note}." for a in answer.answers if (note := draws_note(a.band))]
    if notes:
        lines += ["", "A posterior draw that diverges has no curve:", *notes]
    inactive = [
        f"- {s.label}: {note}." for s in answer.scenarios if (note := scenario_note(cal.model.run, dict(s.changes)))
    ]
    if inactive:
        lines += ["", *inactive]
    lines += ["", "![what-if](whatif.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
