"""GRPO pieces against the verl/TRL test vectors of docs/conventions.md (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps

REWARDS = np.array([[1, 0, 0, 1], [1, 1, 1, 0]], float)
ADV_STD = np.array([0.866024, -0.866024, -0.866024, 0.866024, 0.499999, 0.499999, 0.499999, -1.499997])
ADV_MEAN = np.array([0.5, -0.5, -0.5, 0.5, 0.25, 0.25, 0.25, -0.75])
LOGP_OLD = np.log([0.3, 0.2, 0.2, 0.3, 0.25, 0.25, 0.25, 0.25])
LOGP = LOGP_OLD + np.array([0.5, -0.4, 0.1, 0.2, -0.1, 0.3, 0.0, 3.0])


def test_advantages_match_reference_vectors():
    # reference values are printed to 6 decimals
    np.testing.assert_allclose(ps.bandit.group_advantages(REWARDS, "std").ravel(), ADV_STD, atol=1e-6)
    np.testing.assert_allclose(ps.bandit.group_advantages(REWARDS, "mean").ravel(), ADV_MEAN, atol=1e-12)
    # RLOO by its definition: r_i minus the mean of the other G-1 rewards
    g = REWARDS.shape[-1]
    loo = REWARDS - (REWARDS.sum(-1, keepdims=True) - REWARDS) / (g - 1)
    np.testing.assert_allclose(ps.bandit.group_advantages(REWARDS, "rloo"), loo, atol=1e-12)
    # all-equal groups give zero; TRL's eps = 1e-4 changes the scale as (s + eps)
    assert np.all(ps.bandit.group_advantages(np.ones((3, 5)), "std") == 0)
    s = np.std(REWARDS[0], ddof=1)
    np.testing.assert_allclose(ps.bandit.group_advantages(REWARDS[0], "std", eps=1e-4), (REWARDS[0] - 0.5) / (s + 1e-4))


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_advantage_gradient_of_an_all_equal_group_is_finite():
    """At an all-equal group the std is the tip of a cone; with its subgradient 0 there, ∂A_i/∂r_j =
    (δ_ij − 1/G)/eps for "std" (and "batch" when the whole batch is equal), exactly; it was NaN for every kind (∞·0
    from √0 reached all of them through the selects), and for a whole batch holding one such group. Away from the
    tip the gradient still matches central differences (h 1e-6, float64: rounding ~1e-16/h, 1e-10)."""
    g, eps = 4, 1e-2
    centring = np.eye(g) - 1 / g
    want = dict(std=centring / eps, batch=centring / eps, mean=centring, rloo=centring * g / (g - 1))
    for kind, jac_want in want.items():
        jac = jax.jacrev(lambda r, k=kind: ps.bandit.group_advantages(r, k, eps))(jnp.full(g, 0.5))
        np.testing.assert_allclose(jac, jac_want, rtol=1e-12)
    batch = jnp.asarray([[0.5] * g, [1.0, 0.0, 0.0, 1.0]])  # one all-equal group beside an ordinary one
    for kind in ps.bandit.ADVANTAGES:
        assert np.all(np.isfinite(jax.jacrev(lambda r, k=kind: ps.bandit.group_advantages(r, k, eps))(batch))), kind
    r = REWARDS[0] * 0.3 + 0.1
    jac = jax.jacrev(lambda x: ps.bandit.group_advantages(x, "std", eps))(jnp.asarray(r))
    h = 1e-6
    fd = np.stack(
        [
            (ps.bandit.group_advantages(r + h * e, "std", eps) - ps.bandit.group_advantages(r - h * e, "std", eps))
            / (2 * h)
            for e in np.eye(g)
        ],
        axis=-1,
    )
    np.testing.assert_allclose(jac, fd, atol=1e-6)


def test_advantage_codes_are_traced_kinds(backend_compiles):
    """A kind's `advantage_code` gives its named formula in one compiled program for every kind, and under vmap
    over codes (a select of all kinds); same arithmetic, so only XLA's fusion may move a rounding (1e-14)."""
    rewards = jnp.asarray(np.vstack([REWARDS, np.ones((1, 4))]))
    advantages = jax.jit(ps.bandit.group_advantages)
    by_code = [advantages(rewards, ps.bandit.advantage_code(name)) for name in ps.bandit.ADVANTAGES]
    assert sum("group_advantages" in name for name in backend_compiles) == 1, backend_compiles
    vmapped = jax.vmap(ps.bandit.group_advantages, (None, 0))(rewards, jnp.arange(len(ps.bandit.ADVANTAGES)))
    for code, name in enumerate(ps.bandit.ADVANTAGES):
        named = ps.bandit.group_advantages(rewards, name)
        np.testing.assert_allclose(by_code[code], named, rtol=1e-14, atol=0)
        np.testing.assert_allclose(vmapped[code], named, rtol=1e-14, atol=0)
    assert [ps.bandit.advantage_code(name) for name in ps.bandit.ADVANTAGES] == list(range(len(ps.bandit.ADVANTAGES)))


