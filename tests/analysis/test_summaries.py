"""The batched one-pass summaries (`summarize_curves`, what sweeps use) equal `summarize_curve` curve by curve."""

import jax
import numpy as np
import pytest

from pgrpo_sim.analysis.summaries import MONOTONE, OSCILLATORY, UNSTABLE, summarize_curve, summarize_curves, verdict


def _curves(n: int = 400, count: int = 40) -> np.ndarray:
    """(n, count) time-major curves of every regime: monotone, damped, flip, sustained, growing, flat,
    noisy, a NaN (diverged) one, and random damped oscillations with and without noise."""
    t = np.arange(float(n))
    rng = np.random.default_rng(0)
    fixed = [
        0.8 - 0.6 * np.exp(-t / 40),
        0.8 - 0.6 * np.exp(-t / 60) * np.cos(t / 10),
        0.8 + 0.3 * (-0.97) ** t,
        0.5 + 0.2 * np.sin(t / 7),
        0.5 + 0.01 * np.exp(t / 100) * np.sin(t / 7),
        np.full(n, 0.3),
        0.8 - 0.6 * np.exp(-t / 20) + 0.01 * rng.standard_normal(n),
        np.where(t < 200, 0.3, np.nan),
    ]
    for _ in range(count - len(fixed)):
        a, w, d = rng.uniform(0.01, 0.5), rng.uniform(0.05, 3), rng.uniform(5, 500)
        fixed.append(0.5 + a * np.exp(-t / d) * np.cos(w * t) + 0.001 * rng.standard_normal(n) * rng.integers(0, 2))
    return np.stack(fixed, 1)


@pytest.mark.slow
@pytest.mark.parametrize("stderr", [None, 0.01])
def test_batched_summaries_equal_one_curve_at_a_time(stderr):
    curves = _curves()
    diverged = np.zeros(curves.shape[1], bool)
    diverged[3] = True
    se = None if stderr is None else np.full(curves.shape, stderr)
    many = summarize_curves(curves, diverged, se)
    regimes = set()
    one_curve = jax.jit(summarize_curve)
    for i in range(curves.shape[1]):
        one = one_curve(curves[:, i], diverged[i], None if se is None else se[:, i])
        for field in one._fields:
            # the plateau is a mean over a column instead of a vector: equal to a few ulp
            np.testing.assert_allclose(getattr(many, field)[i], getattr(one, field), rtol=1e-13, err_msg=field)
        regimes.add(int(one.regime))
    assert {MONOTONE, OSCILLATORY, UNSTABLE} <= regimes  # the curves exercise the classification


def test_batched_summaries_are_not_a_copy_of_the_first_curve():
    curves = _curves(count=8)
    many = summarize_curves(curves)
    assert len(set(np.asarray(many.regime).tolist())) > 1
    np.testing.assert_array_equal(np.asarray(many.final_reward)[:7], curves[-1, :7])
    assert np.isnan(many.final_reward[7]) and int(many.regime[7]) == UNSTABLE  # the NaN curve counts as diverged


@pytest.mark.slow
def test_overshoot_is_read_before_the_plateau_window():
    """A curve still rising through its last 10 % (the plateau's own window) did not go past its plateau: its
    overshoot is the (negative) distance to it at the window's start, not p_T minus the window's mean, which
    had read as a positive overshoot. A damped oscillation's first peak is its overshoot: for
    p = 0.6 − 0.4 e^{−t/30} cos(t/10) the peak is at tan(t/10) = −1/3, t* = 10(π − atan(1/3)) (plateau 0.6 to
    1e-4); the integer samples miss t* by ≤ ½, which lowers the peak by ≤ ½·0.4·(1/10)²·(½)² = 5e-4."""
    t = np.arange(301.0)
    rising = 0.6 - 0.4 * np.exp(-t / 200)
    damped = 0.6 - 0.4 * np.exp(-t / 30) * np.cos(t / 10)
    start = int(0.9 * t.size)
    for curve, expected in (
        (rising, rising[start - 1] - rising[start:].mean()),
        (damped, np.max(damped) - damped[start:].mean()),
    ):
        one, batched = summarize_curve(curve), summarize_curves(curve[:, None])
        assert float(one.overshoot) == pytest.approx(expected, abs=1e-6)  # float32 curves
        assert float(batched.overshoot[0]) == float(one.overshoot)
    assert float(summarize_curve(rising).overshoot) < 0
    peak = 10 * (np.pi - np.arctan(1 / 3))
    closed_form = -0.4 * np.exp(-peak / 30) * np.cos(peak / 10)
    assert float(summarize_curve(damped).overshoot) == pytest.approx(closed_form, abs=1e-3)


def test_a_verdict_reads_a_list_as_its_array():
    """`verdict` took `mean.size` of its argument: a list raised AttributeError."""
    curve = np.linspace(0.1, 0.9, 40)
    assert verdict(list(curve), False) == verdict(curve, False) == "learns"
