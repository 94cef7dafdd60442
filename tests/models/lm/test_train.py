"""The language-model level's configuration, optimiser and GRPO loop. The loop's tests compile a tiny policy's whole
run (~15 s on 2 cores) and are in the slow suite."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pgrpo_sim import lm
from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.models.lm import (
    READOUTS,
    completion_logps,
    init_policy,
    make_optimizer,
    response_mask,
    reward_spread,
    solutions,
    task_prompts,
)

TINY = dict(
    prompts_per_step=4, num_generations=4, max_completion_length=8, operands=2, width=16, layers=1, heads=2,
    eval_size=16, eval_every=2,
)  # fmt: skip


def test_config_names_and_codes_read_back():
    config = lm.config(loss_type="bnpo", scale_rewards="none", num_iterations=2, steps_per_generation=4)
    assert (config.loss_type_name, config.scale_rewards, config.steps_per_rollout) == ("bnpo", "none", 8)
    assert config.generation_batch == 256 and not config.kl_reference
    assert lm.config(beta=0.04).kl_reference
    assert np.isinf(lm.config(epsilon=None).epsilon_high)  # no clip: both sides
    assert lm.config(epsilon=0.2, epsilon_high=0.28).epsilon_high == 0.28


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(steps_per_generation=3), "steps_per_generation must divide the generation batch"),
        (dict(learning_rate=0.0), "learning_rate must be > 0"),
        (dict(adam_beta2=1.0), "adam_beta2 must be in"),
        (dict(beta=0.1, kl_reference=False), "beta > 0 needs kl_reference"),
        (dict(scale_rewards="std"), "scale_rewards must be one of"),
        (dict(loss_type="ppo"), "loss_type must be one of"),
        (dict(num_generations=1), "num_generations must be"),
        (dict(lr_scheduler_type="polynomial"), "lr_scheduler_type must be one of"),
        (dict(warmup_steps=1.5), "warmup_steps must be an integer"),
        (dict(max_steps=0), r"max_steps must be in \[1, 100000000\]"),
        (dict(learning_rate=[1e-3, 1e-2]), "learning_rate must be a single number"),
        (dict(start_accuracy=0.99), "start_accuracy must be in"),
    ],
)
def test_bad_settings_raise_one_line(kwargs, match):
    with pytest.raises(PgrpoSimError, match=match):
        lm.config(**kwargs)


@pytest.mark.parametrize("max_steps, run_steps", [(None, 4), (4, 100)])
def test_optimizer_is_hf_adamw_with_clipping_and_schedule(max_steps, run_steps):
    """Three steps of `make_optimizer` against HF's AdamW written out in NumPy: global-norm clip (optax's g·c/‖g‖),
    bias-corrected Adam, decoupled weight decay on matrices only, a linear schedule with one warm-up step (HF's
    factor 0 at step 0) decaying to 0 at optimiser step 4: the run's own length, or `max_steps` (TRL's) when the
    simulated run is longer. float64 both: 1e-12."""
    config = lm.config(
        learning_rate=0.1, weight_decay=0.1, max_grad_norm=0.5, lr_scheduler_type="linear", warmup_steps=1,
        adam_beta1=0.8, adam_beta2=0.9, adam_epsilon=1e-3, max_steps=max_steps,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(2, 3)), "b": rng.normal(size=3)}
    grads = [{"w": rng.normal(size=(2, 3)), "b": rng.normal(size=3)} for _ in range(3)]
    optimizer = make_optimizer(config, run_steps=run_steps)
    state, got, update = optimizer.init(params), params, jax.jit(optimizer.update)  # one program, not one per op
    for g in grads:
        updates, state = update(g, state, got)
        got = jax.tree.map(lambda p, u: p + u, got, updates)
    want, m, v = dict(params), {k: 0.0 for k in params}, {k: 0.0 for k in params}
    for t, g in enumerate(grads, start=1):
        norm = np.sqrt(sum(np.sum(x**2) for x in g.values()))
        scale = min(1.0, 0.5 / norm)
        lr = 0.1 * (0.0 if t == 1 else (4 - (t - 1)) / (4 - 1))  # HF linear: warm-up 1, decay to 0 at step 4
        for k in params:
            gk = g[k] * scale
            m[k] = 0.8 * m[k] + 0.2 * gk
            v[k] = 0.9 * v[k] + 0.1 * gk**2
            adam = (m[k] / (1 - 0.8**t)) / (np.sqrt(v[k] / (1 - 0.9**t)) + 1e-3)
            want[k] = want[k] - lr * (adam + (0.1 * want[k] if k == "w" else 0.0))
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-15)


def _demonstrated(config, steps=60):
    """A start that earns some reward (so advantages and gradients are not 0): Adam on the cross-entropy of the
    task's full solutions, a few steps from a random policy."""
    spec = config.task
    optimizer = optax.adam(1e-2)

    @jax.jit
    def step(params, state, key):
        prompts, _ = task_prompts(spec, key, 64)
        demos = solutions(spec, prompts, jnp.full(64, spec.operands))

        def cross_entropy(params):
            logp, _ = jax.vmap(completion_logps, in_axes=(None, 0, 0, None))(params, prompts, demos, 1.0)
            mask = response_mask(spec, demos)
            return -jnp.sum(logp * mask) / jnp.sum(mask)

        updates, state = optimizer.update(jax.grad(cross_entropy)(params), state)
        return optax.apply_updates(params, updates), state

    params = init_policy(config.policy, jax.random.key(0))
    state = optimizer.init(params)
    for key in jax.random.split(jax.random.key(1), steps):
        params, state = step(params, state, key)
    return params