def test_batch_scale_is_the_std_of_every_reward():
    """The batch std comes from the groups' sums of squares (Chan et al.'s pairwise update), not from a pass over
    every reward: it equals NumPy's two-pass std over the whole array, with leading batch axes, and for rewards
    offset by 1e3 with a 1e-3 spread (their own float64 rounding, 1e-13, is 1e-10 of the spread, so of the O(1)
    advantages: rtol 1e-8, atol 1e-9 where r − mean is near 0)."""
    rng = np.random.default_rng(0)
    for rewards in (rng.random((3, 5, 6)), 1e3 + 1e-3 * rng.random((4, 8))):
        centred = rewards - rewards.mean(-1, keepdims=True)
        want = centred / (np.std(rewards, ddof=1) + 1e-6)
        np.testing.assert_allclose(ps.bandit.group_advantages(rewards, "batch"), want, rtol=1e-8, atol=1e-9)


def test_clipped_surrogate_matches_verl_vector():
    def loss(logp, dual):
        return jnp.mean(ps.bandit.clipped_surrogate(logp, LOGP_OLD, ADV_STD, 0.2, 0.28, dual).loss)

    assert loss(LOGP, 3.0) == pytest.approx(0.298903, abs=1e-6)
    grad = jax.grad(loss)(LOGP, 3.0)
    np.testing.assert_allclose(grad, [0, 0, 0.119638, -0.132221, -0.056552, 0, -0.0625, 0], atol=1e-6)
    out = ps.bandit.clipped_surrogate(LOGP, LOGP_OLD, ADV_STD, 0.2, 0.28, 3.0)
    assert float(out.clipped.mean()) == pytest.approx(0.375)
    np.testing.assert_allclose(out.ratio, np.exp(LOGP - LOGP_OLD), rtol=1e-12)
    # TRL: no dual clip (None and +inf both disable it) and advantages with eps = 1e-4
    adv_trl = ps.bandit.group_advantages(REWARDS, "std", eps=1e-4).ravel()
    for off in (None, np.inf):
        surrogate = lambda lp, off=off: jnp.mean(
            ps.bandit.clipped_surrogate(lp, LOGP_OLD, adv_trl, 0.2, 0.28, off).loss
        )
        assert jax.grad(surrogate)(LOGP)[-1] == pytest.approx(3.76529, abs=1e-5)


def test_ratio_one_gives_policy_gradient():
    grad = jax.grad(lambda lp: jnp.sum(ps.bandit.clipped_surrogate(lp, LOGP_OLD, ADV_STD).loss))(LOGP_OLD)
    np.testing.assert_allclose(grad, -ADV_STD, rtol=1e-12)


def test_log_ratio_clamp():
    out = ps.bandit.clipped_surrogate(np.array([30.0]), np.array([0.0]), np.array([1.0]))
    assert float(out.ratio[0]) == pytest.approx(np.exp(20.0))


