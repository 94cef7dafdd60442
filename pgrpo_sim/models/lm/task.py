"""The language-model level's synthetic verifiable task: the sum of `operands` digits modulo `modulus`.

A prompt is k operand digits a_1 … a_k and a query token `=`. A correct response writes its reasoning as running
sums, one step per operand — the operand a_i, then the partial sum s_i = (s_{i−1} + a_i) mod m — and then the answer
between markers: `a_1 s_1 a_2 s_2 … a_k s_k <ans> s_k </ans> EOS` (2k + 4 tokens). The verifier, like a real
one, reads only the format and the answer: the reward is 1 when the response (up to its first EOS) is digits (any
number, any values), then `<ans>`, the right answer digit, `</ans>`, EOS; 0 otherwise (also without EOS, i.e.
truncated at `max_response_len`).

Why this task: prompts have different right answers (so one constant answer is a collapse, at chance 1/m);
the reward needs a format (so format collapse and immediate EOS are possible) and an end token (so runaway to the
length cap is possible); and the reasoning has a natural length that helps: each written step is one addition
mod m of two tokens in sight, while skipping steps leaves the remaining additions to be done in one position, which
a small transformer does poorly. So accuracy depends on length, as with chain of thought, and demonstrations of
varied length (pretrain.py) leave a broad distribution over lengths for GRPO to move. Hardness is set by `operands`
(k, the work per answer) and `modulus` (m, chance 1/m).

Held-out prompts: a prompt belongs to the evaluation set when Σ_i 3^(k−i)·a_i ≡ 0 (mod 11): about 1 in 11 of the
m^k prompts (so m^k ≳ 11·eval_size gives a full evaluation set). `task_prompts` never draws one: its last operand
(weight 1) is drawn uniformly among the values that keep the prompt out, so the training distribution is uniform
over the first k−1 operands and near uniform over the set.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ...base.checks import check_range
from ...base.errors import PgrpoSimError

PAD = 0
"""Padding token id: after EOS in a completion, and nowhere in a prompt."""
EOS = 1
"""End-of-sequence token id."""
ANS_OPEN = 2
"""Answer-open marker token id (`<ans>`)."""
ANS_CLOSE = 3
"""Answer-close marker token id (`</ans>`)."""
QUERY = 4
"""The `=` token that ends every prompt."""
DIGIT0 = 5
"""Token id of digit 0; digit d is `DIGIT0 + d`."""
MAX_VOCAB = 64
"""Largest vocabulary (modulus ≤ MAX_VOCAB − DIGIT0 = 59): a small model's whole point is a small vocabulary."""
HOLDOUT_MOD = 11
"""A prompt is held out for evaluation when its weighted operand sum is ≡ 0 mod this prime (~9 % of prompts)."""
MAX_OPERANDS = 10
"""Most operands (prompts of at most 11 tokens); a full solution of 2k + 4 tokens fits the longest response, 32."""
ENUMERATE_LIMIT = 2**20
"""Prompt spaces up to this size are enumerated to pick the evaluation set; larger ones are sampled."""
EVAL_SEED = 20260101
"""Fixed seed of the evaluation-set choice: the same spec gives the same evaluation prompts everywhere."""


def check_sizes(module: eqx.Module, limits: Mapping[str, tuple[int, int]]) -> None:
    """Raise `PgrpoSimError` unless each named static field of `module` is an integer in its [low, high].

    Args:
        module: the module whose fields are checked (an `eqx.Module`, in its `__check_init__`).
        limits: field name → (low, high), both inclusive.

    Raises:
        PgrpoSimError: a named field is not an integer (bool included) or is out of its range.
    """
    for name, (low, high) in limits.items():
        value = getattr(module, name)
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise PgrpoSimError(f"{name} sets array shapes: it must be an integer in [{low}, {high}], got {value!r}")
        check_range(name, value, low, high, integer=True)


class TaskSpec(eqx.Module):
    """Static sizes of the modular-sum task (all shapes; no traced leaves).

    Attributes:
        modulus: m, digits 0 … m−1; integer in [2, 59] (vocabulary m + 5 tokens).
        operands: k, digits per prompt; integer in [1, 10].
        max_response_len: longest completion, in tokens; integer in [4, 32] (a full solution takes 2k + 4).
        eval_size: number of held-out evaluation prompts (fewer when the held-out set is smaller); integer in
            [1, 65536].

    Raises:
        PgrpoSimError: on construction, when a size is not an integer in its range.
    """

    modulus: int = eqx.field(static=True, default=10)
    operands: int = eqx.field(static=True, default=4)
    max_response_len: int = eqx.field(static=True, default=16)
    eval_size: int = eqx.field(static=True, default=256)

    def __check_init__(self):
        limits = dict(modulus=(2, MAX_VOCAB - DIGIT0), operands=(1, MAX_OPERANDS), max_response_len=(4, 32))
        check_sizes(self, limits | dict(eval_size=(1, 2**16)))

    @property
    def prompt_len(self) -> int:
        """Tokens per prompt: the operands and `=`."""
        return self.operands + 1

    @property
    def vocab_size(self) -> int:
        """Token ids 0 … vocab_size − 1: PAD, EOS, `<ans>`, `</ans>`, `=`, digits."""
        return DIGIT0 + self.modulus

    @property
    def solution_len(self) -> int:
        """Tokens of a full, correct response: two per operand, then `<ans>`, answer, `</ans>`, EOS."""
        return 2 * self.operands + 4


