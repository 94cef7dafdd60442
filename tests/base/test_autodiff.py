"""Forward-mode value_and_grad against JAX's reverse mode."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.base.autodiff import FORWARD_MODE_MAX, value_and_grad


def _loss(z, scale):
    """Mean late reward of a 100-step expected-mode run at (η, μ) = exp(z[:2]) (other z unused), and an aux."""
    config = ps.bandit_config(eta=jnp.exp(z[0]), momentum=jax.nn.sigmoid(z[1]))
    reward = ps.simulate(config, 100).reward
    return scale * reward[-25:].mean() + 0.1 * jnp.sum(z[2:] ** 2), dict(last=reward[-1])


@pytest.mark.parametrize("size", [2, FORWARD_MODE_MAX, FORWARD_MODE_MAX + 1])
def test_both_modes_agree_with_jax_value_and_grad(size):
    """Same value, aux and gradient as reverse mode (float64: the modes differ by rounding only, 1e-12)."""
    with jax.enable_x64(True):
        z = jnp.asarray(np.linspace(-1.0, 0.5, size))
        (value, aux), grad = value_and_grad(_loss, z, 2.0)
        (value_r, aux_r), grad_r = jax.value_and_grad(_loss, has_aux=True)(z, 2.0)
    assert float(value) == pytest.approx(float(value_r), rel=1e-12)
    assert float(aux["last"]) == pytest.approx(float(aux_r["last"]), rel=1e-12)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(grad_r), rtol=1e-10, atol=1e-12)
    assert abs(float(grad[0])) > 1e-3  # the run depends on η: the check compares something
