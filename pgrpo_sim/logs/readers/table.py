"""The shared table of every log reader: `TrainingLog` (one run as float64 columns aligned on its steps), the
canonical metric names and the source names each is looked up under (`CANONICAL`, with units), the run settings
a log may state (`SETTINGS`, TRL `GRPOConfig` names), column maps (`check_columns`, `parse_column_map`), the
schedule a logged learning rate follows (`logged_schedule`, for a calibration's run config), and `tidy`, which merges
a reader's flat records into a `TrainingLog` by the rules of the package docstring."""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ...base.errors import PgrpoSimError
from ...models.schedules import LR_SCHEDULES, schedule_factor
from .source import TEXT, log_name, show_names

CANONICAL: dict[str, tuple[str, ...]] = {
    "step": ("step", "global_step", "trainer/global_step", "_step"),
    "reward": ("reward", "critic/score/mean", "mean_reward", "train/reward", "reward_mean", "rewards/mean"),
    "reward_std": ("reward_std", "train/reward_std", "critic/score/std", "std_reward"),
    "eval_reward": (
        "eval_reward",
        "eval/reward",
        "val/reward",
        "eval_mean_reward",
        "eval/answer_accuracy",
        "eval_answer_accuracy",
        "eval/accuracy",
        "eval_accuracy",
    ),
    "true_reward": ("true_reward",),
    "entropy": ("entropy", "actor/entropy", "train/entropy", "token_entropy", "actor/entropy_loss"),
    "kl": ("kl", "kl_ref", "train/kl", "actor/kl_loss", "reference_kl"),
    "policy_kl": ("actor/ppo_kl", "approx_kl", "ppo_kl"),
    "grad_norm": ("grad_norm", "actor/grad_norm", "train/grad_norm"),
    "clip_frac": (
        "clip_frac",
        "clip_ratio/region_mean",
        "actor/pg_clipfrac",
        "clip_ratio",
        "train/clip_ratio/region_mean",
        "clip_fraction",
    ),
    "clip_low_frac": ("clip_low_frac", "clip_ratio/low_mean"),
    "clip_high_frac": ("clip_high_frac", "clip_ratio/high_mean"),
    "ratio_max": ("ratio_max",),
    "zero_std_frac": ("frac_reward_zero_std", "zero_std_frac", "zero_adv_frac", "train/frac_reward_zero_std"),
    "adv_var": ("adv_var",),
    "n_samples": ("n_samples", "rollout_count", "num_rollouts"),
    "learning_rate": ("learning_rate", "actor/lr", "train/learning_rate"),
}
"""Canonical metric → the source names looked up, in order. Units: reward as logged; entropy and KL in nats
(per token for LLM logs); `kl` is KL(π‖π_ref), `policy_kl` the per-update KL(π_old‖π); `clip_frac`,
`clip_low_frac` / `clip_high_frac` (tokens clipped at the lower / upper bound, TRL 0.26) and `zero_std_frac`
fractions in [0, 1]; `n_samples` rewards averaged per step (prompts × group size). `reward_std` is the spread
of single rewards (the batch's for verl and CS336-style logs; TRL logs the mean within-group std instead)."""

SETTINGS = (
    "num_generations",
    "prompts_per_step",
    "num_iterations",
    "steps_per_generation",
    "epsilon",
    "epsilon_high",
    "beta",
    "learning_rate",
    "loss_type",
)
"""Run settings `TrainingLog.settings` may hold (TRL `GRPOConfig` names; `prompts_per_step` is the number of
unique prompts per rollout), each only where the log states it."""

_EVAL_PATTERNS = (re.compile(r"^val-core/.+/(reward|acc|score)/mean@\d+$"), re.compile(r"^val/test_score/.+$"))
"""verl validation keys carry the data source in their name; the first match in sorted order is used."""


