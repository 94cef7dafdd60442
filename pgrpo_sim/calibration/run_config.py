"""A real run's configuration under TRL `GRPOConfig` names, and its mapping onto the bandit.

`RunConfig` holds the keys a practitioner sets (docs/guide/calibration.md has the table of how
each maps onto the simulator). Values come, in order of precedence, from a run-config file (JSON or YAML),
from the settings the log itself records (`TrainingLog.settings`), and from TRL's defaults; `RunConfig.sources`
says which, so a report can name every value that was assumed rather than given. A run-config file may also be a
TRL `GRPOConfig` dump (`trainer.args.to_dict()`) or a verl trainer config (`run_config_files.load_run_config`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..base.checks import FLOAT32_MAX, MAX_STEPS, check_choice, check_range
from ..base.errors import PgrpoSimError
from ..logs.readers import TrainingLog, check_log, logged_schedule
from ..models.bandit.configuration import MAX_GROUP_SIZE
from ..models.grpo import SCALE_REWARDS, TOKEN_AGGREGATIONS
from ..models.schedules import LR_SCHEDULES

RUN_OPTIMIZERS = ("adamw", "adam", "sgd")
"""The optimisers a run config names (TRL's `optim` families); the bandit's own are
`models.bandit.configuration.OPTIMIZERS`."""
CS336_LOSS_TYPES = MappingProxyType({"grpo_clip": "grpo", "grpo_no_clip": "grpo", "reinforce_with_baseline": "grpo"})
"""CS336's loss names → TRL's token aggregation (a per-sequence mean); their clip is the run config's (none for
`NO_CLIP_LOSSES`). REINFORCE has no ratio: with one optimiser step per rollout the ratio is 1 and its gradient is the
clipped surrogate's; with reuse the level's ratio stays (said in the notes)."""
RUN_LOSS_TYPES = (*TOKEN_AGGREGATIONS, *CS336_LOSS_TYPES)
"""The `loss_type`s a run config may name: TRL's token aggregations and CS336's names."""
NO_CLIP_LOSSES = ("grpo_no_clip", "reinforce_with_baseline")
"""Loss types that take no clip (CS336's names): their `epsilon` is None."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The run's settings (TRL `GRPOConfig` names, plus `prompts_per_step`, `optimizer`, `reward_scale`).

    Attributes:
        learning_rate: peak optimiser learning rate of the real run; > 0.
        num_generations: G, completions per prompt; integer in [2, `MAX_GROUP_SIZE`].
        num_iterations: epochs over each rollout (TRL `num_iterations`, verl `ppo_epochs`); integer ≥ 1.
        steps_per_generation: optimiser steps per epoch (mini-batches of the rollout); integer ≥ 1, divides P.
        beta: KL coefficient (k3 against the start); ≥ 0.
        epsilon: ε_low of the clip range; in (0, 1); None: no clip.
        epsilon_high: ε_high of the clip range; ≥ epsilon; None: equal to epsilon.
        scale_rewards: the advantage's scaling, one of TRL's `models.grpo.SCALE_REWARDS` (group / batch / none).
        loss_type: token aggregation, one of `RUN_LOSS_TYPES` (no effect on the bandit except `NO_CLIP_LOSSES`).
        max_grad_norm: gradient clip; > 0 or None; recorded, not mapped.
        lr_scheduler_type: the schedule, one of `models.schedules.LR_SCHEDULES`.
        warmup_ratio: warm-up share of the schedule; in [0, 1).
        max_steps: the schedule's length, in logged steps; integer in [1, 10⁸]; None: the log's length.
        prompts_per_step: P, unique prompts per rollout; integer ≥ 1.
        optimizer: one of `RUN_OPTIMIZERS` (adamw / adam / sgd).
        reward_scale: the reward of a fully correct completion, in the log's units (logged rewards are divided by
            it, so the success probability lies in [0, 1]); > 0.
        dataset_size: N, prompts in the dataset (batch noise's finite-population correction); integer ≥ P; None: ≫ P.
        sources: key → where its value came from: "run-config", "log", "default" or "scenario".
        notes: what a report should say about the configuration (`with_notes`).

    Raises:
        PgrpoSimError: a value is out of its range, epsilon_high < epsilon, or steps_per_generation does not divide P.
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
    notes: tuple[str, ...] = dataclasses.field(default=(), compare=False)

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
        if self.epsilon is not None and self.epsilon_high is not None and self.epsilon_high < self.epsilon:
            raise PgrpoSimError(
                f"epsilon_high ({self.epsilon_high:g}) must be >= epsilon ({self.epsilon:g}): a smaller upper clip is "
                "not a clip-higher setting; leave epsilon_high out (null) for a symmetric clip"
            )
        check_choice("scale_rewards", self.scale_rewards, tuple(SCALE_REWARDS))
        check_choice("loss_type", self.loss_type, RUN_LOSS_TYPES)
        if self.max_grad_norm is not None:
            check_range("max_grad_norm", self.max_grad_norm, 0.0, FLOAT32_MAX, low_open=True)
        check_choice("lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULES)
        check_range("warmup_ratio", self.warmup_ratio, 0.0, 1.0, high_open=True)
        if self.max_steps is not None:
            check_range("max_steps", self.max_steps, 1, MAX_STEPS, integer=True)
        check_range("prompts_per_step", self.prompts_per_step, 1, integer=True)
        check_choice("optimizer", self.optimizer, RUN_OPTIMIZERS)
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
        """Warm-up length in logged steps: ⌈warmup_ratio × max_steps⌉ (as transformers' TrainingArguments).

        Args:
            max_steps: the schedule's length, in logged steps.

        Returns:
            The warm-up length, in logged steps.
        """
        return math.ceil(round(self.warmup_ratio * max_steps, 6))  # round: W / T × T is not always W in floats

    def replace(self, **changes) -> RunConfig:
        """A copy with keys changed (validated), their source marked "scenario". A change to a loss without a clip
        (`NO_CLIP_LOSSES`) also removes the clip, unless it sets epsilon too.

        Args:
            **changes: run-config key (`KEYS`) → new value.

        Returns:
            The changed `RunConfig`.

        Raises:
            PgrpoSimError: a key is unknown or a value out of range.
        """
        unknown = sorted(set(changes) - set(KEYS))
        if unknown:
            raise PgrpoSimError(f"unknown run-config key {unknown[0]!r} (known: {', '.join(KEYS)})")
        if changes.get("loss_type") in NO_CLIP_LOSSES and "epsilon" not in changes:
            changes["epsilon"] = None
        return dataclasses.replace(self, **changes, sources={**self.sources, **dict.fromkeys(changes, "scenario")})

    def with_notes(self, *notes: str) -> RunConfig:
        """A copy with `notes` added (empty ones skipped).

        Args:
            *notes: the notes to add, one sentence each.

        Returns:
            The `RunConfig` with them appended.
        """
        return dataclasses.replace(self, notes=self.notes + tuple(n for n in notes if n))

    def as_dict(self) -> dict:
        """JSON-ready: every key with its value and its source, and the notes."""
        return {k: getattr(self, k) for k in KEYS} | {"sources": dict(self.sources), "notes": list(self.notes)}

    def assumed(self, run_config: str | Path | None = None) -> str:
        """The settings that shape the model and came from TRL's defaults (`ASSUMED`; not warmup_ratio under a
        constant schedule nor an unset epsilon_high, = epsilon), as one clause for a summary line; "" when none.

        Args:
            run_config: the run-config file given, or None (then the clause says to pass one).
        """
        moot = {"warmup_ratio": self.lr_scheduler_type == "constant", "epsilon_high": self.epsilon_high is None}
        shown = [
            f"{symbol} = {_show(getattr(self, k))}"
            for k, symbol in ASSUMED.items()
            if self.sources[k] == "default" and not moot.get(k)
        ]
        how = "pass run_config=FILE to set them" if run_config is None else f"{Path(run_config).name} does not set them"
        return f"assumed: {', '.join(shown)} — {how}" if shown else ""


KEYS = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in ("sources", "notes"))
"""The run-config keys, in order."""
_NAMED = ("learning_rate", "lr_scheduler_type", "warmup_ratio", "steps_per_generation", "epsilon", "epsilon_high")
ASSUMED = {"num_generations": "G", "prompts_per_step": "prompts_per_step", "beta": "β", "num_iterations": "epochs"}
ASSUMED |= {k: k for k in (*_NAMED, "scale_rewards", "loss_type", "max_grad_norm")}
"""The keys a summary line names (`RunConfig.assumed`) when assumed: each shapes a level's model or is what a scenario
changes (its learning rate is a multiple of the run's). Not named: `max_steps` (None: the log's length), `dataset_size`
(None: ≫ P), `reward_scale` (the reward's reading has its own note), `optimizer` (neither level follows it)."""


def _show(value) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


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
    """Raise `PgrpoSimError` unless `run` is a `RunConfig` (a dict is a common slip).

    Args:
        run: the object to check.
        name: its name in the error message.

    Raises:
        PgrpoSimError: `run` is not a `RunConfig`.
    """
    if not isinstance(run, RunConfig):
        raise PgrpoSimError(
            f"{name} must be a RunConfig (resolve_run_config builds one from a dict), got {type(run).__name__}"
        )


def coerce(key: str, value: Any) -> Any:
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


def parse_scenario(text: str) -> dict[str, Any]:
    """`"KEY=VALUE[,KEY=VALUE…]"` → the changed keys, typed and checked by name.

    Args:
        text: comma-separated KEY=VALUE items, keys from `KEYS`; "none" or "null" clears a nullable key.

    Returns:
        Run-config key → typed value (for `RunConfig.replace`, `what_if`).

    Raises:
        PgrpoSimError: an item is not KEY=VALUE, a key is unknown or repeated, a value is mistyped, or none is set.
    """
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
        changes[key] = coerce(key, value.strip())
    if not changes:
        raise PgrpoSimError(f"scenario {text!r} changes nothing: give KEY=VALUE[,KEY=VALUE…]")
    return changes


def log_settings(log: TrainingLog, max_steps: int | None = None) -> dict[str, Any]:
    """What a `TrainingLog` says about its run: its recorded `settings`, plus what its logged learning rate shows
    (`logs.readers.logged_schedule`: the peak `learning_rate`, `lr_scheduler_type` and `warmup_ratio`, from at least 3
    finite values), below the recorded settings.

    Args:
        log: the training log (`TrainingLog`).
        max_steps: the schedule's length in logged steps (a run config's `max_steps`), integer ≥ 1; None: the
            log's, from its first step to its last.

    Returns:
        Setting name → value, as the log states them (for `resolve_run_config`'s `settings`).

    Raises:
        PgrpoSimError: `log` is not a `TrainingLog`, or `max_steps` is not an integer ≥ 1.
    """
    check_log(log)
    settings = dict(log.settings)
    if "learning_rate" in log:
        if max_steps is not None:
            check_range("max_steps", max_steps, 1, MAX_STEPS, integer=True)
        first = float(log["step"][0])
        length = int(max_steps or round(float(log["step"][-1]) - first) + 1)
        for key, value in logged_schedule(*log.series("learning_rate"), first, length).items():
            settings.setdefault(key, value)
    return settings


def resolve_run_config(given: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None) -> RunConfig:
    """The run configuration: `given` (a run-config file) over `settings` (what the log records) over TRL's
    defaults; `sources` marks each key "run-config", "log" or "default".

    Args:
        given: run-config key → value (`run_config_files.read_run_config`, or a `RunConfig.as_dict()`); None: none.
        settings: what the log records (`log_settings`); keys outside `KEYS` are ignored; None: none.

    Returns:
        The `RunConfig`, with `sources`.

    Raises:
        PgrpoSimError: `given` or `settings` is not a mapping, `given` has an unknown key, or a value is invalid.
    """
    for name, mapping in (("given", given), ("settings", settings)):
        if mapping is not None and not isinstance(mapping, Mapping):
            raise PgrpoSimError(
                f"{name} must be a mapping of run-config keys (read_run_config reads a file), got "
                f"{type(mapping).__name__}"
            )
    unknown = sorted(set(given or {}) - set(KEYS) - {"sources", "notes"})  # a RunConfig.as_dict() reads back
    if unknown:
        raise PgrpoSimError(f"unknown run-config key {unknown[0]!r} (known: {', '.join(KEYS)})")
    given = {k: v for k, v in (given or {}).items() if k not in ("sources", "notes")}
    settings = {k: v for k, v in (settings or {}).items() if k in KEYS}
    values, sources = {}, {}
    for key in KEYS:
        if key in given:
            values[key], sources[key] = given[key], "run-config"
        elif key in settings:
            values[key], sources[key] = coerce(key, settings[key]), "log"
        else:
            sources[key] = "default"
    if sources["epsilon"] != "run-config" and values.get("loss_type") in NO_CLIP_LOSSES:  # unless given explicitly
        values["epsilon"], sources["epsilon"] = None, sources["loss_type"]
    return RunConfig(**values, sources=sources)
