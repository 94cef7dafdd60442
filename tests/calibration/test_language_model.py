"""The language-model level calibrated on a log: the grid posterior against its closed form, the scenario checks,
which level answers, and (slow) a log made by the level itself at a known rate recovered and rerun."""

import dataclasses
import functools
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pgrpo_sim import lm
from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.calibration import language_model as lmcal, lm_level as lmlevel, lm_scenarios as lmscen
from pgrpo_sim.calibration.run_config import RunConfig
from pgrpo_sim.cli import main
from pgrpo_sim.logs.readers import TrainingLog

TINY_SIZES = dict(
    modulus=5, operands=2, max_completion_length=8, width=16, layers=1, heads=2, eval_size=16, eval_every=4
)  # fmt: skip


def test_grid_posterior_is_the_tempered_gaussian_likelihood():
    rng = np.random.default_rng(0)
    curves = rng.uniform(0.2, 0.8, size=(3, 4, 5))
    observed = curves[1].mean(axis=0) + 0.01
    weights, phi, ceilings, ceiling_weights = lmcal.grid_posterior(curves, observed, observed_n=100)
    mean, var = curves.mean(1), curves.var(1, ddof=1)
    sigma2 = var * 1.25 + mean * (1 - mean) / 100 + lmcal.VARIANCE_FLOOR
    chi2 = np.sum((observed - mean) ** 2 / sigma2, -1)
    want_phi = max(1.0, chi2.min() / 5)
    log_lik = -0.5 * (chi2 + np.log(sigma2).sum(-1)) / want_phi
    want = np.exp(log_lik - log_lik.max())
    np.testing.assert_allclose(weights, want / want.sum(), rtol=1e-12)
    assert phi == pytest.approx(want_phi, rel=1e-12)
    assert np.argmax(weights) == 1 and np.all(ceilings == 1.0) and list(ceiling_weights) == [1.0]


def test_a_scaled_down_log_is_read_with_its_ceiling():
    """The log = 0.6 × grid point 1's mean: the profile picks c = 0.6 there (one of the ceilings tried)."""
    rng = np.random.default_rng(1)
    curves = rng.uniform(0.2, 0.9, size=(3, 4, 8))
    weights, _, ceilings, _ = lmcal.grid_posterior(curves, 0.6 * curves[1].mean(0), 200, ceilings=(0.4, 0.6, 0.8, 1.0))
    assert np.argmax(weights) == 1 and ceilings[1] == 0.6


def test_the_ceiling_posterior_is_the_joint_likelihood_summed_over_points():
    """One grid point whose seeds agree and a fine grid of c: the log = 0.6 × its curve with Gaussian noise of known
    variance σ² = p(1 − p)/n, so the posterior over c is Gaussian with mean 0.6 and s.d. 1/√(Σ p²/σ²) (weighted least
    squares through the origin) to 5 %, and its mean within half an s.d. of 0.6 (σ² depends on c, and its log term
    pulls c down by a fraction of an s.d.); the spread of the points' profiled best c, reported before, can be 0."""
    p = np.linspace(0.3, 0.9, 40)
    curves = np.broadcast_to(p, (1, 3, 40)).copy()
    n = 50
    sigma2 = 0.6 * p * (1 - 0.6 * p) / n + lmcal.VARIANCE_FLOOR
    ceilings = np.linspace(0.4, 0.8, 401)
    _, phi, _, weights = lmcal.grid_posterior(curves, 0.6 * p, n, ceilings=ceilings)
    mean = np.sum(weights * ceilings)
    sd = np.sqrt(np.sum(weights * (ceilings - mean) ** 2))
    want = 1 / np.sqrt(np.sum(p**2 / sigma2))
    assert phi == 1.0 and sd == pytest.approx(want, rel=0.05) and abs(mean - 0.6) < 0.5 * want


def test_a_diverged_run_counts_as_reward_zero():
    curves = np.full((2, 2, 3), 0.5)
    curves[0, 0] = np.nan
    weights, _, _, _ = lmcal.grid_posterior(curves, np.full(3, 0.5), observed_n=64)
    assert weights[1] > weights[0]


