"""matplotlib figures, written to files (the CLI selects the Agg backend; notebooks keep theirs)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullLocator

from ..base.regimes import DISCRETE_REGIMES
from ..models.bandit.hyperparameters import HYPERPARAMETERS

# Okabe–Ito colour-blind-safe palette
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def reward_curve_figure(steps, mean, std, *, title: str = ""):
    """Reward curve (mean ± one std band across seeds) against optimiser step; the band is drawn inside [0, 1],
    where a success probability lives.

    Args:
        steps: optimiser steps, (T,).
        mean: mean reward at each step, (T,); a success probability in [0, 1].
        std: its spread across seeds, (T,); 0 everywhere draws no band.
        title: the axes' title.

    Returns:
        The matplotlib `Figure` (the caller saves and closes it).
    """
    steps, mean, std = (np.asarray(a, float) for a in (steps, mean, std))
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    ax.plot(steps, mean, color=PALETTE[0], lw=1.5, label="mean reward p")
    if np.any(std > 0):
        low, high = np.clip(mean - std, 0.0, 1.0), np.clip(mean + std, 0.0, 1.0)
        ax.fill_between(steps, low, high, color=PALETTE[0], alpha=0.25, lw=0, label="± 1 std (seeds), within [0, 1]")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("expected reward p (success probability)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    return fig


def plot_reward_curve(steps, mean, std, path: str | Path, *, title: str = "") -> None:
    """`reward_curve_figure`, saved to `path` (its suffix picks the format).

    Args:
        steps: optimiser steps, (T,).
        mean: mean reward at each step, (T,).
        std: its spread across seeds, (T,).
        path: the image file (.png, .pdf or .svg).
        title: the axes' title.
    """
    fig = reward_curve_figure(steps, mean, std, title=title)
    try:
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


def plot_ensemble(ts, mean, std, paths, closed_form, path: str) -> None:
    """Reduced-SDE ensemble: mean ± std band, a few sample paths and the deterministic closed form.

    Args:
        ts: times, optimiser steps, (T,).
        mean: ensemble mean of the deviation e = p − p*, (T,).
        std: its standard deviation across paths, (T,).
        paths: sample paths to draw, (K, T) (K may be 0).
        closed_form: the noise-free closed-form e(t), (T,).
        path: the image file (its suffix picks the format).
    """
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
    (`analysis.predict_grid`).

    Args:
        dataset: a finished 2-D sweep (`run_sweep`, `load_sweep`), axes `x` and `y` among its dimensions.
        prediction: its per-cell `PhasePrediction` (`predict_grid`).
        x: the horizontal axis's name (a grid axis of the sweep).
        y: the vertical axis's name.
        path_stem: the files' path without suffix: writes `<path_stem>.png` and `<path_stem>.pdf`.
        boundaries: `phase_boundaries(dataset, x, y)`'s traced curves, or None for contours of the predictions.
        title: the figure's title.
    """
    import json

    from matplotlib.artist import Artist
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
    handles: list[Artist] = [Patch(color=REGIME_COLOURS[n], label=f"simulated: {n}") for n in DISCRETE_REGIMES]
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
    """Draw one validation section's figure into `out_dir/<name>.png`.

    Args:
        name: the section's figure, a key of `VALIDATION_FIGURES`.
        out_dir: the report's folder.
        *data: the numbers the section computed, as its figure function takes them.

    Returns:
        The file name, `<name>.png`.
    """
    fig = make_validation_figure(name, *data)
    try:
        fig.savefig(f"{out_dir}/{name}.png", dpi=110)
    finally:
        plt.close(fig)
    return f"{name}.png"


def make_validation_figure(name: str, *data):
    """The figure of one validation section, from the numbers the section computed.

    Args:
        name: a key of `VALIDATION_FIGURES`.
        *data: the section's numbers, as its figure function takes them.

    Returns:
        The matplotlib `Figure`.
    """
    return VALIDATION_FIGURES[name](*data)