@dataclasses.dataclass(frozen=True)
class TrainingLog:
    """One training run as a tidy table: `data[name]` is a float64 array per canonical metric present (NaN
    where that metric was not logged at a step), all aligned with `data["step"]`.

    `sources`: canonical name → source column; `other`: unmapped numeric columns by source name; `format` and
    `path` of the file (None for a simulation); `skipped_steps`: steps dropped for a non-finite reward;
    `settings`: the run settings the log states (`SETTINGS` names, e.g. `{"num_generations": 8}`; empty when it
    states none); `blowup_steps`: the skipped steps whose reward was a non-finite number (NaN, ±inf, null), not
    text such as "n/a" in a CSV cell (what the instability diagnostic reads as a blow-up).

    Attributes:
        data: canonical name → its column; each float64 of shape (rows,), NaN where not logged; `data["step"]`
            holds the steps (optimiser steps, increasing); units as `CANONICAL` (reward in the log's units).
        sources: canonical name → the source column it was read from (no "step" entry when the log has no step
            column and its records were numbered from 0).
        other: source name → float64 column of shape (rows,), for numeric columns that map to no canonical name.
        format: the format read (one of `FORMATS`, or "simulation").
        path: the file read; None for a simulation.
        skipped_steps: steps dropped for a non-finite reward; float64, shape (skipped,); optimiser steps.
        settings: run setting (`SETTINGS` name) → the value the log states; empty when it states none.
        blowup_steps: those of `skipped_steps` whose reward was a non-finite number; float64; optimiser steps.
    """

    data: dict[str, np.ndarray]
    sources: dict[str, str]
    other: dict[str, np.ndarray]
    format: str
    path: str | None
    skipped_steps: np.ndarray
    settings: dict = dataclasses.field(default_factory=dict)
    blowup_steps: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))

    def __contains__(self, name: str) -> bool:
        return name in self.data

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.data:
            raise KeyError(f"{name!r} is not in this log (present: {', '.join(self.data)})")
        return self.data[name]

    def __len__(self) -> int:
        return self.data["step"].size

    @property
    def missing(self) -> tuple[str, ...]:
        """Canonical metrics this log does not have."""
        return tuple(name for name in CANONICAL if name not in self.data)

    @property
    def constant(self) -> tuple[str, ...]:
        """Metrics whose logged values never change (often a placeholder, e.g. an entropy logged as 0);
        `step` and `n_samples`, which may well be constant, are not listed."""
        out = []
        for name, v in self.data.items():
            finite = v[np.isfinite(v)]
            if name not in ("step", "n_samples") and finite.size > 1 and np.all(finite == finite[0]):
                out.append(name)
        return tuple(out)

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) at the steps where `name` was logged with a finite value.

        Args:
            name: a canonical metric present in the log.

        Returns:
            (steps, values): float64 arrays of equal shape (m,); optimiser steps, and the metric's unit.

        Raises:
            KeyError: `name` is not in the log.
        """
        v = self[name]
        ok = np.isfinite(v)
        return self.data["step"][ok], v[ok]

    def summary(self) -> dict:
        """JSON-ready description: format, rows, sources, missing and constant metrics, skipped steps, settings."""
        return dict(
            format=self.format,
            path=self.path,
            rows=len(self),
            sources=dict(self.sources),
            missing=list(self.missing),
            constant=list(self.constant),
            skipped_steps=[float(s) for s in self.skipped_steps],
            settings=dict(self.settings),
        )


def check_log(log, name: str = "log") -> None:
    """Raise `PgrpoSimError` unless `log` is a `TrainingLog` (a path is a common slip: `read_log` reads it)."""
    if not isinstance(log, TrainingLog):
        hint = " (read the file with read_log(path))" if isinstance(log, (str, Path)) else ""
        raise PgrpoSimError(f"{name} must be a TrainingLog{hint}, got {type(log).__name__}")


def check_columns(columns) -> dict[str, str]:
    """`columns` (canonical name → source column) as a dict; `PgrpoSimError` for a name not in `CANONICAL` or
    something that is not a mapping (`parse_column_map` reads `NAME=SOURCE` strings)."""
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise PgrpoSimError(
            f"columns must map canonical names to source columns, e.g. {{'reward': 'train/reward'}}, got "
            f"{type(columns).__name__} (parse_column_map reads NAME=SOURCE strings)"
        )
    for name in columns:
        if name not in CANONICAL:
            raise PgrpoSimError(f"unknown metric {name!r} in columns; known: {', '.join(CANONICAL)}")
    return dict(columns)


def parse_column_map(items: Sequence[str]) -> dict[str, str]:
    """`["reward=train/reward", ...]` (or one such string) → `{"reward": "train/reward"}`; names must be in
    `CANONICAL`.

    Args:
        items: `NAME=SOURCE` strings (a canonical name and a source column), or one such string.

    Returns:
        Canonical name → source column, for `read_log`'s `columns`.

    Raises:
        PgrpoSimError: an entry that is not `NAME=SOURCE` with both parts non-empty, or a name not in `CANONICAL`.
    """
    items = [items] if isinstance(items, str) else items
    out = {}
    for item in items:
        name, sep, source = item.partition("=")
        name, source = name.strip(), source.strip()
        if not sep or not name or not source:
            raise PgrpoSimError(f"column map entries are NAME=SOURCE, got {item!r}")
        if name not in CANONICAL:
            raise PgrpoSimError(f"unknown metric {name!r} in column map; known: {', '.join(CANONICAL)}")
        out[name] = source
    return out


def constant_learning_rate(values: Sequence[float] | np.ndarray) -> float | None:
    """The learning rate of a logged series that never changes (at least 3 finite values, all equal and > 0),
    else None: a schedule may hold its value for two steps."""
    lr = np.asarray(values, float)
    lr = lr[np.isfinite(lr)]
    return float(lr[0]) if lr.size >= 3 and lr[0] > 0 and np.all(lr == lr[0]) else None


SCHEDULE_TOLERANCE = 0.01
"""A logged learning rate is read as a schedule (`logged_schedule`) when the best match's root-mean-square residual
is at most this share of its peak: logs store the rate to 4 or more significant digits."""


def logged_schedule(steps, values, first: float, length: int) -> dict[str, object]:
    """The run-config settings a logged learning-rate series shows: the best least-squares match of Hugging Face's
    schedules (`LR_SCHEDULES`) to it, its peak → `learning_rate`, its kind → `lr_scheduler_type` and its warm-up W →
    `warmup_ratio` = W / `length` (not for "constant"); {} when the series has fewer than 3 finite values, no positive
    one, or no match within `SCHEDULE_TOLERANCE`.

    The value logged at step s is the schedule at count s − `first` + o optimiser steps, o = 0 (the rate logged
    before the scheduler's step, as TRL 0.26) or 1 (after it, as Unsloth's TRL); the warm-up ends within a logged
    step of the first logged maximum. Every (o, kind, W) so allowed is fitted with its least-squares peak; the smallest
    residual wins, ties going to the simpler kind (the order of `LR_SCHEDULES`). The learning rate is the rate
    logged where the match is at its peak (their mean), else the fitted peak.

    Args:
        steps: the logged steps of the series, increasing; shape (n,).
        values: the logged learning rates; shape (n,); non-finite values are dropped.
        first: the log's first step (the run's first logged step).
        length: the schedule's length, in logged steps (a decay reaches 0 there); integer ≥ 1.

    Returns:
        Setting → value: `learning_rate` (> 0), `lr_scheduler_type` and, but for "constant", `warmup_ratio` in
        [0, 1); or {}.
    """
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if values.size < 3 or not np.max(values) > 0:
        return {}
    best = (np.inf, None)
    tie = 1e-12 * float(values @ values)
    for offset in (1, 0):
        count = steps - first + offset
        top = int(np.argmax(values >= np.max(values) * (1 - 1e-9)))  # the first logged maximum
        low, high = count[max(top - 1, 0)] if top else 0.0, count[min(top + 1, count.size - 1)]
        warmups = [0, *range(max(int(np.ceil(low)), 1), min(int(high), length - 1) + 1)]
        for kind in LR_SCHEDULES:
            for warmup in [0] if kind == "constant" else warmups[kind == "constant_with_warmup" :]:
                f = schedule_factor(kind, count, warmup, length)
                norm = float(f @ f)
                peak = float(f @ values) / norm if norm > 0 else 0.0
                sse = float(np.sum((values - peak * f) ** 2)) if peak > 0 else np.inf
                if sse < best[0] - tie:
                    at_peak = values[f == 1.0]  # logged at the peak: the rate as logged, not refitted
                    best = (sse, (kind, warmup, float(np.mean(at_peak)) if at_peak.size else peak))
    if best[1] is None or np.sqrt(best[0] / values.size) > SCHEDULE_TOLERANCE * best[1][2]:
        return {}
    kind, warmup, peak = best[1]
    # 12 digits: no rounding noise
    settings: dict[str, object] = {"learning_rate": float(f"{peak:.12g}"), "lr_scheduler_type": kind}
    return settings if kind == "constant" else settings | {"warmup_ratio": warmup / length}


def tidy(
    records: Sequence[Mapping[str, float]],
    *,
    format: str,
    path: str | None,
    columns: Mapping[str, str] | None = None,
    settings: Mapping[str, object] | None = None,
) -> TrainingLog:
    """Merge flat numeric records (one dict per logged record, in file order) into a `TrainingLog`, by the
    rules of the package docstring; records without a step column are numbered from 0. `settings` are the run
    settings the parser read (`SETTINGS` names); a learning rate logged with one value throughout is added."""
    columns = check_columns(columns)
    if not records:
        raise PgrpoSimError(f"{log_name(path)} holds no numeric records")
    present = sorted({k for r in records for k in r})
    sources = _match_sources(present, columns, path)
    step_key = sources.get("step")
    merged, skipped, blowups = _merge_steps(records, sources, path)
    if skipped:
        warnings.warn(f"{log_name(path)}: skipped {len(skipped)} record(s) with a non-finite reward", stacklevel=3)
    keep = [s for s, row in merged.items() if any(src in row for n, src in sources.items() if n != "step")]
    column = lambda key: np.array([merged[s].get(key, np.nan) for s in keep], float)
    data = {"step": np.array(keep, float)}
    data.update({name: column(src) for name, src in sources.items() if name != "step"})
    if not np.isfinite(data["reward"]).any():
        raise PgrpoSimError(
            f"{log_name(path)} has no record with a finite reward: column {sources['reward']!r} holds no finite "
            f"number ({len(skipped)} record(s) with a non-numeric or non-finite value)"
        )
    used = set(sources.values()) | {step_key}
    other = {key: column(key) for key in present if key not in used}
    other = {key: v for key, v in other.items() if np.isfinite(v).any()}  # text columns are not metrics
    if step_key:
        sources["step"] = step_key
    settings = {k: v for k, v in (settings or {}).items() if v is not None}
    if "learning_rate" in data and "learning_rate" not in settings:
        lr = constant_learning_rate(data["learning_rate"])
        if lr is not None:
            settings["learning_rate"] = lr
    return TrainingLog(data, sources, other, format, path, np.array(skipped, float), settings, np.array(blowups, float))


def _match_sources(present: Sequence[str], columns: Mapping[str, str], path) -> dict[str, str]:
    """Canonical name → the source column it is read from: the column map's, else the first of its `CANONICAL`
    names present (ignoring case), plain or with TRL's `train/` prefix; an error when no reward is found."""
    by_lower = {}
    for key in present:
        by_lower.setdefault(key.lower(), key)
    sources = {}
    for name, candidates in CANONICAL.items():
        if name in columns:
            if columns[name] not in present:
                raise PgrpoSimError(
                    f"column {columns[name]!r} (for {name}) is not in {log_name(path)}; columns: {show_names(present)}"
                )
            sources[name] = columns[name]
        else:
            found = next((by_lower[c.lower()] for c in candidates if c.lower() in by_lower), None)
            if found is None:  # TRL's TensorBoard and W&B names: train/<key>
                found = next(
                    (by_lower[f"train/{c}".lower()] for c in candidates if f"train/{c}".lower() in by_lower), None
                )
            if found is None and name == "eval_reward":
                found = next((c for c in present if any(p.match(c) for p in _EVAL_PATTERNS)), None)
            if found is not None and found not in sources.values():
                sources[name] = found
    if "reward" not in sources:
        hint = (
            f" (it logs only an eval reward, {sources['eval_reward']!r}: reward={sources['eval_reward']} reads it)"
            if "eval_reward" in sources
            else ""
        )
        raise PgrpoSimError(
            f"no reward column in {log_name(path)} (looked for {', '.join(CANONICAL['reward'])}); "
            f"columns: {show_names(present)}; map one with reward=NAME{hint}"
        )
    return sources