def _calibration(weights, grid=(1e-4, 1e-3, 1e-2)):
    level = lmcal.Level(lr_grid=tuple(grid), seeds=2)
    return lmcal.Calibration(
        run=RunConfig(learning_rate=1e-5), level=level, first_step=0.0, fit_until=10.0, last_step=10.0,
        logged_steps=np.arange(11.0), index=np.arange(11), reward=np.full(11, 0.3), observed_n=64, eval_only=False,
        start_accuracy=0.3, formats=(0.9,), rates=tuple(grid), weights=np.asarray(weights, float)[None, :],
        ceilings=np.ones((1, len(weights))), ceiling_weights=np.ones(1), overdispersion=1.0,
        curves=np.zeros(0), per_logged=1,
    )  # fmt: skip


def test_lr_scale_reads_the_grid_in_decades_uniform_within_each_cell():
    cal = _calibration([0.0, 1.0, 0.0])
    mean, sd = cal.lr_scale
    assert mean == pytest.approx(2.0, abs=1e-12)  # 1e-3 / 1e-5
    assert sd == pytest.approx(1 / math.sqrt(12), rel=1e-12)  # one decade per cell
    assert cal.undetermined is None
    assert "lowest" in _calibration([1.0, 0.0, 0.0]).undetermined
    spread = _calibration([0.0, 0.5, 0.5, 0.0, 0.0], grid=np.geomspace(1e-4, 1e-0, 5))
    assert spread.lr_scale[1] == pytest.approx(math.sqrt(0.25 + 1 / 12), rel=1e-12)  # two cells' mixture
    uneven = _calibration([0.0, 1.0, 0.0], grid=(1e-4, 1e-3, 1e-1))  # the middle cell spans 10^-0.5 … 10^1
    assert uneven.lr_scale == pytest.approx((2.25, 1.5 / math.sqrt(12)), rel=1e-12)
    formats, rates, ceilings = cal.draw(200, np.random.default_rng(1))
    assert np.all(formats == 0.9) and np.all(ceilings == 1.0)
    assert np.all((rates > 1e-3 / 10**0.5) & (rates < 1e-3 * 10**0.5))


def test_rate_cells_reach_halfway_to_each_neighbour():
    lower, upper = lmcal.rate_cells([0.0, 1.0, 1.25, 2.0])
    np.testing.assert_allclose(lower, [-0.5, 0.5, 1.125, 1.625])
    np.testing.assert_allclose(upper, [0.5, 1.125, 1.625, 2.375])


def test_the_refinement_splits_the_best_rates_neighbouring_cells():
    level = lmcal.Level(lr_grid=(1e-4, 1e-3, 1e-2), refine=4)
    np.testing.assert_allclose(np.log10(level.refined_rates(1)), [-3.75, -3.5, -3.25, -2.75, -2.5, -2.25])
    np.testing.assert_allclose(np.log10(level.refined_rates(0)), [-3.75, -3.5, -3.25])  # none past the grid's end
    assert lmcal.Level(lr_grid=(1e-4, 1e-3), refine=1).refined_rates(0) == ()


@pytest.mark.parametrize(
    ("prompts", "steps_per_generation", "want"),
    [(8, 1, 8), (32, 4, 32), (256, 1, lmlevel.MAX_LEVEL_PROMPTS), (240, 3, 30), (128, 64, 64)],
)
def test_the_level_takes_the_runs_prompts_up_to_its_cap(prompts, steps_per_generation, want):
    """The run's own batch (its noise is what reuse overfits), capped and kept divisible by its mini-batches; the
    level's `lm.config` accepts each."""
    run = RunConfig(prompts_per_step=prompts, steps_per_generation=steps_per_generation)
    level = lmcal.Level()
    assert level.prompts_for(run) == want and lmcal.Level(prompts_per_step=16).prompts_for(run) == 16
    assert lmlevel.level_config(run, 1e-3, 0.3, level, 10).prompts_per_step == want


