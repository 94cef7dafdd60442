"""The softmax-bandit GRPO environment: exactness of expected mode, reductions, sampling, gradients."""

import inspect
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.test_util import check_grads

import pgrpo_sim as ps
from pgrpo_sim.models.bandit import (
    binomial_mean,
    expected_group_std,
    expected_loss,
    learning_rate_factor,
    on_policy_grad,
    sampled_loss,
)
from pgrpo_sim.models.bandit.renamed import current_names

# an off-policy point: θ ≠ θ_old far enough that several samples are clipped
THETA_OLD = np.array([[0.2, -0.4, 0.5]])
THETA = THETA_OLD + np.array([[0.35, -0.3, -0.05]])
REF = np.array([[0.0, 0.3, -0.2]])


@jax.jit  # one program per static structure, not an eager one per operation
def _group_grads(config, theta, theta_old, arms, rewards):
    """∇_θ of the loss of each group (arms, rewards of shape (groups, G))."""
    one = lambda a, r: jax.grad(lambda t: sampled_loss(t, theta_old, a[None], r[None], config)[0])(theta)
    return jax.vmap(one)(arms, rewards)


_expected_grad = jax.jit(jax.grad(lambda theta, old, config: expected_loss(theta, old, config)[0]))
"""∇_θ of the expected loss at θ, samples from θ_old (jitted: one program per static structure)."""


def _enumerated_grad(config, theta, theta_old):
    """Gradient of the group loss averaged over every possible group (N^G arm sequences × 2^G reward draws)."""
    n, g = config.n_arms, config.num_generations
    arms = np.array(list(itertools.product(range(n), repeat=g)))
    outcomes = np.array(list(itertools.product([1.0, 0.0], repeat=g)))
    arms_all = np.repeat(arms, len(outcomes), axis=0)
    rewards_all = np.tile(outcomes, (len(arms), 1))
    pi_old = np.asarray(jax.nn.softmax(theta_old))[0]
    r = np.asarray(config.rewards)[0]
    p_reward = np.where(rewards_all == 1, r[arms_all], 1 - r[arms_all])
    weight = np.prod(pi_old[arms_all] * p_reward, axis=1)
    grads = _group_grads(config, theta, theta_old, arms_all, rewards_all)
    assert np.isclose(weight.sum(), 1.0)
    return np.tensordot(weight, np.asarray(grads), axes=1)


ENUMERATED = [(3, a, k) for a in ("std", "mean", "rloo") for k in ("k1", "k2", "k3", "exact")] + [
    (4, "std", "k3"),
    (4, "rloo", "exact"),
]


@pytest.mark.parametrize("num_generations, advantage, kl", ENUMERATED)
def test_expected_mode_equals_average_over_every_group(num_generations, advantage, kl):
    """Bernoulli rewards, off-policy ratios with asymmetric clipping and dual clip: float64 agreement."""
    config = ps.bandit.config(
        rewards=[0.9, 0.3, 0.0],
        init_logits=REF[0],
        beta=0.3,
        num_generations=num_generations,
        advantage=advantage,
        kl=kl,
        epsilon=0.1,
        epsilon_high=0.15,
        dual_clip=1.5,
    )
    exact = _expected_grad(THETA, THETA_OLD, config)
    np.testing.assert_allclose(exact, _enumerated_grad(config, THETA, THETA_OLD), rtol=1e-10, atol=1e-13)


