"""Differentiable outcomes (pgrpo_sim.analysis.outcomes): gradients through long scans, time-to-threshold."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps

BASE = dict(p_ref=0.2, beta=0.5, num_generations=8, learning_rate=0.1, momentum=0.9)


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~10 s on 2 cores)
def test_outcome_gradients_through_three_thousand_steps():
    steps = 3000
    cfg = ps.bandit.config(**BASE, lag_model="stale", lag=2)
    names = ("final_reward", "time_to_threshold", "overshoot", "area", "late_variance")
    point = dict(learning_rate=0.1, momentum=0.9, beta=0.5, p_ref=0.2)

    def read(**values):
        out = ps.outcomes(ps.bandit.with_hyperparameters(cfg, **values), steps)
        return jnp.stack([getattr(out, n) for n in names])

    base = np.asarray(read(**point))
    assert base[2] > 0.05  # underdamped (ζ ≈ 0.02): a real overshoot to differentiate
    jac = jax.jacfwd(lambda p: read(**p))(point)  # forward mode: one compiled program (reverse: see the search)
    h = 1e-6
    for name, x in point.items():
        grad = np.asarray(jac[name])
        assert np.all(np.isfinite(grad)), name
        fd = (np.asarray(read(**(point | {name: x + h}))) - np.asarray(read(**(point | {name: x - h})))) / (2 * h)
        # float64 central differences: roundoff ~1e-16·|f|/h ≤ 1e-6 relative for area ≈ 2400, truncation h²
        np.testing.assert_allclose(grad, fd, rtol=2e-5, atol=1e-7, err_msg=name)


@pytest.mark.slow  # the bandit's own checkpoint test runs by default
def test_checkpointed_outcomes_have_the_same_reverse_mode_gradient():
    """`outcomes(checkpoint=True)`: the same outcomes and `jax.grad` in (η, μ) over 400 steps (blocks of 20; float64,
    1e-12: the blocks only regroup the same steps)."""
    cfg = ps.bandit.config(**BASE, lag_model="stale", lag=2)

    def area(p, checkpoint):
        return ps.outcomes(ps.bandit.with_hyperparameters(cfg, **p), 400, checkpoint=checkpoint).area

    point = dict(learning_rate=0.1, momentum=0.9)
    plain, blocks = (jax.value_and_grad(area)(point, c) for c in (False, True))
    assert float(blocks[0]) == pytest.approx(float(plain[0]), rel=1e-12)
    for name in point:
        assert float(blocks[1][name]) == pytest.approx(float(plain[1][name]), rel=1e-12), name


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_gradient_in_momentum_alone():
    """`jax.grad` and `jax.jacfwd` with respect to μ alone (p* then stays concrete and is computed once, eagerly):
    both equal central differences (float64, h = 1e-6: error ≪ 1e-6 relative). This raised a config error before:
    the eager fixed-point search validated its placeholder μ = 1."""
    cfg = ps.bandit.config(**BASE, lag_model="stale", lag=2)

    def final(m):
        return ps.outcomes(ps.bandit.with_hyperparameters(cfg, momentum=m), 200).final_reward

    h = 1e-6
    fd = (float(final(0.9 + h)) - float(final(0.9 - h))) / (2 * h)
    # jitted (μ alone traced, the rest concrete, as before): one program each, not op by op
    assert float(jax.jit(jax.grad(final))(0.9)) == pytest.approx(fd, rel=1e-6)
    assert float(jax.jit(jax.jacfwd(final))(0.9)) == pytest.approx(fd, rel=1e-6)


@pytest.mark.slow
def test_time_to_threshold_is_the_interpolated_first_passage_time():
    cfg = ps.bandit.config(**(BASE | dict(learning_rate=0.002)), lag_model="stale", lag=2)  # overdamped: monotone
    out = ps.outcomes(cfg, 3000, smoothing=1e-4)
    reward = np.asarray(out.reward)
    u = (reward - reward[0]) / (float(out.p_star) - reward[0])
    assert np.all(np.diff(u) >= -1e-12)
    n = int(np.argmax(u >= 0.9))
    crossing = n - 1 + (0.9 - u[n - 1]) / (u[n] - u[n - 1])
    # the smoothing 1e-4 blurs the crossing by ~1e-4 of the way to p*, i.e. < 0.05 step at this slope (~3e-3/step)
    assert float(out.time_to_threshold) == pytest.approx(crossing, abs=0.05)


def test_a_start_at_the_fixed_point_has_covered_the_way():
    """p_0 = p*: the fraction of the way u is 1 at every step (not 0/0), so the smooth time short of 90 % is
    Σ σ((0.9 − 1)/s) over the steps, σ(x) = ½(1 + x/√(1+x²)); gradients stay finite."""
    from pgrpo_sim.analysis.outcomes import read_outcomes

    def time(p):
        reward = jnp.full(101, p)
        return read_outcomes(reward, {"p_star": p, "stationary_variance": 0.0}, 0.9, 0.02).time_to_threshold

    x = (0.9 - 1.0) / 0.02
    value, grad = jax.jit(jax.value_and_grad(time))(0.4)  # one program, not op by op
    assert float(value) == pytest.approx(100 * 0.5 * (1 + x / np.sqrt(1 + x * x)), rel=1e-12)
    assert np.isfinite(float(grad))


@pytest.mark.slow
def test_outcomes_of_a_scheduled_run_are_its_simulated_curve():
    """A learning-rate schedule is simulated exactly (the 2-arm reduction keeps it): outcomes' curve of a 5-arm
    cosine-decayed run is `simulate`'s, to float32 rounding over 15 steps (1e-6); only `predict`, whose radius is
    that of one η, refuses a schedule (tests/test_api_inputs.py)."""
    cfg = ps.bandit.config(
        learning_rate=0.5, lr_scheduler_type="cosine", warmup_steps=3, decay_steps=20, beta=0.1, n_arms=5, n_correct=2
    )
    np.testing.assert_allclose(ps.outcomes(cfg, 15).reward, ps.simulate(cfg, 15).reward, rtol=1e-6)


@pytest.mark.slow
def test_outcomes_of_reused_rollouts_enumerate_binary_rewards():
    # G = 64 with rollout reuse: 0/1 rewards enumerate 65 reward counts; taken as arbitrary they would exceed
    # the enumeration bound and be refused. Same curve as simulate's (the exact two-arm reduction)
    cfg = ps.bandit.config(num_generations=64, lag_model="refresh", lag=2)
    np.testing.assert_allclose(ps.outcomes(cfg, 5).reward, ps.simulate(cfg, 5).reward, rtol=1e-5)
