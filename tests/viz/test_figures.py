"""Figures draw what they are given, readably: every validation section has one, the two nearly equal onset
predictions stay distinguishable, axes carry labels and the ticks of the values used, a reward band stays
inside [0, 1], and the saturation figure zooms into the start where a slow start shows."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pgrpo_sim.reports.validate import SECTIONS
from pgrpo_sim.viz.figures import VALIDATION_FIGURES, make_validation_figure, reward_curve_figure


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_every_validation_section_has_a_figure():
    assert set(VALIDATION_FIGURES) == set(SECTIONS)


def test_onset_lines_stay_distinguishable():
    fig = make_validation_figure("oscillation_onset", np.linspace(0, 0.95, 12), np.arange(12), 0.777, 0.7216, 0.7225)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    discrete = next(v for k, v in lines.items() if k.startswith("discrete"))
    continuous = next(v for k, v in lines.items() if k.startswith("continuous"))
    # the discrete band is wider than the dashed continuous line drawn over it, and each names its value
    assert discrete.get_linewidth() >= 3 * continuous.get_linewidth() and continuous.get_linestyle() == "--"
    assert "0.7225" in discrete.get_label() and "0.7216" in continuous.get_label()


def test_fluctuations_ticks_at_the_group_sizes():
    g = np.array([4.0, 8.0, 16.0])
    var = 1e-4 / g
    fig = make_validation_figure("fluctuations", g, var, 0.05 * var, var, var, var, -1.0)
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.get_xticks(), g)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "8", "16"]


def test_lag_threshold_has_axis_labels():
    cases = [dict(lag_model="stale", learning_rate=0.1, momentum=0.5, measured=3, exact=3, continuous=2.5)]
    ax = make_validation_figure("lag_threshold", cases).axes[0]
    assert ax.get_xlabel() and ax.get_ylabel()


def test_saturation_figure_zooms_into_the_start():
    p = 0.8 - 0.6 * np.exp(-np.arange(6667) / 50.0)
    fig = make_validation_figure("saturation_law", {"η=0.01, μ=0.8": (p, {"saturation": p}, 333)})
    whole, zoomed = fig.axes
    assert whole.get_xlim()[1] > 6000 and zoomed.get_xlim()[1] < 400


def test_stiffness_and_failure_mode_figures():
    cases = [
        dict(learning_rate=0.05, momentum=0.0, regime="overdamped", exact=0.225, slope=0.09, fit=0.23, fit_stderr=1e-3)
    ]
    ax = make_validation_figure("stiffness", cases).axes[0]
    assert ax.get_ylabel() == "stiffness K" and ax.get_xlabel()
    fig = make_validation_figure(
        "failure_modes",
        ["hacking", "healthy"],
        ["hacking", "instability"],
        [[53, None], [None, None]],
        ["hacking", None],
    )
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["hacking", "instability"]


def test_reward_band_stays_within_zero_and_one():
    steps = np.arange(50)
    mean = np.linspace(0.1, 0.95, 50)
    fig = reward_curve_figure(steps, mean, np.full(50, 0.3))
    (band,) = fig.axes[0].collections
    y = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
    assert y.min() >= 0.0 and y.max() <= 1.0


def test_rollout_reuse_figure_draws_each_onset_per_clip():
    """One panel per clip; each panel's lines carry its cases' onsets, a count never reached drawn just above the
    largest tried, and the continuous model's 2τ* + 1 beside the paper's K_ref*."""
    cases = [
        dict(epsilon=c, learning_rate=e, refresh=r, refresh_fresh=None, floquet=f, paper=p, continuous=2 * p + 1)
        for c, e, r, f, p in ((0.1, 0.25, 6, 5, 2.0), (0.1, 1.0, None, None, 0.5), (0.2, 1.0, 3, 3, 0.5))
    ]
    fig = make_validation_figure("rollout_reuse", cases, 10)
    assert len(fig.axes) == 2 and [ax.get_title() for ax in fig.axes] == ["clip ε = 0.1", "clip ε = 0.2"]
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    np.testing.assert_array_equal(lines["continuous model: 2τ* + 1"].get_ydata(), [5.0, 2.0])
    np.testing.assert_array_equal(lines["paper: (1−μ)/(η_eff K)"].get_ydata(), [2.0, 0.5])
    np.testing.assert_array_equal(lines["reuse (measured)"].get_ydata(), [6, 11])
    np.testing.assert_array_equal(lines["fresh samples (measured)"].get_ydata(), [11, 11])
    np.testing.assert_array_equal(lines["reuse: exact Floquet onset"].get_ydata(), [5, 11])
    np.testing.assert_array_equal(lines["continuous model: 2τ* + 1"].get_xdata(), [0.25, 1.0])
    second = {line.get_label(): line for line in fig.axes[1].get_lines()}
    np.testing.assert_array_equal(second["continuous model: 2τ* + 1"].get_ydata(), [2.0])
    np.testing.assert_array_equal(second["reuse (measured)"].get_ydata(), [3])


def test_what_if_figure_keeps_several_scenarios_apart():
    """Issue 37: four overlapping shaded bands made the what-if figure unreadable. With several bands the calibrated
    run is drawn on top (black, highest z-order), each scenario has its own colour and line style with a light
    band (alpha ≤ 0.1), and the legend sits outside the axes; one band (calibrate, forecast) stays shaded."""
    from pgrpo_sim.calibration.inference import Band
    from pgrpo_sim.viz.calibration_figures import bands_figure

    steps = np.arange(1.0, 51.0)

    def band(level):  # identical curves for two scenarios: the line styles must still tell them apart
        return Band(steps, np.full(50, level), np.full(50, level - 0.1), np.full(50, level + 0.1), 0.8, False, 0.0)

    bands = {"calibrated run": band(0.5), "a=1": band(0.5), "b=2": band(0.6), "c=3": band(0.4)}
    fig = bands_figure(steps, np.full(50, 0.5), bands, fit_until=50.0, warning="calibration failed: …")
    ax = fig.axes[0]
    means = {line.get_label().split(" (")[0]: line for line in ax.get_lines() if "band)" in line.get_label()}
    assert set(means) == set(bands)
    top = means.pop("calibrated run")
    others = [line.get_zorder() for line in ax.get_lines() if line is not top]
    assert top.get_color() == "black" and top.get_zorder() > max(others)
    styles = {(line.get_color(), str(line.get_linestyle())) for line in means.values()}
    assert len({c for c, _ in styles}) == 3 and len({s for _, s in styles}) == 3
    assert all(patch.get_alpha() <= 0.1 for patch in ax.collections)
    legend = ax.get_legend()
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # beside the axes, not over the data
    assert ax.get_title() == "calibration failed: …"
    single = bands_figure(steps, np.full(50, 0.5), {"calibrated model": band(0.5)}).axes[0]
    assert [patch.get_alpha() for patch in single.collections] == [0.2]
