"""Issue 50, items 7 and 8 (what a new user read and saw): a run that never learned is `flat`, not `oscillates`; a
clip scenario on an on-policy run says the clip never acts; a failed validation claim says what it means for a run;
the README says what the language-model level does and does not yet do; the figures of one log share its reward
units; the calibrated run's band edges are told apart from the fit window's end."""

import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pgrpo_sim import lm
from pgrpo_sim.analysis import lm_sweep, summaries
from pgrpo_sim.calibration import lm_scenarios
from pgrpo_sim.calibration.forecast import GoodnessOfFit
from pgrpo_sim.calibration.inference import Band
from pgrpo_sim.calibration.results import Forecast, Scenario, WhatIf
from pgrpo_sim.calibration.run_config import RunConfig
from pgrpo_sim.logs.readers import TrainingLog
from pgrpo_sim.reports import calibration_report, lm_report
from pgrpo_sim.reports.validate import SECTIONS, report_markdown
from pgrpo_sim.viz.calibration_figures import bands_figure

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _lm_run(reward):
    """An `lm.Run` of the given rewards [seeds, steps], every completion well-formed."""
    reward = np.atleast_2d(reward)
    readouts = {name: np.zeros(reward.shape) for name in lm.READOUTS}
    readouts.update(reward=reward, format_ok=np.ones(reward.shape), eval_accuracy=np.full(reward.shape, np.nan))
    seeds = reward.shape[0]
    return lm.Run(readouts, None, np.zeros(seeds, bool), np.full(seeds, -1))


def test_a_run_that_never_learned_is_flat_not_oscillating():
    """7a. Noise about a flat level read as a sustained oscillation: the level's flat runs (a binomial batch of 128 at
    p = 0.3, 60 steps) were called `oscillates` 8 times in 10, and so was an exact flat curve with float32 rounding
    jitter. A curve whose peak is within 3 standard errors (and 0.001) of its start is `flat`; a run that rises by
    0.25 is not, and every verdict is one of `VERDICTS`."""
    from pgrpo_sim.analysis import VERDICTS

    rng = np.random.default_rng(0)
    config = lm.config(prompts_per_step=16, num_generations=8, modulus=10)
    flat = rng.binomial(128, 0.3, size=(20, 60)) / 128
    verdicts = [row["verdict"] for row in lm_sweep.summarize_runs(_lm_run(flat), config, starts=np.arange(20))]
    assert verdicts.count("flat") >= 18 and "oscillates" not in verdicts, verdicts
    t = np.arange(60)
    rising = rng.binomial(128, 0.3 + 0.25 * (1 - np.exp(-t / 10)), size=(20, 60)) / 128
    verdicts_rising = [row["verdict"] for row in lm_sweep.summarize_runs(_lm_run(rising), config)]
    assert set(verdicts_rising) <= {"learns", "plateaus"}, verdicts_rising
    jitter = (0.3 + 1e-7 * rng.standard_normal(200)).astype(np.float32)  # an exact flat curve, rounded
    assert summaries.verdict(jitter, False) == "flat"
    assert summaries.verdict(np.full(50, 0.3), False) == "flat"
    assert summaries.verdict(np.linspace(0.3, 0.302, 50), False) != "flat"  # 0.002 > 0.001: an exact curve rose
    assert set(verdicts + verdicts_rising) <= set(VERDICTS) and "flat" in VERDICTS


def test_every_page_that_lists_the_verdicts_names_flat():
    """7a. The verdict names are the same everywhere a user reads them."""
    for page in ("docs/guide/calibration.md", "docs/guide/command-line.md", "docs/lm.md"):
        text = " ".join((ROOT / page).read_text().split())
        assert "plateaus | flat | oscillates" in text or "`flat`" in text, page


def test_the_running_mean_stderr_is_the_noise_over_the_points_averaged():
    """σ from step-to-step differences of white noise (σ = 0.05) over √min(t + 1, window); a slow trend does not move
    it; bad input is one line."""
    rng = np.random.default_rng(1)
    x = 0.05 * rng.standard_normal(20000) + np.linspace(0.0, 0.5, 20000)
    se = summaries.running_mean_stderr(x, 25)
    np.testing.assert_allclose(se[[0, 3, 24, -1]], 0.05 / np.sqrt([1, 4, 25, 25]), rtol=0.03)
    for bad, words in [((np.zeros(1), 4), "at least 2 steps"), ((np.zeros(5), 0), "window must be")]:
        with pytest.raises(ValueError, match=words):
            summaries.running_mean_stderr(*bad)


ENTRY = dict(verdict="learns", final_reward=0.8, final_lo=0.7, final_hi=0.9, plateau=0.8, time_to_90=30.0,
             diverged_fraction=0.0)  # fmt: skip