@pytest.fixture(scope="module")
def tiny_run():
    config = lm.config(**TINY, num_iterations=2, steps_per_generation=2, beta=0.04, learning_rate=1e-2)
    start = _demonstrated(config)
    return config, start, lm.simulate(config, 4, seeds=2, key=1, start=start)


@pytest.mark.slow
def test_run_read_outs(tiny_run):
    _config, _start, result = tiny_run
    assert set(result.readouts) == set(READOUTS)
    for name, value in result.readouts.items():
        assert value.shape == (2, 4), name
    r = {name: np.asarray(value) for name, value in result.readouts.items()}
    assert np.all(np.isnan(r["eval_accuracy"][:, 1::2])) and np.all(np.isfinite(r["eval_accuracy"][:, ::2]))
    assert np.all((r["reward"] >= 0) & (r["reward"] <= 1)) and np.all(r["completions/mean_length"] <= 8)
    assert np.all(np.any(r["reward"] > 0, axis=1))  # the demonstrated start earns some reward in each run
    # a rollout with a group of unequal rewards has nonzero advantages and gradient; after one, the policy has left
    # the start and k3 (≥ 0) against it is positive
    informative = r["frac_reward_zero_std"] < 1
    assert np.all(informative.any(axis=1)) and np.all(r["grad_norm"][informative] > 0)
    assert np.all(r["kl"] >= 0) and np.all(r["kl"][np.cumsum(informative, axis=1) - informative > 0] > 0)
    assert np.all(r["entropy"] > 0)
    assert np.any(r["clip_ratio/region_mean"] > 0)  # 2 × 2 steps per rollout move ratios past the clip
    assert not np.any(result.diverged) and np.all(result.diverged_step == -1)
    # seeds differ: their rollouts are independent
    assert not np.allclose(r["completions/mean_length"][0], r["completions/mean_length"][1])


@pytest.mark.slow
def test_a_diverged_run_reads_nan_and_keeps_its_parameters():
    """A start with a NaN weight diverges at step 0: read-outs NaN from step 1 on, parameters frozen there."""
    config = lm.config(**TINY)
    start = init_policy(config.policy, jax.random.key(0))
    broken = eqx.tree_at(lambda p: p.unembed, start, start.unembed.at[0, 0].set(jnp.nan))
    result = lm.simulate(config, 3, seeds=1, start=broken)
    assert bool(result.diverged[0]) and int(result.diverged_step[0]) == 0
    for name, value in result.readouts.items():
        assert np.all(np.isnan(np.asarray(value)[0, 1:])), name
    for got, want in zip(jax.tree.leaves(result.params), jax.tree.leaves(broken), strict=True):
        np.testing.assert_array_equal(got[0], want)


