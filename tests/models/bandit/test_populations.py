"""Prompt populations: a dataset of prompts of different difficulty, batches of P prompts per rollout drawn
without replacement through the dataset's epochs, TRL's reward scaling and DAPO's dynamic sampling, and the
read-outs under the names TRL logs (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import beta

import pgrpo_sim as ps


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [
        dict(lag_model="refresh", lag=3),
        pytest.param(dict(), marks=pytest.mark.slow),
        pytest.param(dict(lag_model="stale", lag=2), marks=pytest.mark.slow),
    ],
)
def test_one_prompt_population_is_todays_bandit(extra):
    """A dataset of one prompt with batches of one gives the plain bandit, to float64 rounding: the two are different
    compiled programs (a batch's gather and scatter, or none), whose update arithmetic XLA may fuse differently (1 ulp
    in a few logits and rewards after 12 steps since the in-jit range mask grew, `valid_hyperparameters`), so the
    bound is 1e-15 relative (~5 ulp); other draws, or another update, would differ by far more."""
    common = dict(p_ref=0.3, learning_rate=0.4, momentum=0.5, beta=0.2, num_generations=6)
    plain = ps.simulate(ps.bandit.config(**common, **extra), 12, mode="sampled", seeds=4)
    batched = ps.simulate(ps.bandit.config(**common, **extra, batch_prompts=1), 12, mode="sampled", seeds=4)
    np.testing.assert_allclose(batched.final_logits, plain.final_logits, rtol=1e-15, atol=0)
    np.testing.assert_allclose(batched.reward, plain.reward, rtol=1e-15, atol=0)


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~7 s on 2 cores)
def test_batches_cover_the_dataset_once_per_epoch():
    config = ps.bandit.config(n_prompts=6, batch_prompts=2, difficulty=(1.0, 2.0), learning_rate=0.3, num_generations=4)
    opt = ps.bandit.make_optimizer(config)
    state = ps.bandit.initial_state(config, opt, config.init_logits)
    keys = jax.random.split(jax.random.key(2), 9)
    epochs = []
    for n in range(9):
        before = state.logits
        state, _ = ps.bandit.step(config, opt, "sampled", state, keys[n])
        moved = set(np.flatnonzero(np.any(np.asarray(state.logits != before), axis=-1)))
        assert moved <= set(np.asarray(state.batch).tolist())  # only the batch's prompts are updated
        if n % 3 == 0:
            epochs.append([])
        epochs[-1] += np.asarray(state.batch).tolist()
    assert all(sorted(e) == list(range(6)) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # each epoch its own order


def test_difficulty_quantiles_and_spread():
    """difficulty=(a, b): the D prompts start at the quantiles (d + ½)/D of Beta(a, b); prompt_spread is the
    std over prompts of their success probability."""
    config = ps.bandit.config(n_prompts=8, difficulty=(2.0, 5.0), n_arms=3, learning_rate=0.2)
    start = np.asarray(ps.simulate(config, 1).reward)  # mean over prompts
    p = beta.ppf((np.arange(8) + 0.5) / 8, 2.0, 5.0)
    np.testing.assert_allclose(start[0], p.mean(), rtol=1e-12)
    np.testing.assert_allclose(ps.simulate(config, 1).prompt_spread[0], p.std(), rtol=1e-12)
    with pytest.raises(ps.PgrpoSimError, match="one entry per prompt"):
        ps.bandit.config(n_prompts=3, p_ref=[0.2, 0.5])


def test_batch_scaled_advantages_match_a_hand_computation():
    rewards = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    got = ps.bandit.group_advantages(jnp.asarray(rewards), "batch")
    centred = rewards - rewards.mean(-1, keepdims=True)
    np.testing.assert_allclose(got, centred / (np.std(rewards, ddof=1) + 1e-6), rtol=1e-12)
    with pytest.raises(ps.PgrpoSimError, match="expected mode has no"):
        ps.simulate(ps.bandit.config(advantage="batch"), 3)


@pytest.mark.slow
def test_dynamic_sampling_drops_groups_without_signal():
    """DAPO: a group whose rewards are all equal carries no weight; the others share the loss."""
    config = ps.bandit.config(n_prompts=2, beta=0.3, num_generations=4, dynamic_sampling=True)
    theta = jnp.asarray([[0.3, -0.2], [0.1, 0.4]])
    arms = jnp.asarray([[0, 1, 0, 1], [0, 0, 1, 1]])
    rewards = jnp.asarray([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # the second group has no signal
    loss, _ = ps.bandit.sampled_loss(theta, theta, arms, rewards, config)
    alone = ps.bandit.config(n_prompts=1, beta=0.3, num_generations=4)
    only, _ = ps.bandit.sampled_loss(theta[:1], theta[:1], arms[:1], rewards[:1], alone)
    np.testing.assert_allclose(loss, only, rtol=1e-12)
    plain, _ = ps.bandit.sampled_loss(theta, theta, arms, rewards, config.replace(dynamic_sampling=False))
    assert not np.isclose(plain, loss)


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~10 s on 2 cores)
def test_trl_read_outs_expected_equals_sampled_mean():
    """batch_reward, reward_std, frac_reward_zero_std, clip ratios low/high and kl of one update at a fixed
    (θ, π_old): the exact expectation (`expected_loss`) is the mean over drawn groups (`sampled_loss`), 4 s.e."""
    config = ps.bandit.config(n_prompts=3, p_ref=[0.1, 0.5, 0.8], beta=0.3, num_generations=5, epsilon=0.1)
    old = config.init_logits
    theta = old + jnp.asarray([[0.4, -0.1], [-0.3, 0.2], [0.25, 0.0]])  # ratios well outside 1 ± 0.1
    _, want = ps.bandit.expected_loss(theta, old, config)
    keys = jax.random.split(jax.random.key(4), 20000)

    def one(key):
        arms, rewards = ps.bandit.draw_rollout(config, old, key)
        return ps.bandit.sampled_loss(theta, old, arms, rewards, config)[1]

    got = jax.vmap(one)(keys)
    for name in ("batch_reward", "group_reward_std", "zero_adv_frac", "kl", "clip_low_frac", "clip_high_frac"):
        values = np.asarray(getattr(got, name))
        assert values.std() > 0, name  # a read-out that varies, so the comparison means something
        z = abs(values.mean() - float(getattr(want, name))) / (values.std() / np.sqrt(values.size))
        assert z < 4, (name, values.mean(), float(getattr(want, name)))


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_cli_population_flags(tmp_path):
    """--prompts D --difficulty A,B --batch-prompts P --scale-rewards batch --dynamic-sampling is the population
    configuration; its CSV has the TRL read-outs."""
    from pgrpo_sim.cli import SIMULATE_COLUMNS, main

    out = tmp_path / "pop.csv"
    flags = ["--prompts", "8", "--difficulty", "1,3", "--batch-prompts", "4", "--scale-rewards", "batch"]
    argv = [*flags, "--dynamic-sampling", "--mode", "sampled", "--seeds", "4", "--steps", "6", "--eta", "0.5"]
    assert main(["simulate", *argv, "--out", str(out)]) == 0
    config = ps.bandit.config(
        n_prompts=8, difficulty=(1.0, 3.0), batch_prompts=4, advantage="batch", dynamic_sampling=True, learning_rate=0.5
    )
    run = ps.simulate(config, 6, mode="sampled", seeds=4, key=jax.random.key(0))
    table = np.loadtxt(out, delimiter=",", skiprows=1)
    assert table.shape == (7, len(SIMULATE_COLUMNS))
    for name in ("reward", "batch_reward", "group_reward_std", "prompt_spread"):
        np.testing.assert_allclose(
            table[:, SIMULATE_COLUMNS.index(name)], np.asarray(getattr(run, name)).mean(0), rtol=1e-6
        )


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--difficulty", "1"], "--difficulty expects A,B"),
        (["--difficulty", "0,2"], "difficulty a must be > 0"),
        (["--prompts", "4", "--batch-prompts", "5"], "batch_prompts must be in [1, 4]"),
        (["--scale-rewards", "none", "--advantage", "rloo"], "means --advantage mean"),
        (["--dynamic-sampling"], "expected mode has no exact form"),
        (["--shared-features", "0"], "--shared-features must be >= 1"),
    ],
)
def test_cli_population_flags_refuse_bad_input(extra, words, tmp_path, capsys):
    from pgrpo_sim.cli import main

    out = tmp_path / "x.csv"
    assert main(["simulate", "--steps", "2", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and not out.exists()


@pytest.mark.slow  # two sampled runs with batches
def test_identity_features_are_independent_prompts():
    """Shared parameters with Φ = I (one feature per prompt) are the per-prompt logits: the same run."""
    common = dict(n_prompts=4, difficulty=(1.0, 2.0), learning_rate=0.4, momentum=0.5, beta=0.1, batch_prompts=2)
    plain = ps.simulate(ps.bandit.config(**common), 10, mode="sampled", seeds=3)
    shared = ps.simulate(ps.bandit.config(**common, features=np.eye(4)), 10, mode="sampled", seeds=3)
    np.testing.assert_allclose(shared.final_logits, plain.final_logits, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_shared_parameters_equal_a_hand_loop_and_move_every_prompt():
    """θ = θ_0 + Φ W, W ← W − η Φᵀ ∂L/∂θ (expected mode, SGD); with a batch of one prompt the others move too."""
    phi = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    config = ps.bandit.config(n_prompts=3, p_ref=[0.2, 0.4, 0.6], learning_rate=0.5, beta=0.2, features=phi)
    run = ps.simulate(config, 6)
    theta0 = np.asarray(config.init_logits)
    w = np.zeros((2, 2))
    grad_at = jax.jit(lambda theta: ps.bandit.on_policy_grad(theta, config))  # one compilation, not op by op
    for _ in range(6):
        grad, _ = grad_at(jnp.asarray(theta0 + phi @ w))
        w = w - 0.5 * phi.T @ np.asarray(grad)
    np.testing.assert_allclose(run.final_logits, theta0 + phi @ w, rtol=1e-12)
    one = ps.bandit.config(n_prompts=3, p_ref=[0.2, 0.4, 0.6], learning_rate=0.5, features=phi, batch_prompts=1)
    opt = ps.bandit.make_optimizer(one)
    state = ps.bandit.initial_state(one, opt, one.init_logits)
    state, _ = jax.jit(lambda state, key: ps.bandit.step(one, opt, "sampled", state, key))(state, jax.random.key(1))
    moved = np.any(np.asarray(state.logits != one.init_logits), axis=-1)
    assert moved.sum() >= 2 and int(state.batch[0]) in np.flatnonzero(moved)  # the batch's prompt and others
