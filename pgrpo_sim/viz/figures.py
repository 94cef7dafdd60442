"""matplotlib figures, written to files (the CLI selects the Agg backend; notebooks keep theirs)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..base.regimes import DISCRETE_REGIMES
from ..models.hyperparameters import HYPERPARAMETERS

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


REGIME_COLOURS = {"monotone": PALETTE[5], "oscillatory": PALETTE[1], "flip": PALETTE[4], "unstable": PALETTE[3]}


def plot_phase_diagram(
    dataset, prediction, x: str, y: str, path_stem: str, *, boundaries=None, title: str = ""
) -> None:
    """Empirical regime map of a 2-D sweep with the predicted boundaries overlaid; writes PNG and PDF.

    Boundaries: continuous ζ = 1 and C = 0; exact discrete spectral radius = 1 and onset of complex roots.
    `boundaries` (`analysis.phase_boundaries(dataset, x, y)`, or None) gives the first three as exactly traced
    curves; without it (and always for the complex-root onset) they are contours of the per-cell predictions
    (`analysis.predict_grid`)."""
    import json

    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    regime = dataset["regime"].transpose(y, x).values
    xs, ys = dataset[x].values.astype(float), dataset[y].values.astype(float)
    spacing = json.loads(dataset.attrs.get("spacing", "{}"))
    fig, ax = plt.subplots(figsize=(7.2, 4.8), layout="constrained")
    cmap = ListedColormap([REGIME_COLOURS[n] for n in DISCRETE_REGIMES])
    ax.pcolormesh(xs, ys, regime, cmap=cmap, vmin=-0.5, vmax=3.5, shading="nearest")
    order = list(dataset["regime"].dims)
    swap = order.index(x) < order.index(y)

    def field(values):
        return values.T if swap else values

    lines = [
        (field(prediction.damping_ratio) - 1, "k", "--", "continuous ζ = 1", "damping_ratio"),
        (field(prediction.damping_margin), "k", "-", "continuous C = 0", "damping"),
        (field(prediction.radius) - 1, PALETTE[0], "-", "discrete radius = 1", "spectral_radius"),
        (field(prediction.complex_root) - 0.5, PALETTE[0], ":", "discrete complex-root onset", None),
    ]
    traced = boundaries
    handles = [Patch(color=REGIME_COLOURS[n], label=f"simulated: {n}") for n in DISCRETE_REGIMES]
    for values, colour, style, label, kind in lines:
        if traced is not None and kind is not None:
            for curve in traced[kind]:
                ax.plot(curve.x, curve.y, color=colour, ls=style, lw=1.6)
            if traced[kind]:
                handles.append(Line2D([], [], color=colour, ls=style, lw=1.6, label=label))
        elif np.nanmin(values) < 0 < np.nanmax(values):
            ax.contour(xs, ys, values, levels=[0.0], colors=[colour], linestyles=[style], linewidths=1.6)
            handles.append(Line2D([], [], color=colour, ls=style, lw=1.6, label=label))
    for axis, name in ((ax.set_xscale, x), (ax.set_yscale, y)):
        if spacing.get(name) == "log":
            axis("log")
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    ax.set_title(title, fontsize=9)
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.savefig(f"{path_stem}.png", dpi=130)
    fig.savefig(f"{path_stem}.pdf")
    plt.close(fig)


def _axis_label(name: str) -> str:
    row = HYPERPARAMETERS.get(name)
    return row.label if row is not None else name


def validation_figure(name: str, out_dir, *data) -> str:
    """Draw one validation section's figure into `out_dir/<name>.png`; returns the file name."""
    fig = _VALIDATION_FIGURES[name](*data)
    fig.savefig(f"{out_dir}/{name}.png", dpi=110)
    plt.close(fig)
    return f"{name}.png"


