"""Differentiable hyperparameters: sensitivities and outcome gradients against finite differences, gradient
search against a dense grid of the same objective, and the bad-input messages."""

import json
import math
import re

import pytest

import pgrpo_sim as ps
from pgrpo_sim.cli import main

BASE = dict(p_ref=0.2, beta=0.5, num_generations=8, learning_rate=0.1, momentum=0.9)


def _within_one_grid_step(found: dict, grid_best: dict, bounds: dict, num: int) -> None:
    """The issue's criterion: each searched value within one grid step of the grid optimum, or within 2 %."""
    for name, value in found.items():
        lo, hi = bounds[name]
        if ps.bandit.HYPERPARAMETERS[name].log_scale:
            off_by, step = abs(math.log(value / grid_best[name])), math.log(hi / lo) / (num - 1)
        else:
            off_by, step = abs(value - grid_best[name]), (hi - lo) / (num - 1)
        assert off_by <= step or abs(value / grid_best[name] - 1) <= 0.02, (name, value, grid_best[name])


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~10 s on 2 cores)
def test_search_solves_for_critical_damping_like_the_grid():
    cfg = ps.bandit.config(**BASE, lag_model="stale", lag=2)
    kw = dict(target=1.0, search=["learning_rate"], steps=100)  # steps: the length of the returned trajectory only
    found = ps.analysis.search("damping-ratio", cfg, restarts=4, iterations=50, **kw)
    grid = ps.analysis.grid_search("damping-ratio", cfg, num=400, **kw)
    assert found.evaluations == 200 < grid.evaluations == 400
    _within_one_grid_step(found.best, grid.best, {"learning_rate": ps.analysis.DEFAULT_BOUNDS["learning_rate"]}, 400)
    # and against the closed form: ζ = 1 ⇔ a²τ² + 2a((1−μ)τ + 1+μ) − (1−μ)² = 0, a = η_eff K
    k = ps.sensitivities(ps.bandit.config(**BASE)).values["stiffness"]  # K does not depend on the lag
    mu, tau = 0.9, 2.0
    b = (1 - mu) * tau + (1 + mu)
    a = (-b + math.sqrt(b * b + tau * tau * (1 - mu) ** 2)) / tau**2
    assert found.best["learning_rate"] == pytest.approx(a / (2 * k), rel=1e-6)  # Adam + cosine decay: |ζ − 1| < 1e-6
    assert found.constraints["feasible"] and found.trajectory.shape == (101,)


FINAL_REWARD = dict(steps=100, search="momentum", radius_margin=None)  # one name, as a string


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_search_maximises_final_reward_like_the_grid():
    cfg = ps.bandit.config(**(BASE | dict(learning_rate=0.05)))
    found = ps.analysis.search("final-reward", cfg, **FINAL_REWARD)
    grid = ps.analysis.grid_search("final-reward", cfg, num=1000, **FINAL_REWARD)
    assert found.evaluations == 800 < grid.evaluations == 1000
    _within_one_grid_step(found.best, grid.best, {"momentum": ps.analysis.DEFAULT_BOUNDS["momentum"]}, 1000)
    assert found.objective_value >= grid.objective_value - 1e-9  # at least the grid's best, up to rounding


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~10 s on 2 cores)
def test_constrained_time_to_threshold_is_as_good_as_the_grid():
    """ζ ≥ 0.5 with stale lag 8: the optimum lies on the constraint, which a grid resolves only to a cell;
    the search meets the constraint and is at least as fast as the best grid point (within 1 %)."""
    cfg = ps.bandit.config(**BASE, lag_model="stale", lag=8)
    kw = dict(target=0.9, steps=100, min_damping_ratio=0.5)
    found = ps.analysis.search("time-to-threshold", cfg, restarts=8, iterations=100, **kw)
    grid = ps.analysis.grid_search("time-to-threshold", cfg, num=64, **kw)
    assert found.evaluations == 800 < grid.evaluations == 64**2
    assert found.objective_value <= grid.objective_value * 1.01
    # quadratic penalty 1e3·v²: the optimum may sit ~1e-4 outside the constraint, well inside 1e-3
    assert found.constraints["damping_ratio"] >= 0.5 - 1e-3 and found.constraints["feasible"]
    assert found.history["loss"].shape == (100, 8)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(search=("learning_rate", "lag")), "integer hyperparameter"),
        (dict(config=dict(optimizer="adam")), "adam"),
        (dict(bounds={"learning_rate": (50.0, 100.0)}), "infeasible"),
        (dict(config=dict(beta=0.0)), "no interior fixed point"),
        (dict(target=None), "needs a target"),
        (dict(search=("temperature",)), "unknown hyperparameter"),
        (dict(lags=[]), "lags must hold at least one value"),
        (dict(group_sizes=[]), "group_sizes must hold at least one value"),
        (dict(group_sizes=[4, 4]), "group_sizes holds a value twice"),
    ],
)
def test_search_refuses_bad_input_with_a_clear_message(kwargs, words):
    kwargs = dict(kwargs)
    cfg = ps.bandit.config(**(BASE | kwargs.pop("config", {})), lag_model="stale", lag=2)
    args = dict(target=1.0, restarts=4, iterations=50) | kwargs
    with pytest.raises(ValueError, match=words):
        ps.analysis.search("damping-ratio", cfg, **args)