@pytest.mark.slow
def test_vmap_over_hyperparameters_equals_separate_runs():
    """Two learning rates in one vmapped program equal each run alone (same key), to float32 rounding of
    differently batched matrix products (1e-5 on rewards in [0, 1] after 3 steps)."""
    config = lm.config(**TINY)
    run = lm.make_run(config, 3, _demonstrated(config))
    rates = jnp.asarray([1e-3, 3e-2], jnp.float32)
    stacked = jax.vmap(lambda lr: config.replace(learning_rate=lr))(rates)
    both = jax.jit(jax.vmap(run, in_axes=(0, None)))(stacked, jax.random.key(3))
    for i, lr in enumerate(rates):
        alone = jax.jit(run)(config.replace(learning_rate=lr), jax.random.key(3))
        np.testing.assert_allclose(both.readouts["loss"][i], alone.readouts["loss"], rtol=1e-4, atol=1e-5)
    assert not np.allclose(both.readouts["grad_norm"][0, 1:], both.readouts["grad_norm"][1, 1:])


@pytest.mark.slow
def test_epochs_are_traced_one_program_equals_separate_runs(backend_compiles):
    """1, 2 and 3 epochs per rollout (num_iterations, traced: a loop of traced length) in one vmapped program equal
    each run alone, to float32 rounding of differently batched matrix products grown by a few AdamW steps (whose
    normalised updates amplify tiny gradient differences): 1e-3 relative, far below the O(1) change one epoch more or
    less makes; and the three configurations share one compiled program."""
    config = lm.config(**TINY, learning_rate=1e-2)
    run = lm.make_run(config, 3, _demonstrated(config))
    epochs = jnp.asarray([1, 2, 3], jnp.int32)
    stacked = jax.vmap(lambda e: config.replace(num_iterations=e))(epochs)
    together = jax.jit(jax.vmap(run, in_axes=(0, None)))(stacked, jax.random.key(3))
    alone = jax.jit(run)
    backend_compiles.clear()
    for i, e in enumerate(epochs):
        single = alone(config.replace(num_iterations=e), jax.random.key(3))
        for name in ("loss", "grad_norm", "clip_ratio/region_mean"):
            np.testing.assert_allclose(together.readouts[name][i], single.readouts[name], rtol=1e-3, atol=1e-5)
    assert backend_compiles.count("jit(run)") == 1, backend_compiles  # one for every number of epochs
    region = np.asarray(together.readouts["clip_ratio/region_mean"])
    assert np.all(region[0] == 0) and np.any(region[2] > 0)  # one epoch is on-policy (ρ = 1); three move ρ


def test_reward_spread_is_what_trl_logs():
    """reward_std and frac_reward_zero_std as TRL's GRPOTrainer computes them (torch's std is unbiased): the mean of
    the groups' stds with group scaling, the batch's std with batch scaling; exact up to float32 rounding."""
    from pgrpo_sim.models.grpo import ADVANTAGES

    groups = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]], np.float32)
    for kind in ("std", "mean", "rloo"):
        spread, zero = reward_spread(jnp.asarray(groups), jnp.int32(ADVANTAGES.index(kind)))
        np.testing.assert_allclose(spread, np.std(groups, axis=1, ddof=1).mean(), rtol=1e-6)
        assert float(zero) == pytest.approx(1 / 3)
    spread, zero = reward_spread(jnp.asarray(groups), jnp.int32(ADVANTAGES.index("batch")))
    np.testing.assert_allclose(spread, np.std(groups, ddof=1), rtol=1e-6)
    assert float(zero) == 0.0
    assert float(reward_spread(jnp.ones((2, 4)), jnp.int32(ADVANTAGES.index("batch")))[1]) == 1.0


def test_a_derivative_through_a_run_is_refused_in_one_line():
    """Rewards count sampled tokens: jax.grad would be a silent 0. Refused while tracing, before any run."""
    config = lm.config(width=8, heads=2, layers=1, operands=2, max_completion_length=8, prompts_per_step=2)
    start = init_policy(config.policy, jax.random.key(0))
    mean_reward = lambda lr: lm.simulate(config.replace(learning_rate=lr), 2, start=start).readouts["reward"].mean()
    with pytest.raises(PgrpoSimError, match="no derivative in its hyperparameters"):
        jax.grad(mean_reward)(1e-3)
    assert np.isfinite(float(mean_reward(1e-3)))  # the run itself is untouched
