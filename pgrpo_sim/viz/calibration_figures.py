"""Figures of `calibrate`, `forecast` and `what-if`: the logged reward with the model's bands (written to files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from .figures import PALETTE

SCENARIO_STYLES = ("--", "-.", ":", (0, (6, 2, 1, 2, 1, 2)))
"""Line styles of the scenarios (cycled with their colours), so that curves that coincide stay distinguishable."""
EDGE_STYLE: dict[str, Any] = dict(color="black", lw=0.8, ls=(0, (4, 2)), alpha=0.8)
"""The calibrated run's band edges (several bands): thin black dashes."""
FIT_END_STYLE: dict[str, Any] = dict(color="#7F7F7F", lw=1.4, ls="-", alpha=0.7)
"""The end of the fit window: a solid grey vertical line, unlike any band edge or scenario."""


def bands_figure(steps, reward, bands: dict, *, fit_until: float | None = None, warning: str | None = None):
    """The logged reward (points) and, per label, a band's mean (line) and its interval; a band whose calibrated run
    diverged is only named in the legend; `warning` (e.g. a failed calibration) is the figure's title, in red.

    One band: shaded. Several (what-if): the first is the calibrated run, drawn on top in black with its interval's
    edges as thin black dashes (`EDGE_STYLE`, in the legend); each scenario gets its own colour and line style, its
    interval a light shade; the legend sits beside the axes. The fit window's end is a solid grey vertical line
    (`FIT_END_STYLE`). Rewards are drawn in the units they are given in (the log's, for every command's figure)."""
    several = len(bands) > 1
    fig, ax = plt.subplots(figsize=(9.5, 4.6) if several else (7.0, 4.2), layout="constrained")
    ax.plot(steps, reward, ".", ms=2.5, color="0.6", label="logged reward", zorder=1)
    colours = [c for c in PALETTE if c not in ("#000000", "#F0E442")]  # black is the calibrated run's; yellow is faint
    for i, (label, band) in enumerate(bands.items()):
        base = several and i == 0
        colour = "black" if base else (PALETTE[0] if not several else colours[(i - 1) % len(colours)])
        style = "-" if not several or base else SCENARIO_STYLES[(i - 1) % len(SCENARIO_STYLES)]
        if band.diverged:  # no curve: a diverged run is reported as diverged, never as numbers
            ax.plot([], [], color=colour, ls=style, label=f"{label}: diverged")
            continue
        name = f"{label} ({band.level:.0%} band)"
        if base:
            ax.plot(band.steps, band.mean, color=colour, lw=1.5, label=name, zorder=10)
            edges = f"{label}: {band.level:.0%} band edges"
            for edge, name in ((band.lo, edges), (band.hi, "_" + edges)):  # "_": one legend entry for both
                ax.plot(band.steps, edge, **EDGE_STYLE, label=name, zorder=9)
            continue
        ax.fill_between(band.steps, band.lo, band.hi, color=colour, alpha=0.08 if several else 0.2, lw=0, zorder=2)
        ax.plot(band.steps, band.mean, color=colour, ls=style, lw=2.4 if several else 1.6, label=name, zorder=5)
    if fit_until is not None:
        ax.axvline(fit_until, **FIT_END_STYLE, label="end of the fit window")
    ax.set_xlabel("logged step")
    ax.set_ylabel("reward")
    ax.grid(alpha=0.3)
    if warning:
        ax.set_title(warning, color="#B00000", fontsize=9)
    if several:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=8, loc="best")
    return fig


def plot_bands(
    steps, reward, bands: dict, path: str | Path, *, fit_until: float | None = None, warning: str | None = None
) -> None:
    """`bands_figure`, written to `path`."""
    fig = bands_figure(steps, reward, bands, fit_until=fit_until, warning=warning)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def watch_figure(steps, reward, forecasts: list[dict], *, alert: float):
    """`watch`'s figure: above, the logged reward (points) and each forecast's final reward with its band, drawn at
    the step it was made from (reward / reward_scale, as the forecasts give it); below, each forecast's collapse
    probability ± its standard error against the step it was made from, and the alert threshold (dashed).

    Args:
        steps: the log's rewarded steps.
        reward: their rewards, in the forecasts' units.
        forecasts: `calibration.watch.watch_forecast` entries, oldest first.
        alert: the alert threshold, in (0, 1].

    Returns:
        The matplotlib figure (the caller saves and closes it).
    """
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 5.6), sharex=True, layout="constrained")
    top.plot(steps, reward, ".", ms=2.5, color="0.6", label="logged reward")
    made = [f["step"] for f in forecasts]
    final = [f["final_reward"] if f["final_reward"] is not None else float("nan") for f in forecasts]
    low = [m - f["final_lower"] for m, f in zip(final, forecasts, strict=True)]
    high = [f["final_upper"] - m for m, f in zip(final, forecasts, strict=True)]
    if forecasts:
        until = forecasts[-1]["until"]
        top.errorbar(made, final, yerr=[low, high], fmt="o", color=PALETTE[0], ms=4, capsize=2,
                     label=f"forecast reward at step {until:g} ({forecasts[-1]['runs']} runs' band)")  # fmt: skip
    top.set_ylabel("reward")
    top.legend(loc="best", fontsize="small")
    p = [f["collapse_probability"] for f in forecasts]
    se = [f["collapse_probability_stderr"] for f in forecasts]
    bottom.errorbar(made, p, yerr=se, fmt="o-", color=PALETTE[1], ms=4, capsize=2, label="collapse probability ± s.e.")
    bottom.axhline(alert, ls="--", color="black", lw=1, label=f"alert at {alert:g}")
    bottom.set_ylim(-0.05, 1.05)
    bottom.set_xlabel("logged step the forecast was made from")
    bottom.set_ylabel("collapse probability")
    bottom.legend(loc="best", fontsize="small")
    return fig
