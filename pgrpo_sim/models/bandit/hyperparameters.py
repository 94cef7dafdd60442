"""The one table of the bandit's hyperparameters, and the one way a value enters a `Config`.

Every consumer — sweeps and phase diagrams, sensitivities and search, boundaries, figures and the command
line — reads names, allowed ranges, scales and labels from `HYPERPARAMETERS` and substitutes values with
`set_hyperparameters`, which works on concrete values and on tracers alike (so `jax.vmap` and `jax.grad`
go through it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from ...base.checks import Interval, check_scalar, is_concrete
from ...base.errors import PgrpoSimError
from .configuration import LEAF_RANGES, MAX_GROUP_SIZE, Config, check_config


@dataclasses.dataclass(frozen=True, kw_only=True)
class Hyperparameter:
    """One row of the table.

    Attributes:
        name: the hyperparameter's name, its key in `HYPERPARAMETERS` (e.g. "learning_rate").
        domain: the allowed range (`base.checks.Interval`; the config leaf's own, `configuration.LEAF_RANGES`, where the
            hyperparameter is one).
        label: axis label with units.
        field: the `Config` field it maps into (see `set_hyperparameters`); default: `name`.
        traced: a traced config leaf (one compilation serves every value; `vmap`/`grad` work), else static
            structure (each value compiles its own program).
        integer: takes integer values.
        differentiable: `sensitivities`, `outcomes` and `search` differentiate it.
        log_scale: log-spaced by default in grids, search boxes and figures.
    """

    name: str
    domain: Interval
    label: str
    field: str = ""
    traced: bool = True
    integer: bool = False
    differentiable: bool = False
    log_scale: bool = False

    def __post_init__(self):
        if not self.field:
            object.__setattr__(self, "field", self.name)

    def check(self, value: Any) -> None:
        """Raise `PgrpoSimError` naming this hyperparameter unless every concrete value is in range.

        Args:
            value: the value, in the units of `label`; a number or array (tracers are not checked).

        Raises:
            PgrpoSimError: if a concrete value is non-finite, outside `domain`, or not an integer where `integer`.
        """
        self.domain.check(self.name, value, integer=self.integer)


_ROWS = (
    Hyperparameter(
        name="learning_rate",
        domain=LEAF_RANGES["learning_rate"],
        label="learning rate η (per step)",
        differentiable=True,
        log_scale=True,
    ),
    Hyperparameter(name="momentum", domain=LEAF_RANGES["momentum"], label="momentum μ", differentiable=True),
    Hyperparameter(
        name="beta", domain=LEAF_RANGES["beta"], label="KL coefficient β", differentiable=True, log_scale=True
    ),
    Hyperparameter(
        name="p_ref",
        domain=Interval(0.0, 1.0, True, True),
        label="initial correct mass p_ref",
        field="init_logits",
        differentiable=True,
    ),
    Hyperparameter(
        name="epsilon",
        domain=LEAF_RANGES["epsilon"],
        label="clip range ε",
        field="epsilon",
        differentiable=True,
        log_scale=True,
    ),
    Hyperparameter(
        name="epsilon_high", domain=LEAF_RANGES["epsilon_high"], label="upper clip range ε_high", log_scale=True
    ),
    Hyperparameter(name="lag", domain=Interval(0.0), label="off-policy lag τ (optimiser steps)", integer=True),
    Hyperparameter(
        name="num_generations",
        domain=Interval(2.0, MAX_GROUP_SIZE),
        label="group size G",
        traced=False,
        integer=True,
        log_scale=True,
    ),
    Hyperparameter(
        name="minibatches",
        domain=Interval(1.0),
        label="mini-batches per epoch m (TRL steps_per_generation)",
        traced=False,
        integer=True,
    ),
    Hyperparameter(
        name="ref_sync_alpha",
        domain=LEAF_RANGES["ref_sync_alpha"],
        label="reference sync mix-up α (TRL ref_model_mixup_alpha)",
    ),
)
HYPERPARAMETERS: dict[str, Hyperparameter] = {row.name: row for row in _ROWS}
"""Every sweepable, searchable hyperparameter of a bandit configuration, by name."""
TRACED = tuple(n for n, h in HYPERPARAMETERS.items() if h.traced)
STATIC = tuple(n for n, h in HYPERPARAMETERS.items() if not h.traced)
DIFFERENTIABLE = tuple(n for n, h in HYPERPARAMETERS.items() if h.differentiable)
INTEGER = tuple(n for n, h in HYPERPARAMETERS.items() if h.integer)


def hyperparameter(name: str) -> Hyperparameter:
    """The table row of `name`; `PgrpoSimError` listing the known names otherwise.

    Args:
        name: a key of `HYPERPARAMETERS`, e.g. "learning_rate".

    Returns:
        The `Hyperparameter` row.

    Raises:
        PgrpoSimError: if `name` is not a known hyperparameter.
    """
    if name not in HYPERPARAMETERS:
        raise PgrpoSimError(f"unknown hyperparameter {name!r}; known: {', '.join(HYPERPARAMETERS)}")
    return HYPERPARAMETERS[name]


def reference_mass(config: Config):
    """p_ref: the correct mass of the start θ_0 (which is also the KL reference), averaged over prompts; arms
    with reward 1 count as correct. Works on tracers.

    Args:
        config: the configuration (`Config`; rewards and init_logits of shape (P, N)).

    Returns:
        p_ref, a probability in [0, 1]: 0-d float array.

    Raises:
        PgrpoSimError: if `config` is not a `Config`.
    """
    check_config(config)
    pi = jnp.exp(config.init_logits - jnp.max(config.init_logits, axis=-1, keepdims=True))
    correct = (config.rewards == 1).astype(pi.dtype)
    return jnp.mean(jnp.sum(pi * correct, -1) / jnp.sum(pi, -1))


def symmetric_logits(rewards, p_ref):
    """Class-symmetric start with correct mass `p_ref` for each prompt of `rewards` (P, N): the c arms with
    reward 1 share log(p_ref/c), the others log((1−p_ref)/(N−c)). Works on tracers.

    Args:
        rewards: rewards, shape (P, N), a float JAX or NumPy array (its dtype is the logits'); arms with reward
            exactly 1 are correct. Not checked.
        p_ref: correct mass of each prompt's start, in (0, 1); scalar (or broadcasting with (P, 1)). Not checked.

    Returns:
        Logits of shape (P, N), in the dtype of `rewards`.
    """
    correct = rewards == 1
    c = jnp.sum(correct, -1, keepdims=True).astype(rewards.dtype)
    n = rewards.shape[-1]
    p = jnp.asarray(p_ref, rewards.dtype)
    return jnp.where(correct, jnp.log(p / c), jnp.log((1 - p) / (n - c)))


def set_hyperparameters(config: Config, values: Mapping[str, Any]) -> Config:
    """`config` with hyperparameters replaced by name (`HYPERPARAMETERS`); traced values allowed.

    `epsilon` sets ε_low, and ε_high too where the configuration has ε_high = ε_low (an `epsilon_high` value, if
    also given, is applied after it); `p_ref` rebuilds the class-symmetric start (and KL reference) with that
    correct mass, which needs binary rewards; `lag` is stored as int32; `num_generations`, `minibatches` (static)
    must be a concrete integer. Concrete values are range-checked (`Hyperparameter.check`).

    Args:
        config: the configuration to change (`Config`); it is not modified.
        values: mapping of hyperparameter names (`HYPERPARAMETERS`) to single numbers, concrete or traced, in the
            units of each row's `label` (η per optimiser step, lag in optimiser steps, p_ref a probability, ...).

    Returns:
        A new `Config`, validated where the new values are concrete.

    Raises:
        PgrpoSimError: if `config` is not a `Config`, `values` is not a mapping, a name is unknown, a value is
            not a single number or (concretely) out of range, p_ref is given with concrete rewards that are not 0/1,
            or the changed configuration is invalid (e.g. a stale lag above max_lag).
    """
    check_config(config)
    if not isinstance(values, Mapping):
        raise PgrpoSimError(f"values must be a mapping of hyperparameter names to values, got {type(values).__name__}")
    changes: dict[str, Any] = {}
    ordered = sorted(values, key=lambda n: n == "epsilon_high")  # epsilon_high after epsilon
    for name in ordered:
        row, value = hyperparameter(name), values[name]
        check_scalar(name, value)
        row.check(value)
        if name == "epsilon":
            changes["epsilon"] = value
            follows = config.epsilon_high == config.epsilon
            changes["epsilon_high"] = jnp.where(follows, value, config.epsilon_high)
        elif name == "p_ref":
            if is_concrete(config.rewards) and not np.all(np.isin(np.asarray(config.rewards), (0.0, 1.0))):
                raise PgrpoSimError("p_ref needs binary (0/1) rewards: it sets the mass of the correct arms")
            changes["init_logits"] = symmetric_logits(config.rewards, value)
        elif name in ("num_generations", "minibatches"):
            changes[name] = int(value)
        elif name == "lag":
            changes["lag"] = jnp.asarray(value, jnp.int32) if not isinstance(value, int) else value
        else:
            changes[row.field] = value
    return config.replace(**changes)


def with_hyperparameters(config: Config, **values: Any) -> Config:
    """`set_hyperparameters` with keyword arguments, e.g. to differentiate with respect to p_ref:
    `jax.grad(lambda p: outcomes(with_hyperparameters(cfg, p_ref=p), 500).final_reward)(0.2)`.

    Args:
        config: the configuration to change (`Config`); it is not modified.
        **values: hyperparameter names (`HYPERPARAMETERS`) as keywords, values as in `set_hyperparameters`.

    Returns:
        A new `Config`, as `set_hyperparameters`.

    Raises:
        PgrpoSimError: as `set_hyperparameters`.
    """
    return set_hyperparameters(config, values)