def _band(steps, mean):
    return Band(steps, mean, mean - 0.1, mean + 0.1, 0.8, False, 0.0)


def _answer(entry, band, changes=None):
    """A what-if `Scenario` from its record (as `what_if` builds one on either level)."""
    record = entry if changes is None else dict(entry, set=changes)
    p, se = entry.get("collapse_probability"), entry.get("collapse_probability_stderr")
    return Scenario(changes or {}, entry["verdict"], entry["final_reward"], p, se, band, record)


def _log(steps, reward):
    return TrainingLog({"step": steps, "reward": reward}, {}, {}, "jsonl", "log.jsonl", np.zeros(0))


def test_a_clip_scenario_on_an_on_policy_run_says_the_clip_never_acts(tmp_path, monkeypatch):
    """7b. `epsilon=None` on an on-policy run (num_iterations = 1, steps_per_generation = 1) gave a verdict and no
    word that the ratio is 1 there, so that the clip never acts. The what-if report says so for that scenario, not for
    a clip change with reuse nor for a learning-rate change; and the bandit's on-policy run is indeed the same with and
    without its clip, with reuse not."""
    import math

    from pgrpo_sim.calibration.model import synthetic_log

    monkeypatch.setattr(calibration_report, "calibration_markdown", lambda *a: [])
    monkeypatch.setattr(calibration_report, "plot_bands", lambda *a, **k: None)
    steps = np.arange(1.0, 61.0)
    cal = SimpleNamespace(model=SimpleNamespace(run=RunConfig()), fit_until=30.0, as_dict=lambda: {})
    sets = [{"epsilon": None}, {"learning_rate": 1e-5}, {"epsilon": None, "num_iterations": 2}]
    band = _band(steps, np.full(60, 0.5))
    result = WhatIf("bandit", _answer(ENTRY, band), tuple(_answer(ENTRY, band, s) for s in sets), 0.8, {})
    fit = GoodnessOfFit(30, 0.8, 0.1, 30, 0.1, 30, False)
    calibration_report.write_whatif(_log(steps, np.full(60, 0.5)), cal, result, fit, tmp_path)
    notes = [line for line in (tmp_path / "report.md").read_text().splitlines() if "never acts" in line]
    assert len(notes) == 1 and notes[0].startswith("- epsilon=None: ") and "on-policy" in notes[0], notes
    theta = [-1.0, 0.0, math.log(0.5 / 1e-5), -30.0]
    for run, same in [(RunConfig(learning_rate=1e-5), True), (RunConfig(learning_rate=1e-5, num_iterations=2), False)]:
        clipped = synthetic_log(run, theta, 40).series("reward")[1]
        unclipped = synthetic_log(run.replace(epsilon=None), theta, 40).series("reward")[1]
        assert np.array_equal(clipped, unclipped) == same


class _LMCal:
    """What the language-model level's report writers read of an `lm.Calibration`."""

    lr_scale, start_accuracy, ceiling, formats, format_weights = (-1.0, 0.1), 0.05, (0.7, 0.05), (0.1,), (1.0,)
    undetermined, overdispersion, poor_fit, notes, first_step, fit_until = None, 1.0, False, (), 1.0, 30.0

    def __init__(self, reward_scale):
        self.run = RunConfig(reward_scale=reward_scale)

    def as_dict(self):
        return dict(fit_window=dict(points=30), observable="reward", parameters=dict(start_accuracy=dict(stderr=0.01)))

    def logged_step(self, steps):
        return np.asarray(steps, float) + 1.0


def _lm_entry(mean, changes=None):
    band = dict(steps=list(range(60)), mean=mean, lower=[m - 0.05 for m in mean], upper=[m + 0.05 for m in mean],
                level=0.8)  # fmt: skip
    out = dict(verdict="learns", verdicts=["learns"] * 4, collapse_probability=0.0, collapse_probability_stderr=0.0,
               runs=4, final_reward=mean[-1], final_knowledge=0.3, peak_reward=max(mean), final_entropy=0.5,
               final_mean_length=9.0, band=band)  # fmt: skip
    return out if changes is None else dict(out, set=changes)


