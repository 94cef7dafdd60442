"""The read-out registry (`models.bandit.readouts`) is what the bandit computes: every path of a step returns exactly
its names, and the result types, the simulate table and the log columns are read from it."""

import jax
import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.cli import SIMULATE_COLUMNS
from pgrpo_sim.models import bandit
from pgrpo_sim.models.bandit.readouts import READOUTS, RUN_COLUMNS, STEP_READOUTS, TABLE_READOUTS, UPDATE_READOUTS


@pytest.mark.parametrize(
    "mode, lag_model",
    [("expected", "none"), ("expected", "refresh"), ("sampled", "refresh"), ("sampled", "stale")],
)
def test_every_path_of_a_step_computes_the_registry(mode, lag_model):
    """The per-step dict of `run_loop`'s update (plain step, reuse branches, drawn rollouts) has the registry's keys."""
    config = ps.bandit.config(lag_model=lag_model, lag=2 if lag_model != "none" else 0, true_rewards=[1.0, 0.0])
    carry, update, _ = bandit.run_loop(config, mode)
    _, metrics = jax.eval_shape(update, carry, jax.random.key(0))
    assert set(metrics) == set(STEP_READOUTS)
    assert all(m is not None and m.shape == () for m in metrics.values())


def test_derived_tables_follow_the_registry():
    assert ps.bandit.Run._fields[: len(STEP_READOUTS)] == STEP_READOUTS
    assert ps.bandit.UpdateStats._fields == UPDATE_READOUTS == tuple(r.name for r in READOUTS if r.source == "update")
    assert ("step", "reward", "reward_std", *TABLE_READOUTS[1:]) == SIMULATE_COLUMNS
    assert set(RUN_COLUMNS.values()) <= set(STEP_READOUTS)
    for name in STEP_READOUTS:  # every read-out documented on the result type
        assert f"    {name}: " in ps.bandit.Run.__doc__


def test_from_run_writes_the_registry_columns():
    run = ps.simulate(ps.bandit.config(true_rewards=[1.0, 0.0]), 3)
    log = ps.from_run(run)
    for column, name in RUN_COLUMNS.items():
        np.testing.assert_allclose(log.data[column], np.asarray(getattr(run, name), float), rtol=1e-12)
