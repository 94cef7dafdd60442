"""What `what-if --model lm` and `forecast --model lm` write: calibration.json, whatif.json / forecast.json, a
markdown report and the figure, for the language-model level (`calibration.language_model`)."""

from __future__ import annotations

from pathlib import Path

from ..base.serialise import json_text
from ..calibration import language_model
from ..calibration.forecast import scenario_note
from ..calibration.results import Forecast, WhatIf
from ..logs.readers import TrainingLog
from ..viz.calibration_figures import plot_bands


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3f}"


def lm_calibration_markdown(cal: language_model.Calibration) -> list[str]:
    """The calibration's lines of a report: what was fitted, to what, and how well."""
    data = cal.as_dict()
    mean, sd = cal.lr_scale
    lines = [
        f"Answered by the language-model level (a small transformer trained by GRPO), calibrated on "
        f"{data['fit_window']['points']} logged {data['observable']} values, steps {cal.first_step:g}–"
        f"{cal.fit_until:g}.",
        "",
        "| parameter | value | ± |",
        "|---|---|---|",
        f"| start accuracy (SFT target) | {cal.start_accuracy:.3f} | "
        f"{data['parameters']['start_accuracy']['stderr']:.3f} |",
        f"| log10 lr scale (level rate / run rate) | {mean:.2f} | {sd:.2f} |",
        f"| ceiling (log reward / level reward) | {cal.ceiling[0]:.2f} | {cal.ceiling[1]:.2f} |",
        "| start format (share of well-formed demonstrations) | "
        + ", ".join(f"{f:g}: {w:.2f}" for f, w in zip(cal.formats, cal.format_weights, strict=True))
        + " (posterior) | |",
        "",
        f"Learning-rate scale {10**mean:.3g}"
        + (f" — undetermined: {cal.undetermined}" if cal.undetermined else "")
        + f"; overdispersion φ = {cal.overdispersion:.3g}"
        + (" — a poor fit: the level's mean curve misses the log by more than its noise" if cal.poor_fit else "")
        + ".",
    ]
    lines += [f"- {note}." for note in cal.notes]
    return lines


def _units_lines(cal: language_model.Calibration) -> list[str]:
    """The report's sentence on its units when the log's reward is not a share (`reward_scale` ≠ 1), or nothing."""
    scale = cal.run.reward_scale
    if scale == 1:
        return []
    return [
        "",
        f"The numbers above are the log's reward / reward_scale ({scale:g}), a share in [0, 1]; the figure is in the "
        f"log's units (× {scale:g}).",
    ]


def write_lm_whatif(log: TrainingLog, cal: language_model.Calibration, answer: WhatIf, out: Path) -> None:
    """calibration.json, whatif.json (its record), report.md (one row per scenario: verdict, collapse probability,
    finals) and whatif.png (each scenario's mean curve and band over the log)."""
    (out / "calibration.json").write_text(json_text(cal.as_dict(), indent=2))
    (out / "whatif.json").write_text(json_text(answer.record, indent=2))
    steps, reward = log.series("reward")
    plot_bands(steps, reward, {a.label: a.band for a in answer.answers}, out / "whatif.png", fit_until=cal.fit_until)
    lines = [
        "# pgrpo-sim what-if (language-model level)",
        "",
        *lm_calibration_markdown(cal),
        "",
        "| scenario | verdict | collapse probability | final reward | chance-corrected | peak reward | final entropy "
        "| final length |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in answer.answers:
        e = a.record
        lines.append(
            f"| {a.label} | {e['verdict']} | {e['collapse_probability']:.2f} ± "
            f"{e['collapse_probability_stderr']:.2f} ({e['runs']} runs) | {_fmt(e['final_reward'])} | "
            f"{_fmt(e['final_knowledge'])} | {_fmt(e['peak_reward'])} | {_fmt(e['final_entropy'])} | "
            f"{_fmt(e['final_mean_length'])} |"
        )
    lines += _units_lines(cal)
    notes = [f"- {s.label}: {note}." for s in answer.scenarios if (note := scenario_note(cal.run, dict(s.changes)))]
    if notes:
        lines += ["", *notes]
    lines += [
        "",
        "Each scenario's runs draw the level's learning rate from the calibration's posterior (times the scenario's "
        "rate over the run's), each with its own seed; a run collapses when its chance-corrected reward (a constant "
        "answer scores 1/m on the level and 0 on an LLM) ends, over its last quarter, below half the best it had — "
        "its start or its peak — by more than 3 standard errors. 'chance-corrected': the final reward with the "
        "level's guessing removed (what an LLM, whose chance is 0, would log). The band is the runs' central share "
        "per step.",
        "",
        "![what-if](whatif.png)",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def write_lm_forecast(log: TrainingLog, cal: language_model.Calibration, forecast: Forecast, out: Path) -> None:
    """calibration.json, forecast.json (its record), report.md (the held-out score) and forecast.png."""
    (out / "calibration.json").write_text(json_text(cal.as_dict(), indent=2))
    (out / "forecast.json").write_text(json_text(forecast.record, indent=2))
    steps, reward = log.series("reward")
    plot_bands(steps, reward, {"forecast": forecast.band}, out / "forecast.png", fit_until=cal.fit_until)
    held = forecast.record["heldout"]  # as forecast.json: reward / reward_scale
    score = (
        "No held-out steps to score."
        if held is None
        else f"Held-out MAE {held['mae']:.4f} over {held['n']} steps; {held['coverage']:.0%} of them inside the "
        f"{forecast.band.level:.0%} band."
    )
    lines = ["# pgrpo-sim forecast (language-model level)", "", *lm_calibration_markdown(cal), "", score]
    lines += _units_lines(cal)
    lines += ["", f"Verdict of the calibrated run: {forecast.verdict}.", "", "![forecast](forecast.png)"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
