"""The "typed_jsonl" format: JSON lines whose records carry a `type` (the CS336 GRPO loop): `rollout` (one per
GRPO step, the batch's reward, `std_reward`, `num_rollouts`, ...), `train` (one per optimizer update within a GRPO
step), `eval` (periodic, on a validation set); the step is `grpo_step`. One row per GRPO step (see `read`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from ...base.errors import PgrpoSimError
from . import jsonl
from .source import LogFile, Parsed, flat, log_name, numeric

_TYPED_ROLLOUT = re.compile(r'"type"\s*:\s*"rollout"')
_TYPED_BOOKKEEPING = frozenset({"type", "grpo_step", "step", "optimizer_step", "rollout_epoch", "train_batch_index"})


def detect(log: LogFile) -> bool:
    """JSON lines with a `rollout` record (`"type": "rollout"`), or opening with a record that has `type` and
    `grpo_step` (typed records without a rollout, e.g. eval only, have no training reward)."""
    first = jsonl.first_record(log)
    return first is not None and (bool(_TYPED_ROLLOUT.search(log.text)) or {"type", "grpo_step"} <= set(first))


def read(log: LogFile) -> Parsed:
    """JSON lines with a `type` per record (the CS336 GRPO loop), one row per GRPO step (`grpo_step`).

    - `rollout` (one per step): its fields as logged (`reward`, `std_reward` → reward_std, `num_rollouts` →
      n_samples, `answer_accuracy`, ...) — the training reward of the rollout batch.
    - `train` (one per optimizer update, `epochs_per_rollout_batch` × `num_train_batches` per step): each
      numeric field **averaged over the step's updates**, nulls left out (a field null in every update, such as
      `clip_fraction` without clipping, is not logged); a name the rollout already uses gets a `train/` prefix.
    - `eval` (periodic, a validation set; logged after that step's updates): its fields as `eval/<name>`
      (`eval/reward` → eval_reward), never mixed with the rollout's.
    - any other type (e.g. `grpo_step_summary`): its numeric fields, `<type>/<name>` on a name clash.

    Settings: `group_size` → num_generations, `num_questions` → prompts_per_step, `epochs_per_rollout_batch` →
    num_iterations, `num_train_batches` → steps_per_generation, `cliprange_low` (or `cliprange`) / `cliprange_high`
    → epsilon / epsilon_high (not for a loss type without clipping: `*no_clip*`, `reinforce*`), `kl_coef` → beta,
    `learning_rate`, `loss_type` (as named in the log) — each when one value throughout.
    """
    steps = _by_step(log.text, log.path)
    return [_step_record(step, entry) for step, entry in steps.items()], _settings(steps)


def _by_step(text: str, path) -> dict[float, dict]:
    """The records of each GRPO step, by type: `rollout` and `eval` (one or None), `train` and `other` (lists);
    records without a step (a header or config) are left out."""
    steps: dict[float, dict] = {}
    for i, obj in enumerate(jsonl.json_objects(text, path), 1):
        kind = obj.get("type")
        step = numeric(obj.get("grpo_step", obj.get("step")))
        if step is None or not math.isfinite(step):
            if kind in ("rollout", "train", "eval"):
                raise PgrpoSimError(f"record {i} of {log_name(path)} ({kind}) has no grpo_step")
            continue  # a header or config record
        entry = steps.setdefault(step, dict(rollout=None, train=[], eval=None, other=[]))
        if kind in ("rollout", "eval"):
            if entry[kind] is not None:
                raise PgrpoSimError(
                    f"step {step:g} of {log_name(path)} has two {kind} records (record {i}); "
                    "a resumed or concatenated log? keep one segment"
                )
            entry[kind] = obj
        elif kind == "train":
            entry["train"].append(obj)
        else:
            entry["other"].append(obj)
    return steps


def _step_record(step: float, entry: Mapping) -> dict[str, float]:
    """One GRPO step's row, by the rules of `read`."""
    record = {"step": step}
    if entry["rollout"] is not None:
        record.update({k: v for k, v in flat(entry["rollout"]).items() if k not in _TYPED_BOOKKEEPING})
    train = [flat(t) for t in entry["train"]]
    for key in dict.fromkeys(k for t in train for k in t if k not in _TYPED_BOOKKEEPING):
        values = [t[key] for t in train if key in t and not math.isnan(t[key])]
        if values:
            record[key if key not in record else f"train/{key}"] = float(np.mean(values))
    if entry["eval"] is not None:
        record.update({f"eval/{k}": v for k, v in flat(entry["eval"]).items() if k not in _TYPED_BOOKKEEPING})
    for obj in entry["other"]:
        for key, value in flat(obj).items():
            if key not in _TYPED_BOOKKEEPING:
                record[key if key not in record else f"{obj.get('type')}/{key}"] = value
    return record


def _settings(steps: Mapping[float, Mapping]) -> dict[str, object]:
    """The run settings the rollout and train records state, by the rules of `read`."""
    rollouts = [e["rollout"] for e in steps.values() if e["rollout"] is not None]
    updates = [t for e in steps.values() for t in e["train"]]
    loss_type = _typed_value(updates, "loss_type")
    loss_type = loss_type if isinstance(loss_type, str) else None
    clips = loss_type is None or not ("no_clip" in loss_type or loss_type.startswith("reinforce"))
    settings = dict(
        num_generations=_integer(_typed_value(rollouts, "group_size")),
        prompts_per_step=_integer(_typed_value(rollouts, "num_questions", "num_groups")),
        num_iterations=_integer(_typed_value(updates, "epochs_per_rollout_batch")),
        steps_per_generation=_integer(_typed_value(updates, "num_train_batches")),
        epsilon=numeric(_typed_value(updates, "cliprange_low", "cliprange")) if clips else None,
        epsilon_high=numeric(_typed_value(updates, "cliprange_high")) if clips else None,
        beta=numeric(_typed_value(updates, "kl_coef")),
        learning_rate=numeric(_typed_value(updates, "learning_rate")),
        loss_type=loss_type,
    )
    return {k: v for k, v in settings.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}


def _typed_value(objects: Sequence[Mapping], *keys: str):
    """The one value that `objects` state under the first of `keys` present (None if absent or not constant)."""
    for key in keys:
        values = [obj[key] for obj in objects if obj.get(key) is not None]
        if values:
            return values[0] if all(v == values[0] for v in values) else None
    return None


def _integer(value) -> int | None:
    number = numeric(value)
    return int(number) if number is not None and math.isfinite(number) and number == int(number) else None
