"""Fit a training log with the closed-form laws, diagnose it, and write `fit.json`, `report.md` and figures.

`analyse_log` does the work (a `LogAnalysis`, with the JSON-ready summary); `write_report` also writes the
files (what `pgrpo-sim fit` runs). Noise: when the log has `reward_std` and the number of rewards averaged per step
(`n_samples`, from the log or given) the fits are weighted by the per-step standard error
`noise.reward_stderr` and the reduced χ² uses it; otherwise the reduced χ² uses the short-lag residual
variance (`noise.short_lag_variance`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..base.errors import PgrpoSimError
from ..base.progress import Progress
from ..base.serialise import finite_or_none, json_text
from ..logs import coupling as couplings, law_regimes, laws
from ..logs.diagnostics import FAILURE_MODES, Diagnosis, diagnose
from ..logs.readers import TrainingLog, check_log


def _reward_stderr(log: TrainingLog, metric: str, n_samples: float | None) -> tuple[np.ndarray | None, dict]:
    """Per-step standard error of `metric` at its fitted steps (or None) and a description for the report."""
    rows = np.isfinite(log[metric])
    n = None
    if n_samples is not None:
        n = np.full(int(rows.sum()), float(n_samples))
    elif "n_samples" in log:
        n = log["n_samples"][rows]
    std = log["reward_std"][rows] if "reward_std" in log and metric == "reward" else None
    if n is None or std is None or not (np.all(np.isfinite(std)) and np.all(np.isfinite(n))):
        why = "no reward_std" if std is None else "no samples per step (n_samples)" if n is None else "gaps"
        return None, dict(source="residuals", note=f"short-lag residual variance ({why})")
    sigma = laws.reward_stderr(std, n)
    if not np.all(sigma > 0):
        return None, dict(source="residuals", note="short-lag residual variance (reward_std is 0 throughout)")
    note = "reward_std/√n_samples pooled over the smoothing window; a lower bound when prompts differ in difficulty"
    summary = dict(n_samples=float(np.median(n)), median_stderr=float(np.median(sigma)), note=note)
    return sigma, dict(source="reward_std", **summary)


def _summary(fits: dict[str, laws.LawFit], steps: np.ndarray, values: np.ndarray, sigma: np.ndarray | None) -> dict:
    osc = fits["oscillator"]
    simpler = law_regimes.simpler_bics(fits, steps, values, sigma=sigma)
    regime, why = law_regimes.read_regime(osc, steps=steps, simpler_bic=simpler)
    zeta, z_err = finite_or_none(osc["zeta"]), finite_or_none(osc.stderr[1])
    finite = {law: f.bic for law, f in fits.items() if np.isfinite(f.bic)}
    out = dict(
        plateau=finite_or_none(osc["p_star"]),
        plateau_stderr=finite_or_none(osc.stderr[0]),
        damping_ratio=zeta,
        damping_ratio_stderr=z_err,
        natural_frequency=finite_or_none(osc["omega_n"]),
        regime=regime,
        straight_line_bic=finite_or_none(simpler["straight line"]),
        preferred_law=min(finite, key=finite.__getitem__) if len(finite) == len(fits) else None,
    )
    if why:
        out["regime_reason"] = why
    if out["preferred_law"] is None:
        out["preferred_law_missing_reason"] = (
            "every law fits exactly (zero residuals, e.g. constant data): BIC is undefined"
            if not finite
            else f"BIC is undefined for {', '.join(law for law in fits if law not in finite)}"
        )
    return out


class LogAnalysis(NamedTuple):
    """`analyse_log`'s result: `summary` (the fit.json content), the `fits` by law, the `diagnosis`, and the
    train/eval `coupling` (None without an eval reward).

    Attributes:
        summary: the fit.json content; a JSON-ready dict.
        fits: law → `laws.LawFit`, for every law of `laws.LAWS`.
        diagnosis: the four read-outs, `Diagnosis`.
        coupling: `Coupling` of `reward` and `eval_reward` (default window); None without an eval reward of at
            least 5 points.
    """

    summary: dict
    fits: dict[str, laws.LawFit]
    diagnosis: Diagnosis
    coupling: couplings.Coupling | None


def check_analysis(log: TrainingLog, *, metric: str = "reward", n_samples: int | None = None) -> None:
    """Raise `PgrpoSimError` unless `analyse_log` can run on these inputs (checked before anything is written).

    Args:
        log: the `TrainingLog` to analyse.
        metric: the canonical metric to fit; present in `log`.
        n_samples: rewards averaged per step (prompts × group size); integer ≥ 1; None: the log's `n_samples`.

    Raises:
        PgrpoSimError: `log` is not a `TrainingLog`, `metric` is not in it, `n_samples` is not an integer ≥ 1, or
            the metric's finite series fails `laws.check_curve` or has too few points for the fits.
    """
    _check_metric(log, metric)
    number = n_samples is not None and np.ndim(n_samples) == 0 and np.issubdtype(np.asarray(n_samples).dtype, np.number)
    if n_samples is not None and (isinstance(n_samples, (bool, np.bool_)) or not number):
        raise PgrpoSimError(f"samples per step must be a number, got {n_samples!r}")
    if n_samples is not None and not (np.isfinite(n_samples) and n_samples >= 1 and n_samples == int(n_samples)):
        raise PgrpoSimError(f"samples per step must be an integer >= 1 (prompts × group size), got {n_samples:g}")
    steps, values = log.series(metric)
    laws.check_curve(steps, values)
    n = steps.size
    need = max(len(p) for p in laws.LAW_PARAMS.values()) + 2
    if n < need:
        raise PgrpoSimError(f"metric {metric!r} has {n} finite points; the fits need at least {need}")


def _check_metric(log: TrainingLog, metric: str) -> None:
    check_log(log)
    if metric not in log:
        present = ", ".join(name for name in log.data if name != "step")
        raise PgrpoSimError(f"metric {metric!r} is not in the log (present: {present})")


def rows_without_value(log: TrainingLog, metric: str) -> dict:
    """The log's rows that `metric`'s fit does not use: records whose reward was logged but is not a finite
    number (dropped by the reader) and rows where the metric was not logged (e.g. eval-only records).

    Args:
        log: the `TrainingLog`.
        metric: a canonical metric present in `log`.

    Returns:
        {count, not_finite, not_logged}: ints; `steps`: their steps, sorted; optimiser steps (floats).

    Raises:
        PgrpoSimError: `log` is not a `TrainingLog` or `metric` is not in it.
    """
    _check_metric(log, metric)
    steps = log["step"]
    not_logged = steps[~np.isfinite(log[metric])]
    not_finite = log.skipped_steps if metric == "reward" else np.zeros(0)
    both = np.sort(np.concatenate([not_finite, not_logged]))
    return dict(
        count=int(both.size),
        not_finite=int(not_finite.size),
        not_logged=int(not_logged.size),
        steps=[float(v) for v in both],
    )


def analyse_log(
    log: TrainingLog, *, metric: str = "reward", n_samples: int | None = None, progress: Progress | None = None
) -> LogAnalysis:
    """Fit every law in `ps.logs.LAWS` to `metric` (weighted by the per-step error when `reward_std` and the
    samples per step are known; `n_samples` overrides the log's), read out the four diagnostics and, when the
    log has an eval reward, the train/eval coupling. Each law's fit is told to `progress` as it starts.

    Args:
        log: the `TrainingLog` to analyse.
        metric: the canonical metric to fit; present in `log`.
        n_samples: rewards averaged per step (prompts × group size); integer ≥ 1; None: the log's `n_samples`.
        progress: callable told each law's start (a stage string); None: silent.

    Returns:
        `LogAnalysis`.

    Raises:
        PgrpoSimError: as `check_analysis`.
    """
    check_analysis(log, metric=metric, n_samples=n_samples)
    steps, values = log.series(metric)
    sigma, noise = _reward_stderr(log, metric, n_samples)
    fits = laws.fit_laws(steps, values, sigma=sigma, progress=progress)
    diagnosis = diagnose(log)
    coupling = None
    if "eval_reward" in log and log.series("eval_reward")[0].size >= 5:
        coupling = couplings.coupling_ratio(*log.series("reward"), *log.series("eval_reward"))
    fitted_range = (float(np.min(values)), float(np.max(values)))
    summary = dict(
        log=log.summary(),
        metric=metric,
        source=log.sources.get(metric, metric),
        n_points=int(steps.size),
        rows_without_reward=rows_without_value(log, metric),
        noise=noise,
        smoothing=dict(kind="centred moving average", window=fits["saturation"].smooth_window),
        fits={law: f.as_dict() for law, f in fits.items()},
        fitted_range=list(fitted_range),
        plateaus_beyond_data=plateaus_beyond_data(fits, fitted_range),
        prediction=_summary(fits, steps, values, sigma),
        coupling=None if coupling is None else _coupling_dict(coupling),
        diagnostics=diagnosis.as_dict(),
    )
    return LogAnalysis(summary, fits, diagnosis, coupling)


PLATEAUS = {"saturation": "r_inf", "critical": "r_inf", "oscillator": "p_star"}
"""The parameter of each law that is the curve's plateau (its value as t → ∞)."""


def plateaus_beyond_data(fits: dict[str, laws.LawFit], fitted_range: tuple[float, float]) -> list[dict]:
    """The laws whose fitted plateau lies more than 2 standard errors beyond every fitted value (below the least
    or above the largest of `fitted_range` = (min, max)): extrapolations the run has not reached, e.g. a negative
    plateau of a success rate fitted to a collapsing run. Each: law, parameter, value, stderr (None if undefined).

    Args:
        fits: law → `laws.LawFit`, holding every law of `PLATEAUS` (`laws.fit_laws`' result).
        fitted_range: (min, max) of the fitted values; the metric's units.

    Returns:
        One dict per such law (value and stderr in the metric's units); empty when there is none.
    """
    lo, hi = fitted_range
    out = []
    for law, name in PLATEAUS.items():
        fit = fits[law]
        value, se = float(fit[name]), float(fit.stderr[fit.names.index(name)])
        margin = 2 * se if np.isfinite(se) else 0.0
        if np.isfinite(value) and (value < lo - margin or value > hi + margin):
            out.append(dict(law=law, parameter=name, value=value, stderr=finite_or_none(se)))
    return out


def _coupling_dict(c: couplings.Coupling) -> dict:
    clean = lambda a: [float(v) if math.isfinite(v) else None for v in a]
    return dict(window=c.window, steps=clean(c.steps), ratio=clean(c.ratio), stderr=clean(c.stderr))


def write_report(
    log: TrainingLog, out_dir: str | Path, *, metric: str = "reward", n_samples: int | None = None
) -> dict:
    """`analyse_log`, then `write_analysis`. Returns the fit.json content.

    Args:
        log: the `TrainingLog` to analyse.
        out_dir: the output directory; created if missing.
        metric: the canonical metric to fit; present in `log`.
        n_samples: rewards averaged per step (prompts × group size); integer ≥ 1; None: the log's `n_samples`.

    Returns:
        The fit.json content (`LogAnalysis.summary`).

    Raises:
        PgrpoSimError: as `check_analysis`, or the output directory cannot be written.
    """
    return write_analysis(analyse_log(log, metric=metric, n_samples=n_samples), log, out_dir)


def write_analysis(analysis: LogAnalysis, log: TrainingLog, out_dir: str | Path) -> dict:
    """Write DIR/fit.json, DIR/report.md, DIR/fit.png (data, fitted laws, residuals) and DIR/diagnostics.png
    (the four read-outs) of an `analyse_log` result. Returns the fit.json content.

    Args:
        analysis: `analyse_log`'s result for `log`.
        log: the `TrainingLog` analysed.
        out_dir: the output directory; created if missing.

    Returns:
        The fit.json content (`analysis.summary`).

    Raises:
        PgrpoSimError: `analysis` is not a `LogAnalysis`, `log` is not a `TrainingLog`, or the output directory
            cannot be written.
    """
    from ..viz.log_figures import plot_diagnostics, plot_fits

    if not isinstance(analysis, LogAnalysis):
        raise PgrpoSimError(f"analysis must be a LogAnalysis (from analyse_log), got {type(analysis).__name__}")
    check_log(log)
    out = Path(out_dir)
    result = analysis.summary
    try:
        out.mkdir(parents=True, exist_ok=True)
        plot_fits(*log.series(result["metric"]), analysis.fits, out / "fit.png", ylabel=result["source"])
        plot_diagnostics(analysis.diagnosis, out / "diagnostics.png")
        (out / "fit.json").write_text(json_text(result, indent=2) + "\n")
        (out / "report.md").write_text(_markdown(result))
    except OSError as exc:
        raise PgrpoSimError(f"cannot write to output directory {out}: {exc.strerror}") from None
    return result


def _fmt(v, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}g}"


