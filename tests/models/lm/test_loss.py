"""The language-model level's GRPO loss against an independent NumPy reference of TRL's loss (float64, gradient
by hand), for every loss type, with and without clip, with β = 0 and β > 0, token- and sequence-level ratios."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.models.grpo import group_advantages
from pgrpo_sim.models.lm.loss import LOSS_TYPES, grpo_loss, loss_type_code

from .numpy_reference import trl_advantages, trl_loss_and_grad

G = 3
REWARDS = np.array([1, 0, 1, 0, 0, 1, 1, 1, 1], float)  # three groups; the last has equal rewards (A = 0)
LENGTHS = np.array([5, 3, 1, 4, 0, 2, 5, 5, 3])  # one completion with no token in the loss (TRL's clamp(min=1))
WIDTH = 5
ITEMS, STEPS_PER_GENERATION = 40.0, 2  # this mini-batch is one of 2 slices of a generation batch of 40 tokens
SCALE_KINDS = {"group": "std", "batch": "batch", "none": "mean"}  # TRL scale_rewards → models.grpo kind
CLIPS = {"clip": (0.2, 0.28), "no clip": (np.inf, np.inf)}


def _rollout():
    """A fixed rollout: per-token log-probabilities, masks and TRL's group advantages (float64)."""
    rng = np.random.default_rng(38)
    b = REWARDS.size
    mask = (np.arange(WIDTH) < LENGTHS[:, None]).astype(float)
    logp = -rng.uniform(0.05, 3.0, (b, WIDTH))
    old_logp = logp - rng.uniform(-0.6, 0.6, (b, WIDTH))
    ref_logp = logp - rng.uniform(-1.0, 1.0, (b, WIDTH))
    adv = trl_advantages(REWARDS, G, "group")
    return logp, old_logp, ref_logp, adv, mask


ROLLOUT = _rollout()


def _ratios_away_from_bounds():
    """Ratios (token and sequence level) keep ≥ 1e-3 from every clip bound, so float32 rounding cannot move a
    token across one (a kink of the loss)."""
    logp, old_logp, _, _, mask = ROLLOUT
    tokens = np.exp(logp - old_logp)[mask > 0]
    sequences = np.exp(((logp - old_logp) * mask).sum(1) / np.maximum(mask.sum(1), 1))
    bounds = np.array([0.8, 1.2, 1.28, 1.5])
    return min(np.abs(r[:, None] - bounds).min() for r in (tokens, sequences))


@jax.jit
def _jax_loss(logp, old_logp, ref_logp, adv, mask, code, eps_low, eps_high, beta, delta):
    """One compilation serves every loss type, clip and β (all traced); the two levels compile once each."""

    def both_levels(level):
        loss = lambda lp: grpo_loss(
            lp,
            old_logp,
            adv,
            mask,
            loss_type=code,
            epsilon=eps_low,
            epsilon_high=eps_high,
            delta=delta,
            beta=beta,
            ref_logp=ref_logp,
            num_items_in_batch=ITEMS,
            steps_per_generation=STEPS_PER_GENERATION,
            importance_sampling_level=level,
        )
        return jax.value_and_grad(loss, has_aux=True)(logp)

    return both_levels("token"), both_levels("sequence")


def _f32(*xs):
    return [np.asarray(x, np.float32) for x in xs]


def test_fixture_ratios_stay_off_the_clip_bounds():
    assert _ratios_away_from_bounds() > 1e-3


@pytest.mark.parametrize("scale_rewards", SCALE_KINDS)
def test_group_advantages_are_trls(scale_rewards):
    got = group_advantages(REWARDS.reshape(-1, G), SCALE_KINDS[scale_rewards], eps=1e-4).ravel()
    np.testing.assert_allclose(got, trl_advantages(REWARDS, G, scale_rewards), rtol=1e-12)  # float64 both


