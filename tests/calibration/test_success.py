"""A log whose reward sums several reward functions is calibrated on its success-rate column, said in a note."""

import numpy as np

from pgrpo_sim.calibration.run_config import RunConfig
from pgrpo_sim.calibration.success import success_rate_log
from pgrpo_sim.logs.readers import TrainingLog


def _log(reward, **other):
    steps = np.arange(len(reward), dtype=float)
    return TrainingLog(
        data={"step": steps, "reward": np.asarray(reward, float)}, sources={"reward": "reward"},
        other={k: np.asarray(v, float) for k, v in other.items()}, format="trl", path=None, skipped_steps=np.zeros(0),
    )  # fmt: skip


def test_a_reward_in_the_unit_interval_is_kept():
    log = _log([0.1, 0.5, 0.9], accuracy=[0.0, 0.0, 0.0])
    assert success_rate_log(log, RunConfig()) == (log, RunConfig(), None)


def test_a_correctness_reward_worth_two_is_read_as_a_success_rate():
    correct = [0.0, 1.0, 2.0, 1.5]
    log = _log([0.5, 2.1, 3.4, 2.6], **{"rewards/correctness_reward_func": correct, "rewards/format": [0.5] * 4})
    changed, run, note = success_rate_log(log, RunConfig())
    np.testing.assert_array_equal(changed["reward"], correct)
    assert run.reward_scale == 2.0 and "rewards/correctness_reward_func" in note and note in run.notes
    assert changed.sources["reward"] == "rewards/correctness_reward_func" and "reward" in changed.other


def test_an_accuracy_column_is_taken_at_its_own_scale():
    changed, run, _ = success_rate_log(_log([0.9, 1.3], accuracy=[0.4, 0.7], mean_length=[100, 200]), RunConfig())
    np.testing.assert_array_equal(changed["reward"], [0.4, 0.7])
    assert run.reward_scale == 1.0


def test_without_a_success_column_the_reward_is_kept_for_an_affine_map():
    log = _log([-1.2, 0.4, 1.4], **{"rewards/wordle/mean": [-1.2, 0.4, 1.4]})
    changed, run, note = success_rate_log(log, RunConfig())
    assert (
        changed is log
        and "a + b × the success rate" in note
        and note in run.notes
        and "columns={'reward': SOURCE}" in note
    )