def _preferred(pred: dict) -> str:
    if pred["preferred_law"] is None:
        return f"Preferred law: none ({pred['preferred_law_missing_reason']})."
    return f"Preferred law (lowest BIC): **{pred['preferred_law']}**."


def _rows(rows: dict) -> str:
    if not rows["count"]:
        return "none"
    shown = ", ".join(f"{s:g}" for s in rows["steps"][:10]) + (", …" if rows["count"] > 10 else "")
    return (
        f"{rows['count']} ({rows['not_finite']} not a finite number, {rows['not_logged']} not logged; "
        f"steps {shown}), not fitted"
    )


def _beyond(r: dict) -> list[str]:
    """The report's paragraph on plateaus beyond the data (none: no lines)."""
    if not r["plateaus_beyond_data"]:
        return []
    lo, hi = r["fitted_range"]
    listed = ", ".join(
        f"{p['law']} {p['parameter']} = {_fmt(p['value'])} ± {_fmt(p['stderr'], 2)}" for p in r["plateaus_beyond_data"]
    )
    return [
        f"Plateaus beyond every fitted value (range [{_fmt(lo)}, {_fmt(hi)}], by more than 2 standard errors): "
        f"{listed}. The run has not reached them: they are extrapolations of the law, and may lie outside what "
        "the metric can take (a success rate below 0, for one).",
        "",
    ]