@pytest.mark.parametrize(
    "loss_type, clip, beta", list(itertools.product(LOSS_TYPES, CLIPS, (0.0, 0.04))), ids=lambda x: str(x)
)
def test_loss_and_gradient_match_numpy_reference(loss_type, clip, beta):
    """float32 loss and d loss / d logp against the float64 reference, token and sequence level. Tolerance: ≤ 45
    float32 terms of size ≤ ~3 (ratio ≤ e^0.6 times |A| ≤ 1.2, or k3 ≤ 1.7), each rounded at ε32 = 1.2e-7:
    ≤ 45 · 3 · 1.2e-7 ≈ 1.6e-5 absolute, so 2e-5; a wrong normaliser or branch is off by > 1e-3."""
    eps_low, eps_high = CLIPS[clip]
    logp, old_logp, ref_logp, adv, mask = ROLLOUT
    code = loss_type_code(loss_type)
    args = _f32(logp, old_logp, ref_logp, adv, mask, eps_low, eps_high, beta, np.inf)
    for level, ((loss, stats), grad) in zip(("token", "sequence"), _jax_loss(*args[:5], code, *args[5:]), strict=True):
        want_loss, want_grad, want_clip = trl_loss_and_grad(
            logp, old_logp, ref_logp, adv, mask, loss_type=loss_type, eps_low=eps_low, eps_high=eps_high, beta=beta,
            level=level, items=ITEMS, steps_per_generation=STEPS_PER_GENERATION,
        )  # fmt: skip
        assert loss.dtype == grad.dtype == np.float32
        np.testing.assert_allclose(loss, want_loss, rtol=0, atol=2e-5, err_msg=level)
        np.testing.assert_allclose(grad, want_grad, rtol=0, atol=2e-5, err_msg=level)
        # clip counts are exact fractions: the ratios keep 1e-3 from every bound (see the fixture test)
        np.testing.assert_allclose(
            [stats.clip_low, stats.clip_high, stats.clip_region], want_clip, rtol=0, atol=1e-6, err_msg=level
        )
        assert np.isnan(stats.entropy)


def test_clip_binds_in_the_fixture():
    """The comparison above would not see a wrong clip if no token were clipped: some are, on both sides."""
    logp, old_logp, ref_logp, adv, mask = ROLLOUT
    _, _, (low, high, _) = trl_loss_and_grad(
        logp, old_logp, ref_logp, adv, mask, loss_type="bnpo", eps_low=0.2, eps_high=0.28, beta=0.0, level="token",
        items=ITEMS, steps_per_generation=STEPS_PER_GENERATION,
    )  # fmt: skip
    assert low > 0 and high > 0


def test_two_sided_clip_delta_matches_reference():
    """TRL's δ caps the ratio of the unclipped term: with δ = 1.5 the negative-advantage tokens with ρ > 1.5
    lose their gradient (tolerance as above)."""
    logp, old_logp, ref_logp, adv, mask = ROLLOUT
    args = _f32(logp, old_logp, ref_logp, adv, mask, 0.2, 0.2, 0.0, 1.5)
    (loss, _), grad = _jax_loss(*args[:5], loss_type_code("dapo"), *args[5:])[0]
    want_loss, want_grad, _ = trl_loss_and_grad(
        logp, old_logp, ref_logp, adv, mask, loss_type="dapo", eps_low=0.2, eps_high=0.2, beta=0.0, level="token",
        items=ITEMS, steps_per_generation=STEPS_PER_GENERATION, delta=1.5,
    )  # fmt: skip
    _, no_delta_grad, _ = trl_loss_and_grad(
        logp, old_logp, ref_logp, adv, mask, loss_type="dapo", eps_low=0.2, eps_high=0.2, beta=0.0, level="token",
        items=ITEMS, steps_per_generation=STEPS_PER_GENERATION,
    )  # fmt: skip
    assert np.abs(want_grad - no_delta_grad).max() > 1e-3  # δ binds somewhere in the fixture
    np.testing.assert_allclose(loss, want_loss, rtol=0, atol=2e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=2e-5)


