"""Uniform draws for the sampled-mode hot loop: the Threefry-2x32 hash (20 rounds; Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", SC 2011), the generator behind JAX's default keys, written out in jnp.

Why not `jax.random.uniform`: on CPU, JAX lowers Threefry with its five key-injection blocks as a rolled
while loop, a handful of kernel launches per call; a vmapped bandit step draws a few uniforms per run, so
those launches were half of the sampled-mode run time (benchmarks/RESULTS.md). Unrolled, XLA fuses the
hash into one elementwise kernel. Same hash and key words as JAX (tested against
`jax.extend.random.threefry_2x32`), our own counter layout: the numbers differ from `jax.random.uniform`'s,
their distribution does not. Our counters set the top bit of their second word (`COUNTER_TAG`): JAX derives keys
by hashing (0, d) under the same key (`jax.random.fold_in(key, d)` and the d-th key of `jax.random.split(key, n)`,
d < 2³¹), so a uniform drawn from a key never repeats the words of a key derived from it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)
COUNTER_TAG = np.uint32(0x80000000)
"""Set in the second word of every counter `uniform` hashes, never in JAX's key-derivation counters (0, d)."""


def threefry2x32(key_words: Array, x0: Array, x1: Array) -> tuple[Array, Array]:
    """Threefry-2x32-20 of the counter pairs (x0, x1) (uint32, same shape) under the key (k0, k1) = `key_words`."""
    ks = (key_words[0], key_words[1], key_words[0] ^ key_words[1] ^ _PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for block in range(5):
        for rot in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(rot)) | (x1 >> np.uint32(32 - rot)))
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x0, x1


def uniform(key: Array, shape: tuple[int, ...], dtype) -> Array:
    """Uniform [0, 1) floats of `shape`: float32 takes 23 bits from each hash word (two values per hash),
    float64 53 bits from both words of one hash. Keys of other PRNG implementations use `jax.random.uniform`."""
    if str(jax.random.key_impl(key)) != "threefry2x32":
        return jax.random.uniform(key, shape, dtype)
    words = jax.random.key_data(key)
    n = math.prod(shape)
    if jnp.dtype(dtype) == jnp.float64:
        hi, lo = threefry2x32(words, jnp.arange(n, dtype=jnp.uint32), jnp.full(n, COUNTER_TAG, jnp.uint32))
        mantissa = (hi >> np.uint32(5)).astype(dtype) * 2.0**26 + (lo >> np.uint32(6)).astype(dtype)
        return (mantissa * 2.0**-53).reshape(shape)
    half = (n + 1) // 2
    a, b = threefry2x32(words, jnp.arange(half, dtype=jnp.uint32), jnp.full(half, half | COUNTER_TAG, jnp.uint32))
    bits = jnp.concatenate([a, b])[:n]
    one_to_two = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | np.uint32(0x3F800000), jnp.float32)
    return (one_to_two - 1.0).astype(dtype).reshape(shape)