def test_the_refined_posterior_finds_the_rate_inside_its_coarse_cell(tmp_path, monkeypatch):
    """A level whose reward rises at a speed ∝ its rate (seeds spread by ±0.002) and a log made at a rate a quarter
    decade off the grid: the coarse posterior can only put it in a half-decade cell (s.d. ≥ 0.505/√12 = 0.146
    decades), the refined one places it within an eighth of a decade (its cells' half-width) with an s.d. under 0.08.
    The other start formats never rise, hold < 1 % of the coarse posterior and are not rerun at the added rates."""
    monkeypatch.setenv("PGRPO_SIM_CACHE", str(tmp_path))
    calls = []

    def curve(lr, start_format, seed_index):
        t = np.arange(20.0) * (start_format == 0.3)
        return 0.1 + 0.002 * (seed_index - 1) + 0.7 * (1 - np.exp(-t * lr / 3e-3))

    def runs(settings, steps, seed):
        calls.append({s["start_format"] for s in settings})
        reward = np.stack([curve(s["learning_rate"], s["start_format"], i % 3) for i, s in enumerate(settings)])
        return lm.Run({"reward": reward}, None, None, None)

    monkeypatch.setattr(lmcal, "cached_runs_each", lambda jobs: [runs(*job) for job in jobs])
    truth = 10**-2.75  # a quarter decade off the coarse grid's rates (3e-5 … 1e-2, 0.505 decades apart)
    log = TrainingLog(
        data={"step": np.arange(20.0), "reward": curve(truth, 0.3, 1)}, sources={"reward": "reward"}, other={},
        format="jsonl", path=None, skipped_steps=np.zeros(0),
    )  # fmt: skip
    run = RunConfig(learning_rate=1e-5, lr_scheduler_type="constant")
    coarse = lmcal.calibrate(log, run, level=lmcal.Level(refine=1))
    fine = lmcal.calibrate(log, run, level=lmcal.Level())
    want = math.log10(truth / 1e-5)
    assert coarse.lr_scale[1] >= 0.505 / math.sqrt(12) - 1e-3
    assert abs(fine.lr_scale[0] - want) < 0.126 / 2 and fine.lr_scale[1] < 0.08
    assert len(fine.rates) == 6 + 6 and fine.start_format == 0.3
    assert calls[-1] == {0.3} and len(calls) == 3 + 3 + 1  # three coarse formats twice, one refined
    assert np.all(fine.weights[[0, 2]][:, ~np.isin(fine.rates, fine.level.lr_grid)] == 0)


def test_a_reuse_run_is_fitted_on_its_on_policy_twin(tmp_path, monkeypatch):
    """A level whose climb speeds up with the optimiser steps per rollout (∝ rate × steps, as the level's does) and
    a log that climbs as the on-policy run would (an LLM's climb does not depend on its reuse): fitted on the
    on-policy twin, the 4-epoch run's rate is the log's within the refined cells' half-width (0.063 decades); fitted
    with its reuse, a factor 4 (0.6 decades) too low, where the reuse scenario would be run 4× more gently."""
    monkeypatch.setenv("PGRPO_SIM_CACHE", str(tmp_path))
    fitted = []

    def curve(lr, steps_per_rollout, seed_index):
        t = np.arange(20.0)
        return 0.1 + 0.002 * (seed_index - 1) + 0.7 * (1 - np.exp(-t * lr * steps_per_rollout / 3e-3))

    def runs(settings, steps, seed):
        fitted.extend(s["num_iterations"] * s["steps_per_generation"] for s in settings)
        reward = np.stack([
            curve(s["learning_rate"], s["num_iterations"] * s["steps_per_generation"], i % 3)
            for i, s in enumerate(settings)
        ])  # fmt: skip
        return lm.Run({"reward": reward}, None, None, None)

    monkeypatch.setattr(lmcal, "cached_runs_each", lambda jobs: [runs(*job) for job in jobs])
    truth = 10**-2.75
    log = TrainingLog(
        data={"step": np.arange(20.0), "reward": curve(truth, 1, 1)}, sources={"reward": "reward"}, other={},
        format="jsonl", path=None, skipped_steps=np.zeros(0),
    )  # fmt: skip
    run = RunConfig(learning_rate=1e-5, lr_scheduler_type="constant", num_iterations=4)
    twin = lmcal.calibrate(log, run, level=lmcal.Level(start_formats=(0.3,)))
    assert set(fitted) == {1} and any("one optimiser step per rollout" in note for note in twin.notes)
    assert abs(twin.lr_scale[0] - math.log10(truth / 1e-5)) < 0.126 / 2 and twin.run.num_iterations == 4
    fitted.clear()
    own = lmcal.calibrate(log, run, level=lmcal.Level(start_formats=(0.3,), fit_on_policy=False))
    assert set(fitted) == {4} and abs(own.lr_scale[0] - math.log10(truth / 4 / 1e-5)) < 0.126 / 2


