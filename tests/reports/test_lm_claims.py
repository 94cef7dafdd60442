"""Section 11's bookkeeping on hand-made rows: a setting's collapse share and its error, and the comparison of final
rewards in standard errors (the runs themselves are exercised by the tiny validation run, tests/reports/
test_validate.py, in the slow suite)."""

import math

import numpy as np
import pytest

from pgrpo_sim.logs import laws
from pgrpo_sim.reports import lm_claims


def _rows(lr, finals, verdicts):
    return [dict(learning_rate=lr, final_reward=f, peak_reward=f, final_mean_length=6.0, final_entropy=0.3,
                 verdict=v) for f, v in zip(finals, verdicts, strict=True)]  # fmt: skip


def test_a_setting_counts_its_collapsed_and_diverged_seeds():
    rows = _rows(1e-3, [0.8, 0.7, 0.02, math.nan], ["learns", "learns", "collapses", "diverges"])
    s = lm_claims.summarize_setting(rows + _rows(1e-2, [0.0], ["collapses"]), learning_rate=1e-3)
    assert s["seeds"] == 4 and s["collapse_share"] == 0.5 and s["collapses"]
    assert s["collapse_se"] == pytest.approx(math.sqrt(0.25 / 4))
    assert s["final"] == pytest.approx((0.8 + 0.7 + 0.02) / 3)  # a diverged seed has no final reward


def test_worse_needs_verdict_z_standard_errors():
    a = dict(final=0.50, final_se=0.02)
    b = dict(final=0.70, final_se=0.02)
    assert lm_claims.significantly_worse(a, b) and not lm_claims.significantly_worse(b, a)  # 0.2 apart, 7 s.e.
    close = dict(final=0.62, final_se=0.02)  # 0.08 apart: 2.8 s.e. of the difference, under VERDICT_Z = 3
    assert not lm_claims.significantly_worse(close, b)


def test_the_best_rate_is_the_fastest_of_those_tied_with_the_top():
    """Rates whose final rewards lie within VERDICT_Z standard errors of the highest are tied: the largest of them is
    the best (0.673 ± 0.008 and 0.668 ± 0.012 differ by 0.3 s.e.); a rate significantly below is not, nor one whose
    seeds all diverged (no final reward)."""
    rates = [dict(learning_rate=lr, final=f, final_se=se) for lr, f, se in
             ((1e-4, 0.48, 0.02), (3e-4, 0.673, 0.008), (1e-3, 0.668, 0.012), (3e-3, 0.09, 0.005),
              (1e-2, math.nan, math.nan))]  # fmt: skip
    assert lm_claims.best_rate(rates)["learning_rate"] == 1e-3
    rates[2]["final"] = 0.55  # now 8.8 s.e. below the top
    assert lm_claims.best_rate(rates)["learning_rate"] == 3e-4


@pytest.mark.slow  # the four laws compile (~10 s)
def test_oscillator_fits_read_zeta_falling_with_the_rate():
    """Seed curves made by the oscillator law at ζ 1.6 (slow rate) and 0.3 (fast rate), noise 0.01: the fits find
    both within 4 of their standard errors, and ζ falls; no reuse collapsed, so the K_ref check is undetermined."""
    steps = np.arange(80.0)
    rng = np.random.default_rng(0)
    rates, curves = [], []
    for lr, zeta in ((1e-4, 1.6), (1e-3, 0.3)):
        mean = np.asarray(laws.law_curve("oscillator", steps, np.array([0.7, zeta, 0.2, -0.5, 0.0])))
        curves.append(mean + 0.01 * rng.standard_normal((6, steps.size)))
        rates.append(dict(learning_rate=lr, collapses=False, final=float(mean[-1])))
    res = lm_claims.LMResolution(steps=80, reuse=((1, 1),))
    out = lm_claims.oscillator_claims(res, rates, np.stack(curves), [dict(collapses=False)], common={})
    for fit, zeta in zip(out["zeta_fits"], (1.6, 0.3), strict=True):
        assert abs(fit["zeta"] - zeta) < 4 * fit["zeta_se"]
    assert out["zeta_falls"] is True and out["kref"] is None and "kref_missing_reason" in out


TINY_LM = dict(prompts_per_step=4, num_generations=4, modulus=5, operands=2, max_completion_length=8, width=16,
               layers=1, heads=2, eval_size=16, eval_every=2, start_accuracy=0.3)  # fmt: skip


@pytest.mark.slow  # tiny runs of five settings (~20 s)
def test_section_11_deals_three_rounds_each_setting_once_with_the_numbers_of_one_process():
    """A `Deal` that records its rounds: the rates; reuse and the clip pairs together, the clipped 2-epoch setting
    (written two ways) dealt once; then the K_ref setting, when a reuse collapsed. The result equals the default
    (everything here, in order), so where the rounds run does not change a number."""
    res = lm_claims.LMResolution(
        steps=6, seeds=2, learning_rates=(1e-3, 1e-1), reuse=((1, 1), (2, 1)), clip_epochs=(2,), settings=TINY_LM
    )
    rounds = []

    def recording(function, calls):
        rounds.append([call[:2] for call in calls])
        return lm_claims.run_here(function, calls)

    dealt = lm_claims.lm_collapse(res, 0, None, recording)
    assert [len(r) for r in rounds[:2]] == [2, 3]  # 2 rates; 2 reuse + 2 clip settings, one of them a reuse's
    assert len(rounds) == 2 + (dealt["reuse_collapses_at"] is not None)
    here = lm_claims.lm_collapse(res, 0, None)
    assert repr(dealt) == repr(here)
