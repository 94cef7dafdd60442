"""The optimiser on the logits (docs/design.md §3, "One GRPO step"): optax heavy-ball SGD, Nesterov or Adam, with
optional global-norm gradient clipping, its step scaled by one of Hugging Face's learning-rate schedules
(`learning_rate_factor`)."""

from __future__ import annotations

import jax.numpy as jnp
import optax
from jax import Array

from ..schedules import schedule_factor
from .configuration import Config, check_config


def learning_rate_factor(config: Config, count: Array) -> Array:
    """The schedule's factor on η at optimiser step `count`: `models.schedules.schedule_factor` (Hugging Face's
    linear warm-up from 0 over `warmup_steps`, then 1, linear decay or cosine decay to 0 at `decay_steps`); 1 for
    "constant".

    Args:
        config: the configuration (`Config`): lr_scheduler_type, warmup_steps and decay_steps.
        count: the optimiser step (optax's count), an integer array of any shape (0-d in optax).

    Returns:
        The factor in [0, 1], of count's shape, in η's dtype.
    """
    warmup, total = config.warmup_steps, config.decay_steps
    return schedule_factor(config.lr_scheduler_type, count, warmup, total, jnp, config.learning_rate.dtype)


def make_optimizer(config: Config) -> optax.GradientTransformation:
    """optax optimiser on the logits: optional global-norm clipping, then heavy-ball SGD (optax.sgd with momentum μ),
    Nesterov, or Adam (b1 = μ, b2 = 0.999), at step η × `learning_rate_factor` (a plain η for "constant").

    Args:
        config: the configuration (`Config`): optimizer, learning_rate, momentum, max_grad_norm and the schedule (traced
            leaves stay traced inside the transformation).

    Returns:
        An `optax.GradientTransformation` on the parameters: the logits (D, N), or W (F, N) with features.

    Raises:
        PgrpoSimError: if `config` is not a `Config`.
    """
    check_config(config)
    learning_rate = config.learning_rate
    if config.lr_scheduler_type != "constant":
        learning_rate = lambda count: config.learning_rate * learning_rate_factor(config, count)
    if config.optimizer == "adam":
        base = optax.adam(learning_rate, b1=config.momentum)
    else:
        base = optax.sgd(learning_rate, momentum=config.momentum, nesterov=config.optimizer == "nesterov")
    return base if config.max_grad_norm is None else optax.chain(optax.clip_by_global_norm(config.max_grad_norm), base)