def test_logged_steps_map_to_grpo_steps_both_ways():
    cal = _calibration([0.0, 1.0, 0.0])
    cal = lmcal.dataclasses.replace(cal, run=RunConfig(num_iterations=2, steps_per_generation=2), per_logged=1)
    np.testing.assert_array_equal(cal.grpo_index(np.array([0.0, 3.0, 4.0, 9.0])), [0, 0, 1, 2])  # 4 per rollout
    np.testing.assert_array_equal(cal.logged_step(np.array([0, 1, 2])), [0.0, 4.0, 8.0])


def test_the_schedule_spans_the_runs_max_steps_not_the_simulated_window():
    """TRL lays warm-up and decay over `max_steps` (optimiser steps; one logged step each in TRL's logs), the log's
    length without it: a fit window or a shorter scenario does not decay inside itself."""
    cal = lmcal.dataclasses.replace(_calibration([0.0, 1.0, 0.0]), last_step=99.0)
    run = RunConfig(num_iterations=2, steps_per_generation=2, lr_scheduler_type="cosine", warmup_ratio=0.1)
    cal = lmcal.dataclasses.replace(cal, run=run, per_logged=1)
    assert cal.schedule_steps() == 25  # 100 logged optimiser steps, 4 per GRPO step
    assert cal.schedule_steps(run.replace(max_steps=202)) == 51  # a partial GRPO step still runs
    assert cal.schedule_steps(run.replace(num_iterations=8)) == 25  # a scenario decays over the simulated window
    settings = lmlevel.level_settings(run, 1e-3, 0.3, cal.level, cal.schedule_steps(), 0.9)
    assert settings["max_steps"] == 100 and settings["warmup_steps"] == 10
    per_grpo = lmcal.dataclasses.replace(cal, per_logged=4)  # one logged step per GRPO step (not TRL's format)
    assert per_grpo.schedule_steps() == 100


def test_scenarios_the_level_cannot_run_are_refused_by_name():
    run = RunConfig(num_generations=8)
    with pytest.raises(ValueError, match="cannot change prompts_per_step"):
        lmscen.check_scenario(run, dict(prompts_per_step=64))
    with pytest.raises(ValueError, match="steps_per_generation"):
        lmscen.check_scenario(run, dict(steps_per_generation=3))  # 16 prompts × G 8 = 128 is not split in 3
    assert lmscen.check_scenario(run, dict(epsilon=None, num_iterations=4)).num_iterations == 4


def test_no_clip_losses_run_without_a_clip():
    config = lmlevel.level_config(
        RunConfig(loss_type="reinforce_with_baseline", epsilon=None), 1e-3, 0.3, lmcal.Level(), 10
    )
    assert math.isinf(float(config.epsilon)) and config.loss_type_name == "grpo"


def _log(tmp_path, name="log.jsonl"):
    path = tmp_path / name
    path.write_text("".join(f'{{"step": {i}, "reward": {0.3 + 0.01 * i}}}\n' for i in range(12)))
    return path


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model", "bandit", "--eval-size", "100"], "--eval-size"),
        (["--scenario", "prompts_per_step=64,learning_rate=1e-5"], "cannot change prompts_per_step"),
        (["--eval-size", "0"], "eval-size"),
    ],
)
def test_cli_bad_level_input_is_one_line_and_creates_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    argv = ["what-if", str(_log(tmp_path)), "--out", str(out)]
    argv += extra if "--scenario" in extra else ["--scenario", "learning_rate=1e-5", *extra]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.slow
