"""Figures of the log report: fitted laws with residuals, and the four diagnostic read-outs (written to files)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ..logs.diagnostics import Diagnosis
from ..logs.laws import LawFit, smooth
from .figures import PALETTE


def plot_fits(steps, values, fits: dict[str, LawFit], path: str | Path, *, ylabel: str = "reward") -> None:
    """Data (points and their centred moving average), each fitted law, and the smoothed residuals.

    Args:
        steps: the logged steps, (T,).
        values: the metric at those steps, (T,), in the log's units.
        fits: law → its `LawFit` (`fit_laws`), at least one.
        path: the image file (its suffix picks the format).
        ylabel: the metric's name on the vertical axis.
    """
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    window = next(iter(fits.values())).smooth_window
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 6.0), sharex=True, height_ratios=(2, 1), layout="constrained")
    top.plot(steps, values, ".", ms=2.5, color="0.6", label="data")
    top.plot(steps, smooth(values, window), color="0.2", lw=1.0, label=f"moving average ({window} points)")
    dense = np.linspace(steps[0], steps[-1], 600)
    for colour, (law, f) in zip(PALETTE[1:], fits.items(), strict=False):  # the palette is the longer
        top.plot(
            dense, f.curve(dense), color=colour, lw=1.6, label=f"{law} (R² {f.r2:.2f}, smoothed {f.r2_smoothed:.2f})"
        )
        bottom.plot(steps, smooth(values - f.curve(steps), window), color=colour, lw=1.2, label=law)
    bottom.axhline(0.0, color="0.5", lw=0.6)
    top.set_ylabel(ylabel)
    top.legend(loc="best", fontsize=8)
    bottom.set_ylabel(f"residual ({window}-point average)")
    bottom.set_xlabel("optimiser step")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)


_YLABELS = {
    "hacking": "coupling ρ = Δeval/Δtrain",
    "degeneracy": "zero-std group fraction",
    "concentration": "entropy / baseline",
    "instability": "score (largest indicator / threshold)",
}


def plot_diagnostics(diagnosis: Diagnosis, path: str | Path) -> None:
    """One panel per read-out: its series, its threshold (dashed) and the step where the flag fires.

    Args:
        diagnosis: a `Diagnosis` (`diagnose`) with its four read-outs.
        path: the image file (its suffix picks the format).
    """
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.0), layout="constrained")
    for ax, r, colour in zip(axes.ravel(), diagnosis.readouts, PALETTE, strict=False):  # the palette is the longer
        ax.set_title(f"{r.name}: {'FIRES' if r.flag else 'no flag'}", fontsize=10)
        if not r.available:
            ax.text(
                0.5, 0.5, f"not available\n({r.detail})", ha="center", va="center", transform=ax.transAxes, fontsize=9
            )
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        ax.plot(r.steps, r.value, color=colour, lw=1.3)
        ax.plot(r.steps, r.threshold, color="0.3", lw=1.0, ls="--", label="threshold")
        if r.flag:
            ax.axvline(r.first_step, color=PALETTE[3], lw=1.0, label=f"fires at step {r.first_step:g}")
        ax.set_xlabel("optimiser step")
        ax.set_ylabel(_YLABELS[r.name], fontsize=8)
        ax.legend(loc="best", fontsize=7)
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
