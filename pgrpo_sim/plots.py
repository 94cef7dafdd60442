"""matplotlib figures (Agg backend; files only, no windows)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# Okabe–Ito colour-blind-safe palette
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def plot_reward_curve(steps, mean, std, path: str, *, title: str = "") -> None:
    """Reward curve (mean ± one std band across seeds) against optimiser step, saved to `path`."""
    steps, mean, std = (np.asarray(a, float) for a in (steps, mean, std))
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    ax.plot(steps, mean, color=PALETTE[0], lw=1.5, label="mean reward p")
    if np.any(std > 0):
        ax.fill_between(steps, mean - std, mean + std, color=PALETTE[0], alpha=0.25, lw=0, label="± 1 std (seeds)")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("expected reward p (success probability)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_ensemble(ts, mean, std, paths, closed_form, path: str) -> None:
    """Reduced-SDE ensemble: mean ± std band, a few sample paths and the deterministic closed form."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for i, sample in enumerate(paths):
        ax.plot(ts, sample, color=PALETTE[5], lw=0.6, alpha=0.7, label="sample paths" if i == 0 else None)
    ax.fill_between(ts, mean - std, mean + std, color=PALETTE[0], alpha=0.2, lw=0, label="± 1 std")
    ax.plot(ts, mean, color=PALETTE[0], lw=1.5, label="ensemble mean")
    ax.plot(ts, closed_form, color=PALETTE[3], lw=1.2, ls="--", label="closed form (noise-free)")
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("deviation e = p − p*")
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=120)
    plt.close(fig)
