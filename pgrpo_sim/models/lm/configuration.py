"""Configuration of a GRPO run on the language-model level, under TRL `GRPOConfig`'s names.

`Config` is an `equinox.Module`: sizes and code paths (task, policy shape, G, prompts per step, epochs,
mini-batches, schedule, ratio level, …) are static; every hyperparameter a sweep varies (learning rate, ε, β,
temperature, gradient clip, AdamW's settings, warm-up, epochs, and the loss type and advantage kind as int32 codes)
is a traced array leaf, so `jax.vmap` over stacked configurations trains many networks in one program and a second
value does not recompile. Build it with `config` (`ps.lm.config`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import Interval, as_float, check_choice, check_range, check_scalar, is_concrete
from ...base.errors import PgrpoSimError
from ..grpo import ADVANTAGES, LOSS_TYPES, SCALE_REWARDS, advantage_code
from ..schedules import LR_SCHEDULES
from .loss import IMPORTANCE_SAMPLING_LEVELS, loss_type_code
from .policy import PolicyShape, task_policy_shape
from .pretrain import DEFAULT_START_FORMAT, MAX_START_ACCURACY
from .task import TaskSpec, check_sizes

ADVANTAGE_EPS = 1e-4
"""TRL's advantage denominator ε: (r − mean)/(std + 1e-4)."""
HYPERPARAMETERS: Mapping[str, Interval] = MappingProxyType(
    {
        "learning_rate": Interval(0.0, None, low_open=True),
        "epsilon": Interval(0.0),
        "epsilon_high": Interval(0.0),
        "delta": Interval(1.0, None, low_open=True),
        "beta": Interval(0.0),
        "temperature": Interval(0.0, None, low_open=True),
        "max_grad_norm": Interval(0.0, None, low_open=True),
        "weight_decay": Interval(0.0),
        "adam_beta1": Interval(0.0, 1.0, high_open=True),
        "adam_beta2": Interval(0.0, 1.0, high_open=True),
        "adam_epsilon": Interval(0.0),
    }
)
"""The traced real-valued hyperparameters and their allowed ranges (ε, ε_high, δ and the gradient clip may be +∞:
off)."""
UNBOUNDED = ("epsilon", "epsilon_high", "delta", "max_grad_norm")
"""Hyperparameters whose +∞ means "off" (no clip)."""
MAX_ITERATIONS = 1024
"""Most passes over one generation batch (`num_iterations`)."""
MAX_SCHEDULE_STEPS = 10**8
"""Longest schedule, in optimiser steps (a run's `steps` limit)."""
DEFAULT_LEARNING_RATE = 1e-3
"""This level's default AdamW rate (TRL's 1e-6 is for billion-parameter models; a ~100k-parameter transformer
learns at 1e-4 … 1e-3)."""


def _float_leaf(x: ArrayLike) -> Array:
    """Real hyperparameters become float arrays (None and text are kept, for `__check_init__` to refuse by name)."""
    if x is None or isinstance(x, (str, bytes)):
        return cast(Array, x)  # not a number: kept, for `__check_init__` to refuse
    return as_float(x)


def _int_leaf(x: ArrayLike) -> Array:
    """Integer hyperparameters become int32 arrays once checked whole (a fraction is kept, for the check)."""
    if x is None or isinstance(x, (str, bytes)) or (is_concrete(x) and np.any(np.asarray(x) != np.round(x))):
        return cast(Array, x)  # not a whole number: kept, for `__check_init__` to refuse
    return jnp.asarray(x, jnp.int32)