def _fig_group_size(curves_all, group_sizes):
    fig, axes = plt.subplots(1, len(curves_all), figsize=(11, 3.6), layout="constrained", sharey=True)
    for ax, (kind, (expected, sampled)) in zip(axes, curves_all.items()):
        steps = np.arange(expected.shape[-1])
        for i, g in enumerate(group_sizes):
            mean = sampled[i].mean(0)
            half = 1.96 * sampled[i].std(0) / np.sqrt(sampled.shape[1])
            ax.fill_between(steps, mean - half, mean + half, color=PALETTE[i], alpha=0.25, lw=0)
            ax.plot(steps, expected[i], color=PALETTE[i], lw=1.4, label=f"G = {g}")
        ax.set_title(f"advantage: {kind}")
        ax.set_xlabel("optimiser step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("expected reward p")
    axes[0].legend(title="lines: expected;\nbands: sampled 95 % CI", fontsize=8)
    return fig


def _fig_fluctuations(g, var, se, pred_var, slope, intercept):
    fig, ax = plt.subplots(figsize=(5.6, 4.0), layout="constrained")
    ax.errorbar(g, var, yerr=2 * se, fmt="o", color=PALETTE[0], label="measured late Var(p) (± 2 s.e.)")
    ax.plot(g, pred_var, "s--", color=PALETTE[3], label="predicted D/(2GCK)")
    ax.plot(g, np.exp(intercept) * g**slope, color=PALETTE[0], lw=1, label=f"fit: slope {slope:.2f}")
    ax.plot(g, var[0] * (g / g[0]) ** -1.0, color="0.5", ls=":", label="slope −1")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("group size G")
    ax.set_ylabel("stationary Var(p)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return fig


def _fig_onset(mus, changes, measured, continuous, discrete):
    fig, ax = plt.subplots(figsize=(5.6, 4.0), layout="constrained")
    ax.plot(mus, changes, "o-", color=PALETTE[0], ms=3, label="sign changes of e (bandit)")
    ax.axvline(discrete, color=PALETTE[2], ls="-", label="discrete complex-root onset")
    ax.axvline(continuous, color=PALETTE[3], ls="--", label="continuous ζ = 1")
    ax.axvline(measured, color="k", ls=":", label="measured onset")
    ax.set_yscale("symlog")
    ax.set_xlabel("momentum μ")
    ax.set_ylabel("sign changes of p − p*")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _fig_lag(cases):
    fig, ax = plt.subplots(figsize=(7.0, 4.0), layout="constrained")
    x = np.arange(len(cases))
    nan = float("nan")
    ax.plot(
        x,
        [c["measured"] if c["measured"] is not None else nan for c in cases],
        "o",
        color=PALETTE[0],
        ms=8,
        label="measured (bandit)",
    )
    ax.plot(
        x,
        [c["exact"] if c["exact"] is not None else nan for c in cases],
        "x",
        color=PALETTE[2],
        ms=10,
        mew=2,
        label="exact (Floquet)",
    )
    ax.plot(x, [c["continuous"] for c in cases], "_", color=PALETTE[3], ms=16, mew=2, label="continuous τ*")
    ax.set_xticks(x, [f"{c['lag_model']}\nη={c['eta']} μ={c['momentum']}" for c in cases], fontsize=7)
    ax.set_ylabel("critical lag (steps)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _fig_saturation(curves):
    fig, axes = plt.subplots(1, len(curves), figsize=(10, 3.6), layout="constrained")
    styles = {"saturation": ("--", PALETTE[3]), "critical": (":", PALETTE[2]), "oscillator": ("-.", PALETTE[4])}
    for ax, (label, (p, fits)) in zip(axes, curves.items()):
        steps = np.arange(p.size)
        ax.plot(steps, p, color="k", lw=2.5, alpha=0.35, label="bandit (expected)")
        for law, curve in fits.items():
            ax.plot(steps, curve, ls=styles[law][0], color=styles[law][1], lw=1.3, label=law)
        ax.set_title(label)
        ax.set_xlabel("optimiser step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("expected reward p")
    axes[0].legend(fontsize=8)
    return fig


_VALIDATION_FIGURES = {
    "saturation_law": _fig_saturation,
    "group_size_invariance": _fig_group_size,
    "fluctuations": _fig_fluctuations,
    "oscillation_onset": _fig_onset,
    "lag_threshold": _fig_lag,
}


def plot_convergence(result, path: str) -> None:
    """Objective value per iteration for every restart of a `SearchResult`, and the best penalised loss so far;
    saved to `path`."""
    loss, objective = result.history["loss"], result.history["objective"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8), layout="constrained")
    steps = np.arange(1, loss.shape[0] + 1)
    for r in range(loss.shape[1]):
        ax1.plot(steps, objective[:, r], color=PALETTE[r % len(PALETTE)], lw=1.0, label=f"restart {r}")
    best_so_far = np.fmin.accumulate(np.where(np.isfinite(loss), loss, np.inf).min(axis=1))
    ax2.plot(steps, best_so_far, color=PALETTE[0], lw=1.5)
    ax1.set_xlabel("iteration")
    ax1.set_ylabel(f"objective: {result.objective}")
    ax1.legend(loc="best", fontsize=8)
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("best penalised loss so far")
    if np.all(best_so_far[np.isfinite(best_so_far)] > 0):
        ax2.set_yscale("log")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.suptitle(", ".join(f"{k}={v:.4g}" for k, v in result.best.items()), fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)
