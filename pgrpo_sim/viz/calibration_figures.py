"""Figures of `calibrate`, `forecast` and `what-if`: the logged reward with the model's bands (written to files)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from .figures import PALETTE


def plot_bands(steps, reward, bands: dict, path: str | Path, *, fit_until: float | None = None) -> None:
    """The logged reward (points) and, per label, a band's mean (line) and its interval (shaded); a band whose
    calibrated run diverged is only named in the legend."""
    fig, ax = plt.subplots(figsize=(7.0, 4.2), layout="constrained")
    ax.plot(steps, reward, ".", ms=2.5, color="0.55", label="logged reward")
    for i, (label, band) in enumerate(bands.items()):
        colour = PALETTE[i % len(PALETTE)]
        if band.diverged:  # no curve: a diverged run is reported as diverged, never as numbers
            ax.plot([], [], color=colour, ls="--", label=f"{label}: diverged")
            continue
        ax.fill_between(band.steps, band.lo, band.hi, color=colour, alpha=0.2, lw=0)
        ax.plot(band.steps, band.mean, color=colour, lw=1.6, label=f"{label} ({band.level:.0%} band)")
    if fit_until is not None:
        ax.axvline(fit_until, color="0.3", ls=":", lw=1, label="end of the fit window")
    ax.set_xlabel("logged step")
    ax.set_ylabel("reward")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.savefig(path, dpi=120)
    plt.close(fig)
