"""Forecast pieces that need no calibration: a scenario's model, the verdict rule, the held-out score, the map from
logged steps to model steps."""

import importlib
import re

import numpy as np
import pytest

from pgrpo_sim.calibration import Band, Calibration, draws_note, horizon_limit, predictive_band, verdict
from pgrpo_sim.calibration.forecast import extend, heldout_score
from pgrpo_sim.calibration.inference import fit_data, model_steps
from pgrpo_sim.calibration.model import population_model
from pgrpo_sim.calibration.run_config import RunConfig
from pgrpo_sim.logs.readers import tidy

forecast_module = importlib.import_module("pgrpo_sim.calibration.forecast")  # the package's `forecast` is the function
RUN = RunConfig(learning_rate=1e-5, num_generations=8, prompts_per_step=32, lr_scheduler_type="linear")


def _calibration(run: RunConfig, steps: int, log_format: str) -> Calibration:
    """A calibration as `calibrate` builds it (θ and covariance are not read here)."""
    model = population_model(run, steps, log_format=log_format, horizon=steps + 1)
    return Calibration(
        model=model,
        theta=np.zeros(4),
        covariance=np.eye(4),
        overdispersion=1.0,
        used=("reward",),
        skipped={},
        first_step=1.0,
        fit_until=float(steps + 1),
        n_points=steps + 1,
        log_format=log_format,
        map_offset=0.0,
    )


@pytest.mark.parametrize("log_format", ["jsonl", "trl"])
def test_a_scenario_gets_the_model_its_run_config_implies(log_format):
    """`extend` with another run config gives the model `population_model` builds for it at the calibration's
    horizon: its schedule length (max_steps), optimiser steps per logged step and number of prompts — not the
    calibrated run's with only the run swapped."""
    cal = _calibration(RUN, 50, log_format)
    for changes in (dict(max_steps=400), dict(num_iterations=2), dict(steps_per_generation=2)):
        run = RUN.replace(**changes)
        got = extend(cal, 81.0, run).model
        want = population_model(run, 80, log_format=log_format, horizon=51)
        assert got == want, changes
    assert extend(cal, 81.0, RUN.replace(max_steps=400)).model.config().decay_steps == 400
    assert extend(cal, 81.0).model == population_model(RUN, 80, log_format=log_format, horizon=51)


def test_extend_refuses_a_horizon_beyond_ten_fit_windows():
    cal = _calibration(RUN, 50, "jsonl")
    limit = horizon_limit(1.0, 51.0)
    assert limit == 501.0
    assert extend(cal, limit).model.steps == 500
    with pytest.raises(ValueError, match="until must be <= 501"):
        extend(cal, limit + 1)
    with pytest.raises(ValueError, match="until must be finite"):
        extend(cal, float("nan"))


def test_verdicts_of_flat_falling_and_rising_curves():
    """A flat or barely drifting curve is flat (it does not learn); one that halves collapses; one still rising over
    its last 20 % by more than 10 % of its gain (and 0.001) learns; a non-finite one diverges."""
    assert verdict(np.full(50, 0.3), False) == "flat"
    assert verdict(np.zeros(50), False) == "flat"
    assert verdict(np.linspace(0.0424855, 0.0424858, 50), False) == "flat"  # a drift of 3e-7 does not learn
    assert verdict(np.linspace(0.3, 0.33, 50), False) == "learns"  # 0.006 in the last 20 %: 20 % of its gain
    assert verdict(np.linspace(0.6, 0.2, 50), False) == "collapses"
    assert verdict(np.linspace(0.2, 0.6, 50), False) == "learns"
    assert verdict(np.r_[np.full(49, 0.3), np.nan], False) == "diverges"


def test_a_diverged_forecast_has_no_heldout_score(monkeypatch):
    """The held-out MAE and coverage of a forecast whose MAP run diverged are None, not a coverage of 0 (the law
    baselines, fitted to the window whatever the forecast did, are left out: they compile for seconds)."""
    monkeypatch.setattr(forecast_module, "BASELINE_LAWS", ())
    steps = np.arange(1.0, 31.0)
    log = tidy([{"step": s, "reward": 0.3 + 0.01 * s} for s in steps], format="jsonl", path=None, columns={})
    cal = _calibration(RUN, 19, "jsonl")  # fit window: steps 1…20
    nan = np.full(30, np.nan)
    band = Band(steps=steps, mean=nan, lo=nan, hi=nan, level=0.8, diverged=True, diverged_fraction=1.0)
    score = heldout_score(log, cal, band)
    assert score["n"] == 10 and score["mae"] is None and score["coverage"] is None
    finite = Band(steps=steps, mean=0.3 + 0.01 * steps, lo=0.2 + 0.01 * steps, hi=0.4 + 0.01 * steps, level=0.8,
                  diverged=False, diverged_fraction=0.0)  # fmt: skip
    score = heldout_score(log, cal, finite)
    assert score["mae"] == pytest.approx(0.0, abs=1e-12) and score["coverage"] == 1.0


