"""The LM level's modular-sum task: prompt distribution, held-out set, verifier and masks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.models import lm

SPEC = lm.TaskSpec(modulus=7, operands=3, max_response_len=12, eval_size=20)


def _operands(prompts):
    return np.asarray(prompts)[:, :-1] - lm.DIGIT0


def test_training_prompts_are_never_held_out_and_answers_are_the_sum():
    prompts, answers = lm.task_prompts(SPEC, jax.random.key(0), 4000)
    assert prompts.shape == (4000, SPEC.prompt_len) and prompts.dtype == jnp.int32 and answers.dtype == jnp.int32
    ops = _operands(prompts)
    assert np.all(np.asarray(prompts)[:, -1] == lm.QUERY) and ops.min() == 0 and ops.max() == SPEC.modulus - 1
    np.testing.assert_array_equal(answers, ops.sum(-1) % SPEC.modulus)
    assert not np.asarray(lm.is_held_out(SPEC, ops)).any()
    # every answer occurs: 4000 draws over 7 answers, each expected ~570 (a missing one is a bug, not chance)
    assert len(np.unique(answers)) == SPEC.modulus


def test_eval_prompts_are_a_fixed_distinct_held_out_set():
    prompts, answers = lm.eval_prompts(SPEC)
    ops = _operands(prompts)
    assert prompts.shape == (SPEC.eval_size, SPEC.prompt_len)
    assert np.asarray(lm.is_held_out(SPEC, ops)).all()
    assert len(np.unique(ops, axis=0)) == len(ops)
    np.testing.assert_array_equal(answers, ops.sum(-1) % SPEC.modulus)
    np.testing.assert_array_equal(lm.eval_prompts(SPEC)[0], prompts)
    # a spec whose held-out set is smaller than eval_size gets all of it: 2 operands mod 3 have 1 held-out prompt
    small = lm.TaskSpec(modulus=3, operands=2, max_response_len=8)
    assert lm.eval_prompts(small)[0].shape == (1, 3)


def test_solutions_of_every_length_earn_the_reward():
    prompts, answers = lm.task_prompts(SPEC, jax.random.key(1), 8)
    for steps in range(SPEC.operands + 1):
        done = lm.solutions(SPEC, prompts, jnp.full(8, steps))
        assert np.all(np.asarray(lm.task_reward(SPEC, done, answers)) == 1)
        np.testing.assert_array_equal(lm.response_mask(SPEC, done).sum(-1), 2 * steps + 4)
    full = np.asarray(lm.solutions(SPEC, prompts, jnp.full(8, SPEC.operands)))
    # the reasoning is operand, running sum, … : checked against the prompt
    ops = _operands(prompts)
    np.testing.assert_array_equal(full[:, 0 : 2 * SPEC.operands : 2] - lm.DIGIT0, ops)
    np.testing.assert_array_equal(full[:, 1 : 2 * SPEC.operands : 2] - lm.DIGIT0, np.cumsum(ops, -1) % SPEC.modulus)


def _one(tokens):
    return jnp.asarray([tokens + [lm.PAD] * (SPEC.max_response_len - len(tokens))], jnp.int32)


@pytest.mark.parametrize(
    "tokens, formatted, right",
    [
        ([9, 2, 8, 3, 1], True, True),  # scratch digits, <ans> 3 </ans> EOS (answer 3 is token DIGIT0 + 3 = 8)
        ([2, 8, 3, 1], True, True),
        ([2, 8, 3, 1, 9, 9, 2], True, True),  # tokens after EOS are ignored
        ([2, 9, 3, 1], True, False),  # wrong answer
        ([2, 8, 3], False, False),  # no EOS: truncated
        ([2, 8, 1], False, False),  # no </ans>
        ([8, 3, 1], False, False),  # no <ans>
        ([4, 2, 8, 3, 1], False, False),  # a non-digit (=) in the scratch
        ([0, 2, 8, 3, 1], False, False),  # PAD before EOS
        ([2, 8, 8, 3, 1], False, False),  # two answer digits
        ([2, 2, 3, 1], False, False),  # the answer is not a digit
        ([1, 2, 8, 3, 1], False, False),  # EOS first
    ],
)
def test_verifier_reads_format_and_answer(tokens, formatted, right):
    completion = _one(tokens)
    assert bool(lm.format_ok(SPEC, completion)[0]) is formatted
    reward = lm.task_reward(SPEC, completion, jnp.asarray([3]))
    assert reward.dtype == jnp.float32 and float(reward[0]) == float(right)


def test_response_mask_covers_up_to_the_first_eos():
    mask = lm.response_mask(SPEC, jnp.concatenate([_one([5, 1, 6, 1]), _one([5, 6])]))
    assert mask.dtype == jnp.float32
    np.testing.assert_array_equal(mask[0], [1, 1] + [0] * (SPEC.max_response_len - 2))
    np.testing.assert_array_equal(mask[1], np.ones(SPEC.max_response_len))  # no EOS: truncated, every token counts


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(modulus=1), "modulus must be in"),
        (dict(modulus=60), "modulus must be in"),
        (dict(operands=2.5), "operands sets array shapes"),
        (dict(max_response_len=3), "max_response_len must be in"),
        (dict(eval_size=True), "eval_size sets array shapes"),
    ],
)
def test_spec_refuses_bad_sizes(kwargs, message):
    with pytest.raises(PgrpoSimError, match=message):
        lm.TaskSpec(**kwargs)