def _holdout_weights(spec: TaskSpec, xp=jnp):
    """3^(k−i) mod 11 for operand i = 1 … k: never 0 mod 11 and mixing all operands; the last weight is 1."""
    return xp.asarray([pow(3, spec.operands - 1 - i, HOLDOUT_MOD) for i in range(spec.operands)])


def is_held_out(spec: TaskSpec, operands) -> Array:
    """Whether each prompt (operand values int[..., k], not tokens) is in the evaluation set.

    Args:
        spec: the task (`TaskSpec`).
        operands: operand values 0 … m − 1, not tokens; int (..., k).

    Returns:
        bool (...): Σ_i 3^(k−i)·a_i ≡ 0 (mod 11).
    """
    operands = jnp.asarray(operands)
    return (operands @ _holdout_weights(spec).astype(operands.dtype)) % HOLDOUT_MOD == 0


def _prompt_tokens(operands, xp=jnp):
    """Prompt tokens int32[n, k + 1] of operand values int[n, k]."""
    query = xp.full((*operands.shape[:-1], 1), QUERY, dtype=xp.int32)
    return xp.concatenate([operands.astype(xp.int32) + DIGIT0, query], axis=-1)


@functools.partial(jax.jit, static_argnames=("spec", "n"))
def task_prompts(spec: TaskSpec, key, n: int) -> tuple[Array, Array]:
    """`n` training prompts int32[n, prompt_len] and their answers int32[n] (values 0 … m−1), never held out.

    Compiled once per (`spec`, `n`).

    Args:
        spec: the task (`TaskSpec`); static.
        key: a JAX PRNG key.
        n: prompts to draw; integer ≥ 1; static.

    Returns:
        (prompts, answers): prompt tokens int32 (n, prompt_len) and answer values int32 (n,) in 0 … m − 1.
    """
    k, m = spec.operands, spec.modulus
    key_first, key_last = jax.random.split(key)
    first = jax.random.randint(key_first, (n, k - 1), 0, m, dtype=jnp.int32)
    # the last operand has weight 1: it keeps the prompt out unless a_k ≡ −(weighted rest) (mod HOLDOUT_MOD)
    rest = (first @ _holdout_weights(spec)[:-1].astype(jnp.int32)) % HOLDOUT_MOD
    forbidden = (jnp.arange(m, dtype=jnp.int32)[None, :] + rest[:, None]) % HOLDOUT_MOD == 0
    last = jax.random.categorical(key_last, jnp.where(forbidden, -jnp.inf, 0.0).astype(jnp.float32), axis=-1)
    operands = jnp.concatenate([first, last[:, None].astype(jnp.int32)], axis=-1)
    return _prompt_tokens(operands), (operands.sum(-1) % m).astype(jnp.int32)


@functools.lru_cache(maxsize=32)
def _eval_operands(spec: TaskSpec) -> np.ndarray:
    k, m = spec.operands, spec.modulus
    rng = np.random.default_rng(EVAL_SEED)
    weights = _holdout_weights(spec, np)
    if m**k <= ENUMERATE_LIMIT:
        every = np.stack(np.unravel_index(np.arange(m**k), (m,) * k), axis=-1)
        held = every[(every @ weights) % HOLDOUT_MOD == 0]
        return held[np.sort(rng.permutation(len(held))[: spec.eval_size])]
    draws = rng.integers(0, m, size=(spec.eval_size * HOLDOUT_MOD * 4, k))
    held = draws[(draws @ weights) % HOLDOUT_MOD == 0]
    _, first = np.unique(held, axis=0, return_index=True)
    return held[np.sort(first)][: spec.eval_size]


def eval_prompts(spec: TaskSpec) -> tuple[Array, Array]:
    """The fixed held-out evaluation prompts int32[n_eval, prompt_len] and answers int32[n_eval]; n_eval =
    `eval_size`, or the whole held-out set when it is smaller. The same for every call (a fixed seed).

    Args:
        spec: the task (`TaskSpec`).

    Returns:
        (prompts, answers): prompt tokens int32 (n_eval, prompt_len) and answer values int32 (n_eval,).
    """
    operands = _eval_operands(spec)
    prompts = _prompt_tokens(operands, np)
    answers = (operands.sum(-1) % spec.modulus).astype(np.int32)
    return jnp.asarray(prompts, jnp.int32), jnp.asarray(answers, jnp.int32)


