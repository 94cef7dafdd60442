"""The sampled mode's generator and short-axis reductions against JAX's own and closed forms."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

from pgrpo_sim.base import small_axes as _reduce, threefry as _random


def test_threefry_equals_jax_hash_and_known_answers():
    rng = np.random.default_rng(0)
    key = jax.random.key_data(jax.random.key(7))
    x = rng.integers(0, 2**32, 2 * 500, dtype=np.uint64).astype(np.uint32)
    mine = np.concatenate(_random.threefry2x32(key, jnp.asarray(x[:500]), jnp.asarray(x[500:])))
    np.testing.assert_array_equal(mine, jax.extend.random.threefry_2x32(key, jnp.asarray(x)))
    # Random123 known-answer vectors for Threefry-2x32-20 (Salmon et al. 2011)
    for k, c, out in [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]:
        a, b = _random.threefry2x32(jnp.asarray(k, jnp.uint32), *(jnp.asarray([v], jnp.uint32) for v in c))
        assert (int(a[0]), int(b[0])) == out


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_uniform_is_uniform_and_keyed(dtype):
    n = 200_001  # odd: the float32 path splits the hash words in two halves
    u = np.asarray(_random.uniform(jax.random.key(3), (n,), dtype))
    assert u.dtype == dtype and u.min() >= 0.0 and u.max() < 1.0
    # Kolmogorov–Smirnov at level 1e-3: sup |F_n − F| < 1.95/√n
    s = np.sort(u)
    assert np.max(np.abs(s - np.arange(1, n + 1) / n)) < 1.95 / np.sqrt(n)
    # no correlation between neighbours (one draw per sample, two per hash): |r| < 4/√n
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 4 / np.sqrt(n)
    other = np.asarray(_random.uniform(jax.random.key(4), (n,), dtype))
    assert abs(np.corrcoef(u, other)[0, 1]) < 4 / np.sqrt(n)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_uniform_never_repeats_the_words_of_keys_derived_from_its_key(dtype):
    """The sampled step draws its groups from a step key and derives shuffle keys from it with `fold_in(key, 1)`
    and `fold_in(key, 2)`; with counters (0, d) in its layout, a draw of 1 to 4 uniforms was a key's words (bit
    for bit, prompts × G = 3 or 4 gave fold_in(key, 2)'s). No draw of 1 to 9 values equals a value made the same
    way from the words of `fold_in(key, d)` or `split(key, 9)`, d < 9 (a chance match: ~1e-3 for float32's 23
    bits, as the old layout's was certain)."""
    key = jax.random.key(11)
    derived = np.concatenate(
        [jax.random.key_data(jax.random.split(key, 9)).ravel()]
        + [jax.random.key_data(jax.random.fold_in(key, d)) for d in range(9)]
    ).astype(np.uint32)
    if dtype == jnp.float32:  # float32 takes the top 23 bits of one word
        values = (derived >> 9).astype(np.float64) * 2.0**-23
    else:  # float64 takes 27 bits of the first word and 26 of the second of one hash
        pairs = derived.reshape(-1, 2).astype(np.float64)
        values = (np.floor(pairs[:, 0] / 2**5) * 2.0**26 + np.floor(pairs[:, 1] / 2**6)) * 2.0**-53
    for n in range(1, 10):
        u = np.asarray(_random.uniform(key, (n,), dtype), np.float64)
        assert not np.isin(u, values).any(), n


def test_uniform_falls_back_for_other_key_kinds():
    key = jax.random.key(0, impl="rbg")
    np.testing.assert_array_equal(_random.uniform(key, (5,), jnp.float32), jax.random.uniform(key, (5,), jnp.float32))


@pytest.mark.parametrize("length", [2, 8, 16, 40])  # unrolled adds up to UNROLL_MAX, jnp reductions beyond
def test_short_axis_reductions_equal_jnp(length):
    x = jnp.asarray(np.random.default_rng(length).normal(size=(3, length, 5)))
    for axis in (1, -1):
        np.testing.assert_allclose(_reduce.axis_sum(x, axis), jnp.sum(x, axis), rtol=1e-13)
        np.testing.assert_allclose(_reduce.axis_max(x, axis, keepdims=True), jnp.max(x, axis, keepdims=True))
    np.testing.assert_allclose(_reduce.softmax(x), jax.nn.softmax(x), rtol=1e-13)