@pytest.mark.slow
@pytest.mark.parametrize("advantage", ["std", "mean", "rloo"])
@pytest.mark.parametrize("kl,kl_clamp", [("k2", None), ("k3", None), ("k3", 0.05), ("exact", None)])
def test_on_policy_fast_path_equals_general_expectation(advantage, kl, kl_clamp):
    config = ps.bandit.config(
        rewards=[[0.9, 0.3, 0.0], [1.0, 0.0, 0.5]],
        init_logits=REF[0],
        beta=0.3,
        num_generations=5,
        advantage=advantage,
        kl=kl,
        kl_clamp=kl_clamp,
        dual_clip=1.5,
    )
    theta = np.concatenate([THETA, THETA_OLD])
    g_fast, fast_stats = on_policy_grad(theta, config)
    g_slow, slow_stats = jax.grad(expected_loss, has_aux=True)(theta, theta, config)
    np.testing.assert_allclose(g_fast, g_slow, rtol=1e-12, atol=1e-15)
    for a, b in zip(fast_stats, slow_stats, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
@pytest.mark.parametrize("advantage", ["std", "rloo"])
@pytest.mark.parametrize("kl,kl_clamp", [("k1", None), ("k3", None), ("k3", 0.05), ("exact", None)])
@pytest.mark.parametrize("n_arms", [3, 12])  # per-arm selects (N <= 8) and gathers (N > 8)
def test_sampled_on_policy_fast_path_equals_autodiff(advantage, kl, kl_clamp, n_arms):
    """The written-out sampled gradient at ρ = 1 equals jax.grad of the clipped-surrogate loss, draws included."""
    from pgrpo_sim.models.bandit import draw_rollout, sampled_on_policy_grad

    rng = np.random.default_rng(n_arms)
    config = ps.bandit.config(
        rewards=rng.uniform(0, 1, (2, n_arms)),
        init_logits=rng.normal(size=(2, n_arms)),
        beta=0.3,
        num_generations=6,
        advantage=advantage,
        kl=kl,
        kl_clamp=kl_clamp,
        dual_clip=1.5,
    )
    theta = config.init_logits + rng.normal(size=(2, n_arms))
    arms, rewards = draw_rollout(config, theta, jax.random.key(n_arms))
    g_fast, fast_stats = sampled_on_policy_grad(theta, arms, rewards, config)
    g_slow, slow_stats = jax.grad(sampled_loss, has_aux=True)(theta, theta, arms, rewards, config)
    np.testing.assert_allclose(g_fast, g_slow, rtol=1e-12, atol=1e-15)
    for a, b in zip(fast_stats, slow_stats, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_one_expected_update_with_momentum_matches_enumeration():
    """Two heavy-ball steps of `simulate` equal two steps built by hand from enumerated gradients."""
    config = ps.bandit.config(
        rewards=[1.0, 0.0, 0.0], init_logits=REF[0], learning_rate=0.4, momentum=0.8, beta=0.2, num_generations=3
    )
    run = ps.simulate(config, 2)
    opt = optax.sgd(0.4, momentum=0.8)
    theta, state = REF, opt.init(REF)
    for _ in range(2):
        upd, state = opt.update(_enumerated_grad(config, theta, theta), state)
        theta = theta + upd
    np.testing.assert_allclose(run.final_logits, theta, rtol=1e-10, atol=1e-13)


def _scalar_logit_map(p, p_ref, beta, num_generations, eps=1e-6):
    """Independent scalar form (on-policy, std advantages, k3): Δx/η_eff = p(1−p)(α₊ − α₋) − β(p − p_ref)."""
    from math import comb

    g = num_generations
    k = np.arange(g + 1)
    s = np.sqrt(k * (g - k) / (g * (g - 1)))
    a_pos, a_neg = (1 - k / g) / (s + eps), -(k / g) / (s + eps)
    j = np.arange(g)
    binom = np.array([comb(g - 1, int(i)) for i in j]) * p**j * (1 - p) ** (g - 1 - j)
    return p * (1 - p) * (binom @ a_pos[j + 1] - binom @ a_neg[j]) - beta * (p - p_ref)


@pytest.mark.parametrize("momentum", [0.0, 0.7])
def test_class_symmetric_reduction_to_scalar_logit(momentum):
    n, c, p_ref, learning_rate, beta, g = 5, 2, 0.3, 0.2, 0.4, 6
    config = ps.bandit.config(
        n_arms=n, n_correct=c, p_ref=p_ref, learning_rate=learning_rate, momentum=momentum, beta=beta, num_generations=g
    )
    p_n_arm = np.asarray(ps.simulate(config, 60).reward)
    eta_eff = learning_rate * n / (c * (n - c))
    x = np.log(p_ref / (1 - p_ref))
    v, ps_scalar = 0.0, [p_ref]
    for _ in range(60):
        p = 1 / (1 + np.exp(-x))
        v = momentum * v + _scalar_logit_map(p, p_ref, beta, g)
        x = x + eta_eff * v
        ps_scalar.append(1 / (1 + np.exp(-x)))
    np.testing.assert_allclose(p_n_arm, ps_scalar, rtol=1e-11)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_class_symmetric_reduction_holds_off_policy():
    """With refresh lag and clipping the N-arm dynamics still equal the 2-arm ones at η·N/(2c(N−c))."""
    common = dict(p_ref=0.25, momentum=0.5, beta=0.2, num_generations=5, lag_model="refresh_fresh", lag=3, epsilon=0.05)
    many = ps.simulate(ps.bandit.config(n_arms=7, n_correct=3, learning_rate=0.3, **common), 40)
    two = ps.simulate(ps.bandit.config(n_arms=2, n_correct=1, learning_rate=0.3 * 7 / (2 * 3 * 4), **common), 40)
    np.testing.assert_allclose(many.reward, two.reward, rtol=1e-11)
    assert np.max(many.clip_frac) > 0  # clipping was active
    # from an asymmetric start the reduction does not hold: richer arms of a class grow faster
    asym = ps.bandit.config(
        rewards=[1, 1, 0, 0],
        init_logits=[np.log(1.5), np.log(0.5), 0.0, 0.0],
        learning_rate=0.3,
        beta=0.2,
        num_generations=5,
    )
    sym = ps.bandit.config(
        rewards=[1, 1, 0, 0], init_logits=[0.0, 0.0, 0.0, 0.0], learning_rate=0.3, beta=0.2, num_generations=5
    )
    assert np.isclose(ps.simulate(asym, 1).reward[0], ps.simulate(sym, 1).reward[0])
    assert abs(ps.simulate(asym, 30).reward[-1] - ps.simulate(sym, 30).reward[-1]) > 1e-3


def _reference_run(config, steps):
    """Python-loop reference of the lag models, one expected-loss gradient per step (its pieces jitted: run op by op
    they took most of the test's time)."""
    opt = ps.bandit.make_optimizer(config)
    loss_grad = jax.jit(jax.grad(lambda t, b: expected_loss(t, b, config)[0]))
    update = jax.jit(opt.update)
    theta = np.asarray(config.init_logits)
    state, history, old = opt.init(theta), [theta], theta
    for n in range(steps):
        lag = int(config.lag)
        if config.lag_model == "refresh_fresh" and n % max(lag, 1) == 0:
            old = theta
        at, behaviour = {
            "none": (theta, theta),
            "refresh_fresh": (theta, old),
            "stale": (history[max(n - lag, 0)], history[max(n - lag, 0)]),
        }[config.lag_model]
        upd, state = update(loss_grad(at, behaviour), state, theta)
        theta = np.asarray(theta + upd)
        history.append(theta)
    return theta


@pytest.mark.parametrize("lag_model, optimizer", [("refresh_fresh", "sgd"), ("stale", "nesterov"), ("stale", "adam")])
def test_lag_models_match_python_loop_reference(lag_model, optimizer):
    config = ps.bandit.config(
        n_arms=3,
        p_ref=0.3,
        learning_rate=0.3,
        momentum=0.6,
        beta=0.1,
        num_generations=4,
        lag_model=lag_model,
        lag=3,
        optimizer=optimizer,
    )
    run = ps.simulate(config, 12)
    np.testing.assert_allclose(run.final_logits, _reference_run(config, 12), rtol=1e-10)
    if lag_model == "refresh_fresh":  # at refresh steps π_old = π: ratio exactly 1, nothing clipped
        assert np.all(run.ratio_max[::3] == 1.0) and np.all(run.clip_frac[::3] == 0.0)
        assert np.all(run.ratio_max[1::3][:-1] != 1.0)


@pytest.mark.slow
def test_sampled_one_step_update_is_unbiased():
    config = ps.bandit.config(
        rewards=[0.9, 0.3, 0.0],
        init_logits=[0.0, 0.2, 0.4],
        learning_rate=0.5,
        beta=0.2,
        num_generations=4,
        advantage="rloo",
    )
    s = 20000
    run = ps.simulate(config, 1, mode="sampled", seeds=s, key=jax.random.key(7))
    delta = np.asarray(run.final_logits[:, 0] - config.init_logits[0])
    expected = np.asarray(ps.simulate(config, 1).final_logits[0] - config.init_logits[0])
    z = (delta.mean(0) - expected) / (delta.std(0) / np.sqrt(s))
    assert np.all(np.abs(z) < 4), z
    # the zero-advantage fraction observed equals p^G + (1-p)^G on average
    zf = np.asarray(run.zero_adv_frac[:, 0])
    assert abs(zf.mean() - float(ps.simulate(config, 1).zero_adv_frac[0])) < 4 * zf.std() / np.sqrt(s)


@pytest.mark.slow
def test_sampled_mean_tracks_expected_curve_at_small_step():
    """η = 0.03, G = 4, 1000 seeds: seed-mean p_t within 4 standard errors of the expected curve."""
    config = ps.bandit.config(p_ref=0.2, beta=0.5, num_generations=4, learning_rate=0.03)
    expected = np.asarray(ps.simulate(config, 1000).reward)
    sampled = np.asarray(ps.simulate(config, 1000, mode="sampled", seeds=1000, key=jax.random.key(3)).reward)
    t = np.array([300, 500, 700, 1000])
    z = (sampled[:, t].mean(0) - expected[t]) / (sampled[:, t].std(0) / np.sqrt(sampled.shape[0]))
    print("\nsmall-step z-scores at t =", t, np.round(z, 2))
    assert np.all(np.abs(z) < 4), z


def _late_drift(learning_rate, num_generations, seeds=4000):
    """Seed-mean minus expected-mode p over the last half of 60/η steps, with its standard error."""
    config = ps.bandit.config(p_ref=0.2, beta=0.5, num_generations=num_generations, learning_rate=learning_rate)
    steps = round(60 / learning_rate)
    expected = np.asarray(ps.simulate(config, steps).reward)[steps // 2 :]
    sampled = np.asarray(ps.simulate(config, steps, mode="sampled", seeds=seeds, key=jax.random.key(11)).reward)
    per_seed = (sampled[:, steps // 2 :] - expected).mean(1)
    return per_seed.mean(), per_seed.std() / np.sqrt(seeds)


@pytest.mark.slow
def test_noise_induced_drift_shrinks_with_step_and_group_size():
    big, small_eta, big_g = _late_drift(0.6, 4), _late_drift(0.3, 4), _late_drift(0.6, 16)
    print(
        f"\nlate drift: η=0.6 G=4 {big[0]:.2e}±{big[1]:.1e}; η=0.3 G=4 {small_eta[0]:.2e}±{small_eta[1]:.1e};"
        f" η=0.6 G=16 {big_g[0]:.2e}±{big_g[1]:.1e}"
    )
    assert big[0] < -4 * big[1]  # the drift is real at large η (and pulls the seed-mean below the expected curve)
    for smaller in (small_eta, big_g):
        assert abs(big[0]) - abs(smaller[0]) > 4 * np.hypot(big[1], smaller[1])


def _fixed_point(num_generations, beta=0.5, p_ref=0.2):
    """p* of the expected 2-arm dynamics: bisection on the sign of the expected logit drive."""
    config = ps.bandit.config(p_ref=p_ref, beta=beta, num_generations=num_generations)

    @jax.jit
    def drive(x):
        theta = jnp.stack([x, jnp.zeros_like(x)])[None]
        g = jax.grad(lambda t: expected_loss(t, theta, config)[0])(theta)
        return g[0, 1] - g[0, 0]

    lo, hi = np.log(p_ref / (1 - p_ref)), 20.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if drive(mid) > 0 else (lo, mid)
    return 1 / (1 + np.exp(-0.5 * (lo + hi)))


@pytest.mark.slow
def test_fixed_point_tends_to_large_group_closed_form():
    beta, p_ref = 0.5, 0.2
    closed = (1 + 2 * beta**2 * p_ref + np.sqrt(1 + 4 * beta**2 * p_ref * (1 - p_ref))) / (2 * (1 + beta**2))
    gaps = {g: _fixed_point(g) - closed for g in (4, 256, 1024, 4096)}
    print("\np*(G) - closed form:", {g: f"{v:.2e}" for g, v in gaps.items()})
    assert abs(gaps[1024]) < 1e-3
    # 1/G convergence: quadrupling G divides the gap by 4 (± 10%)
    assert 3.6 < gaps[256] / gaps[1024] < 4.4 and 3.6 < gaps[1024] / gaps[4096] < 4.4
    assert abs(gaps[4]) > 0.1  # the closed form fails at small G


@pytest.mark.slow
def test_grad_of_late_reward_matches_finite_differences():
    base = dict(learning_rate=0.15, momentum=0.5, beta=0.3)

    def outcome(learning_rate, momentum, beta):
        config = ps.bandit.config(
            n_arms=3, p_ref=0.2, num_generations=4, learning_rate=learning_rate, momentum=momentum, beta=beta
        )
        return jnp.mean(ps.simulate(config, 300).reward[-100:])

    grads = jax.grad(outcome, argnums=(0, 1, 2))(*base.values())
    for i, name in enumerate(base):
        h = 1e-5
        plus, minus = dict(base), dict(base)
        plus[name] += h
        minus[name] -= h
        fd = (outcome(**plus) - outcome(**minus)) / (2 * h)
        # O(h²) truncation ~1e-10 and rounding ~1e-16/1e-5: rtol 1e-4 is loose for float64
        np.testing.assert_allclose(grads[i], fd, rtol=1e-4, err_msg=name)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
@pytest.mark.parametrize("advantage", ["std", "mean", "rloo"])
@pytest.mark.parametrize("kl", ["k1", "k2", "k3", "exact"])
def test_loss_gradients_match_finite_differences(advantage, kl):
    config = ps.bandit.config(
        rewards=[0.9, 0.3, 0.0],
        init_logits=REF[0],
        beta=0.3,
        num_generations=4,
        advantage=advantage,
        kl=kl,
        kl_clamp=10.0,
        epsilon=0.1,
        epsilon_high=0.15,
        dual_clip=1.5,
    )
    check_grads(
        lambda t: expected_loss(t, THETA_OLD, config)[0], (THETA,), order=1, modes=["rev"], atol=1e-6, rtol=1e-6
    )
    arms, rewards = np.array([[0, 1, 2, 0]]), np.array([[1.0, 0.0, 0.0, 0.0]])
    check_grads(
        lambda t: sampled_loss(t, THETA_OLD, arms, rewards, config)[0],
        (THETA,),
        order=1,
        modes=["rev"],
        atol=1e-6,
        rtol=1e-6,
    )


def test_second_call_does_not_recompile(backend_compiles):
    config = ps.bandit.config(p_ref=0.3, learning_rate=0.2, num_generations=5)
    ps.simulate(config, 50)
    backend_compiles.clear()
    ps.simulate(config.replace(learning_rate=0.05, momentum=0.9, beta=0.4), 50)
    ps.simulate(ps.bandit.config(p_ref=0.6, learning_rate=0.7, num_generations=5, epsilon=0.3), 50)
    assert not [name for name in backend_compiles if "_simulate" in name], backend_compiles


@pytest.mark.slow
def test_vmap_over_hyperparameters_and_divergence_flag():
    """A configuration whose logits blow up is flagged and NaN-masked; its neighbours run on."""
    # without KL a one-hot policy feels no force: θ coasts to η·g/(1 − μ), past the float64 maximum at η = 1e308
    config = ps.bandit.config(p_ref=0.2, momentum=0.9, num_generations=4)
    etas = jnp.array([0.1, 1e308])
    runs = jax.vmap(lambda e: ps.simulate(config.replace(learning_rate=e), 30))(etas)
    assert not runs.diverged[0] and runs.diverged[1]
    step = int(runs.diverged_step[1])
    assert 0 <= step < 30
    assert np.all(np.isfinite(runs.reward[0])) and np.all(np.isnan(runs.reward[1, step + 1 :]))
    assert np.all(np.isfinite(runs.final_logits[1]))  # frozen at the last finite state
    assert int(runs.diverged_step[0]) == -1


@pytest.mark.slow
def test_true_reward_and_output_shapes():
    config = ps.bandit.config(
        rewards=[1.0, 1.0, 0.0], true_rewards=[1.0, 0.0, 0.0], n_prompts=2, learning_rate=0.3, num_generations=4
    )
    run = ps.simulate(config, 20, mode="sampled", seeds=3)
    assert run.reward.shape == run.true_reward.shape == (3, 21) and run.final_logits.shape == (3, 2, 3)
    assert np.all(run.true_reward <= run.reward + 1e-12)
    exp = ps.simulate(config, 20)
    assert exp.reward.shape == (21,) and exp.diverged.shape == ()
    assert ps.simulate(ps.bandit.config(), 5).true_reward is None


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_arms=1), "n_arms"),
        (dict(n_correct=2), "n_correct"),
        (dict(p_ref=1.0), "p_ref"),
        (dict(num_generations=1), "num_generations"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(momentum=1.0), "momentum"),
        (dict(beta=-0.1), "beta"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(dual_clip=1.0), "dual_clip"),
        (dict(lag_model="stale", lag=-1), "lag"),
        (dict(lag=2), "lag"),
        (dict(rewards=[0.5, 1.5]), "rewards"),
        (dict(learning_rate=float("nan")), "learning_rate"),
        (dict(advantage="gae"), "advantage"),
        (dict(advantage=7), "advantage"),
        (dict(lag_model="stale", lag=1.5), "lag"),
        (dict(lr_scheduler_type="linear"), "decay_steps"),  # a decay needs its end (default: η 0 from step 1)
        (dict(lr_scheduler_type="cosine", warmup_steps=20, decay_steps=10), "warmup_steps"),
        (dict(init_logits=[0.0, 1.0], p_ref=0.3), "p_ref"),  # one start, not two
        (dict(difficulty=(1.0, 2.0), n_prompts=2, init_logits=[0.0, 1.0]), "difficulty"),
        (dict(rewards=[[1.0, 0.0], [0.0, 1.0]], n_prompts=3), "n_prompts"),
    ],
)
def test_bad_config_raises(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ps.bandit.config(**kwargs)


@pytest.mark.parametrize(
    "old, new",
    [("eta", "learning_rate"), ("group_size", "num_generations"), ("clip", "epsilon"), ("clip_high", "epsilon_high"),
     ("grad_clip", "max_grad_norm"), ("lr_schedule", "lr_scheduler_type")],
)  # fmt: skip
def test_former_names_are_refused_naming_trls(old, new):
    """The bandit took TRL's names (issue 48): a former one is one line naming its replacement, not a TypeError."""
    with pytest.raises(ValueError, match=f"takes {new} \\(TRL's name\\), not {old}$"):
        ps.bandit.config(**{old: 0.2})
    with pytest.raises(ValueError, match="unknown setting 'etta'"):
        ps.bandit.config(etta=0.2)
    assert new in inspect.signature(ps.bandit.config).parameters


def test_current_names_renames_keys_and_grid_axes_and_leaves_trls_names_alone():
    """A record written under the former names (an output folder's settings, a sweep's spec) reads in TRL's."""
    old = {"eta": 0.1, "grid": ["eta=0.05,0.1", "clip=0.1,0.2", "momentum=0.5", "group-size=4", "lag-model=stale"],
           "base": {"group_size": 8}, "set": ["note=eta"], "mode": "sampled", "out": "/a-b=c"}  # fmt: skip
    assert current_names(old) == {
        "learning_rate": 0.1,
        "grid": ["learning_rate=0.05,0.1", "epsilon=0.1,0.2", "momentum=0.5", "num_generations=4", "lag_model=stale"],
        "out": "/a-b=c",
        "base": {"num_generations": 8},
        "set": ["note=eta"],
        "mode": "sampled",
    }
    assert current_names(current_names(old)) == current_names(old)
    assert old["grid"][0] == "eta=0.05,0.1"  # not changed in place


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["expected", "sampled"])
def test_advantage_kinds_share_one_program_and_rloo_is_rescaled_mean(mode, backend_compiles):
    """The advantage kind is a traced code: std, mean and rloo runs share one compiled `simulate`. RLOO advantages
    are the mean-centred ones times c = G/(G − 1), and the clipped surrogate is linear in A > 0 scalings, so an
    rloo run at (η, β) is the mean run at (c·η, β/c) step for step (heavy-ball momentum included; same key in
    sampled mode): equal up to rounding, 1e-12 over 60 steps."""
    c = 8 / 7
    base = dict(learning_rate=0.3, momentum=0.5, beta=0.2, epsilon=0.1, lag_model="refresh_fresh", lag=3)
    runs = {
        kind: ps.simulate(ps.bandit.config(advantage=kind, **base), 60, mode=mode, seeds=3)
        for kind in ("std", "mean", "rloo")
    }
    assert sum("simulate" in name for name in backend_compiles) == 1, backend_compiles
    scaled = ps.simulate(
        ps.bandit.config(**base | dict(advantage="mean", learning_rate=0.3 * c, beta=0.2 / c)), 60, mode=mode, seeds=3
    )
    np.testing.assert_allclose(runs["rloo"].reward, scaled.reward, rtol=1e-12)
    assert all(np.isfinite(run.reward).all() for run in runs.values())
    assert not np.allclose(runs["std"].reward, runs["mean"].reward, rtol=1e-3)


def test_expected_mode_refuses_batch_advantages_and_reports_a_traced_one_as_diverged():
    """Batch-scaled advantages have no expected-mode form: refused by name when the kind is concrete; a traced
    code (inside a caller's jit) cannot be refused, so its run is NaN from the first update: diverged."""
    config = ps.bandit.config(advantage="batch")
    with pytest.raises(ps.PgrpoSimError, match="expected mode has no"):
        ps.simulate(config, 3)
    with pytest.raises(ps.PgrpoSimError, match="expected mode has no"):
        ps.predict(config)
    out = jax.jit(lambda c: ps.bandit.run(c, jax.random.key(0), 3, "expected"))(config)
    assert bool(out.diverged) and int(out.diverged_step) == 0


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
@pytest.mark.parametrize("mode", ["expected", "sampled"])
def test_readouts_keep_only_what_is_asked(mode):
    """`readouts` drops the other per-step read-outs (None) without moving the kept ones: another compiled program,
    so XLA may fuse differently (1e-13 over 40 steps); the final state and divergence flags are always there."""
    config = ps.bandit.config(learning_rate=0.4, momentum=0.6, beta=0.1, epsilon=0.1, lag_model="refresh_fresh", lag=2)
    full = ps.simulate(config, 40, mode=mode, seeds=3)
    kept = ps.simulate(config, 40, mode=mode, seeds=3, readouts=("group_reward_std", "reward"))
    for name in ps.bandit.STEP_READOUTS:
        if name in ("reward", "group_reward_std"):
            np.testing.assert_allclose(getattr(kept, name), getattr(full, name), rtol=1e-13, atol=1e-15)
        else:
            assert getattr(kept, name) is None, name
    np.testing.assert_allclose(kept.final_logits, full.final_logits, rtol=1e-13)
    assert np.array_equal(kept.diverged, full.diverged)
    with pytest.raises(ValueError, match="readouts must be one of"):
        ps.simulate(config, 5, readouts=("rewards",))


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, lag_model, steps",
    [
        ("expected", "none", 61),
        pytest.param("expected", "refresh", 40, marks=pytest.mark.slow),
        pytest.param("sampled", "refresh_fresh", 30, marks=pytest.mark.slow),
    ],
)
def test_checkpointed_run_equals_plain_run(mode, lag_model, steps):
    """`checkpoint=True` regroups the steps into blocks (61: whole blocks plus a plain tail; expected reuse runs
    by branches): the same rewards and reverse-mode derivative in η (1e-12: another compiled program, XLA may
    fuse differently). The reward alone keeps the four compilations short."""
    lag = 0 if lag_model == "none" else 2
    config = ps.bandit.config(learning_rate=0.4, momentum=0.6, beta=0.1, epsilon=0.1, lag_model=lag_model, lag=lag)

    def late(learning_rate, checkpoint):
        cfg = config.replace(learning_rate=learning_rate)
        run = ps.simulate(cfg, steps, mode=mode, seeds=3, readouts=("reward",), checkpoint=checkpoint)
        return run.reward[..., -10:].mean(), run.reward

    (_plain, curve), grad = jax.value_and_grad(late, has_aux=True)(jnp.float64(0.4), False)
    (_blocks, curve_blocks), grad_blocks = jax.value_and_grad(late, has_aux=True)(jnp.float64(0.4), True)
    np.testing.assert_allclose(curve_blocks, curve, rtol=1e-12, atol=1e-14)
    assert float(grad_blocks) == pytest.approx(float(grad), rel=1e-12, abs=1e-14)


