"""The language-model level's policy: a small pre-LayerNorm causal transformer with learned positional embeddings.

Parameters are an `eqx.Module` of float32 arrays (float32 also under x64), so `jax.vmap` over a stack of them
trains many networks at once; the sizes are the static `PolicyShape`. One code path (`_forward`) serves the
teacher-forced pass (`token_logits`, `completion_logps`) and the autoregressive one (`sample`, with a key/value
cache of `max_len` positions), so the two agree to float32 rounding.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array

from ...base import threefry
from ...base.errors import PgrpoSimError
from .task import EOS, PAD, TaskSpec, check_sizes

F32 = jnp.float32
MLP_RATIO = 2
"""Hidden width of each block's MLP, in multiples of the model width: 2, not GPT's 4 (on CPU the MLP's elementwise
backward at 4 cost more than the rest of the training step)."""
INIT_STD = 0.02
"""Standard deviation of the initial weights (GPT-2's); residual projections are scaled by 1/√(2·layers)."""
LN_EPS = 1e-5
"""LayerNorm's ε (PyTorch's default)."""


class PolicyShape(eqx.Module):
    """Static sizes of the policy: vocab tokens, width (model dimension), layers, heads (dividing width), max_len
    (positions: prompt plus response).

    Attributes:
        vocab: token ids 0 … vocab − 1; integer in [2, 4096].
        max_len: positions, prompt plus response, in tokens; integer in [2, 4096].
        width: the model dimension; integer in [1, 4096].
        layers: transformer blocks; integer in [1, 64].
        heads: attention heads; integer in [1, 4096] that divides `width`.

    Raises:
        PgrpoSimError: on construction, when a size is not an integer in its range or `heads` does not divide
            `width`.
    """

    vocab: int = eqx.field(static=True)
    max_len: int = eqx.field(static=True)
    width: int = eqx.field(static=True, default=64)
    layers: int = eqx.field(static=True, default=2)
    heads: int = eqx.field(static=True, default=4)

    def __check_init__(self):
        limits = dict(vocab=(2, 4096), max_len=(2, 4096), width=(1, 4096), layers=(1, 64), heads=(1, 4096))
        check_sizes(self, limits)
        if self.width % self.heads:
            raise PgrpoSimError(f"heads must divide width ({self.width}), got {self.heads}")


def task_policy_shape(spec: TaskSpec, width: int = 64, layers: int = 2, heads: int = 4) -> PolicyShape:
    """The `PolicyShape` that fits `spec`: its vocabulary and prompt plus longest response as max_len.

    Args:
        spec: the task (`TaskSpec`).
        width: the model dimension; integer in [1, 4096].
        layers: transformer blocks; integer in [1, 64].
        heads: attention heads; integer that divides `width`.

    Returns:
        The `PolicyShape`: vocab = spec.vocab_size, max_len = spec.prompt_len + spec.max_response_len.

    Raises:
        PgrpoSimError: a size out of range (`PolicyShape`).
    """
    return PolicyShape(
        vocab=spec.vocab_size, max_len=spec.prompt_len + spec.max_response_len, width=width, layers=layers, heads=heads
    )


class Block(eqx.Module):
    """One pre-LN transformer block: causal multi-head self-attention, then a GELU MLP, each a residual branch.

    Shapes are one layer's; in `Policy.blocks` every array has a leading (layers,) axis. All float32.

    Attributes:
        ln1_scale: the attention branch's LayerNorm scale; (width,).
        ln1_bias: its LayerNorm bias; (width,).
        qkv: query, key and value projections; (width, 3·width).
        attn_out: the attention output projection; (width, width).
        ln2_scale: the MLP branch's LayerNorm scale; (width,).
        ln2_bias: its LayerNorm bias; (width,).
        mlp_in: the MLP's input matrix; (width, MLP_RATIO·width).
        mlp_in_bias: its bias; (MLP_RATIO·width,).
        mlp_out: the MLP's output matrix; (MLP_RATIO·width, width).
        mlp_out_bias: its bias; (width,).
    """

    ln1_scale: Array
    ln1_bias: Array
    qkv: Array  # [width, 3·width]: queries, keys, values
    attn_out: Array  # [width, width]
    ln2_scale: Array
    ln2_bias: Array
    mlp_in: Array  # [width, MLP_RATIO·width]
    mlp_in_bias: Array
    mlp_out: Array  # [MLP_RATIO·width, width]
    mlp_out_bias: Array


class Policy(eqx.Module):
    """Policy parameters (float32 arrays) and their static `shape`; `blocks` holds every layer's arrays stacked on a
    leading layer axis. A stack of policies (vmap) adds leading axes to every array.

    Attributes:
        embed: token embeddings; (vocab, width).
        positions: learned positional embeddings; (max_len, width).
        blocks: the transformer blocks (`Block`), each array with a leading (layers,) axis.
        ln_scale: the final LayerNorm's scale; (width,).
        ln_bias: the final LayerNorm's bias; (width,).
        unembed: the output projection to logits; (width, vocab).
        shape: the sizes (`PolicyShape`); static.
    """

    embed: Array  # [vocab, width]
    positions: Array  # [max_len, width]
    blocks: Block
    ln_scale: Array
    ln_bias: Array
    unembed: Array  # [width, vocab]
    shape: PolicyShape = eqx.field(static=True)


def init_policy(shape: PolicyShape, key) -> Policy:
    """Random initial parameters (GPT-2's scheme: normal(0, 0.02), residual outputs scaled by 1/√(2·layers)).

    Args:
        shape: the sizes (`PolicyShape`).
        key: a JAX PRNG key.

    Returns:
        The `Policy`, float32; LayerNorm scales 1, biases 0.
    """
    d, hidden = shape.width, MLP_RATIO * shape.width
    keys = iter(jax.random.split(key, 7))

    def normal(shape_, std=INIT_STD):
        return std * jax.random.normal(next(keys), shape_, F32)

    residual_std = INIT_STD / math.sqrt(2 * shape.layers)
    layers = shape.layers
    blocks = Block(
        ln1_scale=jnp.ones((layers, d), F32),
        ln1_bias=jnp.zeros((layers, d), F32),
        qkv=normal((layers, d, 3 * d)),
        attn_out=normal((layers, d, d), residual_std),
        ln2_scale=jnp.ones((layers, d), F32),
        ln2_bias=jnp.zeros((layers, d), F32),
        mlp_in=normal((layers, d, hidden)),
        mlp_in_bias=jnp.zeros((layers, hidden), F32),
        mlp_out=normal((layers, hidden, d), residual_std),
        mlp_out_bias=jnp.zeros((layers, d), F32),
    )
    return Policy(
        embed=normal((shape.vocab, d)),
        positions=normal((shape.max_len, d)),
        blocks=blocks,
        ln_scale=jnp.ones(d, F32),
        ln_bias=jnp.zeros(d, F32),
        unembed=normal((d, shape.vocab)),
        shape=shape,
    )


def _layer_norm(x, scale, bias):
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LN_EPS) * scale + bias


