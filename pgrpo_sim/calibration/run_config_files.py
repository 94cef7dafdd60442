"""Run-config files in any trainer's names, translated to `RunConfig`'s keys: the one translator of other trainers'
names (a hand-written file of run-config keys, a TRL `GRPOConfig` dump, a verl trainer config; CS336's loss names
are `run_config.CS336_LOSS_TYPES`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base.errors import PgrpoSimError
from .run_config import KEYS, RunConfig, coerce


@dataclasses.dataclass(frozen=True)
class RunConfigFile:
    """A run-config file read (`load_run_config`): `keys` (run-config names, typed), the file's keys `not_used`
    (names with no counterpart in the bandit, e.g. `output_dir`, `logging_steps`), and `notes` saying how the keys
    that are not the file's own were derived (e.g. `prompts_per_step` from the batch sizes).

    Attributes:
        keys: run-config key (`KEYS`) → value, typed.
        not_used: the file's keys that set nothing here (dotted for nested ones), sorted.
        notes: how derived keys were computed, one sentence each.
    """

    keys: dict[str, Any]
    not_used: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def summary(self) -> tuple[str, ...]:
        """The notes, and the keys not used as one more, for `RunConfig.with_notes`."""
        unused = f"not used ({len(self.not_used)} keys with no counterpart in the bandit): {', '.join(self.not_used)}"
        return self.notes + ((unused,) if self.not_used else ())


TRAINING_ARGUMENTS = ("output_dir", "per_device_train_batch_size", "gradient_accumulation_steps")
"""Keys every transformers `TrainingArguments.to_dict()` (so every TRL `GRPOConfig` dump) holds: a file with one of
them is read as a dump, whose other keys are accepted and listed as not used. A hand-written file has only
run-config keys, so that a misspelt one is an error, not a silently ignored key."""
VERL_SECTIONS = ("actor_rollout_ref", "algorithm", "data", "trainer", "critic", "reward_model")
"""Top-level sections of a verl trainer config (nested, or as dotted keys)."""
_ACTOR = "actor_rollout_ref.actor."
VERL_KEYS = {
    _ACTOR + "optim.lr": "learning_rate",
    _ACTOR + "ppo_epochs": "num_iterations",
    _ACTOR + "clip_ratio": "epsilon",
    _ACTOR + "clip_ratio_low": "epsilon",
    _ACTOR + "clip_ratio_high": "epsilon_high",
    _ACTOR + "grad_clip": "max_grad_norm",
    _ACTOR + "optim.lr_warmup_steps_ratio": "warmup_ratio",
    "actor_rollout_ref.rollout.n": "num_generations",
    "data.train_batch_size": "prompts_per_step",
    "trainer.total_training_steps": "max_steps",
}
"""verl names of run-config keys (verl's `data.train_batch_size` counts prompts per rollout; `clip_ratio_low`, when
given, overrides `clip_ratio`, as in verl's actor). Read besides: `ppo_mini_batch_size` (→ steps_per_generation),
`use_kl_loss`/`kl_loss_coef` (→ beta), `loss_agg_mode`, `norm_adv_by_std_in_grpo`, `warmup_style` and
`adv_estimator`."""
VERL_LOSS_AGG = {"token-mean": "dapo", "seq-mean-token-mean": "grpo", "seq-mean-token-sum-norm": "dr_grpo"}
"""verl `loss_agg_mode` → the TRL loss type that aggregates the same way."""
VERL_SCHEDULES = {"constant": "constant_with_warmup", "cosine": "cosine"}
"""verl `warmup_style` → Hugging Face scheduler (verl's constant schedule warms up first)."""


def load_run_config(path: str | Path) -> RunConfigFile:
    """A JSON or YAML run-config file: run-config keys (checked by name), a TRL `GRPOConfig` dump
    (`trainer.args.to_dict()`) or a verl trainer config (nested or dotted keys); see `translate_run_config`.

    Args:
        path: the file; ".json" is read as JSON, anything else as YAML.

    Returns:
        The `RunConfigFile`.

    Raises:
        PgrpoSimError: the file cannot be read or parsed, or its keys or values are invalid (`translate_run_config`).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PgrpoSimError(f"run-config: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file (a checkpoint, an archive) named by mistake
        why = f"not a text file (not UTF-8 at byte {exc.start}): give a JSON or YAML file of GRPOConfig keys"
        raise PgrpoSimError(f"run-config {path.name}: {why}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else _yaml(text)
    except ValueError as exc:
        raise PgrpoSimError(f"run-config {path.name}: not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    return translate_run_config(data, path.name)


def read_run_config(path: str | Path) -> dict[str, Any]:
    """The run-config keys of a file (`load_run_config(path).keys`).

    Args:
        path: a JSON or YAML run-config file.

    Returns:
        Run-config key → typed value (for `resolve_run_config`).

    Raises:
        PgrpoSimError: as `load_run_config`.
    """
    return load_run_config(path).keys


def translate_run_config(data: Any, name: str = "run-config") -> RunConfigFile:
    """The run-config keys of a mapping read from a file named `name`:
    - a verl config (a key under `VERL_SECTIONS`): `VERL_KEYS` and the settings they list;
    - a TRL `GRPOConfig` dump (a key of `TRAINING_ARGUMENTS`): its `GRPOConfig` names; `prompts_per_step` =
      generation_batch_size / num_generations (generation_batch_size = per_device_train_batch_size × world size ×
      steps_per_generation; world size 1 unless the file has `world_size`), and `steps_per_generation` in optimiser
      steps = TRL's steps_per_generation (micro-batches) / gradient_accumulation_steps; `optim` → optimizer;
      transformers' `warmup_steps` → warmup_ratio (below 1 it is a fraction already); `max_steps` ≤ 0 (train by
      epochs) and null values count as not given;
    - otherwise run-config names only (an unknown key is an error).
    Keys of a dump or a verl config that set nothing here are listed in `not_used`.

    Args:
        data: the file's content, a mapping (nested or with dotted keys).
        name: the file's name, for error messages.

    Returns:
        The `RunConfigFile`.

    Raises:
        PgrpoSimError: `data` is not a mapping, a plain run-config file has an unknown key, a value is mistyped, a
            derived count is not a whole number ≥ 1, or a verl `adv_estimator` is not "grpo".
    """
    if not isinstance(data, Mapping):
        raise PgrpoSimError(f"run-config {name}: expected a mapping of GRPOConfig keys, got {type(data).__name__}")
    flat = _flatten(data)
    if any(key.split(".")[0] in VERL_SECTIONS for key in flat):
        return _from_verl(flat, name)
    if any(key in flat for key in TRAINING_ARGUMENTS):
        return _from_trl(flat, name)
    unknown = sorted(set(flat) - set(KEYS))
    if unknown:
        raise PgrpoSimError(f"run-config {name}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
    return RunConfigFile({k: coerce(k, v) for k, v in flat.items()})


def _flatten(data: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys ({"a": {"b": 1}} → {"a.b": 1}); dotted keys stay as they are."""
    out = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _whole(name: str, what: str, numerator: float, denominator: float) -> int:
    """numerator / denominator as a whole number ≥ 1, or a one-line error naming `what` it would be."""
    ratio = numerator / denominator
    if ratio < 1 or ratio != int(ratio):
        raise PgrpoSimError(f"run-config {name}: {what} = {numerator:g} / {denominator:g} must be a whole number >= 1")
    return int(ratio)


def _from_trl(flat: dict[str, Any], name: str) -> RunConfigFile:
    given = {k: v for k, v in flat.items() if v is not None}  # a dump's null: not set
    keys = {k: coerce(k, v) for k, v in given.items() if k in KEYS and k != "steps_per_generation"}
    used, notes = set(keys), []
    if keys.get("max_steps") is not None and keys["max_steps"] <= 0:  # transformers' -1: the length is in epochs
        del keys["max_steps"]
    optim = str(given.get("optim", ""))
    if "optimizer" not in keys and (optim.startswith(("adamw", "paged_adamw")) or optim == "sgd"):
        keys["optimizer"] = "sgd" if optim == "sgd" else "adamw"
        used.add("optim")
    warmup = given.get("warmup_steps")
    if warmup and "warmup_ratio" not in keys:
        if 0 < float(warmup) < 1:
            keys["warmup_ratio"] = float(warmup)
        elif keys.get("max_steps"):
            keys["warmup_ratio"] = float(warmup) / keys["max_steps"]
            notes.append(f"warmup_ratio = warmup_steps / max_steps = {warmup:g} / {keys['max_steps']}")
        if "warmup_ratio" in keys:
            used.add("warmup_steps")
    accumulation = int(given.get("gradient_accumulation_steps", 1))
    micro = int(given.get("steps_per_generation", accumulation))  # TRL: micro-batches per generation
    keys["steps_per_generation"] = _whole(
        name, "steps_per_generation / gradient_accumulation_steps", micro, accumulation
    )
    used |= {"steps_per_generation", "gradient_accumulation_steps"} & set(given)
    g = keys.get("num_generations", RunConfig.num_generations)
    if "generation_batch_size" in given:
        completions, how, batch = (
            float(given["generation_batch_size"]),
            "generation_batch_size",
            {"generation_batch_size"},
        )
    elif "per_device_train_batch_size" in given:
        world = int(given.get("world_size", 1))
        completions = float(given["per_device_train_batch_size"]) * world * micro
        how = "per_device_train_batch_size × world_size × steps_per_generation" + (
            "" if "world_size" in given else " (world size 1: the dump does not record it)"
        )
        batch = {"per_device_train_batch_size", "world_size"}
    else:
        completions, how, batch = None, "", set()
    if completions is not None and "prompts_per_step" not in keys:
        keys["prompts_per_step"] = _whole(name, f"prompts per rollout ({how} / num_generations)", completions, g)
        notes.append(f"prompts_per_step = {how} / num_generations = {completions:g} / {g}")
        used |= batch & set(given)
    return RunConfigFile(keys, tuple(sorted(set(flat) - used)), tuple(notes))


def _from_verl(flat: dict[str, Any], name: str) -> RunConfigFile:
    given = {k: v for k, v in flat.items() if v is not None}
    keys, used = {}, set()
    for source, key in VERL_KEYS.items():  # clip_ratio_low after clip_ratio: the low one wins
        if source in given and not (key == "max_steps" and float(given[source]) <= 0):
            keys[key] = coerce(key, given[source])
            used.add(source)
    estimator = given.get("algorithm.adv_estimator")
    if estimator is not None:
        if estimator != "grpo":
            raise PgrpoSimError(f"run-config {name}: algorithm.adv_estimator {estimator!r}: only grpo is simulated")
        used.add("algorithm.adv_estimator")
    if "algorithm.norm_adv_by_std_in_grpo" in given:
        keys["scale_rewards"] = coerce("scale_rewards", given["algorithm.norm_adv_by_std_in_grpo"])
        used.add("algorithm.norm_adv_by_std_in_grpo")
    kl_loss = given.get(_ACTOR + "use_kl_loss", True)
    if _ACTOR + "kl_loss_coef" in given or kl_loss is False:
        keys["beta"] = coerce("beta", given.get(_ACTOR + "kl_loss_coef", 0.0)) if kl_loss else 0.0
        used |= {_ACTOR + "kl_loss_coef", _ACTOR + "use_kl_loss"} & set(given)
    agg = VERL_LOSS_AGG.get(given.get(_ACTOR + "loss_agg_mode", ""))
    if agg is not None:
        keys["loss_type"] = agg
        used.add(_ACTOR + "loss_agg_mode")
    style = VERL_SCHEDULES.get(given.get(_ACTOR + "optim.warmup_style", ""))
    if style is not None:
        keys["lr_scheduler_type"] = style
        used.add(_ACTOR + "optim.warmup_style")
    notes = []
    if _ACTOR + "ppo_mini_batch_size" in given and "prompts_per_step" in keys:
        mini = float(given[_ACTOR + "ppo_mini_batch_size"])
        keys["steps_per_generation"] = _whole(
            name, "steps_per_generation (train_batch_size / ppo_mini_batch_size)", keys["prompts_per_step"], mini
        )
        notes.append(
            f"steps_per_generation = data.train_batch_size / ppo_mini_batch_size = {keys['prompts_per_step']} / "
            f"{mini:g}"
        )
        used.add(_ACTOR + "ppo_mini_batch_size")
    return RunConfigFile(keys, tuple(sorted(set(flat) - used)), tuple(notes))


def _yaml(text: str):
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
