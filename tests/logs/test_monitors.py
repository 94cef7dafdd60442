"""The practitioners' collapse monitors on logs whose answer is known by construction."""

import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.logs import TrainingLog
from pgrpo_sim.logs.monitors import ENTROPY_DROP, SPIKE_Z, monitor_calls


def _log(**series):
    n = len(next(iter(series.values())))
    data = {"step": np.arange(float(n))} | {k: np.asarray(v, float) for k, v in series.items()}
    return TrainingLog(data=data, sources={k: k for k in series}, other={}, format="jsonl", path=None,
                       skipped_steps=np.zeros(0))  # fmt: skip


def test_entropy_drop_fires_after_the_fall_and_not_before():
    entropy = np.r_[np.full(10, 1.0), np.full(10, 0.3)]
    log = _log(reward=np.linspace(0.1, 0.5, 20), entropy=entropy)
    before, after = monitor_calls(log, 9)["entropy_drop"], monitor_calls(log, 19)["entropy_drop"]
    assert before.collapse == 0.0 and before.value == pytest.approx(0.0, abs=1e-15)
    assert after.collapse == 1.0 and after.value == pytest.approx(0.7, abs=1e-12) and after.value > ENTROPY_DROP


def test_gradient_spike_is_a_z_score_over_the_run_so_far():
    norm = 1.0 + 0.1 * np.random.default_rng(0).standard_normal(30)
    quiet = monitor_calls(_log(reward=np.zeros(30), grad_norm=norm), 29)["grad_norm_spike"]
    assert quiet.available and quiet.collapse == 0.0 and quiet.value < SPIKE_Z
    spiked = norm.copy()
    spiked[20] = 3.0
    z = (3.0 - spiked[:20].mean()) / spiked[:20].std(ddof=1)
    call = monitor_calls(_log(reward=np.zeros(30), grad_norm=spiked), 29)["grad_norm_spike"]
    assert call.collapse == 1.0 and call.value == pytest.approx(z, rel=1e-9)  # running sums: a few ulps of σ


@pytest.mark.parametrize("a, b, fires", [(0.2, 1.0, False), (-0.3, -0.2, True)])
def test_entropy_law_extrapolates_an_exact_law_to_zero_entropy(a, b, fires):
    """R = b − a·e^H holds exactly, so the fit returns R(0) = b − a to rounding; a < 0 (the reward falls with the
    entropy) puts R(0) below half the best reward."""
    entropy = np.linspace(1.2, 0.4, 15)
    call = monitor_calls(_log(reward=b - a * np.exp(entropy), entropy=entropy), 14)["entropy_law"]
    assert call.value == pytest.approx(b - a, abs=1e-12) and call.collapse == float(fires)


def test_a_log_without_the_inputs_is_not_read():
    calls = monitor_calls(_log(reward=np.linspace(0, 1, 20)), 19)
    assert not any(c.available for c in calls.values()) and all(np.isnan(c.collapse) for c in calls.values())
    with pytest.raises(PgrpoSimError, match="until must be finite"):
        monitor_calls(_log(reward=np.zeros(3)), float("nan"))
