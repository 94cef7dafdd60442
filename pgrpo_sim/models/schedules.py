"""Hugging Face's learning-rate schedules (`transformers.get_scheduler`) as one jit-safe factor, shared by the bandit's
and the language model's optimisers: a linear warm-up from 0 over `warmup` optimiser steps, then 1 ("constant",
"constant_with_warmup"), a linear decay or a half-cosine decay to 0 at `total`.

Not optax's schedules: they check their lengths in Python (`if transition_steps <= 0`), which fails when the lengths
are traced, as a calibration's and a sweep's are.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

LR_SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")
"""The schedules, under Hugging Face's `lr_scheduler_type` names ("constant" has no warm-up)."""


def schedule_factor(kind: str, count: ArrayLike, warmup: ArrayLike, total: ArrayLike, dtype=jnp.float32) -> Array:
    """The schedule's factor on the peak learning rate at optimiser step `count`.

    Args:
        kind: one of `LR_SCHEDULES`; static.
        count: the optimiser step (optax's count, from 0); integer array of any shape.
        warmup: warm-up length, in optimiser steps; integer ≥ 0; may be traced.
        total: the schedule's length (where a decay reaches 0), in optimiser steps; integer ≥ 1; may be traced.
        dtype: the factor's floating dtype.

    Returns:
        The factor in [0, 1], of `count`'s shape: `count / warmup` during the warm-up (not for "constant"), then 1,
        1 − progress ("linear") or (1 + cos(π · progress)) / 2 ("cosine"), progress = (count − warmup) / (total −
        warmup) clipped to [0, 1].
    """
    count = jnp.asarray(count, dtype)
    rising = count / jnp.maximum(warmup, 1)
    progress = jnp.clip((count - warmup) / jnp.maximum(total - warmup, 1), 0.0, 1.0)
    after = {
        "constant": jnp.ones_like(count),
        "constant_with_warmup": jnp.ones_like(count),
        "linear": 1.0 - progress,
        "cosine": 0.5 * (1.0 + jnp.cos(jnp.pi * progress)),
    }[kind]
    return after if kind == "constant" else jnp.where(count < warmup, rising, after)