def _fig_group_size(curves_all, group_sizes):
    """curves_all: advantage kind → (expected curves (G, T), sampled seed-mean curves (G, T), their 95 % half-width)."""
    fig, axes = plt.subplots(1, len(curves_all), figsize=(11, 3.6), layout="constrained", sharey=True)
    for ax, (kind, (expected, mean, half)) in zip(axes, curves_all.items(), strict=True):
        steps = np.arange(expected.shape[-1])
        for i, g in enumerate(group_sizes):
            ax.fill_between(steps, mean[i] - half[i], mean[i] + half[i], color=PALETTE[i], alpha=0.25, lw=0)
            ax.plot(steps, expected[i], color=PALETTE[i], lw=1.4, label=f"G = {g}")
        ax.set_title(f"advantage: {kind}")
        ax.set_xlabel("optimiser step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("expected reward p")
    axes[0].legend(title="lines: expected;\nbands: sampled 95 % CI", fontsize=8)
    return fig


def _fig_fluctuations(g, var, se, pred_var, fitted, inverse, slope):
    """Measured Var(p) ± 2 s.e., the prediction, the fitted power law and a 1/G line, at the group sizes used."""
    fig, ax = plt.subplots(figsize=(5.6, 4.0), layout="constrained")
    ax.errorbar(g, var, yerr=2 * se, fmt="o", color=PALETTE[0], label="measured late Var(p) (± 2 s.e.)")
    ax.plot(g, pred_var, "s--", color=PALETTE[3], label="predicted D/(2GCK)")
    ax.plot(g, fitted, color=PALETTE[0], lw=1, label=f"fit: slope {slope:.2f}")
    ax.plot(g, inverse, color="0.5", ls=":", label="slope −1")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(g, [f"{int(v)}" for v in g])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("group size G")
    ax.set_ylabel("stationary Var(p)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return fig


def _fig_onset(mus, changes, measured, continuous, discrete):
    """Sign changes against μ with the three onsets; the two predictions nearly coincide, so the discrete one is
    a wide translucent band under the dashed continuous line, each labelled with its value."""
    fig, ax = plt.subplots(figsize=(5.6, 4.0), layout="constrained")
    ax.plot(mus, changes, "o-", color=PALETTE[0], ms=3, label="sign changes of e (bandit)")
    ax.axvline(
        discrete, color=PALETTE[2], ls="-", lw=6, alpha=0.45, label=f"discrete complex-root onset {discrete:.4f}"
    )
    ax.axvline(continuous, color=PALETTE[3], ls="--", lw=1.3, label=f"continuous ζ = 1 at {continuous:.4f}")
    if measured is not None:  # None: no run on the grid oscillates
        ax.axvline(measured, color="k", ls=":", lw=1.3, label=f"measured onset {measured:.3f}")
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
    ax.set_xticks(x, [f"{c['lag_model']}\nη={c['learning_rate']} μ={c['momentum']}" for c in cases], fontsize=7)
    ax.set_xlabel("case: lag model, learning rate η, momentum μ")
    ax.set_ylabel("critical lag (steps)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _fig_saturation(curves):
    """Top row: each whole curve with the fitted laws; bottom row: its first `zoom` steps, where a slow start
    shows. curves: label → (p, {law: fitted curve}, zoom)."""
    fig, axes = plt.subplots(2, len(curves), figsize=(10, 6.4), layout="constrained", squeeze=False)
    styles = {"saturation": ("--", PALETTE[3]), "critical": (":", PALETTE[2]), "oscillator": ("-.", PALETTE[4])}
    for col, (label, (p, fits, zoom)) in enumerate(curves.items()):
        steps = np.arange(p.size)
        for row, end in enumerate((p.size, zoom + 1)):
            ax = axes[row, col]
            ax.plot(steps[:end], p[:end], color="k", lw=2.5, alpha=0.35, label="bandit (expected)")
            for law, curve in fits.items():
                ax.plot(steps[:end], curve[:end], ls=styles[law][0], color=styles[law][1], lw=1.3, label=law)
            ax.set_title(label if row == 0 else f"{label}: the first {zoom} steps", fontsize=9)
            ax.set_xlabel("optimiser step")
            ax.grid(alpha=0.3)
        axes[0, col].axvspan(0, zoom, color="0.85", zorder=0)
    for row in range(2):
        axes[row, 0].set_ylabel("expected reward p")
    axes[0, 0].legend(fontsize=8)
    return fig


def _fig_stiffness(cases):
    """K three ways per case: exact (Jacobian), the paper's early slope, and the oscillator fit ± 2 s.e."""
    fig, ax = plt.subplots(figsize=(7.0, 4.0), layout="constrained")
    x = np.arange(len(cases))
    ax.plot(x, [c["exact"] for c in cases], "_", color="k", ms=22, mew=2, label="(a) exact Jacobian")
    ax.plot(x - 0.12, [c["slope"] for c in cases], "v", color=PALETTE[3], ms=7, label="(b) early slope")
    ax.errorbar(
        x + 0.12,
        [c["fit"] for c in cases],
        yerr=[2 * c["fit_stderr"] for c in cases],
        fmt="o",
        color=PALETTE[0],
        ms=5,
        label="(c) oscillator fit ± 2 s.e.",
    )
    ax.set_xticks(x, [f"η={c['learning_rate']} μ={c['momentum']}\n{c['regime']}" for c in cases], fontsize=7)
    ax.set_xlabel("case: learning rate η, momentum μ, predicted regime")
    ax.set_ylabel("stiffness K")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _fig_failure_modes(runs, readouts, first_steps, first):
    """For each run (rows) the step at which each read-out's flag first fired (columns; empty: never), the first
    flag of the run outlined."""
    fig, ax = plt.subplots(figsize=(7.0, 3.8), layout="constrained")
    steps = np.array([[np.nan if v is None else float(v) for v in row] for row in first_steps])
    shown = np.ma.masked_invalid(steps)
    image = ax.imshow(shown, cmap="viridis_r", aspect="auto")
    fig.colorbar(image, ax=ax, label="first step the flag fired")
    for i, row in enumerate(steps):
        for j, v in enumerate(row):
            first_here = first[i] == readouts[j]
            text = "—" if np.isnan(v) else f"{v:g}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="k" if np.isnan(v) else "w")
            if first_here:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec=PALETTE[3], lw=2.5))
    ax.set_xticks(range(len(readouts)), readouts)
    ax.set_yticks(range(len(runs)), [f"{r} run" for r in runs])
    ax.set_xlabel("read-out (flag); outlined: the run's first flag")
    return fig


def _fig_rollout_reuse(cases, max_epochs):
    clips = sorted({c["epsilon"] for c in cases})
    fig, axes = plt.subplots(1, len(clips), figsize=(4.2 * len(clips), 3.8), layout="constrained", sharey=True)
    axes = np.atleast_1d(axes)
    above = max_epochs + 1
    for ax, clip in zip(axes, clips, strict=True):
        mine = [c for c in cases if c["epsilon"] == clip]
        etas = np.array([c["learning_rate"] for c in mine])
        for key, style, colour, label in (
            ("refresh", "o-", PALETTE[0], "reuse (measured)"),
            ("refresh_fresh", "s--", PALETTE[1], "fresh samples (measured)"),
            ("floquet", "x", PALETTE[2], "reuse: exact Floquet onset"),
        ):
            values = [above if c[key] is None else c[key] for c in mine]
            ax.plot(etas, values, style, color=colour, label=label, ms=7)
        ax.plot(etas, [c["paper"] for c in mine], ":", color=PALETTE[3], label="paper: (1−μ)/(η_eff K)")
        ax.plot(etas, [c["continuous"] for c in mine], "-.", color=PALETTE[4], label="continuous model: 2τ* + 1")
        ax.axhline(above, color="0.6", lw=0.8)
        ax.text(etas.min(), above, " stable up to the largest count tried", va="bottom", fontsize=7, color="0.4")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(etas, [f"{e:g}" for e in etas])
        ax.set_ylim(0, above + 1)
        ax.set_xlabel("learning rate η")
        ax.set_title(f"clip ε = {clip:g}")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("critical optimiser steps per rollout K_ref")
    axes[0].legend(fontsize=7, loc="lower left")
    return fig


def _fig_mean_field(curves):
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for i, (label, (reward, fit)) in enumerate(curves.items()):
        steps = np.arange(reward.size)
        ax.plot(steps, reward, color=PALETTE[i % len(PALETTE)], lw=2.2, alpha=0.45)
        ax.plot(steps, fit, color=PALETTE[i % len(PALETTE)], lw=1.0, ls="--", label=label)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("mean reward (thick: bandit, dashed: fit)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def _fig_group_spread(points):
    """Within-group reward std against G: measured, its exact expectation and the leading order."""
    g = np.array(list(points))
    measured, exact, leading = np.array(list(points.values())).T
    fig, ax = plt.subplots(figsize=(5.6, 4.0), layout="constrained")
    ax.plot(g, leading, "s:", color="0.5", label="leading order √(p(1 − p))")
    ax.plot(g, exact, "-", color=PALETTE[3], label="exact E[s_G | p]")
    ax.plot(g, measured, "o", color=PALETTE[0], label="sampled reward_std (late mean)")
    ax.set_xscale("log")
    ax.set_xticks(g, [f"{int(v)}" for v in g])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("group size G")
    ax.set_ylabel("within-group reward std")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _fig_lm_collapse(rates, finals, ses, reuse_steps, reuse_finals, reuse_ses):
    """Final reward (mean ± s.e. over seeds) against the learning rate, and against the optimiser steps per rollout
    at the best rate."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained", sharey=True)
    for ax, x, y, e, label in (
        (axes[0], rates, finals, ses, "learning rate"),
        (axes[1], reuse_steps, reuse_finals, reuse_ses, "optimiser steps per rollout (clip 0.2, best rate)"),
    ):
        ax.errorbar(x, y, yerr=e, marker="o", color=PALETTE[0], capsize=3)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("final reward (mean ± s.e. over seeds)")
    return fig


VALIDATION_FIGURES = {
    "lm_collapse": _fig_lm_collapse,
    "rollout_reuse": _fig_rollout_reuse,
    "mean_field": _fig_mean_field,
    "saturation_law": _fig_saturation,
    "group_size_invariance": _fig_group_size,
    "fluctuations": _fig_fluctuations,
    "oscillation_onset": _fig_onset,
    "lag_threshold": _fig_lag,
    "stiffness": _fig_stiffness,
    "failure_modes": _fig_failure_modes,
    "group_spread": _fig_group_spread,
}
"""Section name → the function drawing its figure from the section's numbers."""


def plot_convergence(result, path: str) -> None:
    """Objective value per iteration for every restart of a `SearchResult`, and the best penalised loss so far.

    Args:
        result: a `search` result (its `history`, per iteration × restart).
        path: the image file (its suffix picks the format).
    """
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
