"""Validation sections 8 (rollout reuse) and 9 (mean field) on tiny resolutions: their numbers agree with
direct runs, and the identity they rest on holds exactly."""

import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.reports import rollout_claims as rc

pytestmark = pytest.mark.slow  # the enumerated reuse cycle and law fits: ~40 s

TINY = rc.RolloutResolution(
    reuse_etas=(1.0,), reuse_clips=(0.1,), max_epochs=9, cycles=40, spreads=(None,), prompts=4, population_steps=300
)


def test_reuse_onset_is_the_first_unstable_epoch_count():
    out = rc.rollout_reuse(TINY, None)
    (case,) = out["cases"]
    k = case["refresh"]
    assert k is not None and 1 < k <= TINY.max_epochs  # η = 1 with a tight clip destabilises within the range
    config = ps.bandit.config(**rc.BASE, learning_rate=1.0, epsilon=0.1, lag_model="refresh")
    for epochs, unstable in ((k - 1, False), (k, True)):  # the onset, re-derived from two direct runs
        run = ps.simulate(config.replace(lag=epochs), TINY.cycles * epochs)
        strobe = np.asarray(run.reward)[::epochs]
        assert (int(ps.summarize_curve(strobe, run.diverged).regime) == 3) == unstable
    assert out["verdict"]["text"].startswith("paper's K_ref*")  # no "holds:"/"fails:": the report says that
    header, row = out["table"]
    assert header[2] == "onset, reuse" and row[:3] == ["1", "0.1", k]


def test_identical_prompts_are_the_single_prompt_at_a_dth_of_the_step():
    """D identical prompts share the mean loss, so each moves with η/D: the population fit equals the reference."""
    out = rc.mean_field(TINY, None)
    (plain, shared) = out["fits"]
    assert plain["concentration"] is None and not plain["shared"] and plain["spread"] == 0.0
    np.testing.assert_allclose(plain["zeta"], out["zeta_single_prompt"], rtol=1e-6)
    assert plain["zeta_difference_se"] < 1e-3 and plain["r2"] > 0.99
    assert shared["shared"]
    assert [row[1] for row in out["table"][1:]] == ["—", "per prompt", "shared"]  # the reference, then each fit
