"""The Brier score, its skill against the base rate and the reliability table, against hand-computed values."""

import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.calibration.scoring import brier_score, brier_skill, reliability


def test_brier_score_and_skill_by_hand():
    p, y = [0.9, 0.2, 0.6, 0.0], [1, 0, 0, 0]
    want = (0.01 + 0.04 + 0.36 + 0.0) / 4
    assert brier_score(p, y) == pytest.approx(want, abs=1e-15)
    assert brier_skill(p, y) == pytest.approx(1 - want / (0.25 * 0.75), abs=1e-15)


def test_the_base_rate_has_no_skill_and_the_truth_all_of_it():
    y = np.array([1, 0, 0, 1, 0])
    assert brier_skill(np.full(5, y.mean()), y) == pytest.approx(0.0, abs=1e-15)
    assert brier_skill(y, y) == 1.0
    assert brier_skill(1 - y, y) < 0  # always wrong: worse than the base rate


def test_reliability_bins_probabilities_and_counts_collapses():
    p = [0.05, 0.08, 0.2, 0.95, 1.0, 0.5]
    y = [0, 1, 0, 1, 1, 0]
    bins = reliability(p, y)
    first, last = bins[0], bins[-1]
    assert (first.n, first.mean_probability, first.collapsed_share) == (2, pytest.approx(0.065), 0.5)
    assert (last.n, last.collapsed_share) == (2, 1.0)  # 1.0 falls in the last bin
    assert sum(b.n for b in bins) == 6
    assert bins[2].n == 0 and np.isnan(bins[2].mean_probability)  # [0.3, 0.5) holds nothing


@pytest.mark.parametrize(
    "p, y, match",
    [
        ([0.5], [2], "labels must be 0"),
        ([1.5], [1], r"in \[0, 1\]"),
        ([], [], "non-empty"),
        ([0.2, 0.3], [1], "length"),
    ],
)
def test_bad_scores_are_one_line(p, y, match):
    with pytest.raises(PgrpoSimError, match=match):
        brier_score(p, y)


def test_skill_needs_both_outcomes():
    with pytest.raises(PgrpoSimError, match="both outcomes"):
        brier_skill([0.1, 0.2], [0, 0])
