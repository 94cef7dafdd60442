"""The two levels answer the same calls the same way (issue 48, "one model interface"): the same verbs, their shared
parameters, and the same result types for the answers on a log (`Forecast`, `WhatIf` of `Scenario`s)."""

import inspect
import typing

import pgrpo_sim as ps


def _parameters(function) -> dict[str, object]:
    return {name: p.kind for name, p in inspect.signature(function).parameters.items()}


def test_both_levels_simulate_with_the_same_shared_parameters():
    """`simulate(config, steps, *, seeds, key)` on both levels: the configuration and the step count positional,
    seeds and key by keyword (a level's own extras, the bandit's `mode`, the language model's `start`, beside)."""
    shared = {
        "config": inspect.Parameter.POSITIONAL_OR_KEYWORD,
        "steps": inspect.Parameter.POSITIONAL_OR_KEYWORD,
        "seeds": inspect.Parameter.KEYWORD_ONLY,
        "key": inspect.Parameter.KEYWORD_ONLY,
    }
    for simulate in (ps.bandit.simulate, ps.lm.simulate):
        parameters = _parameters(simulate)
        assert {name: parameters.get(name) for name in shared} == shared, simulate.__qualname__
        assert list(parameters)[:2] == ["config", "steps"], simulate.__qualname__


LEVELS = ("bandit", "lm")
VERBS = (
    "Config", "config", "simulate", "Run", "sweep", "calibrate", "Calibration", "forecast", "what_if", "Forecast",
    "WhatIf",
)  # fmt: skip


def test_both_levels_expose_the_same_verbs_under_names_without_the_group_s():
    for group in LEVELS:
        namespace = getattr(ps, group)
        missing = [verb for verb in VERBS if verb not in namespace.__all__]
        assert not missing, f"ps.{group} lacks {missing}"
        prefixed = [n for n in namespace.__all__ if n.lower().startswith(group)]
        assert not prefixed, f"ps.{group} names repeat the group: {prefixed}"


SHARED = {
    "sweep": ("base", "grid", "*steps", "*seeds", "*key", "*progress"),
    "calibrate": ("log", "run", "*fit_until", "*progress"),
    "forecast": ("log", "calibration", "*until", "*level", "*seed"),
    "what_if": ("calibration", "scenarios", "*until", "*level", "*seed", "*progress"),
}
"""Each calibration verb's parameters on both levels, in order for the positional ones, "*": keyword-only."""


def test_both_levels_calibrate_forecast_and_ask_what_if_with_the_same_parameters():
    for verb, names in SHARED.items():
        for group in LEVELS:
            function = getattr(getattr(ps, group), verb)
            parameters = _parameters(function)
            positional = [n for n in names if not n.startswith("*")]
            assert list(parameters)[: len(positional)] == positional, f"ps.{group}.{verb}"
            for name in (n[1:] for n in names if n.startswith("*")):
                assert parameters.get(name) == inspect.Parameter.KEYWORD_ONLY, f"ps.{group}.{verb}: {name}"


def test_both_levels_answer_forecast_and_what_if_with_one_set_of_result_types():
    """`forecast` returns a `Forecast`, `what_if` a `WhatIf` on both levels: the same classes, so one caller (the
    command line, a notebook) reads either level's answer by the same fields."""
    for group in LEVELS:
        namespace = getattr(ps, group)
        assert namespace.Forecast is ps.calibration.Forecast and namespace.WhatIf is ps.calibration.WhatIf, group
        assert typing.get_type_hints(namespace.forecast)["return"] is ps.calibration.Forecast, group
        assert typing.get_type_hints(namespace.what_if)["return"] is ps.calibration.WhatIf, group


MAX_ROOT_NAMES = 40
"""The root is the front door (issue 48): the names most users call; everything else is in its group."""


def test_the_root_holds_at_most_40_names():
    assert len(ps.__all__) <= MAX_ROOT_NAMES, sorted(ps.__all__)


def test_both_levels_runs_hold_their_read_outs_by_name():
    """`run.readouts["reward"]` on both levels: the language model's `Run` holds the mapping, the bandit's gives it
    from its fields (the read-outs it computed), the same arrays."""
    assert "readouts" in ps.lm.Run._fields
    run = ps.bandit.simulate(ps.bandit.config(learning_rate=0.1), 5, readouts=("reward", "entropy"))
    assert set(run.readouts) == {"reward", "entropy"}
    assert run.readouts["reward"] is run.reward


def test_both_levels_sweep_into_one_result_form_whose_points_are_their_runs():
    """`sweep(base, grid, *, steps, seeds, key)` returns an `xarray.Dataset` on both levels: a dimension per grid
    setting with its values, `final_reward` among the variables; each point is the run `simulate` makes of it
    (bit for bit: the same program and key)."""
    import numpy as np
    import xarray as xr

    tiny = dict(
        prompts_per_step=4, num_generations=4, modulus=5, operands=2, max_completion_length=8, width=16, layers=1,
        heads=2, eval_size=16, eval_every=2, start_accuracy=0.3,
    )  # fmt: skip  # tests/analysis/test_lm_sweep.py's TINY: the same SFT start, trained once per test session
    bandit = ps.bandit.sweep(
        dict(p_ref=0.2, beta=0.5, lag_model="stale", max_lag=2), {"learning_rate": [0.05, 0.1], "lag": [0, 2]}, steps=40
    )
    lm = ps.lm.sweep(tiny, {"learning_rate": [1e-3, 3e-3], "epsilon": [0.2, None]}, steps=4, seeds=2, key=5)
    for ds, grid in ((bandit, ("learning_rate", "lag")), (lm, ("learning_rate", "epsilon"))):
        assert isinstance(ds, xr.Dataset) and ds["final_reward"].dims[:2] == grid
    alone = ps.bandit.simulate(
        ps.bandit.config(p_ref=0.2, beta=0.5, lag_model="stale", lag=2, max_lag=2, learning_rate=0.1), 40
    )
    assert float(bandit.final_reward.sel(learning_rate=0.1, lag=2)) == float(alone.reward[-1])
    run = ps.lm.simulate(ps.lm.config(**tiny, learning_rate=3e-3, epsilon=None), 4, seeds=2, key=5)
    point = lm.sel(learning_rate=3e-3).isel(epsilon=1)  # epsilon None: an object coordinate
    np.testing.assert_array_equal(point["reward"].values, np.asarray(run.readouts["reward"]))
    rows = ps.lm.summarize_runs(run, ps.lm.config(**tiny, learning_rate=3e-3, epsilon=None))
    assert list(point["verdict"].values) == [row["verdict"] for row in rows]
    assert float(point["collapse_share"]) == np.mean([row["verdict"] == "collapses" for row in rows])
    assert "completions_mean_length" in lm and lm.attrs["model"] == "lm"
