"""Derivatives with the cheaper autodiff mode for the shape at hand."""

from __future__ import annotations

from collections.abc import Callable

import jax
from jax import Array

FORWARD_MODE_MAX = 4
"""Up to this many inputs `value_and_grad` uses forward mode (`jax.jacfwd`). Through a simulated run of the
bandit it costs about 7× the run, against 13× for reverse mode, which also keeps every step for the
backward pass (benchmarks/RESULTS.md, "Gradients through a run")."""


def value_and_grad(loss: Callable, z: Array, *args) -> tuple[tuple[Array, object], Array]:
    """((loss(z, *args)), ∂loss/∂z) for `loss` returning (scalar, aux), like
    `jax.value_and_grad(loss, has_aux=True)(z, *args)`: forward mode when z (a vector) has at most
    `FORWARD_MODE_MAX` entries, reverse mode beyond."""
    if z.shape[-1] > FORWARD_MODE_MAX:
        return jax.value_and_grad(loss, has_aux=True)(z, *args)

    def both(v):
        value, aux = loss(v, *args)
        return value, (value, aux)

    grad, out = jax.jacfwd(both, has_aux=True)(z)
    return out, grad
