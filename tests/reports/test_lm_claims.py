"""Section 11's bookkeeping on hand-made rows: a setting's collapse share and its error, and the comparison of final
rewards in standard errors (the runs themselves are exercised by the tiny validation run, tests/reports/
test_validate.py, in the slow suite)."""

import math

import pytest

from pgrpo_sim.reports import lm_claims


def _rows(lr, finals, verdicts):
    return [dict(learning_rate=lr, final_reward=f, peak_reward=f, final_mean_length=6.0, final_entropy=0.3,
                 verdict=v) for f, v in zip(finals, verdicts)]  # fmt: skip


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
