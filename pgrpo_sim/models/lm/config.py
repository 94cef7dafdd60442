"""Configuration of a GRPO run on the language-model level, under TRL `GRPOConfig`'s names.

`LMConfig` is an `equinox.Module`: sizes and code paths (task, policy shape, G, prompts per step, epochs,
mini-batches, schedule, ratio level, …) are static; every hyperparameter a sweep varies (learning rate, ε, β,
temperature, gradient clip, AdamW's settings, warm-up, and the loss type and advantage kind as int32 codes) is a
traced array leaf, so `jax.vmap` over stacked configurations trains many networks in one program and a second
value does not recompile. Build it with `lm_config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import Interval, as_float, check_choice, check_range, check_scalar, is_concrete
from ...base.errors import PgrpoSimError
from ..config import LR_SCHEDULES
from ..grpo import ADVANTAGES, advantage_code
from .loss import IMPORTANCE_SAMPLING_LEVELS, LOSS_TYPES, loss_type_code
from .policy import PolicyShape, task_policy_shape
from .pretrain import DEFAULT_START_FORMAT, MAX_START_ACCURACY
from .task import TaskSpec, check_sizes

SCALE_REWARDS = MappingProxyType({"group": "std", "batch": "batch", "none": "mean"})
"""TRL `scale_rewards` → the advantage kind of `models.grpo.group_advantages` (TRL's ε 1e-4)."""
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
DEFAULT_LEARNING_RATE = 1e-3
"""This level's default AdamW rate (TRL's 1e-6 is for billion-parameter models; a ~100k-parameter transformer
learns at 1e-4 … 1e-3)."""


def _float_leaf(x):
    """Real hyperparameters become float arrays (None and text are kept, for `__check_init__` to refuse by name)."""
    return x if x is None or isinstance(x, (str, bytes)) else as_float(x)


def _int_leaf(x):
    """Integer hyperparameters become int32 arrays once checked whole (a fraction is kept, for the check)."""
    if x is None or isinstance(x, (str, bytes)) or (is_concrete(x) and np.any(np.asarray(x) != np.round(x))):
        return x
    return jnp.asarray(x, jnp.int32)


class LMConfig(eqx.Module):
    """A GRPO run on the language-model level (docs: `lm_config`). Build it with `lm_config`, not directly."""

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
    loss_type: Array = eqx.field(converter=loss_type_code)
    advantage: Array = eqx.field(converter=advantage_code)
    task: TaskSpec = eqx.field(static=True)
    policy: PolicyShape = eqx.field(static=True)
    num_generations: int = eqx.field(static=True)
    prompts_per_step: int = eqx.field(static=True)
    num_iterations: int = eqx.field(static=True)
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
        for name in ("warmup_steps", "loss_type", "advantage"):
            check_scalar(name, getattr(self, name))
        check_range("warmup_steps", self.warmup_steps, 0, integer=True)
        if not isinstance(self.task, TaskSpec) or not isinstance(self.policy, PolicyShape):
            raise PgrpoSimError("task must be a TaskSpec and policy a PolicyShape (build the config with lm_config)")
        limits = dict(num_generations=(2, 4096), prompts_per_step=(1, 2**16), num_iterations=(1, 1024))
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
    def steps_per_rollout(self) -> int:
        """Optimiser steps per GRPO step (rollout): num_iterations × steps_per_generation."""
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

    def replace(self, **changes) -> LMConfig:
        """A copy with fields changed (validated when the new values are concrete)."""
        return dataclasses.replace(self, **changes)


def lm_config(
    *,
    learning_rate: ArrayLike = DEFAULT_LEARNING_RATE,
    num_generations: int = 8,
    prompts_per_step: int = 32,
    num_iterations: int = 1,
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
) -> LMConfig:
    """Build and validate an `LMConfig`; names and defaults are TRL `GRPOConfig`'s, except where noted.

    Batch: each GRPO step draws `prompts_per_step` prompts and `num_generations` (G) completions of each (TRL's
    generation batch), then takes `num_iterations` × `steps_per_generation` AdamW steps over it, in
    `steps_per_generation` shuffled mini-batches per pass (TRL with `gradient_accumulation_steps` = 1).
    Loss: `loss_type` (TRL's default "dapo"), `epsilon`/`epsilon_high` (None: no clip), `delta`, `beta` (k3 against
    the start policy; `kl_reference` computes the reference log-probabilities, default: whether β may be nonzero),
    `importance_sampling_level`, `mask_truncated_completions`, `scale_rewards` group | batch | none.
    Optimiser: AdamW with `max_grad_norm` global-norm clipping (None: off), weight decay on matrices only (as HF
    excludes biases and LayerNorm), `lr_scheduler_type` constant | constant_with_warmup | linear | cosine over the
    run's optimiser steps (this level's default is "constant", HF's "linear"), `warmup_steps` in optimiser steps;
    `learning_rate` defaults to `DEFAULT_LEARNING_RATE` (TRL's 1e-6 is for billion-parameter models).
    Task and model (this level's own names): `modulus`, `operands`, `max_completion_length` (the task's longest
    response), `width`, `layers`, `heads`; the SFT start's `start_accuracy`, `start_format` (the share of
    well-formed demonstrations: a low one hides right answers behind a broken format, as in a base model) and
    `sft_seed`; greedy eval accuracy on `eval_size` held-out prompts every `eval_every` GRPO steps.
    """
    check_choice("scale_rewards", scale_rewards, tuple(SCALE_REWARDS))
    task = TaskSpec(modulus=modulus, operands=operands, max_response_len=max_completion_length, eval_size=eval_size)
    if kl_reference is None:
        kl_reference = not is_concrete(beta) or bool(np.any(np.asarray(beta) != 0))
    return LMConfig(
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