def _first_eos(completions: Array) -> tuple[Array, Array]:
    """(index of the first EOS, whether there is one) per completion."""
    is_eos = completions == EOS
    return jnp.argmax(is_eos, axis=-1), is_eos.any(axis=-1)


@functools.partial(jax.jit, static_argnames=("spec",))
def response_mask(spec: TaskSpec, completions) -> Array:
    """float32[n, L]: 1 up to and including the first EOS, 0 after; all ones without EOS (truncated).

    Args:
        spec: the task (`TaskSpec`), unused (the mask depends only on EOS); static.
        completions: completion tokens; int (n, L) (any leading axes).

    Returns:
        The mask; float32, the shape of `completions`.
    """
    del spec  # the mask depends only on EOS; the spec argument keeps the task functions' signature uniform
    completions = jnp.asarray(completions)
    end, has_eos = _first_eos(completions)
    positions = jnp.arange(completions.shape[-1])
    return ((positions <= end[..., None]) | ~has_eos[..., None]).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("spec",))
def _parse(spec: TaskSpec, completions) -> tuple[Array, Array]:
    """(format_ok bool[n], answer token int32[n]) of each completion."""
    completions = jnp.asarray(completions)
    end, has_eos = _first_eos(completions)
    positions = jnp.arange(completions.shape[-1])
    is_digit = (completions >= DIGIT0) & (completions < DIGIT0 + spec.modulus)
    scratch_ok = jnp.all(is_digit | (positions >= end[..., None] - 3), axis=-1)

    def at(offset):
        return jnp.take_along_axis(completions, jnp.maximum(end - offset, 0)[..., None], axis=-1)[..., 0]

    answer = at(2)
    ok = has_eos & (end >= 3) & scratch_ok & (at(3) == ANS_OPEN) & (at(1) == ANS_CLOSE)
    ok &= (answer >= DIGIT0) & (answer < DIGIT0 + spec.modulus)
    return ok, answer


def format_ok(spec: TaskSpec, completions) -> Array:
    """bool[n]: the completion is digits, `<ans>`, one digit, `</ans>`, EOS (right answer or not).

    Args:
        spec: the task (`TaskSpec`).
        completions: completion tokens; int (n, L).

    Returns:
        Whether each completion is well-formed; bool (n,).
    """
    return _parse(spec, completions)[0]


def task_reward(spec: TaskSpec, completions, answers) -> Array:
    """float32[n] in {0, 1}: 1 when the completion has the format of `format_ok` and the right answer digit.

    Args:
        spec: the task (`TaskSpec`).
        completions: completion tokens; int (n, L).
        answers: the right answers, values 0 … m − 1 (not tokens); int (n,).

    Returns:
        The rewards; float32 (n,), in {0, 1}.
    """
    ok, answer = _parse(spec, completions)
    return (ok & (answer == jnp.asarray(answers) + DIGIT0)).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames=("spec",))
def solutions(spec: TaskSpec, prompts, steps) -> Array:
    """Well-formed responses int32[n, max_response_len] (PAD after EOS) to `prompts` int32[n, prompt_len] that
    write the first `steps` int[n] (0 … k) reasoning steps and then the right answer: the task's demonstrations.

    Args:
        spec: the task (`TaskSpec`); static.
        prompts: prompt tokens; int (n, prompt_len).
        steps: reasoning steps to write per prompt; int (n,), in 0 … `max_solution_steps(spec)` (more leave no room
            for the answer block).

    Returns:
        Response tokens; int32 (n, max_response_len).
    """
    k, m, length = spec.operands, spec.modulus, spec.max_response_len
    prompts = jnp.asarray(prompts, jnp.int32)
    operands = prompts[:, :k] - DIGIT0
    sums = jnp.cumsum(operands, axis=-1) % m
    steps = jnp.asarray(steps, jnp.int32)
    # the response's position p holds: reasoning (operand, sum) pairs for p < 2·steps, then the answer block
    p = jnp.arange(length)[None, :]
    pair = jnp.minimum(p // 2, k - 1)
    reasoning = jnp.where(p % 2 == 0, operands[:, pair[0]], sums[:, pair[0]])
    tail = p - 2 * steps[:, None]
    answer_block = jnp.stack(
        [jnp.full_like(sums[:, -1], ANS_OPEN), sums[:, -1] + DIGIT0, jnp.full_like(sums[:, -1], ANS_CLOSE)], -1
    )
    tail_token = jnp.where(tail == 3, EOS, jnp.take_along_axis(answer_block, jnp.clip(tail, 0, 2), axis=-1))
    out = jnp.where(tail < 0, reasoning + DIGIT0, jnp.where(tail <= 3, tail_token, PAD))
    return out.astype(jnp.int32)


def max_solution_steps(spec: TaskSpec) -> int:
    """Most reasoning steps a response of `max_response_len` tokens can hold with its answer block.

    Args:
        spec: the task (`TaskSpec`).

    Returns:
        min(k, (max_response_len − 4) // 2).
    """
    return min(spec.operands, (spec.max_response_len - 4) // 2)