@functools.partial(jax.jit, static_argnames="level")
@functools.partial(jax.value_and_grad)
def _f64_loss(logp, code, level):
    old_logp, ref_logp, adv, mask = ROLLOUT[1:]
    return grpo_loss(
        logp, old_logp, adv, mask, loss_type=code, epsilon=0.2, epsilon_high=0.28, beta=0.04, ref_logp=ref_logp,
        num_items_in_batch=ITEMS, steps_per_generation=STEPS_PER_GENERATION, importance_sampling_level=level,
    )[0]  # fmt: skip


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "cispo"])
def test_jax_gradient_matches_finite_differences(loss_type):
    """jax.grad of the float64 loss against central differences at a few tokens (h = 1e-6: truncation h² ~ 1e-12,
    rounding 1e-16/h ~ 1e-10, so 1e-8), with clip, β > 0 and sequence-level ratios on."""
    logp, code = ROLLOUT[0], loss_type_code(loss_type)
    for level in ("token", "sequence"):
        grad = _f64_loss(jnp.asarray(logp), code, level)[1]
        for i, t in [(0, 0), (3, 2), (6, 4), (8, 1)]:
            h = np.zeros_like(logp)
            h[i, t] = 1e-6
            numeric = (_f64_loss(logp + h, code, level)[0] - _f64_loss(logp - h, code, level)[0]) / 2e-6
            np.testing.assert_allclose(grad[i, t], numeric, rtol=0, atol=1e-8, err_msg=f"{level} {i},{t}")


def test_on_policy_gradient_is_advantage_times_score():
    """At π = π_old (TRL num_iterations = 1) ρ = 1, nothing is clipped, and the bnpo gradient is A·m / Σm."""
    logp, _, _, adv, mask = ROLLOUT
    (loss, stats), grad = jax.value_and_grad(lambda lp: grpo_loss(lp, lp, adv, mask, loss_type="bnpo"), has_aux=True)(
        jnp.asarray(logp)
    )
    np.testing.assert_allclose(grad, -adv[:, None] * mask / mask.sum(), rtol=1e-12)
    np.testing.assert_allclose(loss, -(adv[:, None] * mask).sum() / mask.sum(), rtol=1e-12, atol=1e-15)
    assert stats.clip_region == 0


def test_read_outs_kl_and_entropy_are_masked_token_means():
    logp, old_logp, ref_logp, adv, mask = ROLLOUT
    entropy = np.abs(logp) + 0.5
    _, stats = grpo_loss(logp, old_logp, adv, mask, ref_logp=ref_logp, entropy=entropy)
    x = ref_logp - logp
    np.testing.assert_allclose(stats.kl, ((np.exp(x) - x - 1) * mask).sum() / mask.sum(), rtol=1e-12)
    np.testing.assert_allclose(stats.entropy, (entropy * mask).sum() / mask.sum(), rtol=1e-12)
    _, stats = grpo_loss(logp, old_logp, adv, mask)  # no reference policy: no KL read-out
    assert np.isnan(stats.kl)


def test_loss_type_codes_vmap():
    """The loss type is a traced code (its index in LOSS_TYPES): one vmapped call computes every loss type, each
    equal to its own call."""
    logp, old_logp, _, adv, mask = ROLLOUT
    one = lambda c: grpo_loss(
        logp, old_logp, adv, mask, loss_type=c, num_items_in_batch=ITEMS, steps_per_generation=STEPS_PER_GENERATION
    )[0]
    batched = jax.vmap(one)(jnp.arange(len(LOSS_TYPES), dtype=jnp.int32))
    single = [jax.jit(one)(loss_type_code(name)) for name in LOSS_TYPES]
    np.testing.assert_allclose(batched, single, rtol=1e-12)
    assert len(set(np.round(np.asarray(single), 12))) == len(LOSS_TYPES)  # the normalisers differ on this rollout
    assert [int(loss_type_code(name)) for name in LOSS_TYPES] == list(range(len(LOSS_TYPES)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(loss_type="ppo"), "loss_type must be one of"),
        (dict(loss_type=7), "loss_type"),
        (dict(epsilon=-0.1), "epsilon must be >= 0"),
        (dict(delta=1.0), "delta must be > 1"),
        (dict(beta=0.1), "beta > 0 needs ref_logp"),
        (dict(importance_sampling_level="seq"), "importance_sampling_level must be one of"),
        (dict(steps_per_generation=0), "steps_per_generation must be >= 1"),
    ],
)
def test_bad_arguments_raise_one_line(kwargs, match):
    logp, old_logp, _, adv, mask = ROLLOUT
    with pytest.raises(PgrpoSimError, match=match):
        grpo_loss(logp, old_logp, adv, mask, **kwargs)


def test_advantages_must_be_one_per_completion():
    logp, old_logp, _, adv, mask = ROLLOUT
    with pytest.raises(PgrpoSimError, match="advantages must have shape"):
        grpo_loss(logp, old_logp, adv[:-1], mask)
