"""Rollouts as TRL and verl run them: one rollout per refresh reused for epochs × mini-batches optimiser steps,
its exact expected-mode counterpart (the rollout-averaged cycle), and KL reference sync (float64)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import pgrpo_sim as ps

BASE = dict(p_ref=0.2, learning_rate=0.5, epsilon=0.2, num_generations=4, lag_model="refresh")


@pytest.mark.slow
def test_reuse_equals_a_hand_written_loop_over_one_rollout():
    """Each refresh draws one rollout (with that step's key) and every inner step uses those same samples."""
    config = ps.bandit.config(**BASE, beta=0.1, momentum=0.5, n_prompts=3, lag=3)
    steps, key = 7, jax.random.key(3)
    run = ps.bandit.run(config, key, steps, "sampled")
    keys = jax.random.split(key, steps + 1)
    opt = ps.bandit.make_optimizer(config)
    theta, state = config.init_logits, opt.init(config.init_logits)
    drawn = []

    @jax.jit  # one compilation, not op by op
    def inner(theta, state, old, arms, rewards):
        grad = jax.grad(lambda t: ps.bandit.sampled_loss(t, old, arms, rewards, config)[0])(theta)
        update, state = opt.update(grad, state, theta)
        return optax.apply_updates(theta, update), state

    draw = jax.jit(lambda old, key: ps.bandit.draw_rollout(config, old, key))
    for n in range(steps):
        if n % 3 == 0:  # refresh: π_old ← π, one rollout from it
            old = theta
            arms, rewards = draw(old, keys[n])
            drawn.append((arms, rewards))
        theta, state = inner(theta, state, old, arms, rewards)
    # same arithmetic in another XLA fusion: a few ulp in float64
    np.testing.assert_allclose(run.final_logits, theta, rtol=1e-12, atol=1e-14)
    assert len(drawn) == 3 and not np.array_equal(drawn[0][0], drawn[1][0])  # fresh draws at each refresh
    # the reused samples are bitwise those of the refresh step: replay the scan state by state
    state = ps.bandit.initial_state(config, opt, config.init_logits)
    step = jax.jit(lambda state, key: ps.bandit.step(config, opt, "sampled", state, key))  # one compilation
    for n in range(steps):
        state, _ = step(state, keys[n])
        np.testing.assert_array_equal(state.rollout_arms, drawn[n // 3][0])
        np.testing.assert_array_equal(state.rollout_rewards, drawn[n // 3][1])


@pytest.mark.slow
def test_clipping_stops_samples_that_left_the_trust_region():
    """Within a rollout the ratio drifts from 1 and clipping switches on; at every refresh it is exactly 1."""
    config = ps.bandit.config(**(BASE | dict(learning_rate=2.0)), n_prompts=8, lag=8)
    run = ps.simulate(config, 32, mode="sampled", seeds=16, key=jax.random.key(0))
    assert np.all(np.asarray(run.ratio_max)[:, ::8] == 1.0) and np.all(np.asarray(run.clip_frac)[:, ::8] == 0.0)
    assert np.asarray(run.clip_frac)[:, 4::8].mean() > 0.05


def test_minibatches_partition_the_prompts_once_per_epoch():
    """m = 3 mini-batches of a 6-prompt rollout, 2 epochs: each epoch's 3 steps touch every prompt exactly once,
    with a new random order per epoch; prompts outside the step's mini-batch do not move (SGD, no KL)."""
    config = ps.bandit.config(**BASE, n_prompts=6, lag=6, minibatches=3)
    opt = ps.bandit.make_optimizer(config)
    state = ps.bandit.initial_state(config, opt, config.init_logits)
    keys = jax.random.split(jax.random.key(1), 12)
    step = jax.jit(lambda state, key: ps.bandit.step(config, opt, "sampled", state, key))  # one compilation
    orders = []
    for epoch in range(4):  # two rollouts of two epochs
        seen = []
        for j in range(3):
            n = 3 * epoch + j
            before = state.logits
            state, _ = step(state, keys[n])
            weights = ps.bandit.minibatch_weights(config, jnp.asarray(j), state.rollout_order)
            chosen = np.flatnonzero(np.asarray(weights))
            moved = np.flatnonzero(np.any(np.asarray(state.logits != before), axis=-1))
            assert set(moved) <= set(chosen) and len(chosen) == 2
            np.testing.assert_allclose(np.asarray(weights)[chosen], 0.5)
            seen += list(chosen)
        assert sorted(seen) == list(range(6))
        orders.append(np.asarray(state.rollout_order))
    assert any(not np.array_equal(orders[0], o) for o in orders[1:])


@pytest.mark.slow
@pytest.mark.parametrize("advantage", ["std", pytest.param("rloo", marks=pytest.mark.slow)])
def test_expected_cycle_equals_the_mean_of_sampled_reuse(advantage):
    """Within a cycle expected mode is the exact mean over rollouts: sampled seed means agree within 4 s.e."""
    config = ps.bandit.config(**BASE, lag=6, momentum=0.3, beta=0.2, advantage=advantage)
    seeds = 4000
    sampled = ps.simulate(config, 6, mode="sampled", seeds=seeds, key=jax.random.key(7))
    expected = ps.simulate(config, 6)
    for name in ("reward", "entropy", "kl_ref", "grad_norm", "clip_frac", "ratio_mean"):
        got = np.asarray(getattr(sampled, name))
        mean, se = got.mean(0), got.std(0) / np.sqrt(seeds)
        z = np.abs(mean - np.asarray(getattr(expected, name))) / np.maximum(se, 1e-12)
        assert np.all(z[1:] < 4), (name, z)
    assert ps.bandit.rollout_outcomes(config)[0].shape == (35, 4)  # C(4 + 4 − 1, 3) rollouts of 2 arms × 2 rewards
    assert ps.bandit.rollout_outcomes(ps.bandit.config(**(BASE | dict(num_generations=8)), lag=2))[0].shape[0] == 165


def test_expected_reuse_refuses_what_it_cannot_enumerate():
    with pytest.raises(ps.PgrpoSimError, match="prompts"):
        ps.simulate(ps.bandit.config(**BASE, lag=2, n_prompts=2), 4)
    with pytest.raises(ps.PgrpoSimError, match="more than"):
        ps.simulate(ps.bandit.config(**(BASE | dict(num_generations=16)), n_arms=8, lag=2), 4)  # C(23, 7) arm multisets


@pytest.mark.slow  # 2 × 4000 seeds
def test_reuse_learns_less_than_fresh_samples():
    """The issue's case: 2 arms, p_ref 0.2, β 0, G 4, η 0.5, clip 0.2, refresh every 8 steps, reward at step 40.
    An independent NumPy loop gave 0.746 ± 0.002 with reuse; fresh samples give about 0.871."""
    config = ps.bandit.config(**BASE, lag=8)
    reuse = np.asarray(ps.simulate(config, 40, mode="sampled", seeds=4000, key=jax.random.key(0)).reward[:, 40])
    fresh = ps.simulate(config.replace(lag_model="refresh_fresh"), 40, mode="sampled", seeds=4000)
    se = reuse.std() / np.sqrt(reuse.size)
    assert abs(reuse.mean() - 0.746) < 4 * np.hypot(se, 0.002)
    assert np.asarray(fresh.reward[:, 40]).mean() - reuse.mean() > 0.1


@pytest.mark.slow
def test_reference_sync_equals_a_hand_loop():
    """Every S steps π_ref ← α·π + (1 − α)·π_ref on the logits, before the step's update."""
    config = ps.bandit.config(
        p_ref=0.3, learning_rate=0.4, beta=0.5, num_generations=6, ref_sync_steps=3, ref_sync_alpha=0.25
    )
    run = ps.simulate(config, 10)
    theta = ref = np.asarray(config.init_logits)
    kls = []
    on_policy_grad = jax.jit(ps.bandit.on_policy_grad)  # one compilation, not op by op
    for n in range(10):
        if n > 0 and n % 3 == 0:
            ref = 0.25 * theta + 0.75 * ref
        synced = config.replace(init_logits=jnp.asarray(ref))
        kls.append(float(ps.bandit.kl_divergence(theta, ref)[0]))
        grad, _ = on_policy_grad(jnp.asarray(theta), synced)
        theta = theta - 0.4 * np.asarray(grad)
    np.testing.assert_allclose(run.final_logits, theta, rtol=1e-12)
    np.testing.assert_allclose(run.kl_ref[:10], kls, rtol=1e-10, atol=1e-15)
    plain = ps.simulate(config.replace(ref_sync_steps=None), 10)
    assert not np.allclose(plain.final_logits, run.final_logits)  # the sync changes the run


def _csv_reward(path):
    return np.loadtxt(path, delimiter=",", skiprows=1, usecols=1)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_cli_refresh_lag_means_rollout_reuse(tmp_path):
    """`simulate --lag-model refresh --lag K --mode sampled`: reuse with K optimiser steps per rollout (K epochs of
    one mini-batch); `--num-iterations E --steps-per-generation M` is K = E × M with M mini-batches."""
    from pgrpo_sim.cli import main

    common = [
        "--p-ref",
        "0.2",
        "--eta",
        "0.5",
        "--group-size",
        "4",
        "--mode",
        "sampled",
        "--seeds",
        "8",
        "--steps",
        "12",
    ]
    assert main(["simulate", *common, "--lag-model", "refresh", "--lag", "4", "--out", str(tmp_path / "a.csv")]) == 0
    config = ps.bandit.config(**BASE, lag=4)
    run = ps.simulate(config, 12, mode="sampled", seeds=8, key=jax.random.key(0))
    np.testing.assert_allclose(_csv_reward(tmp_path / "a.csv"), np.asarray(run.reward).mean(0), rtol=1e-6)
    argv = [*common, "--prompts", "4", "--num-iterations", "2", "--steps-per-generation", "2"]
    assert main(["simulate", *argv, "--out", str(tmp_path / "b.csv")]) == 0
    config = ps.bandit.config(**BASE, lag=4, n_prompts=4, minibatches=2)
    run = ps.simulate(config, 12, mode="sampled", seeds=8, key=jax.random.key(0))
    np.testing.assert_allclose(_csv_reward(tmp_path / "b.csv"), np.asarray(run.reward).mean(0), rtol=1e-6)


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--lag-model", "stale", "--num-iterations", "2"], "need --lag-model refresh"),
        (["--num-iterations", "2", "--lag", "3"], "disagrees"),
        (["--num-iterations", "0"], "--num-iterations must be >= 1"),
        (["--prompts", "3", "--steps-per-generation", "2"], "minibatches (--steps-per-generation) must divide"),
        (["--ref-sync-steps", "0"], "ref_sync_steps must be >= 1"),
        (["--ref-sync-steps", "5", "--ref-sync-alpha", "1.5"], "ref_sync_alpha must be in"),
    ],
)
def test_cli_rollout_flags_refuse_bad_input(extra, words, tmp_path, capsys):
    from pgrpo_sim.cli import main

    out = tmp_path / "x.csv"
    assert main(["simulate", "--steps", "2", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and not out.exists()


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
@pytest.mark.parametrize("n_arms, num_generations", [(2, 8), (3, 4)])
def test_binary_rewards_enumerate_fewer_rollouts_with_the_same_result(n_arms, num_generations):
    """With 0/1 rewards only multisets of arms occur (C(G+N−1, N−1) instead of C(G+2N−1, 2N−1)); the expected
    reuse run is the same to rounding (1e-12 in float64) as the full enumeration, which `simulate` takes for
    rewards that are not all 0 or 1: here a wrong arm's reward of 1e-300, which moves no number by 1e-12."""
    from pgrpo_sim.models.bandit import rollout_outcomes

    kw = dict(
        n_arms=n_arms,
        p_ref=0.3,
        learning_rate=0.8,
        beta=0.1,
        num_generations=num_generations,
        lag_model="refresh",
        lag=3,
    )
    config = ps.bandit.config(**kw)
    arms, _, counts = rollout_outcomes(config, binary_rewards=True)
    assert arms.shape[0] == math.comb(num_generations + n_arms - 1, n_arms - 1)
    assert np.all(np.asarray(counts).sum(1) == num_generations)
    almost = config.replace(rewards=config.rewards.at[..., 1].set(1e-300))
    assert ps.bandit.rewards_are_binary(config) and not ps.bandit.rewards_are_binary(almost)
    full, fast = (ps.simulate(c, 40) for c in (almost, config))
    for name in ("reward", "clip_frac", "kl_ref", "zero_adv_frac", "group_reward_std"):
        np.testing.assert_allclose(getattr(fast, name), getattr(full, name), atol=1e-12, err_msg=name)


def test_binary_rewards_are_refused_for_other_rewards():
    """Asserting 0/1 rewards where a concrete reward is 0.5 is refused by `simulate` and by the enumeration of
    rollouts, so a direct Floquet radius of rollout reuse for such a configuration fails instead of using the
    binary enumeration; without the assertion every (arm, reward) multiset is enumerated."""
    from pgrpo_sim.models.bandit import rollout_outcomes
    from pgrpo_sim.prediction import floquet_radius

    config = ps.bandit.config(rewards=[1.0, 0.5], num_generations=4, lag_model="refresh", lag=3)
    for call in (
        lambda: ps.simulate(config, 5, binary_rewards=True),
        lambda: rollout_outcomes(config, binary_rewards=True),
        lambda: floquet_radius(config, jnp.asarray(0.3)),
    ):
        with pytest.raises(ValueError, match="binary_rewards=True needs every reward to be 0 or 1"):
            call()
    assert rollout_outcomes(config)[0].shape[0] == math.comb(4 + 3, 3)
