"""Forward-mode value_and_grad against JAX's reverse mode and a closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgrpo_sim.base.autodiff import FORWARD_MODE_MAX, value_and_grad


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