def test_bad_simulate_arguments():
    config = ps.bandit.config()
    for kwargs, name in [
        (dict(steps=0), "steps"),
        (dict(steps=5, seeds=0), "seeds"),
        (dict(steps=5, mode="x"), "mode"),
    ]:
        with pytest.raises(ValueError, match=name):
            ps.simulate(config, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("means", [[0.9, 0.3, 0.0, 0.6], [0.9, 0.3, 0.0, 0.6, 1.0, 0.1, 0.5, 0.2, 0.7, 0.4, 0.8, 0.05]])
def test_draw_frequencies_match_policy_and_reward_means(means):
    """One uniform per sample gives arms ~ π_old and rewards ~ Bernoulli(r_arm) independently (4 SE), with
    per-arm selects (4 arms) and gathers (12 arms); 12 groups of `MAX_GROUP_SIZE` = 4096 samples."""
    from pgrpo_sim.models.bandit import draw_rollout

    n = len(means)
    config = ps.bandit.config(
        rewards=means, init_logits=np.linspace(0.5, -1.0, n), num_generations=ps.bandit.MAX_GROUP_SIZE
    )
    keys = jax.random.split(jax.random.key(5), 12)
    arms, rewards = jax.vmap(lambda k: draw_rollout(config, config.init_logits, k))(keys)
    arms, rewards = np.asarray(arms).ravel(), np.asarray(rewards).ravel()
    pi = np.asarray(jax.nn.softmax(config.init_logits[0]))
    freq = np.bincount(arms, minlength=n) / arms.size
    assert np.all(np.abs(freq - pi) < 4 * np.sqrt(pi * (1 - pi) / arms.size))
    for a, r in enumerate(means):
        hits = rewards[arms == a]
        assert abs(hits.mean() - r) <= 4 * np.sqrt(max(r * (1 - r), 1e-12) / hits.size) + 1e-12


@pytest.mark.parametrize("g", [2, 3, 5, 8])
def test_expected_group_std_by_enumeration(g):
    """E[unbiased std of G Bernoulli(p) rewards] against all 2^G reward vectors (float64 sums: 1e-12)."""
    outcomes = np.array(list(itertools.product([0.0, 1.0], repeat=g)))
    stds = outcomes.std(axis=1, ddof=1)
    for p in (0.03, 0.2, 0.5, 0.9):
        weights = p ** outcomes.sum(1) * (1 - p) ** (g - outcomes.sum(1))
        with jax.enable_x64(True):
            got = float(expected_group_std(g, jnp.float64(p)))
        assert got == pytest.approx(weights @ stds, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 15, 40, 61])