class Config(eqx.Module):
    """A GRPO run on the language-model level (docs: `config`). Build it with `config`, not directly.

    Traced leaves are scalars, or carry a leading axis when configurations are stacked for `vmap`
    (`lm.simulate_each`); the rest is static. Steps are optimiser steps unless said otherwise.

    Attributes:
        learning_rate: peak AdamW learning rate; float scalar; > 0.
        epsilon: ε_low of the clip; float scalar; ≥ 0, +∞: no clip.
        epsilon_high: ε_high of the clip (for "cispo" the cap on ρ); float scalar; ≥ 0, +∞: no clip.
        delta: TRL's two-sided clip δ on ρ; float scalar; > 1, +∞: off.
        beta: k3 KL coefficient against the start policy; float scalar; ≥ 0.
        temperature: sampling temperature; float scalar; > 0.
        max_grad_norm: global-norm gradient clip; float scalar; > 0, +∞: off.
        weight_decay: AdamW decoupled weight decay (matrices only); float scalar; ≥ 0.
        adam_beta1: AdamW β1; float scalar; in [0, 1).
        adam_beta2: AdamW β2; float scalar; in [0, 1).
        adam_epsilon: AdamW ε; float scalar; ≥ 0.
        warmup_steps: the schedule's warm-up, in optimiser steps; int32 scalar; ≥ 0.
        max_steps: the schedule's length, in optimiser steps (a decay reaches 0 there); int32 scalar; ≥ 1, or 0:
            the simulated run's own length.
        num_iterations: passes over each generation batch; int32 scalar; in [1, 1024] (traced: runs that differ
            only in their epochs share one compiled program).
        loss_type: the loss type's code, its index in `LOSS_TYPES`; int32 scalar.
        advantage: the advantage kind's code, its index in `models.grpo.ADVANTAGES` (`SCALE_REWARDS`); int32 scalar.
        task: the task's sizes (`TaskSpec`); static.
        policy: the transformer's sizes (`PolicyShape`, `task_policy_shape` of `task`); static.
        num_generations: G, completions per prompt; integer in [2, 4096].
        prompts_per_step: prompts per GRPO step; integer in [1, 65536].
        steps_per_generation: mini-batches (optimiser steps) per pass; integer in [1, 2²⁰] dividing
            prompts_per_step × num_generations.
        importance_sampling_level: "token" or "sequence" (GSPO), `IMPORTANCE_SAMPLING_LEVELS`.
        mask_truncated_completions: whether completions without EOS are left out of the loss.
        lr_scheduler_type: the schedule over the run's optimiser steps, one of `models.schedules.LR_SCHEDULES`.
        kl_reference: whether the reference (start) policy's log-probabilities are computed; needed for β > 0.
        eval_every: GRPO steps between greedy evaluations; integer in [1, 2³⁰].
        start_accuracy: the SFT start's target sampled accuracy; in (0, 0.95], ≤ start_format.
        start_format: share of well-formed SFT demonstrations; in (0, 1].
        sft_seed: the SFT start's seed; integer in [0, 2³² − 1].

    Raises:
        PgrpoSimError: on construction, when a concrete value is out of its range or the sizes do not fit together.
    """

    learning_rate: Array = eqx.field(converter=_float_leaf)
    epsilon: Array = eqx.field(converter=_float_leaf)
    epsilon_high: Array = eqx.field(converter=_float_leaf)
    delta: Array = eqx.field(converter=_float_leaf)
    beta: Array = eqx.field(converter=_float_leaf)
    temperature: Array = eqx.field(converter=_float_leaf)
    max_grad_norm: Array = eqx.field(converter=_float_leaf)
    weight_decay: Array = eqx.field(converter=_float_leaf)
    adam_beta1: Array = eqx.field(converter=_float_leaf)
    adam_beta2: Array = eqx.field(converter=_float_leaf)
    adam_epsilon: Array = eqx.field(converter=_float_leaf)
    warmup_steps: Array = eqx.field(converter=_int_leaf)
    max_steps: Array = eqx.field(converter=_int_leaf)
    num_iterations: Array = eqx.field(converter=_int_leaf)
    loss_type: Array = eqx.field(converter=loss_type_code)
    advantage: Array = eqx.field(converter=advantage_code)
    task: TaskSpec = eqx.field(static=True)
    policy: PolicyShape = eqx.field(static=True)
    num_generations: int = eqx.field(static=True)
    prompts_per_step: int = eqx.field(static=True)
    steps_per_generation: int = eqx.field(static=True)
    importance_sampling_level: str = eqx.field(static=True)
    mask_truncated_completions: bool = eqx.field(static=True)
    lr_scheduler_type: str = eqx.field(static=True)
    kl_reference: bool = eqx.field(static=True)
    eval_every: int = eqx.field(static=True)
    start_accuracy: float = eqx.field(static=True)
    start_format: float = eqx.field(static=True)
    sft_seed: int = eqx.field(static=True)

    def __check_init__(self):
        for name, interval in HYPERPARAMETERS.items():
            value = getattr(self, name)
            check_scalar(name, value)
            check_range(name, value, *interval[:2], low_open=interval.low_open, high_open=interval.high_open,
                        allow_inf=name in UNBOUNDED)  # fmt: skip
        for name in ("warmup_steps", "max_steps", "num_iterations", "loss_type", "advantage"):
            check_scalar(name, getattr(self, name))
        check_range("warmup_steps", self.warmup_steps, 0, integer=True)
        check_range("max_steps", self.max_steps, 0, MAX_SCHEDULE_STEPS, integer=True)
        check_range("num_iterations", self.num_iterations, 1, MAX_ITERATIONS, integer=True)
        if not isinstance(self.task, TaskSpec) or not isinstance(self.policy, PolicyShape):
            raise PgrpoSimError("task must be a TaskSpec and policy a PolicyShape (build the config with ps.lm.config)")
        limits = dict(num_generations=(2, 4096), prompts_per_step=(1, 2**16))
        check_sizes(
            self, limits | dict(steps_per_generation=(1, 2**20), eval_every=(1, 2**30), sft_seed=(0, 2**32 - 1))
        )
        batch = self.num_generations * self.prompts_per_step
        if batch % self.steps_per_generation:
            raise PgrpoSimError(
                f"steps_per_generation must divide the generation batch (prompts_per_step × num_generations = "
                f"{batch}), got {self.steps_per_generation}"
            )
        check_choice("importance_sampling_level", self.importance_sampling_level, IMPORTANCE_SAMPLING_LEVELS)
        check_choice("lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULES)
        for name in ("mask_truncated_completions", "kl_reference"):
            if not isinstance(getattr(self, name), bool):
                raise PgrpoSimError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not self.kl_reference and is_concrete(self.beta) and np.any(np.asarray(self.beta) != 0):
            raise PgrpoSimError("beta > 0 needs kl_reference=True (the reference policy's log-probabilities)")
        check_range("start_accuracy", self.start_accuracy, 0.0, MAX_START_ACCURACY, low_open=True)  # pretrain's range
        check_range("start_format", self.start_format, 0.0, 1.0, low_open=True)
        if self.start_accuracy > self.start_format:
            raise PgrpoSimError(
                f"start_accuracy ({self.start_accuracy:g}) cannot exceed start_format ({self.start_format:g}): a "
                "malformed completion is not rewarded"
            )
        want = task_policy_shape(self.task, self.policy.width, self.policy.layers, self.policy.heads)
        if self.policy != want:
            raise PgrpoSimError(f"policy shape {self.policy} does not fit the task (want {want})")

    @property
    def generation_batch(self) -> int:
        """Completions per GRPO step: prompts_per_step × num_generations."""
        return self.prompts_per_step * self.num_generations

    @property
    def steps_per_rollout(self) -> Array:
        """Optimiser steps per GRPO step (rollout): num_iterations × steps_per_generation; int32 (traced with
        `num_iterations`)."""
        return self.num_iterations * self.steps_per_generation

    @property
    def loss_type_name(self) -> str:
        """The loss type's name (needs a concrete, unbatched `loss_type`)."""
        return LOSS_TYPES[int(self.loss_type)]

    @property
    def scale_rewards(self) -> str:
        """TRL's `scale_rewards` name of the advantage kind (needs a concrete, unbatched `advantage`)."""
        kind = ADVANTAGES[int(self.advantage)]
        return next(name for name, k in SCALE_REWARDS.items() if k == kind)

    def replace(self, **changes) -> Config:
        """A copy with fields changed (validated when the new values are concrete).

        Args:
            **changes: field name → new value, as the field holds it (codes for `loss_type` and `advantage`).

        Returns:
            The changed `Config`.
        """
        return dataclasses.replace(self, **changes)


def config(
    *,
    learning_rate: ArrayLike = DEFAULT_LEARNING_RATE,
    num_generations: int = 8,
    prompts_per_step: int = 32,
    num_iterations: ArrayLike = 1,
    steps_per_generation: int = 1,
    loss_type: str | ArrayLike = "dapo",
    scale_rewards: str = "group",
    epsilon: ArrayLike | None = 0.2,
    epsilon_high: ArrayLike | None = None,
    delta: ArrayLike | None = None,
    beta: ArrayLike = 0.0,
    kl_reference: bool | None = None,
    importance_sampling_level: str = "token",
    mask_truncated_completions: bool = False,
    temperature: ArrayLike = 1.0,
    max_grad_norm: ArrayLike | None = 1.0,
    weight_decay: ArrayLike = 0.0,
    adam_beta1: ArrayLike = 0.9,
    adam_beta2: ArrayLike = 0.999,
    adam_epsilon: ArrayLike = 1e-8,
    lr_scheduler_type: str = "constant",
    warmup_steps: ArrayLike = 0,
    max_steps: ArrayLike | None = None,
    max_completion_length: int = 16,
    modulus: int = 10,
    operands: int = 4,
    width: int = 64,
    layers: int = 2,
    heads: int = 4,
    start_accuracy: float = 0.2,
    start_format: float = DEFAULT_START_FORMAT,
    sft_seed: int = 0,
    eval_every: int = 10,
    eval_size: int = 256,
) -> Config:
    """Build and validate a `Config`; names and defaults are TRL `GRPOConfig`'s, except where noted.

    Batch: each GRPO step draws `prompts_per_step` prompts and `num_generations` (G) completions of each (TRL's
    generation batch), then takes `num_iterations` × `steps_per_generation` AdamW steps over it, in
    `steps_per_generation` shuffled mini-batches per pass (TRL with `gradient_accumulation_steps` = 1).
    Hyperparameters marked traced may be arrays (a sweep vmaps over them); the rest are Python values.

    Args:
        learning_rate: peak AdamW learning rate; > 0; traced. Default `DEFAULT_LEARNING_RATE` (TRL's 1e-6 is for
            billion-parameter models).
        num_generations: G, completions per prompt; integer in [2, 4096].
        prompts_per_step: prompts per GRPO step; integer in [1, 65536].
        num_iterations: passes over each generation batch; integer in [1, 1024]; traced.
        steps_per_generation: shuffled mini-batches (AdamW steps) per pass; integer in [1, 2²⁰] that divides
            prompts_per_step × num_generations.
        loss_type: a name in `LOSS_TYPES` (TRL's default "dapo") or its `loss_type_code`; traced.
        scale_rewards: "group", "batch" or "none" (`SCALE_REWARDS`).
        epsilon: ε_low of the clip; ≥ 0; None: no clip (and ε_high none unless given); traced.
        epsilon_high: ε_high of the clip (for "cispo" the cap on ρ); ≥ 0; None: `epsilon`; traced.
        delta: TRL's two-sided clip δ (ρ capped at δ in the unclipped term); > 1; None: off; traced.
        beta: k3 KL coefficient against the start policy; ≥ 0; traced.
        kl_reference: whether to compute the reference log-probabilities; None: whether β may be nonzero (traced,
            or a concrete β ≠ 0).
        importance_sampling_level: "token" or "sequence" (GSPO).
        mask_truncated_completions: whether completions without EOS are left out of the loss.
        temperature: sampling temperature (also of the loss's log-probabilities); > 0; traced.
        max_grad_norm: global-norm gradient clip; > 0; None: off; traced.
        weight_decay: AdamW decoupled weight decay, on matrices only (as HF excludes biases and LayerNorm); ≥ 0;
            traced.
        adam_beta1: AdamW β1; in [0, 1); traced.
        adam_beta2: AdamW β2; in [0, 1); traced.
        adam_epsilon: AdamW ε; ≥ 0; traced.
        lr_scheduler_type: "constant", "constant_with_warmup", "linear" or "cosine" over the run's optimiser steps
            (this level's default is "constant", HF's "linear").
        warmup_steps: warm-up length, in optimiser steps; integer ≥ 0; traced.
        max_steps: the schedule's length, in optimiser steps (TRL's `max_steps`: a linear or cosine decay reaches 0
            there, also when the simulated run is shorter); integer in [1, 10⁸]; None: the simulated run's length;
            traced.
        max_completion_length: the task's longest response, in tokens; integer in [4, 32] (this level's name).
        modulus: m, the task's modulus (digits 0 … m − 1); integer in [2, 59].
        operands: k, digits per prompt; integer in [1, 10].
        width: the transformer's model dimension; integer in [1, 4096], divisible by `heads`.
        layers: transformer blocks; integer in [1, 64].
        heads: attention heads; integer that divides `width`.
        start_accuracy: the SFT start's target sampled (T = 1) eval accuracy; in (0, 0.95], ≤ `start_format`.
        start_format: share of well-formed SFT demonstrations (a low one hides right answers behind a broken format,
            as in a base model); in (0, 1].
        sft_seed: the SFT start's seed; integer in [0, 2³² − 1].
        eval_every: GRPO steps between greedy eval accuracies on the held-out prompts; integer in [1, 2³⁰].
        eval_size: held-out evaluation prompts; integer in [1, 65536].

    Returns:
        The validated `Config`.

    Raises:
        PgrpoSimError: a name is unknown, a concrete value is out of its range, or the sizes do not fit together
            (e.g. `steps_per_generation` does not divide the generation batch, β > 0 without `kl_reference`).
    """
    check_choice("scale_rewards", scale_rewards, tuple(SCALE_REWARDS))
    if max_steps is not None and is_concrete(max_steps):
        check_range("max_steps", max_steps, 1, MAX_SCHEDULE_STEPS, integer=True)
    task = TaskSpec(modulus=modulus, operands=operands, max_response_len=max_completion_length, eval_size=eval_size)
    if kl_reference is None:
        kl_reference = not is_concrete(beta) or bool(np.any(np.asarray(beta) != 0))
    return Config(
        learning_rate=learning_rate,
        epsilon=np.inf if epsilon is None else epsilon,
        epsilon_high=(np.inf if epsilon is None else epsilon) if epsilon_high is None else epsilon_high,
        delta=np.inf if delta is None else delta,
        beta=beta,
        temperature=temperature,
        max_grad_norm=np.inf if max_grad_norm is None else max_grad_norm,
        weight_decay=weight_decay,
        adam_beta1=adam_beta1,
        adam_beta2=adam_beta2,
        adam_epsilon=adam_epsilon,
        warmup_steps=warmup_steps,
        max_steps=0 if max_steps is None else max_steps,
        loss_type=loss_type,
        advantage=SCALE_REWARDS[scale_rewards],
        task=task,
        policy=task_policy_shape(task, width, layers, heads),
        num_generations=num_generations,
        prompts_per_step=prompts_per_step,
        num_iterations=num_iterations,
        steps_per_generation=steps_per_generation,
        importance_sampling_level=importance_sampling_level,
        mask_truncated_completions=mask_truncated_completions,
        lr_scheduler_type=lr_scheduler_type,
        kl_reference=kl_reference,
        eval_every=eval_every,
        start_accuracy=start_accuracy,
        start_format=start_format,
        sft_seed=sft_seed,
    )
