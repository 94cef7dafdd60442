"""What the bandit's two modes share (docs/design.md §3, "Two modes, one update rule"): the mode names and
`check_mode`, which refuses a configuration that a mode has no exact form for; `UpdateStats`, the read-outs of one
update; and the KL penalty of a loss (`kl_term`) and its slope (`kl_slope`) (docs/conventions.md §3)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ...base.checks import check_choice, is_concrete
from ...base.errors import PgrpoSimError
from ..grpo import ADVANTAGES, kl_divergence, kl_estimate
from .configuration import MODES, Config, check_config
from .enumeration import rewards_are_binary, rollout_count
from .readouts import UPDATE_READOUTS, attributes

# fields computed from UPDATE_READOUTS: pyright reads only literal field lists
UpdateStats = NamedTuple("UpdateStats", [(name, Array) for name in UPDATE_READOUTS])  # pyright: ignore[reportArgumentType]
UpdateStats.__doc__ = (
    "Per-step read-outs of one GRPO update's rollout and surrogate (expectations in expected mode, group averages "
    "when sampled), under TRL's names where it logs them; scalars (fields from "
    "`models.bandit.readouts.UPDATE_READOUTS`).\n\n" + attributes(UPDATE_READOUTS)
)


def check_mode(config: Config, mode: str) -> None:
    """Raise `PgrpoSimError` if `mode` has no exact form for `config`: expected mode refuses dynamic sampling and
    batch-scaled advantages, which couple the groups of a batch, and rollout reuse (lag model "refresh") of
    several prompts or of more than `MAX_OUTCOMES` distinct rollouts, which it would enumerate. Entry points call
    it on concrete configurations; a traced "batch" advantage code cannot be refused, so `advantage_table` makes
    its expected run NaN (and traced rewards are counted as binary, the smaller enumeration).

    Args:
        config: the configuration (`Config`).
        mode: "expected" or "sampled" (`MODES`); sampled mode has a form for every configuration.

    Raises:
        PgrpoSimError: if `config` is not a `Config` or `mode` is unknown; in expected mode, for dynamic
            sampling, a concrete "batch" advantage code, or lag model "refresh" with several prompts or more
            than `MAX_OUTCOMES` distinct rollouts (`rollout_count`).
    """
    check_config(config)
    check_choice("mode", mode, MODES)
    if mode != "expected":
        return
    batch = is_concrete(config.advantage) and np.any(np.asarray(config.advantage) == ADVANTAGES.index("batch"))
    if config.dynamic_sampling or batch:
        raise PgrpoSimError(
            "dynamic sampling and batch-scaled advantages couple the groups of a batch: expected mode has no "
            "exact form for them; use mode 'sampled'"
        )
    if config.lag_model == "refresh":  # rollout reuse: enumerated, so one prompt and a bounded count
        rollout_count(config, rewards_are_binary(config) or not is_concrete(config.rewards))


def kl_term(config: Config, logits: Array | None, logp: Array, logp_ref: Array, weights: Array) -> Array:
    """Per-prompt KL penalty: exact KL(π‖π_ref), or the estimator averaged with `weights` over samples.

    Args:
        config: the configuration (`Config`): `kl`, `kl_clamp` and the reference `init_logits` (P, N).
        logits: θ, (P, N); read by "exact" only (may be None otherwise).
        logp: log π of the samples (nats), (P, ...) broadcasting with `logp_ref` and `weights`.
        logp_ref: log π_ref of the same samples (nats).
        weights: the samples' weights over the last axis (e.g. 1/G each, or π_old).

    Returns:
        (P,) the KL term of each prompt (nats).
    """
    if config.kl == "exact":
        assert logits is not None, 'kl "exact" reads the logits'
        return kl_divergence(logits, config.init_logits)
    return jnp.sum(weights * kl_estimate(logp, logp_ref, config.kl, config.kl_clamp), axis=-1)


def kl_slope(d: Array, config: Config) -> Array:
    """∂k/∂log π of the KL estimator at d = log π − log π_ref, elementwise.

    Args:
        d: log π − log π_ref (nats), any shape.
        config: the configuration (`Config`): its estimator `kl` ("k1", "k2" or "k3") and `kl_clamp`.

    Returns:
        The slope, of the shape of `d`.
    """
    slope = jax.vmap(jax.grad(lambda x: kl_estimate(x, 0.0, config.kl, config.kl_clamp)))(d.ravel())
    return slope.reshape(d.shape)