def test_one_logs_figures_share_its_reward_units(tmp_path, monkeypatch):
    """8. On a log paid 2.0 a correct answer (reward_scale 2), forecast.png (the bandit's) drew the log's 0–2 rewards
    while the level's whatif.png and forecast.png drew them / 2. Every figure now draws the logged rewards as
    logged and the level's bands × reward_scale; the level's report says its numbers are / reward_scale; its note on
    a clip scenario on an on-policy run is there too."""
    drawn = {}

    def capture(name):
        def plot(steps, reward, bands, path, **kwargs):
            drawn[name] = bands_figure(steps, reward, bands, **kwargs).axes[0]

        return plot

    steps, reward = np.arange(1.0, 61.0), np.linspace(0.2, 1.8, 60)
    log, level_mean = _log(steps, reward), list(np.linspace(0.1, 0.9, 60))
    monkeypatch.setattr(calibration_report, "calibration_markdown", lambda *a: [])
    monkeypatch.setattr(calibration_report, "plot_bands", capture("bandit forecast"))
    cal = SimpleNamespace(fit_until=30.0, as_dict=lambda: {})
    fit = GoodnessOfFit(30, 0.8, 0.1, 30, 0.1, 30, False)
    forecast = Forecast("bandit", _band(steps, reward), 30.0, 60.0, None, None, None, None, {})
    calibration_report.write_forecast(log, cal, forecast, fit, tmp_path)
    monkeypatch.setattr(lm_report, "plot_bands", capture("level what-if"))
    level = _LMCal(2.0)
    entry = _lm_entry(level_mean)
    band = lm_scenarios.band(level, entry)  # the level's summary / reward_scale → the log's units
    result = WhatIf("lm", _answer(entry, band), (_answer(entry, band, {"epsilon": None}),), 0.8, {})
    lm_report.write_lm_whatif(log, level, result, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "reward / reward_scale (2)" in text and "- epsilon=None: the clip's change" in text
    monkeypatch.setattr(lm_report, "plot_bands", capture("level forecast"))
    forecast = Forecast("lm", band, 30.0, 60.0, "learns", 0.0, 0.0, None, dict(forecast=entry, heldout=None))
    lm_report.write_lm_forecast(log, level, forecast, tmp_path)
    for name, ax in drawn.items():
        lines = {line.get_label(): line for line in ax.get_lines()}
        np.testing.assert_allclose(lines["logged reward"].get_ydata(), reward, err_msg=name)
        assert ax.get_ylim()[1] > 1.8, name
    for name in ("level what-if", "level forecast"):
        means = [line for line in drawn[name].get_lines() if "band)" in line.get_label()]
        np.testing.assert_allclose(means[0].get_ydata(), 2.0 * np.asarray(level_mean), err_msg=name)


def test_band_edges_and_the_fit_windows_end_are_told_apart(tmp_path):
    """8. The calibrated run's band edges were drawn in the dotted near-black of the fit window's end marker, with no
    legend entry. They now differ in line style and colour, and the legend names both (once each)."""
    steps = np.arange(1.0, 51.0)
    bands = {"calibrated run": _band(steps, np.full(50, 0.5)), "epsilon=None": _band(steps, np.full(50, 0.6))}
    fig = bands_figure(steps, np.full(50, 0.5), bands, fit_until=25.0)
    ax = fig.axes[0]
    edges = [line for line in ax.get_lines() if "band edges" in line.get_label()]
    (end,) = [line for line in ax.get_lines() if line.get_label() == "end of the fit window"]
    assert len(edges) == 2 and {str(e.get_linestyle()) for e in edges} != {str(end.get_linestyle())}
    assert all(matplotlib.colors.to_hex(e.get_color()) != matplotlib.colors.to_hex(end.get_color()) for e in edges)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend.count("end of the fit window") == 1 and sum("band edges" in t for t in legend) == 1, legend
    fig.savefig(tmp_path / "whatif.png", dpi=60)  # it renders
    assert (tmp_path / "whatif.png").stat().st_size > 0


def test_a_failed_claim_says_what_it_means_for_a_run():
    """7c. The validate report listed failed claims without what they mean for a user's run. Every claim has one
    sentence for that, printed under a failed verdict and not under one that holds."""
    from pgrpo_sim.reports.validate.sections import IF_FAILS

    assert set(IF_FAILS) == set(SECTIONS)
    for key, sentence in IF_FAILS.items():
        assert sentence.endswith(".") and len(re.findall(r"\.\s", sentence)) == 0, key  # one sentence
    results = {key: {"verdict": {"holds": i % 2 == 0, "text": f"numbers of {key}"}} for i, key in enumerate(SECTIONS)}
    text = report_markdown(results, quick=True, seed=0)
    for i, key in enumerate(SECTIONS):
        assert (f"*What this means for a run:* {IF_FAILS[key]}" in text) == (i % 2 == 1), key


def test_the_readme_says_what_the_language_model_level_does_and_does_not_yet_do():
    """7d. The README promised the level "can collapse where real runs collapse" beside the anchor study's failed
    collapse checks. It now says what holds (it breaks on its own at a high rate, many steps per rollout, no clip) and
    that its collapse calls on the real runs do not yet hold, with the anchor study's section linked."""
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "collapse where real runs collapse" not in text
    for words in ("breaks on its own", "too many optimiser steps per rollout", "no clip", "do not yet hold",
                  "docs/anchor-study.md#the-language-model-level-on-the-real-sweeps"):  # fmt: skip
        assert words in text, words