def _merge_steps(
    records: Sequence[Mapping[str, float]], sources: Mapping[str, str], path
) -> tuple[dict[float, dict[str, float]], list[float], list[float]]:
    """The records merged by step (in file order), the steps skipped for a non-finite reward, and those of them
    whose reward was a non-finite number rather than text; errors for a missing, non-finite or backward step and
    for a mapped column logged twice at one step with different values."""
    step_key = sources.get("step")
    merged: dict[float, dict[str, float]] = {}
    last_step, skipped, blowups = -math.inf, [], []
    for i, record in enumerate(records):
        if step_key and step_key not in record:
            raise PgrpoSimError(f"record {i + 1} of {log_name(path)} has no {step_key!r}")
        step = float(record[step_key]) if step_key else float(i)
        if not math.isfinite(step):
            raise PgrpoSimError(f"record {i + 1} of {log_name(path)} has a non-finite step")
        if step < last_step:
            raise PgrpoSimError(
                f"steps in {log_name(path)} go backwards: step {step:g} (record {i + 1}) follows step {last_step:g}; "
                "a resumed or concatenated log? keep one segment"
            )
        last_step = step
        reward = record.get(sources["reward"])
        if reward is not None and not math.isfinite(reward):
            skipped.append(step)
            if reward is not TEXT:
                blowups.append(step)
            continue
        row = merged.setdefault(step, {})
        for key, value in record.items():
            clash = key in row and row[key] != value and not (math.isnan(row[key]) and math.isnan(value))
            if clash and key in sources.values():
                raise PgrpoSimError(f"step {step:g} of {log_name(path)} logs {key!r} twice with different values")
            row[key] = value
    return merged, skipped, blowups
