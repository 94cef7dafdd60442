"""A real run's configuration under TRL `GRPOConfig` names, and its mapping onto the bandit.

`RunConfig` holds the keys a practitioner sets (README "Calibrate, forecast, what-if" has the table of how
each maps onto the simulator). Values come, in order of precedence, from `--run-config FILE` (JSON or YAML),
from the settings the log itself records (`TrainingLog.settings`), and from TRL's defaults; `RunConfig.sources`
says which, so a report can name every value that was assumed rather than given.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base.checks import FLOAT32_MAX, MAX_STEPS, check_choice, check_range
from ..base.errors import PgrpoSimError
from ..logs.readers import check_log, constant_learning_rate
from ..models.config import MAX_GROUP_SIZE

SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")
SCALE_REWARDS = ("group", "batch", "none")
OPTIMIZERS = ("adamw", "adam", "sgd")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "grpo_clip", "grpo_no_clip", "reinforce_with_baseline")
NO_CLIP_LOSSES = ("grpo_no_clip", "reinforce_with_baseline")
"""Loss types that take no clip (CS336's names): their `epsilon` is None."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The run's settings (TRL `GRPOConfig` names, plus `prompts_per_step`, `optimizer`, `reward_scale`).

    learning_rate: peak optimiser learning rate of the real run; num_generations: G, completions per prompt;
    num_iterations: epochs over each rollout (TRL `num_iterations`, verl `ppo_epochs`); steps_per_generation:
    optimiser steps per epoch (mini-batches of the rollout); beta: KL coefficient; epsilon / epsilon_high: clip
    range (None: no clip); scale_rewards: group / batch / none; loss_type: token aggregation (no effect on a
    one-token bandit except the no-clip losses); max_grad_norm: recorded, not mapped; lr_scheduler_type,
    warmup_ratio, max_steps: the schedule (max_steps in logged steps); prompts_per_step: unique prompts per
    rollout; optimizer: adamw / adam / sgd; reward_scale: the reward of a fully correct completion (logged
    rewards are divided by it, so the success probability lies in [0, 1]); dataset_size: prompts in the dataset
    (None: many more than prompts_per_step), for the finite-population correction of the batch's noise.
    """

    learning_rate: float = 1e-6
    num_generations: int = 8
    num_iterations: int = 1
    steps_per_generation: int = 1
    beta: float = 0.0
    epsilon: float | None = 0.2
    epsilon_high: float | None = None
    scale_rewards: str = "group"
    loss_type: str = "dapo"
    max_grad_norm: float | None = 1.0
    lr_scheduler_type: str = "linear"
    warmup_ratio: float = 0.0
    max_steps: int | None = None
    prompts_per_step: int = 8
    optimizer: str = "adamw"
    reward_scale: float = 1.0
    dataset_size: int | None = None
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self):
        check_range("learning_rate", self.learning_rate, 0.0, FLOAT32_MAX, low_open=True)
        check_range("num_generations", self.num_generations, 2, MAX_GROUP_SIZE, integer=True)
        check_range("num_iterations", self.num_iterations, 1, integer=True)
        check_range("steps_per_generation", self.steps_per_generation, 1, integer=True)
        check_range("beta", self.beta, 0.0, FLOAT32_MAX)
        if self.epsilon is not None:
            check_range("epsilon", self.epsilon, 0.0, 1.0, low_open=True, high_open=True)
        if self.epsilon_high is not None:
            check_range("epsilon_high", self.epsilon_high, 0.0, FLOAT32_MAX, low_open=True)
        check_choice("scale_rewards", self.scale_rewards, SCALE_REWARDS)
        check_choice("loss_type", self.loss_type, LOSS_TYPES)
        if self.max_grad_norm is not None:
            check_range("max_grad_norm", self.max_grad_norm, 0.0, FLOAT32_MAX, low_open=True)
        check_choice("lr_scheduler_type", self.lr_scheduler_type, SCHEDULES)
        check_range("warmup_ratio", self.warmup_ratio, 0.0, 1.0, high_open=True)
        if self.max_steps is not None:
            check_range("max_steps", self.max_steps, 1, MAX_STEPS, integer=True)
        check_range("prompts_per_step", self.prompts_per_step, 1, integer=True)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_range("reward_scale", self.reward_scale, 0.0, FLOAT32_MAX, low_open=True)
        if self.dataset_size is not None:
            check_range("dataset_size", self.dataset_size, self.prompts_per_step, integer=True)
        if self.prompts_per_step % self.steps_per_generation:
            raise PgrpoSimError(
                f"steps_per_generation ({self.steps_per_generation}) must divide prompts_per_step "
                f"({self.prompts_per_step}): each optimiser step takes an equal share of the rollout's prompts"
            )

    @property
    def steps_per_rollout(self) -> int:
        """Optimiser steps taken on one rollout: num_iterations × steps_per_generation."""
        return self.num_iterations * self.steps_per_generation

    @property
    def clip(self) -> tuple[float, float] | None:
        """(ε_low, ε_high), or None for no clip."""
        if self.epsilon is None:
            return None
        return self.epsilon, self.epsilon if self.epsilon_high is None else self.epsilon_high

    def warmup_steps(self, max_steps: int) -> int:
        """Warm-up length in logged steps: ⌈warmup_ratio × max_steps⌉ (as transformers' TrainingArguments)."""
        return math.ceil(self.warmup_ratio * max_steps)

    def replace(self, **changes) -> RunConfig:
        """A copy with keys changed (validated), their source marked "scenario". A change to a loss without a clip
        (`NO_CLIP_LOSSES`) also removes the clip, unless it sets epsilon too."""
        unknown = sorted(set(changes) - set(KEYS))
        if unknown:
            raise PgrpoSimError(f"unknown run-config key {unknown[0]!r} (known: {', '.join(KEYS)})")
        if changes.get("loss_type") in NO_CLIP_LOSSES and "epsilon" not in changes:
            changes["epsilon"] = None
        return dataclasses.replace(self, **changes, sources={**self.sources, **dict.fromkeys(changes, "scenario")})

    def as_dict(self) -> dict:
        """JSON-ready: every key with its value and its source."""
        return {k: getattr(self, k) for k in KEYS} | {"sources": dict(self.sources)}


KEYS = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name != "sources")
"""The run-config keys, in order."""
_INTEGER = (
    "num_generations",
    "num_iterations",
    "steps_per_generation",
    "max_steps",
    "prompts_per_step",
    "dataset_size",
)
_NULLABLE = ("epsilon", "epsilon_high", "max_grad_norm", "max_steps", "dataset_size")


def check_run_config(run, name: str = "run") -> None:
    """Raise `PgrpoSimError` unless `run` is a `RunConfig` (a dict is a common slip)."""
    if not isinstance(run, RunConfig):
        raise PgrpoSimError(
            f"{name} must be a RunConfig (resolve_run_config builds one from a dict), got {type(run).__name__}"
        )


def _coerce(key: str, value: Any) -> Any:
    """A value from a file, a log or a scenario string, as the key's type; a one-line error otherwise."""
    if isinstance(value, str) and value.strip().lower() in ("none", "null") and key in _NULLABLE:
        return None
    if value is None:
        if key in _NULLABLE:
            return None
        raise PgrpoSimError(f"run-config {key} must have a value, got null")
    if key == "scale_rewards" and isinstance(value, bool | str) and str(value).lower() in ("true", "false"):
        return "group" if str(value).lower() == "true" else "none"  # TRL's older boolean form
    default = RunConfig.__dataclass_fields__[key].default
    if isinstance(default, str):
        return str(value)
    if isinstance(value, bool):  # YAML's true/false is not a number (float(True) would read as 1)
        raise PgrpoSimError(f"run-config {key} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PgrpoSimError(f"run-config {key} must be a number, got {value!r}") from None
    if key in _INTEGER:
        if not number.is_integer():
            raise PgrpoSimError(f"run-config {key} must be an integer, got {value!r}")
        return int(number)
    return number


def read_run_config(path: str | Path) -> dict[str, Any]:
    """The keys of a JSON or YAML run-config file (a mapping of GRPOConfig names to values), checked by name."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PgrpoSimError(f"run-config: cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else _yaml(text)
    except ValueError as exc:
        raise PgrpoSimError(f"run-config {path.name}: not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    if not isinstance(data, Mapping):
        raise PgrpoSimError(f"run-config {path.name}: expected a mapping of GRPOConfig keys, got {type(data).__name__}")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise PgrpoSimError(f"run-config {path.name}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
    return {k: _coerce(k, v) for k, v in data.items()}


def _yaml(text: str):
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(" ".join(str(exc).split())) from None


def parse_scenario(text: str) -> dict[str, Any]:
    """`"KEY=VALUE[,KEY=VALUE…]"` → the changed keys, typed and checked by name."""
    changes = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PgrpoSimError(f"scenario item {item!r} must be KEY=VALUE")
        if key not in KEYS:
            raise PgrpoSimError(f"unknown run-config key {key!r} in scenario (known: {', '.join(KEYS)})")
        if key in changes:
            raise PgrpoSimError(f"scenario {text!r} sets {key} twice: give each key once")
        changes[key] = _coerce(key, value.strip())
    if not changes:
        raise PgrpoSimError(f"scenario {text!r} changes nothing: give KEY=VALUE[,KEY=VALUE…]")
    return changes


def log_settings(log) -> dict[str, Any]:
    """What a `TrainingLog` says about its run: its recorded `settings`, plus `lr_scheduler_type` "constant" and the
    `learning_rate` when its logged learning rate never changes (at least 3 finite values)."""
    check_log(log)
    settings = dict(log.settings)
    lr = constant_learning_rate(log.series("learning_rate")[1]) if "learning_rate" in log else None
    if lr is not None:
        settings.setdefault("learning_rate", lr)
        settings.setdefault("lr_scheduler_type", "constant")
    return settings


def resolve_run_config(given: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None) -> RunConfig:
    """The run configuration: `given` (a run-config file) over `settings` (what the log records) over TRL's
    defaults; `sources` marks each key "run-config", "log" or "default"."""
    for name, mapping in (("given", given), ("settings", settings)):
        if mapping is not None and not isinstance(mapping, Mapping):
            raise PgrpoSimError(
                f"{name} must be a mapping of run-config keys (read_run_config reads a file), got "
                f"{type(mapping).__name__}"
            )
    unknown = sorted(set(given or {}) - set(KEYS) - {"sources"})  # a RunConfig.as_dict() reads back
    if unknown:
        raise PgrpoSimError(f"unknown run-config key {unknown[0]!r} (known: {', '.join(KEYS)})")
    given = {k: v for k, v in (given or {}).items() if k != "sources"}
    settings = {k: v for k, v in (settings or {}).items() if k in KEYS}
    values, sources = {}, {}
    for key in KEYS:
        if key in given:
            values[key], sources[key] = given[key], "run-config"
        elif key in settings:
            values[key], sources[key] = _coerce(key, settings[key]), "log"
        else:
            sources[key] = "default"
    if sources["epsilon"] != "run-config" and values.get("loss_type") in NO_CLIP_LOSSES:  # unless given explicitly
        values["epsilon"], sources["epsilon"] = None, sources["loss_type"]
    return RunConfig(**values, sources=sources)