def test_binomial_mean_equals_sum_over_pmf(n):
    """Horner form of Σ_j B(j; n, p)·v_j against the explicit sum with math.comb, value and derivative
    (float64: 1e-12 relative; n = 61 takes the log-space branch), including p = 0, ½ (where the form
    switches from q^n to p^n) and 1."""
    values = np.random.default_rng(n).normal(size=(2, n + 1))
    j = np.arange(n + 1)
    choose = np.array([math.comb(n, i) for i in j], float)
    ps_ = np.array([0.0, 1e-3, 0.2, 0.5, 0.7, 0.999, 1.0])
    with jax.enable_x64(True):
        got = np.asarray(binomial_mean(n, jnp.asarray(ps_), values))
        slope = np.asarray(jax.vmap(jax.jacfwd(lambda p: binomial_mean(n, p, values)))(jnp.asarray(ps_[1:-1])))
    for p, row in zip(ps_, got, strict=True):
        pmf = choose * p**j * (1 - p) ** (n - j)
        np.testing.assert_allclose(row, values @ pmf, rtol=1e-12, atol=1e-12)
    for p, row in zip(ps_[1:-1], slope, strict=True):  # d/dp B(j; n, p) = B(j; n, p)·(j/p − (n − j)/(1 − p))
        dpmf = choose * p**j * (1 - p) ** (n - j) * (j / p - (n - j) / (1 - p))
        np.testing.assert_allclose(row, values @ dpmf, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 61])