def _markdown(r: dict) -> str:
    log, pred = r["log"], r["prediction"]
    lines = [
        f"# Fit report: {Path(log['path']).name if log['path'] else 'simulation'}",
        "",
        f"Format `{log['format']}`, {log['rows']} rows; fitted metric `{r['metric']}` (source `{r['source']}`), "
        f"{r['n_points']} points. Time t counts steps from the first fitted step.",
        "",
        f"- sources: {', '.join(f'{k} ← `{v}`' for k, v in log['sources'].items())}",
        f"- missing metrics: {', '.join(log['missing']) or 'none'}",
        f"- constant metrics (possibly placeholders): {', '.join(log['constant']) or 'none'}",
        f"- rows without a usable {r['metric']}: {_rows(r['rows_without_reward'])}",
        f"- noise: {r['noise']['note']}",
        f"- smoothing for R²_smoothed: {r['smoothing']['kind']} over {r['smoothing']['window']} points",
        "",
        "## Fits",
        "",
        "| law | parameters (± standard error) | R² | R² smoothed | reduced χ² | AIC | BIC |",
        "|---|---|---|---|---|---|---|",
    ]
    for law, f in r["fits"].items():
        params = ", ".join(f"{k} = {_fmt(v['value'])} ± {_fmt(v['stderr'], 2)}" for k, v in f["params"].items())
        lines.append(
            f"| {law} | {params} | {_fmt(f['r2'], 3)} | {_fmt(f['r2_smoothed'], 3)} | {_fmt(f['reduced_chi2'], 3)} "
            f"| {_fmt(f['aic'], 5)} | {_fmt(f['bic'], 5)} |"
        )
    lines += [
        "",
        _preferred(pred) + " Oscillator reading: plateau p* = "
        f"{_fmt(pred['plateau'])} ± {_fmt(pred['plateau_stderr'], 2)}, damping ratio ζ = {_fmt(pred['damping_ratio'])} "
        f"± {_fmt(pred['damping_ratio_stderr'], 2)}, regime **{pred['regime']}**"
        + (f" ({pred['regime_reason']})." if pred.get("regime_reason") else ".")
        + " Standard errors shown as — are undefined.",
        "",
        "A reduced χ² near 1 means the law fits within the noise; well above 1, the law misses structure (or the "
        "noise is underestimated).",
        "",
        *_beyond(r),
        "![data, fitted laws and residuals](fit.png)",
        "",
        "## Diagnostics",
        "",
        f"First to fire: **{r['diagnostics']['first'] or 'none'}**.",
        "",
        "| read-out | available | flag | first step | rule | detail |",
        "|---|---|---|---|---|---|",
    ]
    for name in FAILURE_MODES:
        d = r["diagnostics"][name]
        lines.append(
            f"| {name} | {'yes' if d['available'] else 'no'} | {'**FIRES**' if d['flag'] else 'no'} | "
            f"{_fmt(d['first_step'], 6)} | {d['rule']} | {d['detail']} |"
        )
    lines += ["", "![the four diagnostic read-outs](diagnostics.png)", ""]
    return "\n".join(lines)
