"""Derivatives with the cheaper autodiff mode for the shape at hand."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
from jax import Array

FORWARD_MODE_MAX = 4
"""Up to this many inputs `value_and_grad` uses forward mode (`jax.jacfwd`). Through a simulated run of the
bandit vmapped over 1000 configurations, three tangents cost less than reverse mode with its full tape
(benchmarks/RESULTS.md, run of 2026-12-02, "Gradients through a run"), and forward mode holds no tape. The
checkpointed tape costs less there, but at `search`'s width (8 restarts, 2 hyperparameters, 300 steps) forward
mode ran 200 iterations in 0.09 s against 0.15 s (full tape) and 0.25 s (checkpointed), and compiled in 5.6 s
against 6.4 s and 7.6 s (measured once, 2026-12-02, 2 cores; not a benchmark)."""

_Aux = TypeVar("_Aux")


def value_and_grad(loss: Callable[..., tuple[Array, _Aux]], z: Array, *args) -> tuple[tuple[Array, _Aux], Array]:
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


@jax.custom_jvp
def where_frozen(frozen: Array, current: Array, proposed: Array) -> Array:
    """`jnp.where(frozen, current, proposed)` (`current` and `proposed` of one shape and dtype, `frozen` a bool
    that broadcasts to them), differentiated as `proposed` alone: for a guard that holds a state still once it went
    bad (a run's divergence), not part of the model. Values are the select's; derivatives are exact wherever
    `frozen` is False and, where it is True, those of the discarded `proposed` (not meaningful, possibly
    non-finite). The select's own derivative selects every tangent and cotangent too: through a bandit
    run vmapped over 1000 configurations that took about a third of a gradient's time (checkpointed reverse mode
    47–55 → 33–43 ms, forward mode 71–80 → 40–59 ms; 3 processes each, 2026-12-02, 2 cores)."""
    return jnp.where(frozen, current, proposed)


@where_frozen.defjvp
def _where_frozen_jvp(primals, tangents):
    return where_frozen(*primals), tangents[2]


def _block_size(length: int) -> int:
    """Steps per checkpointed block: the largest divisor of `length` up to √length, or ⌈√length⌉ when that
    divisor is under half of √length (then the steps beyond whole blocks run as one plain scan)."""
    root = math.isqrt(length)
    divisor = max(d for d in range(1, root + 1) if length % d == 0)
    return divisor if 4 * divisor * divisor >= length else root + 1


def scan(f: Callable, init, xs, length: int, *, checkpoint: bool = False):
    """`jax.lax.scan(f, init, xs, length=length)`; with `checkpoint`, one whose reverse-mode derivative keeps
    O(√length) carries, not every step's residuals: an outer scan over blocks of about √length steps, each
    block rematerialised on the backward pass (`jax.checkpoint`; Griewank & Walther, *Evaluating
    Derivatives*, 2008, §12.3). Forward runs and forward mode compute the same steps at the same speed;
    reverse mode recomputes each step once more, yet through a wide vmapped bandit run costs about half what the
    full tape costs, whose residuals stream through memory (benchmarks/RESULTS.md, run of 2026-12-02,
    "Gradients through a run"). Lengths with no divisor near √length run their last steps (fewer than a block)
    as a plain scan, which traces `f` a second time. The nested loops compile more slowly (about 0.2 s more for
    a bandit run, 0.5–1 s more for its gradient), hence opt-in."""
    if not checkpoint:
        return jax.lax.scan(f, init, xs, length=length)
    block = _block_size(length)
    whole = length - length % block
    head = None if xs is None else jax.tree.map(lambda x: x[:whole], xs)
    blocked = None if xs is None else jax.tree.map(lambda x: x.reshape(whole // block, block, *x.shape[1:]), head)
    run_block = jax.checkpoint(lambda carry, chunk: jax.lax.scan(f, carry, chunk, length=block), prevent_cse=False)
    carry, ys = jax.lax.scan(run_block, init, blocked, length=whole // block)
    ys = jax.tree.map(lambda y: y.reshape(whole, *y.shape[2:]), ys)
    if whole == length:
        return carry, ys
    tail = None if xs is None else jax.tree.map(lambda x: x[whole:], xs)
    carry, rest = jax.lax.scan(f, carry, tail, length=length - whole)
    return carry, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys, rest)