def test_a_log_made_by_the_level_is_recovered_and_its_scenarios_run(tmp_path):
    """The level at a known rate writes a log; calibrated on it, the posterior's best rate is the true one, and a
    scenario's runs take the drawn rates × its factor, its collapse share being its runs' verdicts'. The truth is
    the grid's collapsing rate: this small a model learns little in 30 steps at the other two, whose curves differ
    by less than their noise (under other XLA flags the posterior's choice between them flipped), and 343 prompts
    (not TINY_SIZES' 25, which it memorises) keep its rollout reward at the SFT start's held-out accuracy."""
    level = lmcal.Level(
        prompts_per_step=4,
        lr_grid=(3e-4, 3e-3, 3e-2),
        start_formats=(0.9,),
        ceilings=(1.0,),
        seeds=4,
        draws=4,
        sizes=dict(TINY_SIZES, modulus=7, operands=3),
    )  # the log is made at c = 1 (the ceiling's profile has its own test): the rate alone is recovered
    run = RunConfig(learning_rate=1e-5, num_generations=4, prompts_per_step=4, lr_scheduler_type="constant")
    truth = lmlevel.level_config(run, 3e-2, 0.3, level, 30)
    made = lm.simulate_each([truth] * 4, 30, key=99)
    reward = np.asarray(made.readouts["reward"]).mean(0)
    log = TrainingLog(
        data={"step": np.arange(30.0), "reward": reward}, sources={"reward": "reward"}, other={}, format="jsonl",
        path=None, skipped_steps=np.zeros(0),
    )  # fmt: skip
    cal = lmcal.calibrate(log, run, level=level, seed=1)
    assert abs(math.log10(cal.rates[int(np.argmax(cal.rate_weights))] / 3e-2)) <= 0.5  # within the truth's cell
    assert cal.start_accuracy == pytest.approx(float(reward[0]))
    result = lmscen.what_if(cal, [dict(learning_rate=3e-4)], until=29, seed=2)
    for answer in result.answers:
        broke = [v in ("collapses", "diverges") for v in answer.record["verdicts"]]
        assert answer.collapse_probability == pytest.approx(np.mean(broke))
        assert answer.band.mean.shape == (30,)
    assert result.scenarios[0].record["level_learning_rates"][0] == pytest.approx(
        30 * result.baseline.record["level_learning_rates"][0]
    )
    # a log paid 2 per right answer: the answers' final reward and band in its units, whatif.json's / reward_scale
    paid = dataclasses.replace(cal, run=run.replace(reward_scale=2.0))
    twice = lmscen.what_if(paid, [], until=29, seed=2).baseline
    assert twice.record["final_reward"] == result.baseline.record["final_reward"]
    assert twice.final_reward == pytest.approx(2 * result.baseline.final_reward, rel=1e-12)
    np.testing.assert_allclose(twice.band.mean, 2 * result.baseline.band.mean, rtol=1e-12)


def test_grid_runs_are_cached_by_their_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PGRPO_SIM_CACHE", str(tmp_path))
    calls = []
    fake = {name: np.full((2, 3), float(i)) for i, name in enumerate(lm.READOUTS)}
    fake["reward"], fake["completions/mean_length"] = np.arange(6.0).reshape(2, 3), np.full((2, 3), np.nan)

    def simulate(configs, steps, key):
        calls.append(len(configs))
        return lm.Run(fake, None, np.array([False, True]), np.array([-1, 2]))

    monkeypatch.setattr(lmcal.lm, "simulate_each", simulate)
    monkeypatch.setattr(lmcal.lm, "pretrained_policy", lambda *args: None)  # no SFT start: the runs are stood in for
    settings = [dict(learning_rate=1e-3, **TINY_SIZES), dict(learning_rate=2e-3, **TINY_SIZES)]
    [first] = lmcal.cached_runs_each([lmcal.LevelJob(settings, 3, 0)])
    [again] = lmcal.cached_runs_each([lmcal.LevelJob(settings, 3, 0)])
    assert calls == [2]  # the second call read the file
    for run in (first, again):  # every read-out (a name with a slash, NaN) and the divergence, as they ran
        assert set(run.readouts) == set(fake) and run.params is None
        for name, values in fake.items():
            np.testing.assert_array_equal(run.readouts[name], values)
        np.testing.assert_array_equal(run.diverged, [False, True])
        np.testing.assert_array_equal(run.diverged_step, [-1, 2])
    lmcal.cached_runs_each([lmcal.LevelJob(settings, 3, 1)])  # another seed is another file
    assert calls == [2, 2]