def test_kl_estimators_match_reference_vectors():
    d = np.array([0.8, -0.1, 0.4])
    k3 = ps.bandit.kl_estimate(d, np.zeros(3), "k3")
    np.testing.assert_allclose(k3, [0.249329, 0.005171, 0.070320], atol=1e-6)
    g = jax.grad(lambda lp: jnp.sum(ps.bandit.kl_estimate(lp, np.zeros(3), "k3")))(d)
    np.testing.assert_allclose(g, [0.55067, -0.10517, 0.32968], atol=1e-5)
    np.testing.assert_allclose(ps.bandit.kl_estimate(d, 0.0, "k1"), d)
    np.testing.assert_allclose(ps.bandit.kl_estimate(d, 0.0, "k2"), 0.5 * d**2)
    assert float(ps.bandit.kl_estimate(-15.0, 0.0, "k3", clamp=10.0)) == 10.0
    assert float(ps.bandit.kl_estimate(-15.0, 0.0, "k3")) == pytest.approx(np.exp(15) - 16)


def test_expected_k3_gradient_is_pi_minus_pi_ref():
    """On-policy E_{a~π}[∇_θ k3(a)] = π − π_ref (the gradient of KL(π_ref‖π)), by exact enumeration."""
    z, z_ref = jnp.array([0.3, -1.0, 0.8, 0.1]), jnp.array([0.0, 0.5, -0.2, 0.4])
    pi, pi_ref = jax.nn.softmax(z), jax.nn.softmax(z_ref)
    est = lambda th: jnp.sum(pi * ps.bandit.kl_estimate(jax.nn.log_softmax(th), jnp.log(pi_ref), "k3"))
    np.testing.assert_allclose(jax.grad(est)(z), pi - pi_ref, atol=1e-12)


def test_entropy_and_kl_divergence():
    assert float(ps.bandit.entropy(np.array([1.0, 2.0, 0.5]))) == pytest.approx(0.905959, abs=1e-6)
    z, z_ref = np.array([0.3, -1.0, 0.8]), np.array([0.0, 0.5, -0.2])
    p, q = np.exp(z) / np.exp(z).sum(), np.exp(z_ref) / np.exp(z_ref).sum()
    assert float(ps.bandit.kl_divergence(z, z_ref)) == pytest.approx(np.sum(p * np.log(p / q)), rel=1e-12)


def test_entropy_and_kl_of_a_logit_gap_beyond_the_float_range():
    """Finite float32 logits ±3e38 give log π = −∞ for the losing arm (its gap overflows): 0·log 0 counts as 0, so
    the policy is one-hot with entropy 0 and KL = −log π_ref(winner) — not NaN in a run that has not diverged —
    and gradients stay finite."""
    z = jnp.array([3e38, -3e38], jnp.float32)
    z_ref = jnp.array([0.0, np.log(4.0)], jnp.float32)  # π_ref = (0.2, 0.8)
    assert float(ps.bandit.entropy(z)) == 0.0
    assert float(ps.bandit.kl_divergence(z, z_ref)) == pytest.approx(-np.log(0.2), rel=1e-6)
    assert np.all(np.isfinite(jax.grad(lambda t: ps.bandit.entropy(t) + ps.bandit.kl_divergence(t, z_ref))(z)))


def test_bad_input():
    with pytest.raises(ValueError, match="advantage"):
        ps.bandit.group_advantages(REWARDS, "gauss")
    with pytest.raises(ValueError, match=r"advantage .*ADVANTAGES"):
        ps.bandit.group_advantages(REWARDS, 4)
    with pytest.raises(ValueError, match="group size"):
        ps.bandit.group_advantages(np.ones((3, 1)))
    with pytest.raises(ValueError, match="dual_clip"):
        ps.bandit.clipped_surrogate(LOGP, LOGP_OLD, ADV_STD, dual_clip=1.0)
    with pytest.raises(ValueError, match="kl"):
        ps.bandit.kl_estimate(LOGP, LOGP_OLD, "k4")