def test_binomial_mean_derivatives_every_mode(n):
    """`binomial_mean`'s own derivative rule, float64: reverse mode equals forward mode (1e-13), the
    derivative in `values` is the pmf (linear: 1e-12), and the second derivative in p matches central
    differences of the first (step 1e-5: error O(h²) times the fourth derivative, ≪ 1e-6)."""
    values = np.random.default_rng(n).normal(size=(2, n + 1))
    choose = np.array([math.comb(n, i) for i in range(n + 1)], float)
    weights = jnp.array([1.0, -2.0])
    with jax.enable_x64(True):
        f = lambda p, v: jnp.sum(binomial_mean(n, p, v) * weights)
        for p in (0.2, 0.5, 0.83):
            p = jnp.float64(p)
            fwd = jax.jacfwd(f)(p, values)
            rev, by_values = jax.grad(f, argnums=(0, 1))(p, values)
            assert float(rev) == pytest.approx(float(fwd), rel=1e-13, abs=1e-13)
            pmf = choose * p ** np.arange(n + 1) * (1 - p) ** (n - np.arange(n + 1))
            np.testing.assert_allclose(np.asarray(by_values), np.outer(weights, pmf), rtol=1e-12, atol=1e-12)
            second = float(jax.grad(jax.grad(f))(p, values))
            h = 1e-5
            fd = (float(jax.grad(f)(p + h, values)) - float(jax.grad(f)(p - h, values))) / (2 * h)
            assert second == pytest.approx(fd, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("kind", ["constant_with_warmup", "linear", "cosine"])
def test_learning_rate_schedule_matches_hugging_face(kind):
    """The factor on η against transformers' lr_lambda formulas (get_*_schedule_with_warmup), written out here."""
    warmup, total = 4, 17

    def hf(step):
        if step < warmup:
            return step / max(1, warmup)
        if kind == "constant_with_warmup":
            return 1.0
        progress = (step - warmup) / max(1, total - warmup)
        return max(0.0, 1.0 - progress) if kind == "linear" else max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    config = ps.bandit.config(lr_scheduler_type=kind, warmup_steps=warmup, decay_steps=total)
    with jax.enable_x64(True):
        got = [float(learning_rate_factor(config.replace(learning_rate=jnp.float64(0.1)), n)) for n in range(total + 1)]
    np.testing.assert_allclose(got, [hf(n) for n in range(total + 1)], atol=1e-12)  # HF cosine rises again after


def test_scheduled_run_takes_scaled_steps():
    """One on-policy SGD step at factor f moves the logits by f·η·∇ (the first warm-up step moves nothing)."""
    config = ps.bandit.config(learning_rate=0.3, lr_scheduler_type="linear", warmup_steps=2, decay_steps=10)
    plain = ps.bandit.config(learning_rate=0.3)
    run, ref = ps.simulate(config, 3), ps.simulate(plain, 1)
    assert float(run.reward[1]) == float(run.reward[0])  # factor 0 at step 0
    # step 1 at factor 1/2 from the unchanged start is half the plain first step in logit space
    logit = lambda p: np.log(p / (1 - p))
    half = (logit(float(run.reward[2])) - logit(float(run.reward[1]))) / (logit(float(ref.reward[1])) - logit(0.2))
    assert half == pytest.approx(0.5, rel=1e-5)


@pytest.mark.parametrize("kl", ["k1", "k3"])
def test_kl_readout_is_finite_when_an_arm_probability_underflows(kl):
    """E_π[k1] = E_π[k3] = KL(π‖π_ref): the on-policy read-out equals the exact KL of the policy (`kl_ref`) even when
    a huge step sends an arm's probability to 0 (summed as π·k3 that gave 0·∞ = NaN in a run not diverged)."""
    config = ps.bandit.config(learning_rate=1e6, momentum=0.99, beta=0.5, kl=kl)
    run = ps.simulate(config, 20)
    assert not bool(run.diverged) and float(np.min(run.entropy)) == 0.0  # a probability did underflow
    np.testing.assert_allclose(run.kl, run.kl_ref, rtol=1e-12, atol=0)