@pytest.mark.slow
def test_what_if_and_forecast_with_the_level_write_their_files(tmp_path, monkeypatch, capsys):
    """The command line's `--model lm` path end to end, on a tiny level: whatif.json has `model` and
    `collapse_probability` per scenario, and the report and figure are written; forecast scores held-out steps and
    reaches the run's `max_steps` (beyond the log) with the run's own collapse probability."""
    tiny = functools.partial(
        lmcal.Level, prompts_per_step=4, lr_grid=(1e-3, 1e-2), start_formats=(0.9,), seeds=2, draws=2,
        sizes=TINY_SIZES,
    )  # fmt: skip
    monkeypatch.setattr(lmcal, "Level", tiny)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(f'{{"step": {i}, "reward": {0.3 + 0.01 * i}}}\n' for i in range(12)))
    config = tmp_path / "run.yaml"
    config.write_text("num_generations: 4\nprompts_per_step: 4\nlr_scheduler_type: constant\n")
    out = tmp_path / "whatif"
    args = ["what-if", str(log), "--run-config", str(config), "--quiet", "--out", str(out)]
    args += ["--scenario", "learning_rate=1e-5", "--scenario", "epsilon=none,num_iterations=2"]
    assert main(args) == 0
    first = (out / "whatif.json").read_text()
    with monkeypatch.context() as asked_again:  # the calibration's and the scenarios' runs all come from the cache
        asked_again.setattr(lmcal.lm, "simulate_each", lambda *a, **k: pytest.fail("a cached run ran again"))
        assert main([*args, "--overwrite"]) == 0
    assert (out / "whatif.json").read_text() == first
    result = json.loads(first)
    assert result["model"] == "lm" and len(result["scenarios"]) == 2
    for entry in (result["baseline"], *result["scenarios"]):
        assert entry["model"] == "lm" and 0 <= entry["collapse_probability"] <= 1 and entry["runs"] == 2
    assert (out / "whatif.png").stat().st_size > 1000 and "collapse probability" in (out / "report.md").read_text()
    forecast = tmp_path / "forecast"
    config.write_text(config.read_text() + "max_steps: 16\n")
    argv = ["forecast", str(log), "--model", "lm", "--run-config", str(config), "--fit-until", "7", "--quiet"]
    capsys.readouterr()
    assert main([*argv, "--out", str(forecast)]) == 0
    result = json.loads((forecast / "forecast.json").read_text())
    assert result["heldout"]["n"] == 4 and result["until"] == 16 and len(result["forecast"]["band"]["mean"]) == 17
    assert 0 <= result["collapse_probability"] <= 1 and "collapse probability" in capsys.readouterr().out


