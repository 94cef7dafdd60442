"""Exact sensitivities of the oscillator (pgrpo_sim.analysis.sensitivities) against finite differences."""

import pytest

import pgrpo_sim as ps

BASE = dict(p_ref=0.2, beta=0.5, num_generations=8, learning_rate=0.1, momentum=0.9)


@pytest.mark.slow
def test_sensitivities_match_finite_differences():
    cfg = ps.bandit.config(**BASE)
    sens = ps.sensitivities(cfg)
    pred = ps.predict(cfg).as_dict()
    for q in ps.bandit.QUANTITIES:  # the values are predict's (both from prediction.fixed_point)
        assert sens.values[q] == pytest.approx(pred[q], rel=1e-10), q
    perturbed = {
        "learning_rate": lambda h: cfg.replace(learning_rate=0.1 + h),
        "momentum": lambda h: cfg.replace(momentum=0.9 + h),
        "beta": lambda h: cfg.replace(beta=0.5 + h),
        "p_ref": lambda h: ps.bandit.config(**(BASE | dict(p_ref=0.2 + h))),
        "epsilon": lambda h: cfg.replace(epsilon=0.2 + h, epsilon_high=0.2 + h),
    }
    h = 1e-6
    for name, make in perturbed.items():
        up, down = ps.sensitivities(make(h)).values, ps.sensitivities(make(-h)).values
        for q in ps.bandit.QUANTITIES:
            fd = (up[q] - down[q]) / (2 * h)
            # central differences of values converged to ~1e-15: error ~1e-15/h + h² ≈ 1e-9 relative
            assert sens.partials[q][name] == pytest.approx(fd, rel=1e-6, abs=1e-9), (q, name)
    # the continuous lag (here τ = 0) enters only the oscillator formulas; one-sided difference, error O(h)
    osc = lambda tau: ps.damping_ratio(2 * 0.1, 0.9, tau, sens.values["stiffness"])
    assert sens.partials["damping_ratio"]["lag"] == pytest.approx(float((osc(h) - osc(0.0)) / h), rel=1e-5)
    assert sens.partials["p_star"]["learning_rate"] == 0.0 and sens.partials["stiffness"]["epsilon"] == 0.0
    assert "d/dbeta" in sens.table()