def test_a_band_says_how_many_draws_diverged():
    """A band is over the draws that did not diverge: nothing to say when all ran (or the MAP run diverged, which
    says it all); the share otherwise, and that the band is no central interval of all draws once the share
    exceeds its tail, (1 − level)/2 = 10 % at level 0.8."""
    steps = np.arange(1.0, 4.0)
    band = lambda frac, diverged=False: Band(steps=steps, mean=steps, lo=steps, hi=steps, level=0.8,
                                             diverged=diverged, diverged_fraction=frac)  # fmt: skip
    assert draws_note(band(0.0)) is None and draws_note(band(1.0, diverged=True)) is None
    assert draws_note(band(0.05)) == "5% of the posterior draws diverge; mean and band are over the others"
    assert draws_note(band(0.335)) == (
        "34% of the posterior draws diverge, more than the band's 10% tail: mean and band are over the others, and "
        "the band is no central 80% interval of all draws"
    )


def test_model_steps_of_a_log():
    """Logged steps map to model steps by their distance from the first rewarded step; a fractional distance has
    no model step and is refused, naming the step."""
    np.testing.assert_array_equal(model_steps(np.array([3.0, 4.0, 7.0]), 3.0), [0, 1, 4])
    with pytest.raises(ValueError, match=re.escape("step 3.5 is not a whole number of steps after its first step 3")):
        model_steps(np.array([3.0, 3.5, 4.0]), 3.0)


def test_calibration_data_drop_values_logged_before_the_first_reward():
    """A zero-std fraction logged at step 0, before the first reward at step 1, has no model step (it used to get
    index −1, the model's last step)."""
    records = [{"step": 0.0, "zero_std_frac": 0.5}] + [
        {"step": float(s), "reward": 0.3, "zero_std_frac": 0.4} for s in range(1, 13)
    ]
    log = tidy(records, format="jsonl", path=None, columns={})
    first, _, used, _ = fit_data(log, RUN, None)
    assert first == 1.0 and used["zero_std_frac"][0].min() == 0 and used["zero_std_frac"][0].size == 12


def test_calibrate_refuses_bad_arguments_before_fitting():
    """Checked before any fit: a dict for the run config (it raised AttributeError), horizon 0 (silently the log's
    length), a fit window beyond the log (silently the whole log)."""
    from pgrpo_sim.calibration import calibrate

    log = tidy([{"step": float(s), "reward": 0.3} for s in range(1, 31)], format="jsonl", path=None, columns={})
    for kwargs, match in (
        (dict(run={"learning_rate": 1e-6}), "run must be a RunConfig"),
        (dict(horizon=0), "horizon must be"),
        (dict(fit_until=1e9), "fit_until must be in \\[1, 30\\]"),
    ):
        with pytest.raises(ValueError, match=match):
            calibrate(log, **(dict(run=RUN) | kwargs))


def test_population_model_and_band_refuse_bad_arguments():
    with pytest.raises(ValueError, match="steps must be"):
        population_model(RUN, -3)
    with pytest.raises(ValueError, match="horizon must be"):
        population_model(RUN, 50, horizon=-5)
    with pytest.raises(ValueError, match="observable must be one of"):
        predictive_band(_calibration(RUN, 20, "jsonl"), observable="rewards")
    with pytest.raises(ValueError, match="seed must be"):
        predictive_band(_calibration(RUN, 20, "jsonl"), seed=-1)


def _window_band(mean, half, steps, diverged=False):
    """A band of constant half-width about `mean` at `steps` (level 0.8)."""
    return Band(steps=steps, mean=mean, lo=mean - half, hi=mean + half, level=0.8, diverged=diverged,
                diverged_fraction=0.0)  # fmt: skip