def test_a_start_the_level_cannot_reach_is_one_line_naming_the_other_level(tmp_path, capsys, monkeypatch):
    """A log that starts above what the level's SFT reaches (near 0.4 at its default sizes) is refused with the
    reason and the way out, exit 2, nothing written (the SFT run is stood in for: it takes a minute)."""
    from pgrpo_sim.models.lm import StartNotReached

    def unreachable(settings, steps, seed=0):
        raise StartNotReached(settings[0]["start_accuracy"], 0.41)

    monkeypatch.setattr(lmcal, "cached_runs_each", lambda jobs: [unreachable(*job) for job in jobs])
    out = tmp_path / "out"
    path = tmp_path / "high.jsonl"
    path.write_text("".join(f'{{"step": {i}, "reward": {0.7 + 0.01 * i}}}\n' for i in range(12)))
    assert main(["what-if", str(path), "--scenario", "learning_rate=1e-5", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "starts at reward 0.7" in err and "0.41" in err, err
    assert "--model bandit" in err and not out.exists()


def test_a_forecast_window_too_short_for_the_bandit_goes_to_the_level(tmp_path, capsys, monkeypatch):
    """`forecast --model auto` on a fit window of 4 rewards (the bandit's fit needs 10) is answered by the level,
    seen here by the level's own refusal of a start it cannot reach (its runs are stood in for); `--model bandit`
    keeps the bandit's refusal."""
    from pgrpo_sim.models.lm import StartNotReached

    def unreachable(settings, steps, seed=0):
        raise StartNotReached(settings[0]["start_accuracy"], 0.41)

    monkeypatch.setattr(lmcal, "cached_runs_each", lambda jobs: [unreachable(*job) for job in jobs])
    path = tmp_path / "short.jsonl"
    path.write_text("".join(f'{{"step": {4 * i}, "reward": {0.7 + 0.01 * i}}}\n' for i in range(12)))
    for model, message in (("auto", "language-model level's SFT start"), ("bandit", "needs at least 10")):
        out = str(tmp_path / "o")
        argv = ["forecast", str(path), "--fit-fraction", "0.3", "--model", model, "--quiet", "--out", out]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "o").exists()


def test_scenario_arguments_are_checked_before_any_run():
    """level, seed and steps are refused in one line before the level runs (they failed in NumPy after the runs), and
    every scenario of a what-if before its baseline runs."""
    for call, words in [
        (lambda: lmscen.scenario(None, {}, steps=10, level=1.5), "level must be in"),
        (lambda: lmscen.scenario(None, {}, steps=10, seed=-1), "seed must be"),
        (lambda: lmscen.what_if(None, [{}], until=0, level=0.0), "level must be in"),
    ]:
        with pytest.raises(PgrpoSimError, match=words):
            call()

    class Calibrated:  # what lm.what_if reads before it runs anything
        run, level, first_step = RunConfig(), lmcal.Level(), 5.0

    with pytest.raises(PgrpoSimError, match="cannot change max_grad_norms"):
        lmscen.what_if(Calibrated(), [dict(learning_rate=1e-5), dict(max_grad_norms=1.0)], until=10)
    with pytest.raises(PgrpoSimError, match="until must be"):
        lmscen.what_if(Calibrated(), [dict(learning_rate=1e-5)], until=4)


def test_a_band_whose_runs_all_diverged_is_marked_diverged():
    class Calibrated:
        run = RunConfig()

        def logged_step(self, steps):
            return steps

    band = dict(steps=[0, 1], mean=[np.nan] * 2, lower=[np.nan] * 2, upper=[np.nan] * 2, level=0.8)
    assert lmscen.band(Calibrated(), dict(band=band, verdicts=["diverges", "diverges"])).diverged
    assert not lmscen.band(Calibrated(), dict(band=band, verdicts=["diverges", "learns"])).diverged


@pytest.mark.parametrize(
    "settings, words",
    [
        (dict(lr_grid=(1e-3,)), "lr_grid must hold at least two"),
        (dict(lr_grid=(1e-2, 1e-3)), "in increasing order"),
        (dict(refine=0), "refine"),
        (dict(start_formats=(1.5,)), "start_formats must hold shares"),
        (dict(ceilings=()), "ceilings must hold shares"),
        (dict(ceilings=(0.5, 1.2)), "ceilings must hold shares"),
    ],
)
def test_a_level_refuses_grids_it_cannot_run(settings, words):
    with pytest.raises(PgrpoSimError, match=words):
        lmcal.Level(**settings)


@pytest.mark.parametrize("modulus, called", [(10, False), (lmlevel.CALIBRATION_MODULUS, True)])
def test_the_calibration_modulus_puts_the_chance_floor_below_a_real_start(modulus, called):
    """Why the level answers for a log at m = 50: twelve runs from a format-limited start at the MATH runs' 0.03
    (a fifth of its completions well-formed) that collapse to one well-formed answer for every prompt (reward 1/m).
    At m = 10 the start's chance-corrected reward, (0.03 − 0.2/10)/0.9 ≈ 0.011, is within 3 standard errors of the
    collapsed runs' 0 (12 × 128 completions at the start: s.e. ≈ 0.0046), so no collapse can be called, and the
    runs' reward rises from 0.03 to 0.1; at m = 50 the start keeps (0.03 − 0.004)/0.98 ≈ 0.027, and they collapse."""
    from pgrpo_sim.models.lm import READOUTS

    config = lm.config(modulus=modulus, prompts_per_step=16, num_generations=8)
    seeds, steps = 12, 40
    reward, formed = np.full((seeds, steps), 1 / modulus), np.ones((seeds, steps))
    reward[:, 0], formed[:, 0] = 0.03, 0.2
    readouts = {name: np.full((seeds, steps), 0.5) for name in READOUTS} | dict(reward=reward, format_ok=formed)
    run = lm.Run(readouts, None, np.zeros(seeds, bool), np.full(seeds, -1))
    verdicts = {row["verdict"] for row in lm.summarize_runs(run, config)}
    assert verdicts == ({"collapses"} if called else verdicts - {"collapses"})


def test_a_run_near_a_collapse_edge_is_forecast_on_the_level(tmp_path, capsys, monkeypatch):
    """`near_edge`: many optimiser steps per rollout, reuse without a clip, or a gradient-norm spike in the fit window
    send `forecast --model auto` to the level (seen by its stood-in refusal); an on-policy clipped run with a quiet
    gradient stays with the bandit."""
    from pgrpo_sim.models.lm import StartNotReached

    assert "16 optimiser steps" in lmlevel.near_edge(RunConfig(num_iterations=4, steps_per_generation=4))
    assert "without a clip" in lmlevel.near_edge(RunConfig(num_iterations=2, epsilon=None))
    assert lmlevel.near_edge(RunConfig(num_iterations=2)) is None and lmlevel.near_edge(RunConfig()) is None
    norm = 1.0 + 0.05 * np.sin(np.arange(40.0))
    spiked = np.where(np.arange(40) == 30, 5.0, norm)
    quiet, loud = (
        TrainingLog(data={"step": np.arange(40.0), "reward": np.full(40, 0.3), "grad_norm": g},
                    sources={"reward": "reward", "grad_norm": "grad_norm"}, other={}, format="jsonl", path=None,
                    skipped_steps=np.zeros(0))
        for g in (norm, spiked)
    )  # fmt: skip
    assert lmlevel.near_edge(RunConfig(), quiet) is None and lmlevel.near_edge(RunConfig(), loud, fit_until=29) is None
    assert "gradient-norm spike" in lmlevel.near_edge(RunConfig(), loud)

    def unreachable(settings, steps, seed=0):
        raise StartNotReached(settings[0]["start_accuracy"], 0.41)

    monkeypatch.setattr(lmcal, "cached_runs_each", lambda jobs: [unreachable(*job) for job in jobs])
    log = tmp_path / "log.jsonl"
    log.write_text("".join(f'{{"step": {i}, "reward": {0.3 + 0.01 * i}}}\n' for i in range(40)))
    config = tmp_path / "run.yaml"
    config.write_text("num_iterations: 4\nsteps_per_generation: 4\n")
    argv = ["forecast", str(log), "--run-config", str(config), "--fit-fraction", "0.5", "--out", str(tmp_path / "o")]
    assert main([*argv, "--quiet"]) == 2
    assert "language-model level's SFT start" in capsys.readouterr().err


def test_a_forecast_reaches_the_runs_max_steps_within_the_horizon_a_window_allows():
    from pgrpo_sim.calibration.forecast import horizon_limit
    from pgrpo_sim.cli.lm_forecast import forecast_end

    log = TrainingLog(
        data={"step": np.arange(1.0, 31.0), "reward": np.full(30, 0.3)}, sources={"reward": "reward"}, other={},
        format="jsonl", path=None, skipped_steps=np.zeros(0),
    )  # fmt: skip
    assert forecast_end(log, RunConfig(), 10.0) == 30.0  # the log's end
    assert forecast_end(log, RunConfig(max_steps=40), 10.0) == 40.0  # the run's end, beyond the log
    assert forecast_end(log, RunConfig(max_steps=10**6), 10.0) == horizon_limit(1.0, 10.0)  # not hours of runs
    every_tenth = dataclasses.replace(log, data={"step": np.arange(10.0, 310.0, 10.0), "reward": np.full(30, 0.3)})
    assert forecast_end(every_tenth, RunConfig(max_steps=400), 100.0) == 400.0  # TRL's logging_steps=10: step 400
    from_zero = dataclasses.replace(log, data={"step": np.arange(0.0, 30.0), "reward": np.full(30, 0.3)})
    assert forecast_end(from_zero, RunConfig(max_steps=40), 10.0) == 40.0  # a log from step 0 (before training)


@pytest.mark.slow  # ~90 s: two SFT starts and the level's program, made in each process
def test_jobs_dealt_over_two_devices_run_the_same_bits_as_on_one(tmp_path):
    """Each job is one program placed on one device, so the runs of three jobs dealt over two CPU devices (two
    lanes; the two SFT starts made side by side too) equal, bit for bit, the same jobs run one after the other on
    one device (nothing cached between: each process makes the starts and runs anew)."""
    script = f"""
        import json, sys
        import jax
        jax.config.update("jax_num_cpu_devices", int(sys.argv[1]))
        import numpy as np
        from pgrpo_sim.calibration import language_model as lmcal
        sizes = {TINY_SIZES!r}
        jobs = [lmcal.LevelJob([dict(sizes, learning_rate=lr, start_format=form) for lr in rates], 6, seed)
                for rates, seed, form in (((1e-3, 3e-3), 0, 1.0), ((2e-3, 1e-2), 1, 0.5), ((1e-3, 5e-3), 2, 1.0))]
        runs = lmcal.cached_runs_each(jobs)
        print(json.dumps([{{k: np.asarray(v).tolist() for k, v in r.readouts.items()}} for r in runs]))
        print(len(jax.local_devices()))
    """
    outs = []
    for devices in (1, 2):
        env = dict(os.environ, PGRPO_SIM_CACHE=str(tmp_path / str(devices)), JAX_PLATFORMS="cpu")
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), str(devices)], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs, count = proc.stdout.strip().splitlines()[-2:]
        assert int(count) == devices
        outs.append(runs)
    assert outs[0] == outs[1]  # the JSON of every read-out, NaN included
