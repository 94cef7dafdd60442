"""What a calibration starts from, as the command line builds it: the run config's sources and the success-rate
column (`calibration_inputs`), and the fit window (`fit_window_end`)."""

import numpy as np
import pytest

from pgrpo_sim.calibration import calibration_inputs, fit_window_end
from pgrpo_sim.logs.readers import TrainingLog


def _log(reward, **other):
    steps = np.arange(1, len(reward) + 1, dtype=float)
    return TrainingLog(
        data={"step": steps, "reward": np.asarray(reward, float)}, sources={"reward": "reward"},
        other={k: np.asarray(v, float) for k, v in other.items()}, format="trl", path=None, skipped_steps=np.zeros(0),
    )  # fmt: skip


def test_the_config_file_outranks_the_defaults_and_a_correctness_column_is_read(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("num_generations: 16\nlearning_rate: 2.0e-6\n")
    correct = [0.0, 1.0, 2.0, 1.5]
    log = _log([0.5, 2.1, 3.4, 2.6], **{"rewards/correctness_reward_func": correct})
    changed, run, loaded = calibration_inputs(log, config)
    assert run.num_generations == 16 and run.learning_rate == 2e-6 and loaded is not None
    assert run.sources["num_generations"] != run.sources["beta"]  # from the file vs TRL's default
    assert run.reward_scale == 2.0 and list(changed["reward"]) == correct
    kept, run, loaded = calibration_inputs(log, success_rate=False)  # the caller chose the reward column
    assert kept is log and run.reward_scale == 1.0 and loaded is None


def test_the_fit_window_from_a_step_or_a_fraction():
    log = _log(np.linspace(0.1, 0.5, 10))  # steps 1 … 10
    assert fit_window_end(log) is None
    assert fit_window_end(log, fit_until=4.0) == 4.0
    assert fit_window_end(log, fit_fraction=0.3) == 3.0  # the 3rd of 10 rewarded steps
    assert fit_window_end(log, fit_fraction=0.25) == 3.0  # ceil(2.5)
    with pytest.raises(ValueError, match="not both"):
        fit_window_end(log, fit_until=4.0, fit_fraction=0.3)
    with pytest.raises(ValueError, match="fit-until"):
        fit_window_end(log, fit_until=11.0)
    with pytest.raises(ValueError, match="fit-fraction"):
        fit_window_end(log, fit_fraction=0.0)