def test_goodness_of_fit_passes_a_band_that_describes_its_window_and_fails_one_that_misses_it():
    """Rewards N(m, 0.1²) about the band's mean m, whose 80 % band is m ± 1.2816·0.1: about 10 % below and 10 %
    above, within 3 binomial standard errors (3·√(0.09/200) = 6.4 %); issue 37's failed calibration, its mean far
    below the logged rewards (0 % below, 22 % above), fails and says so."""
    steps = np.arange(1.0, 201.0)
    cal = _calibration(RUN, 199, "jsonl")  # fit window: steps 1…200
    mean = np.clip(0.2 + 0.003 * steps, 0, 0.8)
    y = mean + 0.1 * np.random.default_rng(0).standard_normal(steps.size)
    records = [{"step": s, "reward": float(r)} for s, r in zip(steps, np.clip(y, 0, 1), strict=True)]
    log = tidy(records, format="jsonl", path=None, columns={})
    good = forecast_module.goodness_of_fit(log, cal, _window_band(mean, 1.2816 * 0.1, steps))
    assert good.passed and good.n == good.n_below == good.n_above == 200, good
    assert good.tolerance(200) == pytest.approx(3 * np.sqrt(0.1 * 0.9 / 200))
    assert good.describe().startswith("fits its fit window") and good.as_dict()["passed"] is True
    low = forecast_module.goodness_of_fit(log, cal, _window_band(mean - 0.15, 1.2816 * 0.1, steps))
    assert not low.passed and low.above > 0.3 and low.below < 0.05, low
    assert low.describe().startswith("misses its fit window") and low.as_dict()["passed"] is False
    nan = np.full(steps.size, np.nan)
    diverged = forecast_module.goodness_of_fit(log, cal, _window_band(nan, 0.1, steps, diverged=True))
    assert not diverged.passed and "diverges" in diverged.describe()
    # the MAP run finite but too few draws finite: the band's edges are NaN and nothing can be compared: it fails
    undefined = forecast_module.goodness_of_fit(log, cal, Band(steps, mean, nan, nan, 0.8, False, 0.99))
    assert not undefined.passed and undefined.n_undefined == 200 and "undefined at 200 of 200" in undefined.describe()
    assert undefined.as_dict()["n_undefined"] == 200


def test_goodness_of_fit_counts_a_side_only_where_the_band_edge_is_off_the_reward_bound():
    """A reward floored at 0 (the first 300 of 400 steps: 0 nine times in ten, else 0.3): where the band's lower
    edge is 0 no reward can lie below it, so that side counts only the steps where the edge is above 0, and a band
    that describes the rewards (lower edge 0 and upper 0.2 at first, then 0.5 ± 1.28·0.1) passes. Counted over all 400
    steps, the share below would be 2.5 %, 7.5 % short of 10 % where 3·√(0.09/400) = 4.5 % is the tolerance."""
    steps = np.arange(1.0, 401.0)
    cal = _calibration(RUN, 399, "jsonl")
    rng = np.random.default_rng(1)
    early = np.where(rng.random(steps.size) < 0.9, 0.0, 0.3)
    y = np.where(steps <= 300, early, 0.5 + 0.1 * rng.standard_normal(steps.size))
    records = [{"step": s, "reward": float(r)} for s, r in zip(steps, y, strict=True)]
    log = tidy(records, format="jsonl", path=None, columns={})
    first = steps <= 300
    band = Band(steps=steps, mean=np.where(first, 0.03, 0.5), lo=np.where(first, 0.0, 0.372),
                hi=np.where(first, 0.2, 0.628), level=0.8, diverged=False, diverged_fraction=0.0)  # fmt: skip
    fit = forecast_module.goodness_of_fit(log, cal, band)
    assert fit.n == 400 and fit.n_below == 100 and fit.n_above == 400 and fit.passed, fit


def test_goodness_of_fit_draws_its_own_band_when_the_given_one_stops_before_the_window_ends(monkeypatch):
    steps = np.arange(1.0, 31.0)
    cal = _calibration(RUN, 29, "jsonl")
    log = tidy([{"step": s, "reward": 0.5} for s in steps], format="jsonl", path=None, columns={})
    drawn = []

    def fake_band(calibration, *, level, seed):
        drawn.append((calibration.model.steps, level, seed))
        return _window_band(np.full(30, 0.5), 0.1, steps)

    monkeypatch.setattr(forecast_module, "predictive_band", fake_band)
    short = _window_band(np.full(10, 0.5), 0.1, steps[:10])
    assert forecast_module.goodness_of_fit(log, cal, short, level=0.8, seed=3).n == 30
    assert drawn == [(29, 0.8, 3)]
