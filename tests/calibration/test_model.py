"""The population model against the plain bandit, its batch moments against Monte Carlo draws of a batch."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.calibration.model import population_model
from pgrpo_sim.calibration.run_config import RunConfig

RUN = RunConfig(learning_rate=1e-5, num_generations=8, prompts_per_step=32, lr_scheduler_type="constant")


@pytest.mark.slow
def test_one_difficulty_is_the_plain_bandit():
    """σ → 0 and no unsolvable prompts: every prompt is the same bandit, so the mean reward is exactly its curve."""
    model = population_model(RUN, 60, log_format="jsonl")
    theta = jnp.array([-1.2, -30.0, math.log(0.2 / 1e-5), -40.0])
    got = np.asarray(model.observables(theta).reward)
    plain = ps.simulate(ps.bandit.config(p_ref=1 / (1 + math.exp(1.2)), learning_rate=0.2, num_generations=8), 60)
    np.testing.assert_allclose(got, np.asarray(plain.reward), rtol=1e-10)


def test_reuse_is_read_at_the_rollouts():
    """A rollout-unit log reads the per-prompt run every num_iterations steps; a TRL log (one optimiser step per
    logged step, 2 epochs × 2 mini-batches per rollout) reads the rollout its batch came from."""
    run = RunConfig(num_iterations=2, steps_per_generation=2, prompts_per_step=32)
    assert list(population_model(run, 4, log_format="jsonl").read_steps()) == [0, 2, 4, 6, 8]
    assert list(population_model(run, 9, log_format="trl").read_steps()) == [0, 0, 0, 0, 2, 2, 2, 2, 4, 4]


@pytest.mark.slow
@pytest.mark.parametrize("unsolvable, dataset", [(0.0, None), (0.25, None), (0.25, 32)])
def test_batch_moments_match_monte_carlo(unsolvable, dataset):
    """Mean and variance of a batch's reward, zero-std fraction and mean within-group std, drawn as a real run draws
    them (P prompts from the population — i.i.d., or without replacement from N = dataset — G completions each),
    against the model's formulas at step 0. 4·10⁴ batches: the relative s.e. of a variance is √(2/n) ≈ 0.7 %, so
    3 % is over 4 s.e.; means are compared at 5 s.e."""
    run = RunConfig(num_generations=8, prompts_per_step=32, dataset_size=dataset)
    model = population_model(run, 1, log_format="jsonl")
    c = unsolvable if unsolvable > 0 else 1e-12
    theta = jnp.array([-0.8, math.log(1.3), 0.0, math.log(c / (1 - c))])
    obs = model.observables(theta)._replace(diverged=np.zeros(2))
    obs = jax.tree.map(lambda x: float(np.asarray(x)[0]), obs)
    z = jax.scipy.stats.norm.ppf((np.arange(model.prompts) + 0.5) / model.prompts)
    p_learn = 1 / (1 + np.exp(-(-0.8 + 1.3 * np.asarray(z))))
    rng = np.random.default_rng(1)
    n, g, batch = 40_000, 8, 32
    if dataset is None:  # a large dataset: each prompt unsolvable with probability c, else a random quantile prompt
        p = np.where(rng.random((n, batch)) < unsolvable, 0.0, rng.choice(p_learn, (n, batch)))
    else:  # a dataset of N = P prompts: always the same ones
        k = round(unsolvable * dataset)
        pool = np.concatenate([np.zeros(k), np.quantile(p_learn, (np.arange(dataset - k) + 0.5) / (dataset - k))])
        p = np.broadcast_to(pool, (n, batch))
        obs_mean = np.mean(pool)
        assert obs.reward == pytest.approx(obs_mean, abs=0.02)  # the pool is a coarse version of the population
    rewards = rng.random((n, batch, g)) < p[..., None]
    reward = rewards.mean((1, 2))
    std = rewards.std(-1, ddof=1).mean(-1)
    zero = (rewards.all(-1) | ~rewards.any(-1)).mean(-1)
    if dataset is None:
        for name, sample in (("reward", reward), ("zero_std_frac", zero), ("reward_std", std)):
            assert getattr(obs, name) == pytest.approx(sample.mean(), abs=5 * sample.std() / math.sqrt(n)), name
            assert getattr(obs, f"{name}_var") == pytest.approx(sample.var(), rel=0.03), name
    else:  # finite-population correction: no prompt-sampling term when the batch is the whole dataset
        within = np.mean(p[0] * (1 - p[0]))
        assert reward.var() == pytest.approx(within / g / batch, rel=0.03)
        assert float(obs.reward_var) == pytest.approx(within / g / batch, rel=0.1)


@pytest.mark.slow
def test_scenarios_changing_only_float_keys_share_one_compilation(backend_compiles):
    """A what-if over learning rate, β, clip and `scale_rewards` (the advantage kind, a traced code) compiles the
    population model once (their values are traced), and
    each band's mean curve is that run config's own `observables` (so tracing them changed no number): the
    posterior sd is 1e-10, so the draws move the curve by ~1e-10, well inside 1e-8. A new group size is new static
    structure: one more compilation."""
    from pgrpo_sim.calibration.inference import Calibration, predictive_band

    theta = np.array([-1.0, 0.0, math.log(0.1 / 1e-5), -2.0])

    def band(run):
        model = population_model(run, 40, log_format="jsonl")
        cal = Calibration(model, theta, 1e-20 * np.eye(4), 1.0, ("reward",), {}, 1.0, 20.0, 20, "jsonl", 0.0)
        return model, predictive_band(cal)

    band(RUN)  # compiles the band's program
    backend_compiles.clear()
    scenarios = [
        RUN.replace(learning_rate=3e-5),
        RUN.replace(beta=0.1),
        RUN.replace(epsilon_high=0.28),
        RUN.replace(scale_rewards="none"),
    ]
    bands = [band(run) for run in scenarios]
    assert len(backend_compiles) == 0, f"compilations for float-only changes: {backend_compiles}"
    band(RUN.replace(num_generations=4))
    assert len(backend_compiles) >= 1
    for model, b in bands:
        direct = np.asarray(model.observables(jnp.asarray(theta)).reward)
        np.testing.assert_allclose(b.mean, direct, rtol=1e-8)


@pytest.mark.slow
def test_synthetic_log_with_minibatches_reuses_each_rollout():
    """TRL's steps_per_generation M > 1 at one epoch is rollout reuse (M optimiser steps per rollout), so the
    synthetic run is built (it used to be refused as mini-batches without lag model 'refresh') and learns: over
    80 steps at a large learning rate the late reward is above the early one by far more than its noise (32
    prompts × 8 completions: a batch reward's s.d. is about 0.03)."""
    from pgrpo_sim.calibration import synthetic_log

    run = RunConfig(learning_rate=1e-5, steps_per_generation=2, prompts_per_step=32, lr_scheduler_type="constant")
    log = synthetic_log(run, [-1.0, 0.0, math.log(0.05 / 1e-5), -30.0], 80)
    reward = log.data["reward"]
    assert reward.shape == (81,) and np.all((reward >= 0) & (reward <= 1))
    assert reward[-10:].mean() - reward[:10].mean() > 0.2


def test_band_of_a_fraction_stays_within_zero_and_one():
    """The band adds one batch's Gaussian noise to each draw; a batch's reward fraction lies in [0, 1], so the band
    does too, even with noise far larger than the curve's range (overdispersion 1e4: sd ~ 10 here)."""
    from pgrpo_sim.calibration.inference import Calibration, predictive_band

    model = population_model(RUN, 20, log_format="jsonl")
    theta = np.array([-1.0, 0.0, math.log(0.1 / 1e-5), -2.0])
    cal = Calibration(model, theta, 1e-20 * np.eye(4), 1e4, ("reward",), {}, 1.0, 10.0, 10, "jsonl", 0.0)
    band = predictive_band(cal)
    assert np.all(band.lo >= 0) and np.all(band.hi <= 1) and np.all(band.lo < band.hi)
    assert np.all(band.lo[1:] == 0) and np.all(band.hi[1:] == 1)  # noise that large fills the whole range


def test_an_affine_reward_is_the_success_rate_mapped():
    """θ with (a, log b) appended predicts reward a + b·p̄ with variance b²·Var, within-group std b·s and the same
    zero-std fraction as θ without them (the map changes the units, not the run); the band of such a calibration
    lies in [a, a + b], where a batch's mapped reward lies, with noise far larger than that range."""
    from pgrpo_sim.calibration.inference import Calibration, predictive_band

    model = population_model(RUN, 20, log_format="jsonl")
    theta = np.array([-1.0, 0.0, math.log(0.1 / 1e-5), -2.0])
    a, b = -1.25, 4.0
    plain, mapped = (model.observables(jnp.asarray(t)) for t in (theta, np.append(theta, [a, math.log(b)])))
    np.testing.assert_allclose(mapped.reward, a + b * np.asarray(plain.reward), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mapped.reward_var, b**2 * np.asarray(plain.reward_var), rtol=1e-12)
    np.testing.assert_allclose(mapped.reward_std, b * np.asarray(plain.reward_std), rtol=1e-12)
    np.testing.assert_array_equal(mapped.zero_std_frac, plain.zero_std_frac)
    names = (*ps.calibration.PARAMETERS, "reward_offset", "log_reward_gain")
    cal = Calibration(
        model, np.append(theta, [a, math.log(b)]), 1e-20 * np.eye(6), 1e4, ("reward",), {}, 1.0, 10.0, 10, "jsonl",
        0.0, parameters=names, prior_sd=np.ones(6),
    )  # fmt: skip
    band = predictive_band(cal)
    assert cal.reward_bounds == (a, a + b)  # the draws' a and b scatter by 1e-10 about the MAP's
    np.testing.assert_allclose(band.lo[1:], a, atol=1e-8)
    np.testing.assert_allclose(band.hi[1:], a + b, atol=1e-8)


def test_an_observable_keeps_its_own_overdispersion_only_beyond_its_noise():
    """A reduced χ² of ν = 100 degrees of freedom scatters by √(2/ν) = 0.14 of its mean: 1.2 against a pooled 1.0 is
    noise (the pooled φ stays), 3.0 against 1.0 and 1.05 against 3.07 (Wordle's reward beside its misfitting
    zero-std fraction and within-group std) are not; an own φ is never below 1."""
    from pgrpo_sim.calibration.inference import own_overdispersion

    assert own_overdispersion(120.0, 100.0, 1.0) == 1.0
    assert own_overdispersion(300.0, 100.0, 1.0) == 3.0
    assert own_overdispersion(105.0, 100.0, 3.07) == pytest.approx(1.05)
    assert own_overdispersion(50.0, 100.0, 3.07) == 1.0
