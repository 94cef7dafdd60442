"""Forward-mode value_and_grad against JAX's reverse mode and a closed form; the checkpointed scan against lax.scan."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.base.autodiff import FORWARD_MODE_MAX, scan, value_and_grad, where_frozen


def _loss(z, scale):
    """scale·Σ sin(z_i)·z_i² (gradient scale·(cos(z_i)·z_i² + 2 z_i sin(z_i))), with an aux."""
    return scale * jnp.sum(jnp.sin(z) * z**2), dict(first=z[0] ** 2)


@pytest.mark.parametrize("size", [2, FORWARD_MODE_MAX, FORWARD_MODE_MAX + 1])
def test_both_modes_agree_with_jax_value_and_grad(size):
    """Same value, aux and gradient as reverse mode and the closed form (float64: rounding only, 1e-12)."""
    with jax.enable_x64(True):
        z = jnp.asarray(np.linspace(-1.0, 0.5, size))
        (value, aux), grad = value_and_grad(_loss, z, 2.0)
        (value_r, aux_r), grad_r = jax.value_and_grad(_loss, has_aux=True)(z, 2.0)
    exact = 2.0 * (np.cos(z) * z**2 + 2 * z * np.sin(z))
    assert float(value) == pytest.approx(float(value_r), rel=1e-12)
    assert float(aux["first"]) == pytest.approx(float(aux_r["first"]), rel=1e-12)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(grad_r), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(grad), exact, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("frozen", [False, True])
def test_where_frozen_selects_values_and_differentiates_the_proposal(frozen):
    """Values are `jnp.where`'s; forward and reverse derivatives are those of `proposed` alone, frozen or not
    (f(a) = where_frozen(frozen, a², a³) at a = 1.5: derivative 3a² = 6.75; float64, rounding only)."""
    with jax.enable_x64(True):
        a = jnp.float64(1.5)
        f = lambda a: where_frozen(jnp.asarray(frozen), a**2, a**3)
        assert float(f(a)) == (2.25 if frozen else 3.375)
        assert float(jax.grad(f)(a)) == pytest.approx(6.75, rel=1e-15)
        assert float(jax.jacfwd(f)(a)) == pytest.approx(6.75, rel=1e-15)
        batched = jax.vmap(jax.grad(lambda a, d: where_frozen(d, a**2, a**3)))(jnp.full(2, a), jnp.array([False, True]))
        np.testing.assert_array_equal(np.asarray(batched), [6.75, 6.75])


def _recurrence(carry, x):
    """A nonlinear two-state recurrence with per-step inputs: (u, v) ← (u + 0.1 sin(v)·x, 0.9 v + 0.05 u²)."""
    u, v = carry
    new = (u + 0.1 * jnp.sin(v) * x, 0.9 * v + 0.05 * u**2)
    return new, new[0] * new[1]


@pytest.mark.slow
@pytest.mark.parametrize("length", [1, 7, 60, 61])
def test_checkpointed_scan_equals_scan(length):
    """Blocks of `_block_size` steps (61 is prime: whole blocks plus a plain tail; 7: a tail of one step) give
    lax.scan's carry and outputs, and the same reverse- and forward-mode derivatives (float64: 1e-13, the
    blocks only regroup the same operations)."""
    with jax.enable_x64(True):
        xs = jnp.asarray(np.random.default_rng(length).normal(size=length))

        def objective(a, checkpoint):
            carry, ys = scan(_recurrence, (a, 0.3 * a), xs * a, length, checkpoint=checkpoint)
            return jnp.sum(ys) + carry[0] * carry[1]

        ref = jax.lax.scan(_recurrence, (jnp.float64(0.7), jnp.float64(0.21)), xs * 0.7)
        got = scan(_recurrence, (jnp.float64(0.7), jnp.float64(0.21)), xs * 0.7, length, checkpoint=True)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=1e-15)
        plain = jax.grad(objective)(0.7, False)
        assert float(jax.grad(objective)(0.7, True)) == pytest.approx(float(plain), rel=1e-13)
        assert float(jax.jacfwd(objective)(0.7, True)) == pytest.approx(float(plain), rel=1e-13)


def _temp_bytes(f, *args) -> int:
    """XLA's temporary memory (bytes) of `jax.jit(f)` compiled for `args`."""
    return jax.jit(f).lower(*args).compile().memory_analysis().temp_size_in_bytes


def test_checkpointed_gradient_memory_grows_as_square_root():
    """XLA's temporary memory for reverse mode through 400 and 6400 steps of a recurrence on 256 floats (1 KiB of
    state a step): the full tape grows ×16 (over ×12 allowed for fixed buffers), the checkpointed one by about
    ×4 (√16; under ×6), and at 6400 steps it is under a tenth of the tape."""

    def step(u, x):
        u = jnp.tanh(u * x + 0.1)
        return u, None

    def temp(steps, checkpoint):
        def loss(a):
            xs = jnp.linspace(0.5, 1.5, steps, dtype=jnp.float32)
            final, _ = scan(step, jnp.full(256, a), xs, steps, checkpoint=checkpoint)
            return jnp.sum(final)

        return _temp_bytes(jax.grad(loss), jnp.float32(0.3))

    tape = [temp(s, False) for s in (400, 6400)]
    blocks = [temp(s, True) for s in (400, 6400)]
    assert tape[1] / tape[0] > 12, tape
    assert blocks[1] / blocks[0] < 6, blocks
    assert blocks[1] < tape[1] / 10, (blocks, tape)


@pytest.mark.slow
def test_checkpointed_bandit_gradient_memory_grows_as_square_root():
    """The same for `jax.grad` through an expected-mode bandit run (`simulate(checkpoint=...)`), whose reward
    curve itself is O(steps) (8 bytes a step): ×16 for the tape, under ×8 for the blocks, and under an eighth of
    the tape at 6400 steps."""

    def temp(steps, checkpoint):
        def final_reward(learning_rate):
            return ps.simulate(config.replace(learning_rate=learning_rate), steps, checkpoint=checkpoint).reward[-1]

        return _temp_bytes(jax.grad(final_reward), jnp.float64(0.01))

    with jax.enable_x64(True):
        config = ps.bandit.config().replace(learning_rate=jnp.float64(0.01))
        tape = [temp(s, False) for s in (400, 6400)]
        blocks = [temp(s, True) for s in (400, 6400)]
    assert tape[1] / tape[0] > 12, tape
    assert blocks[1] / blocks[0] < 8, blocks
    assert blocks[1] < tape[1] / 8, (blocks, tape)
