"""The LM level's transformer policy: KV-cache sampling agrees with the teacher-forced pass, is causal, vmaps over
prompts and over parameter stacks, and draws from softmax(logits / T)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.models import lm

SPEC = lm.TaskSpec(modulus=5, operands=2, max_response_len=8)
SHAPE = lm.task_policy_shape(SPEC, width=16, layers=2, heads=2)
NEW = SPEC.max_response_len
LOGP_ATOL = 1e-5
"""Log-probabilities here are O(1–10) nats; the cached and teacher-forced passes sum the same float32 terms in
other orders (width 16), ~1e-6 apart: 1e-5 is float32 rounding, a wrong position or mask is ≥ 1e-2."""


def _params(seed):
    """Random parameters with O(1) weights, so the logits are far from uniform and positions matter."""
    params = lm.init_policy(SHAPE, jax.random.key(seed))
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed + 100), len(leaves))
    noisy = [leaf + 0.4 * jax.random.normal(k, leaf.shape, leaf.dtype) for leaf, k in zip(leaves, keys, strict=True)]
    return jax.tree.unflatten(tree, noisy)


PARAMS = _params(0)
PROMPTS = lm.task_prompts(SPEC, jax.random.key(1), 16)[0]
KEYS = jax.random.split(jax.random.key(2), 16)

sample_batch = jax.jit(jax.vmap(lm.sample, in_axes=(None, 0, 0, None, None)), static_argnums=4)
logits_batch = jax.jit(jax.vmap(lm.token_logits, in_axes=(None, 0)))
logps_batch = jax.jit(jax.vmap(lm.completion_logps, in_axes=(None, 0, 0, None)))
sample_runs = jax.jit(
    jax.vmap(jax.vmap(lm.sample, in_axes=(None, 0, 0, None, None)), in_axes=(0, None, 0, 0, None)), static_argnums=4
)


@functools.cache
def _sampled(temperature):
    return sample_batch(PARAMS, PROMPTS, KEYS, temperature, NEW)


def test_params_are_float32_also_under_x64():
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(PARAMS))
    tokens, logp = _sampled(1.0)
    assert tokens.dtype == jnp.int32 and logp.dtype == jnp.float32 and tokens.shape == (16, NEW)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sample_logps_equal_the_teacher_forced_pass(temperature):
    tokens, logp = _sampled(temperature)
    again, entropy = logps_batch(PARAMS, PROMPTS, tokens, temperature)
    mask = np.asarray(lm.response_mask(SPEC, tokens))
    assert 0.2 < mask.mean() < 1  # some completions end early: the masking after EOS is exercised
    np.testing.assert_allclose(np.asarray(again) * mask, np.asarray(logp), atol=LOGP_ATOL)
    assert np.all(np.asarray(entropy) > 0) and np.all(np.asarray(entropy) <= np.log(SHAPE.vocab) + 1e-5)


def test_tokens_after_eos_are_pad_with_zero_logp():
    tokens, logp = map(np.asarray, _sampled(1.0))
    after = np.asarray(lm.response_mask(SPEC, tokens)) == 0
    assert after.any()
    assert np.all(tokens[after] == lm.PAD) and np.all(logp[after] == 0) and np.all(logp[~after] < 0)


def test_greedy_follows_the_argmax_of_the_teacher_forced_logits():
    tokens, logp = map(np.asarray, sample_batch(PARAMS, PROMPTS, KEYS, 0.0, NEW))
    assert np.all(logp == 0)
    logits = np.asarray(logits_batch(PARAMS, jnp.concatenate([PROMPTS, tokens], axis=1)))
    predicted = np.argmax(logits[:, SPEC.prompt_len - 1 : -1], -1)
    mask = np.asarray(lm.response_mask(SPEC, tokens)) == 1
    np.testing.assert_array_equal(predicted[mask], tokens[mask])


def test_token_logits_are_causal():
    sequence = jnp.concatenate([PROMPTS[0], _sampled(1.0)[0][0]])
    changed = sequence.at[-3].set((sequence[-3] + 1) % SHAPE.vocab)
    before, after = logits_batch(PARAMS, jnp.stack([sequence, changed]))
    np.testing.assert_array_equal(before[:-3], after[:-3])
    assert not np.allclose(before[-3:], after[-3:])


@pytest.mark.slow
def test_vmap_over_runs_equals_each_run_alone():
    stack = jax.tree.map(lambda a, b: jnp.stack([a, b]), PARAMS, _params(7))
    keys = jnp.stack([KEYS, jax.random.split(jax.random.key(3), 16)])
    temperatures = jnp.asarray([1.0, 0.5], jnp.float32)
    tokens, logp = sample_runs(stack, PROMPTS, keys, temperatures, NEW)
    for run in range(2):
        one = jax.tree.map(lambda leaf, run=run: leaf[run], stack)
        alone = sample_batch(one, PROMPTS, keys[run], float(temperatures[run]), NEW)
        np.testing.assert_array_equal(tokens[run], alone[0])
        np.testing.assert_allclose(logp[run], alone[1], atol=LOGP_ATOL)
    assert not np.array_equal(tokens[0], tokens[1])


@pytest.mark.slow
def test_first_token_frequencies_follow_the_tempered_softmax():
    rounds, temperature = 64, 2.5
    prompts = jnp.broadcast_to(PROMPTS[0], PROMPTS.shape)
    keys = jax.random.split(jax.random.key(5), (rounds, len(KEYS)))
    first = np.concatenate([np.asarray(sample_batch(PARAMS, prompts, k, temperature, NEW)[0][:, 0]) for k in keys])
    logits = np.asarray(lm.token_logits(PARAMS, PROMPTS[0])[-1], np.float64)
    want = np.exp(logits / temperature) / np.exp(logits / temperature).sum()
    seen, n = np.bincount(first, minlength=SHAPE.vocab) / len(first), len(first)

    def within(p):  # 5 binomial standard errors per token (+1e-3 for p ~ 0): a right sampler misses 1 in 10⁶
        return np.abs(seen - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-3

    assert within(want).all()
    assert not within(np.exp(logits) / np.exp(logits).sum()).all()  # T = 1 would fail: the test sees the temperature


def test_a_new_temperature_does_not_recompile(backend_compiles):
    _sampled(1.0)
    backend_compiles.clear()
    jax.block_until_ready(sample_batch(PARAMS, PROMPTS, KEYS, 0.3, NEW))
    assert backend_compiles == []


def test_bad_sizes_are_refused():
    with pytest.raises(PgrpoSimError, match="heads must divide width"):
        lm.PolicyShape(vocab=10, max_len=8, width=10, heads=4)
    with pytest.raises(PgrpoSimError, match="must fit max_len"):
        lm.sample(PARAMS, PROMPTS[0], KEYS[0], 1.0, SHAPE.max_len)