def _empty_cache(shape: PolicyShape, length: int):
    """Per layer, keys and values float32[heads, length, head_dim] (heads before positions: XLA's batched dots are
    fastest so), zeros (masked until written). Separate arrays per layer, not one stack: a stacked cache was sliced
    and re-stacked (copied whole) at every sampled token."""
    zeros = jnp.zeros((shape.heads, length, shape.width // shape.heads), F32)
    return tuple((zeros, zeros) for _ in range(shape.layers))


def _forward(params: Policy, tokens: Array, start, cache):
    """Logits float32[T, vocab] of `tokens` int[T] at positions start … start+T−1, attending causally to the
    cached keys/values of earlier positions; returns them and the cache with these positions written."""
    shape = params.shape
    heads, head_dim = shape.heads, shape.width // shape.heads
    length = tokens.shape[0]
    x = params.embed[tokens] + jax.lax.dynamic_slice_in_dim(params.positions, start, length)
    query_pos = start + jnp.arange(length)
    visible = jnp.arange(cache[0][0].shape[1])[None, :] <= query_pos[:, None]  # [T, S]

    def layer(x, block, keys, values):
        h = _layer_norm(x, block.ln1_scale, block.ln1_bias)
        # heads-first einsums (not reshapes of [T, width] products): XLA's CPU dots then need no transposes
        qkv = jnp.einsum("tw,whd->htd", h, block.qkv.reshape(shape.width, 3 * heads, head_dim))
        q, k, v = jnp.split(qkv, 3, axis=0)
        keys = jax.lax.dynamic_update_slice_in_dim(keys, k, start, axis=1)
        values = jax.lax.dynamic_update_slice_in_dim(values, v, start, axis=1)
        scores = jnp.einsum("htd,hsd->hts", q, keys) / math.sqrt(head_dim)
        weights = jax.nn.softmax(jnp.where(visible[None], scores, jnp.finfo(F32).min), axis=-1)
        attended = jnp.einsum("hts,hsd->htd", weights, values)
        x = x + jnp.einsum("htd,hdw->tw", attended, block.attn_out.reshape(heads, head_dim, shape.width))
        h = _layer_norm(x, block.ln2_scale, block.ln2_bias)
        x = x + jax.nn.gelu(h @ block.mlp_in + block.mlp_in_bias) @ block.mlp_out + block.mlp_out_bias
        return x, (keys, values)

    new_cache = []
    for i, (keys, values) in enumerate(cache):  # unrolled: a rolled loop over 1–2 layers halved sampling's speed
        x, keys_values = layer(x, jax.tree.map(lambda leaf, i=i: leaf[i], params.blocks), keys, values)
        new_cache.append(keys_values)
    logits = _layer_norm(x, params.ln_scale, params.ln_bias) @ params.unembed
    return logits, tuple(new_cache)


def token_logits(params: Policy, tokens) -> Array:
    """Logits float32[T, vocab] of one sequence `tokens` int[T] (T ≤ max_len); row t predicts token t+1.
    Causal, so PAD after EOS does not change earlier rows. vmap for batches.

    Args:
        params: the `Policy`.
        tokens: token ids of one sequence; int (T,), 1 ≤ T ≤ max_len, ids < vocab.

    Returns:
        Logits of the next token at each position; float32 (T, vocab); nats (unnormalised log-probabilities).
    """
    tokens = jnp.asarray(tokens, jnp.int32)
    return _forward(params, tokens, 0, _empty_cache(params.shape, tokens.shape[0]))[0]


def _check_lengths(params: Policy, prompt_len: int, new: int) -> None:
    if prompt_len < 1 or new < 1 or prompt_len + new > params.shape.max_len:
        raise PgrpoSimError(
            f"prompt ({prompt_len} tokens) plus completion ({new} tokens) must fit max_len {params.shape.max_len}, "
            "both at least 1"
        )


def _pick(logits, gumbel, temperature, done):
    """The token argmax(logits + T·gumbel) — a draw from softmax(logits / T) for standard Gumbel noise, greedy at
    T = 0 — and its log-probability under softmax(logits / T) (0 at T = 0); PAD with log-probability 0 once
    `done`."""
    token = jnp.argmax(logits + temperature * gumbel).astype(jnp.int32)
    safe_t = jnp.where(temperature > 0, temperature, 1.0)
    logp = jnp.where(temperature > 0, jax.nn.log_softmax(logits / safe_t)[token], 0.0)
    return jnp.where(done, PAD, token), jnp.where(done, 0.0, logp).astype(F32)


def sample(params: Policy, prompt, key, temperature, max_new: int) -> tuple[Array, Array]:
    """Sample a completion of ONE prompt int[Tp]: tokens int32[max_new] and their log-probabilities float32[max_new]
    under the temperature-scaled policy softmax(logits / temperature). temperature (traced, ≥ 0; 0 is greedy, with
    log-probability 0) and `key` may be vmapped; `max_new` is static. Tokens after the first EOS are PAD with
    log-probability 0. Autoregressive with a key/value cache; vmap over prompts/keys and over parameter stacks.

    Args:
        params: the `Policy`.
        prompt: prompt token ids; int (Tp,), Tp ≥ 1.
        key: a JAX PRNG key.
        temperature: the sampling temperature; scalar ≥ 0 (0: greedy).
        max_new: completion length, in tokens; integer ≥ 1 with Tp + max_new ≤ max_len; static.

    Returns:
        (tokens, logps): token ids int32 (max_new,) (PAD after the first EOS) and their log-probabilities
        float32 (max_new,), nats (0 after EOS and at temperature 0).

    Raises:
        PgrpoSimError: the prompt or completion is empty, or they do not fit max_len.
    """
    prompt = jnp.asarray(prompt, jnp.int32)
    prompt_len = prompt.shape[0]
    _check_lengths(params, prompt_len, max_new)
    temperature = jnp.asarray(temperature, F32)
    logits, cache = _forward(params, prompt, 0, _empty_cache(params.shape, params.shape.max_len))
    # all the noise at once, outside the loop (the package's unrolled Threefry: one fused kernel)
    uniform = jnp.maximum(threefry.uniform(key, (max_new, params.shape.vocab), F32), jnp.finfo(F32).tiny)
    gumbel = -jnp.log(-jnp.log(uniform))

    def step(carry, xs):
        logits, cache, done = carry
        position, noise = xs
        token, logp = _pick(logits, noise, temperature, done)
        next_logits, cache = _forward(params, token[None], position, cache)
        return (next_logits[0], cache, done | (token == EOS)), (token, logp)

    positions = prompt_len + jnp.arange(max_new - 1)
    (logits, _, done), (tokens, logps) = jax.lax.scan(
        step, (logits[-1], cache, jnp.asarray(False)), (positions, gumbel[:-1])
    )
    token, logp = _pick(logits, gumbel[-1], temperature, done)  # the last token needs no forward pass after it
    return jnp.append(tokens, token), jnp.append(logps, logp)


def completion_logps(params: Policy, prompt, completion, temperature) -> tuple[Array, Array]:
    """One teacher-forced pass over prompt int[Tp] + completion int[L]: the log-probability float32[L] of each
    completion token and the entropy float32[L] (nats) of the distribution it was drawn from, both under
    softmax(logits / temperature) as TRL computes them (temperature > 0). Positions after EOS are computed too
    (mask them with `response_mask`).

    Args:
        params: the `Policy`.
        prompt: prompt token ids; int (Tp,), Tp ≥ 1.
        completion: completion token ids; int (L,), L ≥ 1, Tp + L ≤ max_len.
        temperature: the temperature the completion was sampled at; scalar > 0.

    Returns:
        (logp, entropy): each float32 (L,), nats.

    Raises:
        PgrpoSimError: the prompt or completion is empty, or they do not fit max_len.
    """
    prompt = jnp.asarray(prompt, jnp.int32)
    completion = jnp.asarray(completion, jnp.int32)
    _check_lengths(params, prompt.shape[0], completion.shape[0])
    sequence = jnp.concatenate([prompt, completion])[:-1]
    logits = token_logits(params, sequence)[prompt.shape[0] - 1 :] / jnp.asarray(temperature, F32)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    logp = jnp.take_along_axis(log_probs, completion[:, None], axis=-1)[:, 0]
    entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
    return logp, entropy