def test_grid_search_refuses_a_grid_beyond_max_grid_points():
    """64 points for each of 5 hyperparameters is 1.1e9 evaluations: refused before anything is built."""
    cfg = ps.bandit.config(**BASE, lag_model="stale", lag=2)
    names = ("learning_rate", "momentum", "beta", "epsilon", "p_ref")
    with pytest.raises(ValueError, match=re.escape("1.07e+09 grid points over 5 hyperparameters")):
        ps.analysis.grid_search("damping-ratio", cfg, target=1.0, search=names, num=64)


@pytest.mark.slow
def test_all_nan_objective_is_an_error_not_a_number():
    # without KL a one-hot policy feels no force, so in 100 steps the logits coast to η·g·(1 − μ¹⁰⁰)/(1 − μ),
    # ≥ 1e307 · 0.3 · 79 for every μ in the box: past the float64 maximum, so every final reward is NaN
    cfg = ps.bandit.config(**(BASE | dict(learning_rate=1e307, beta=0.0)))
    with pytest.raises(ValueError, match="NaN at every evaluated point"):
        ps.analysis.search("final-reward", cfg, bounds={"momentum": (0.995, 0.999)}, **FINAL_REWARD)


@pytest.mark.slow
def test_tune_command(tmp_path, capsys):
    argv = [
        "tune",
        "--objective",
        "damping-ratio",
        "--target",
        "1.0",
        "--p-ref",
        "0.2",
        "--beta",
        "0.5",
        "--momentum",
        "0.9",
        "--lag-model",
        "stale",
        "--lags",
        "2",
        "--restarts",
        "4",
        "--iterations",
        "50",
        "--steps",
        "100",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["best"]["lag"] == 2 and summary["evaluations"] == 200
    assert summary["searched"] == ["learning_rate"] and summary["outer_grid"] == ["lag"]
    assert abs(summary["objective_value"] - 1.0) < 1e-6
    assert {"damping_ratio", "spectral_radius", "feasible"} <= set(summary["constraints"])
    assert (tmp_path / "convergence.png").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "learning_rate" in out and "outer grid" in out


@pytest.mark.parametrize(
    "extra, word",
    [
        (["--objective", "time-to-threshold"], "target"),
        (["--objective", "damping-ratio", "--target", "1", "--search", "learning_rate,lag"], "lag"),
        (["--objective", "damping-ratio", "--target", "1", "--optimizer", "adam"], "adam"),
    ],
)
def test_tune_command_errors(extra, word, tmp_path, capsys):
    assert main(["tune", *extra, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and word in err
