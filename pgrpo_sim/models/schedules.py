"""Hugging Face's learning-rate schedules (`transformers.get_scheduler`) as one factor, in NumPy or in jit-safe JAX:
the bandit's and the language model's optimisers compute it traced, the log reader matches logged rates to it.
A linear warm-up from 0 over `warmup` optimiser steps, then 1 ("constant", "constant_with_warmup"), a linear decay or
a half-cosine decay to 0 at `total`.

Not optax's schedules: they check their lengths in Python (`if transition_steps <= 0`), which fails when the lengths
are traced, as a calibration's and a sweep's are.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

LR_SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")
"""The schedules, under Hugging Face's `lr_scheduler_type` names, simplest first ("constant" has no warm-up)."""


def schedule_factor(kind: str, count, warmup, total, xp=np, dtype: DTypeLike = float):
    """The schedule's factor on the peak learning rate at optimiser step `count`.

    Args:
        kind: one of `LR_SCHEDULES`; static.
        count: optimiser steps taken (optax's count, from 0); array of any shape.
        warmup: warm-up length, in optimiser steps; integer ≥ 0 (ignored by "constant"); may be traced.
        total: the schedule's length (where a decay reaches 0), in optimiser steps; integer ≥ 1; may be traced.
        xp: the array module, `numpy` or `jax.numpy` (traced lengths need the latter).
        dtype: the factor's floating dtype.

    Returns:
        The factor in [0, 1], of `count`'s shape: `count / warmup` during the warm-up (not for "constant"), then 1,
        1 − progress ("linear") or (1 + cos(π · progress)) / 2 ("cosine"), progress = (count − warmup) / (total −
        warmup) clipped to [0, 1].
    """
    count = xp.asarray(count, dtype)
    rising = count / xp.maximum(warmup, 1)
    progress = xp.clip((count - warmup) / xp.maximum(total - warmup, 1), 0.0, 1.0)
    after = {
        "constant": xp.ones_like(count),
        "constant_with_warmup": xp.ones_like(count),
        "linear": 1.0 - progress,
        "cosine": 0.5 * (1.0 + xp.cos(xp.pi * progress)),
    }[kind]
    return after if kind == "constant" else xp.where(count < warmup, rising, after)
