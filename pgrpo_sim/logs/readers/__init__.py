"""Readers for real GRPO training logs, into one tidy table with canonical metric names.

Formats (`FORMATS`; `detect_format` picks one from the file's content, or its name for TensorBoard):
- "trl": Hugging Face TRL `trainer_state.json` (GRPOTrainer `log_history`), both the older key names
  (Unsloth era: `reward`, `reward_std`, `kl`, `rewards/<fn>`) and TRL 0.26's (`entropy`,
  `frac_reward_zero_std`, `clip_ratio/region_mean`, `completions/*`, `eval_*`).
- "trl_console": TRL's console output, the logged dicts printed as Python literals (`{'loss': '0', 'reward':
  '0.125', ...}`, string or float values) among other output and tqdm progress bars (a dict may follow a carriage
  return). The console does not print the step: the n-th dict with training metrics is step n (with
  `logging_steps` k > 1 the trainer's step is k·n); `eval_*` dicts belong to the latest step and the closing
  `{'train_runtime': ...}` summary is no step (merged into the last one, as in `trainer_state.json`).
- "typed_jsonl": JSON lines whose records carry a `type` (the CS336 GRPO loop): `rollout` (one per GRPO step,
  the batch's reward, `std_reward`, `num_rollouts`, ...), `train` (one per optimizer update within a GRPO
  step), `eval` (periodic, on a validation set); the step is `grpo_step`. See `_parse_typed`.
- "verl": verl metrics, either its `file` logger's JSONL (`{"step": n, "data": {...}}` or flat objects) or
  its console lines (`step:12 - critic/score/mean:0.4 - actor/entropy:0.9 - ...`).
- "tensorboard": an event file (`events.out.tfevents.*`) or a folder holding a run's event files, read with
  tensorboard's own `EventAccumulator` (optional extra: `pip install 'pgrpo-sim[tensorboard]'`); every scalar,
  old-style or TF2 tensor, one record per step. TRL writes `train/<key>` and `eval/<key>` tags.
- "wandb": a Weights & Biases CSV export: a panel's (`Step`, `<run> - train/reward`, `..__MIN`, `..__MAX`;
  the min/max band columns are not metrics, a single run's name prefix is removed) or a run's history
  (`_step`, `_runtime`, `trainer/global_step`, ...; `trainer/global_step` is preferred to `_step`).
- "wandb_long": a W&B export in long form, `run_name,metric,step,value`, one row per logged value, often several
  runs of a sweep in one file: `run` picks one (required when the file holds several; the error lists them). A
  metric logged several times at one step (per optimiser step, e.g. `train/grad_norm` with 16 updates per
  rollout) is averaged there.
- "jsonl": any other file of one JSON object per line, or one JSON array of objects (pandas' `to_json(orient=
  "records")`). Strings holding a number (`"0.125"`) are numbers in every JSON format.
- "csv": any comma- (or tab-) separated table with a header row, including `pgrpo-sim simulate` output.

Each canonical metric (`CANONICAL`) is looked up under its known source names (ignoring case), first match
wins, then under the same names with TRL's `train/` prefix (TensorBoard and W&B); a column map
(`{"reward": "train/reward"}`) overrides the lookup. Source names are kept (`TrainingLog.sources`), as are the
numeric columns that map to no canonical name (`TrainingLog.other`). Metrics that a log lacks are listed in
`TrainingLog.missing`, never filled in. Eval metrics keep an eval name (`eval_*`, `eval/*`) in every format, so
they are never read as the training reward.

`TrainingLog.settings` holds the run settings the log itself states, under TRL `GRPOConfig` names
(`num_generations`, `prompts_per_step` = unique prompts per rollout, `num_iterations`, `steps_per_generation`,
`epsilon`, `epsilon_high`, `beta`, `learning_rate` when constant, `loss_type` as the log names it); nothing is
guessed, so it is often empty.

Records sharing a step are merged (TRL logs eval metrics as a separate record at the training step). A
record whose reward is logged but not a finite number (NaN, inf, null, or text such as "n/a") is
dropped with a warning and counted in `TrainingLog.skipped_steps` (an empty CSV cell is "not logged");
steps that go backwards and a metric logged twice at one step with different values are errors. Every error
is a one-line `ValueError`.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...base.errors import PgrpoSimError

if TYPE_CHECKING:  # the bandit (and JAX) are not needed to read logs
    from ...models.bandit import BanditRun

FORMATS = ("trl", "trl_console", "typed_jsonl", "verl", "tensorboard", "wandb", "wandb_long", "jsonl", "csv")
"""Log formats `read_log` understands ("auto" detects one of these)."""

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

_TRL_CONSOLE_KEYS = frozenset(
    c.lower() for name, names in CANONICAL.items() if name not in ("step", "eval_reward") for c in names
) | {"loss"}
"""A console dict holding one of these keys is a training step (others: eval dicts, the summary, stray text)."""

_EVAL_PATTERNS = (re.compile(r"^val-core/.+/(reward|acc|score)/mean@\d+$"), re.compile(r"^val/test_score/.+$"))
"""verl validation keys carry the data source in their name; the first match in sorted order is used."""

_CONSOLE = re.compile(r"step:\s*(\d+)\s+-\s+(.*)$")
_NUMBER = re.compile(
    r"^(?:np\.float\d*\(|np\.int\d*\()?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)\)?$"
)


@dataclasses.dataclass(frozen=True)
class TrainingLog:
    """One training run as a tidy table: `data[name]` is a float64 array per canonical metric present (NaN
    where that metric was not logged at a step), all aligned with `data["step"]`.

    `sources`: canonical name → source column; `other`: unmapped numeric columns by source name; `format` and
    `path` of the file (None for a simulation); `skipped_steps`: steps dropped for a non-finite reward;
    `settings`: the run settings the log states (`SETTINGS` names, e.g. `{"num_generations": 8}`; empty when it
    states none); `blowup_steps`: the skipped steps whose reward was a non-finite number (NaN, ±inf, null), not
    text such as "n/a" in a CSV cell (what the instability diagnostic reads as a blow-up).
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
        """(steps, values) at the steps where `name` was logged with a finite value."""
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
    `CANONICAL`."""
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


def detect_format(path: str | Path) -> str:
    """The format of a log, from its content: a TensorBoard event file (by name or its first record) or a folder
    holding event files is "tensorboard"; a JSON object with `log_history` is "trl"; JSON lines with a `rollout`
    record (`"type": "rollout"`), or opening with a record that has `type` and `grpo_step`, "typed_jsonl"; JSON
    lines with verl-style keys (`actor/…`, `critic/…`, `val-core/…`, or a `data` object) or console lines
    `step:N - key:value - …` are "verl"; other JSON lines "jsonl"; text holding TRL's printed dicts
    (`{'loss': …, 'reward': …}`) "trl_console"; a table with W&B columns (`…__MIN`/`…__MAX`, `_step`,
    `trainer/global_step`, `<run> - <metric>`) "wandb"; the header `run_name,metric,step,value` "wandb_long";
    anything else "csv"."""
    if _is_tensorboard(path):
        return "tensorboard"
    return _detect(_read_text(path), path)


def _detect(text: str, path) -> str:
    stripped = text.strip()
    if stripped.startswith("["):
        return "jsonl"  # a JSON array of records (its reader names what it holds if not)
    if stripped.startswith("{"):
        try:
            whole, error = json.loads(stripped), None
        except json.JSONDecodeError as exc:
            whole, error = None, exc
        if isinstance(whole, dict) and "log_history" in whole:
            return "trl"
        if isinstance(whole, dict) and "\n" in stripped:
            raise PgrpoSimError(f"{_name(path)} is a JSON object without log_history (not a TRL trainer_state.json)")
        try:
            first = json.loads(stripped.splitlines()[0])
        except json.JSONDecodeError:
            if _has_trl_console_dicts(text):
                return "trl_console"
            raise PgrpoSimError(f"{_name(path)} is not valid JSON (line {error.lineno}: {error.msg})") from None
        if _TYPED_ROLLOUT.search(text) or (isinstance(first, dict) and {"type", "grpo_step"} <= set(first)):
            return "typed_jsonl"  # typed records without a rollout (e.g. eval only) have no training reward
        data = first.get("data") if isinstance(first, dict) else None
        keys = set(first) | set(data) if isinstance(data, dict) else set(first)
        if isinstance(data, dict) or any(str(k).split("/")[0] in ("actor", "critic", "val-core") for k in keys):
            return "verl"
        return "jsonl"
    if any(_CONSOLE.search(line) for line in text.splitlines()[:2000]):
        return "verl"
    if _has_trl_console_dicts(text):
        return "trl_console"
    header = _csv_header(text)
    if _is_wandb_header(header):
        return "wandb"
    if [h.lower() for h in header] == list(_WANDB_LONG):
        return "wandb_long"
    return "csv"


def read_log(
    path: str | Path, format: str = "auto", columns: Mapping[str, str] | None = None, run: str | None = None
) -> TrainingLog:
    """Read a training log into a `TrainingLog` (see the module docstring for formats and rules).

    `path` is a file, or for TensorBoard also a folder of event files. `columns` maps canonical names to source
    column names and overrides the built-in lookup. `run`: the run to read from a file that holds several (W&B long
    form). Raises a one-line `ValueError` for a missing or unreadable file, malformed content, no reward column,
    backwards steps or conflicting duplicates, a file of several runs without `run`, or `run` on a one-run format.
    """
    if run is not None and not isinstance(run, str):
        raise PgrpoSimError(f"run must be a run's name (str), got {type(run).__name__}")
    if not isinstance(path, (str, Path)):
        raise PgrpoSimError(f"path must be a file path (str or Path), got {type(path).__name__}")
    if format != "auto" and format not in FORMATS:
        raise PgrpoSimError(f"format must be auto or one of {', '.join(FORMATS)}; got {format!r}")
    check_columns(columns)
    if format == "tensorboard" or (format == "auto" and _is_tensorboard(path)):
        records, settings = _parse_tensorboard(path)
        return tidy(records, format="tensorboard", path=str(path), columns=columns, settings=settings)
    text = _read_text(path)
    if format == "auto":
        format = _detect(text, path)
    if format == "wandb_long":
        records = _parse_wandb_long(text, path, run)
        return tidy(records, format=format, path=str(path), columns=columns)
    if run is not None:
        raise PgrpoSimError(
            f"{_name(path)} is a {format} log of one run: a run is chosen only in a W&B long-form CSV "
            f"({','.join(_WANDB_LONG)}); drop --run"
        )
    parser = {
        "trl": _parse_trl,
        "trl_console": _parse_trl_console,
        "typed_jsonl": _parse_typed,
        "verl": _parse_verl,
        "wandb": _parse_wandb,
        "jsonl": _parse_json_lines,
        "csv": _parse_csv,
    }[format]
    records, settings = parser(text, path)
    return tidy(records, format=format, path=str(path), columns=columns, settings=settings)


RUN_COLUMNS = {
    "reward": "reward",
    "true_reward": "true_reward",
    "entropy": "entropy",
    "kl": "kl_ref",
    "grad_norm": "grad_norm",
    "ratio_max": "ratio_max",
    "clip_frac": "clip_frac",
    "zero_std_frac": "zero_adv_frac",
    "adv_var": "adv_var",
}
"""Log column → the `BanditRun` read-out `from_run` takes it from (a run may leave any but the reward out:
`simulate(readouts=tuple(RUN_COLUMNS.values()))` computes exactly these)."""


def from_run(run: BanditRun, *, index: int | None = None) -> TrainingLog:
    """A `TrainingLog` from a `BanditRun` (step n = θ_n). Sampled runs are averaged over seeds, with
    `reward_std` the spread across seeds and `n_samples` the number of seeds (so the per-step error of the
    mean is reward_std/√seeds); `index` picks a single seed instead. Steps after a divergence are NaN and
    therefore skipped (see `TrainingLog.skipped_steps`)."""
    if not all(hasattr(run, v) for v in RUN_COLUMNS.values()):
        raise PgrpoSimError(f"run must be a BanditRun (from simulate), got {type(run).__name__}")
    arrays = {k: np.asarray(getattr(run, v), float) for k, v in RUN_COLUMNS.items() if getattr(run, v) is not None}
    if index is not None:
        seeds = np.atleast_2d(arrays["reward"]).shape[0]
        if not isinstance(index, (int, np.integer)) or not 0 <= index < seeds:  # (base.checks would import JAX)
            raise PgrpoSimError(f"index must be an integer in [0, {seeds - 1}] (a seed of the run), got {index!r}")
        arrays = {k: np.atleast_2d(v)[index] for k, v in arrays.items()}
    elif arrays["reward"].ndim == 2:
        reward = arrays["reward"]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after every seed diverged
            arrays = {k: np.nanmean(v, 0) if k != "reward" else np.mean(v, 0) for k, v in arrays.items()}
            arrays["reward_std"] = np.std(reward, 0, ddof=1)  # NaN for one seed: no spread to measure
        arrays["n_samples"] = np.full(reward.shape[1], float(reward.shape[0]))
    steps = np.arange(arrays["reward"].size, dtype=float)
    records = [{"step": float(s), **{k: float(v[i]) for k, v in arrays.items()}} for i, s in enumerate(steps)]
    return tidy(records, format="simulation", path=None, columns={k: k for k in arrays})


def constant_learning_rate(values: Sequence[float] | np.ndarray) -> float | None:
    """The learning rate of a logged series that never changes (at least 3 finite values, all equal and > 0),
    else None: a schedule may hold its value for two steps."""
    lr = np.asarray(values, float)
    lr = lr[np.isfinite(lr)]
    return float(lr[0]) if lr.size >= 3 and lr[0] > 0 and np.all(lr == lr[0]) else None


def tidy(
    records: Sequence[Mapping[str, float]],
    *,
    format: str,
    path: str | None,
    columns: Mapping[str, str] | None = None,
    settings: Mapping[str, object] | None = None,
) -> TrainingLog:
    """Merge flat numeric records (one dict per logged record, in file order) into a `TrainingLog`, by the
    rules of the module docstring; records without a step column are numbered from 0. `settings` are the run
    settings the parser read (`SETTINGS` names); a learning rate logged with one value throughout is added."""
    columns = check_columns(columns)
    if not records:
        raise PgrpoSimError(f"{_name(path)} holds no numeric records")
    present = sorted({k for r in records for k in r})
    by_lower = {}
    for key in present:
        by_lower.setdefault(key.lower(), key)
    sources = {}
    for name, candidates in CANONICAL.items():
        if name in columns:
            if columns[name] not in present:
                raise PgrpoSimError(
                    f"column {columns[name]!r} (for {name}) is not in {_name(path)}; columns: {_show(present)}"
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
            f"no reward column in {_name(path)} (looked for {', '.join(CANONICAL['reward'])}); "
            f"columns: {_show(present)}; map one with reward=NAME{hint}"
        )
    step_key = sources.get("step")
    merged: dict[float, dict[str, float]] = {}
    last_step, skipped, blowups = -math.inf, [], []
    for i, record in enumerate(records):
        if step_key and step_key not in record:
            raise PgrpoSimError(f"record {i + 1} of {_name(path)} has no {step_key!r}")
        step = float(record[step_key]) if step_key else float(i)
        if not math.isfinite(step):
            raise PgrpoSimError(f"record {i + 1} of {_name(path)} has a non-finite step")
        if step < last_step:
            raise PgrpoSimError(
                f"steps in {_name(path)} go backwards: step {step:g} (record {i + 1}) follows step {last_step:g}; "
                "a resumed or concatenated log? keep one segment"
            )
        last_step = step
        reward = record.get(sources["reward"])
        if reward is not None and not math.isfinite(reward):
            skipped.append(step)
            if reward is not _TEXT:
                blowups.append(step)
            continue
        row = merged.setdefault(step, {})
        for key, value in record.items():
            clash = key in row and row[key] != value and not (math.isnan(row[key]) and math.isnan(value))
            if clash and key in sources.values():
                raise PgrpoSimError(f"step {step:g} of {_name(path)} logs {key!r} twice with different values")
            row[key] = value
    if skipped:
        warnings.warn(f"{_name(path)}: skipped {len(skipped)} record(s) with a non-finite reward", stacklevel=3)
    keep = [s for s, row in merged.items() if any(src in row for n, src in sources.items() if n != "step")]
    column = lambda key: np.array([merged[s].get(key, np.nan) for s in keep], float)  # noqa: E731
    data = {"step": np.array(keep, float)}
    data.update({name: column(src) for name, src in sources.items() if name != "step"})
    if not np.isfinite(data["reward"]).any():
        raise PgrpoSimError(
            f"{_name(path)} has no record with a finite reward: column {sources['reward']!r} holds no finite "
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


# ---------------------------------------------------------------------------------------------- parsers


def _read_text(path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PgrpoSimError(f"log file not found: {path}") from None
    except IsADirectoryError:
        raise PgrpoSimError(
            f"log path is a directory without TensorBoard event files (events.out.tfevents.*): {path}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PgrpoSimError(f"cannot read log {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _name(path) -> str:
    return "the log" if path is None else Path(path).name


def _show(names: Sequence[str], limit: int = 12) -> str:
    return ", ".join(names[:limit]) + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def _numeric(value) -> float | None:
    """A float for numbers and for strings holding one ('0.125', 'nan': loggers that write values as text, e.g.
    TRL's console); None (not a metric) for other strings, booleans, lists and objects; null → NaN."""
    if value is None:
        return math.nan
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


_TEXT = float("nan")  # a NaN object of its own (not `math.nan`, which JSON null becomes)
"""A CSV cell or JSON string that is text, not a number ("n/a"): NaN, told apart from a logged NaN by identity
(`is _TEXT`)."""


def _flat(obj: Mapping) -> dict[str, float]:
    """Numeric fields of a record, text ones as `_TEXT` (a logged value that is not a number); a verl `data`
    object is merged into the top level."""
    items = dict(obj)
    if isinstance(items.get("data"), dict):
        items.update(items.pop("data"))
    out = {}
    for key, value in items.items():
        number = _numeric(value)
        if number is not None:
            out[str(key)] = number
        elif isinstance(value, str):
            out[str(key)] = _TEXT
    return out


Parsed = tuple[list[dict[str, float]], dict[str, object]]
"""A parser's result: the flat numeric records in file order, and the run settings the log states."""


def _parse_trl(text: str, path) -> Parsed:
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PgrpoSimError(f"{_name(path)} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise PgrpoSimError(f"{_name(path)} is not a TRL trainer_state.json (no log_history list)")
    return [_flat(entry) for entry in history if isinstance(entry, dict)], {}


_NOT_RECORDS = 'a log needs records with named fields, e.g. {"step": 1, "reward": 0.5}'


def _json_objects(text: str, path) -> list[dict]:
    """The objects of a JSON lines file, blank lines skipped, or of one JSON array of objects (the records
    orientation of pandas' `to_json`)."""
    if text.lstrip().startswith("["):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as exc:
            first = next(line for line in text.splitlines() if line.strip()).strip()
            try:
                json.loads(first)
            except json.JSONDecodeError:
                raise PgrpoSimError(f"{_name(path)} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
            raise PgrpoSimError(
                f"{_name(path)} holds JSON arrays, not objects (first line {first[:40]!r}): {_NOT_RECORDS}"
            ) from None
        if not all(isinstance(obj, dict) for obj in whole):
            kind = next(type(obj).__name__ for obj in whole if not isinstance(obj, dict))
            raise PgrpoSimError(f"{_name(path)} is a JSON array of {kind} values, not of objects: {_NOT_RECORDS}")
        return whole
    objects = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PgrpoSimError(f"{_name(path)} is not valid JSON lines (line {i}: {exc.msg})") from None
        if not isinstance(obj, dict):
            raise PgrpoSimError(f"{_name(path)}: line {i} is not a JSON object")
        objects.append(obj)
    return objects


def _parse_json_lines(text: str, path) -> Parsed:
    return [_flat(obj) for obj in _json_objects(text, path)], {}


def _parse_verl(text: str, path) -> Parsed:
    if text.lstrip().startswith("{"):
        return _parse_json_lines(text, path)
    records = []
    for line in text.splitlines():
        match = _CONSOLE.search(line)
        if not match:
            continue  # other console output
        record = {"step": float(match.group(1))}
        for field in match.group(2).split(" - "):
            key, sep, value = field.rpartition(":")
            number = _NUMBER.match(value.strip())
            if sep and number:
                record[key.strip()] = float(number.group(1))
        records.append(record)
    if not records:
        raise PgrpoSimError(f"{_name(path)} has no verl console lines (step:N - key:value - …)")
    return records, {}


def _csv_header(text: str) -> list[str]:
    """The header fields of a comma- or tab-separated table (its first non-empty line)."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    delimiter = "\t" if line.count("\t") > line.count(",") else ","
    return [h.strip() for h in next(csv.reader([line], delimiter=delimiter), [])]


def _csv_rows(text: str, path) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise PgrpoSimError(f"{_name(path)} has no data rows (a CSV log needs a header and rows)")
    delimiter = "\t" if lines[0].count("\t") > lines[0].count(",") else ","
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
    header = [h.strip() for h in next(reader)]
    rows = []
    for i, row in enumerate(reader, 2):
        if len(row) != len(header):
            raise PgrpoSimError(f"{_name(path)}: row {i} has {len(row)} fields, the header has {len(header)}")
        rows.append(row)
    return header, rows


def _csv_records(header: Sequence[str | None], rows: Sequence[Sequence[str]]) -> list[dict[str, float]]:
    """One record per row; columns whose header is None are left out."""
    records = []
    for row in rows:
        record = {}
        for key, cell in zip(header, row):
            if key is None or not cell.strip():
                continue  # an empty cell: not logged at this step
            try:
                record[key] = float(cell)
            except ValueError:
                record[key] = _TEXT  # logged, but not a number ("n/a"): a skipped reward is counted
        records.append(record)
    return records


def _parse_csv(text: str, path) -> Parsed:
    header, rows = _csv_rows(text, path)
    return _csv_records(header, rows), {}


# W&B exports: a panel's CSV has `<run> - <metric>` columns with `__MIN` / `__MAX` band columns; a run's history
# has W&B's own `_step`, `_runtime`, `_timestamp`; HF's W&B callback adds `trainer/global_step`.
_WANDB_BAND = re.compile(r"__(MIN|MAX)$")
_WANDB_OWN = frozenset({"_step", "_runtime", "_timestamp", "trainer/global_step"})
_WANDB_STEP = frozenset({"step", "_step", "trainer/global_step", "global_step"})
_WANDB_RUN = " - "


def _is_wandb_header(header: Sequence[str]) -> bool:
    if any(_WANDB_BAND.search(h) for h in header) or any(h in _WANDB_OWN for h in header):
        return True
    if list(header[:2]) == ["Name", "State"]:  # a runs table (refused by _parse_wandb)
        return True
    return bool(header) and header[0].lower() == "step" and any(_WANDB_RUN in h for h in header[1:])


def _parse_wandb(text: str, path) -> Parsed:
    """A W&B CSV export: band columns dropped, a single run's `<run> - ` prefix removed (several runs in one
    export are an error), a runs table (one row per run) refused."""
    header, rows = _csv_rows(text, path)
    keep = [None if _WANDB_BAND.search(h) else h for h in header]
    runs = sorted({h.rpartition(_WANDB_RUN)[0] for h in keep if h and _WANDB_RUN in h})
    if len(runs) > 1:
        raise PgrpoSimError(
            f"{_name(path)} holds {len(runs)} W&B runs ({_show(runs, 4)}); export one run's curves per file"
        )
    keep = [h.rpartition(_WANDB_RUN)[2] if h and _WANDB_RUN in h else h for h in keep]
    if not any(h and h.lower() in _WANDB_STEP for h in keep) and "Name" in keep and len(rows) > 1:
        names = {row[keep.index("Name")] for row in rows}
        if len(names) > 1:
            raise PgrpoSimError(
                f"{_name(path)} is a W&B runs table (one row per run: {_show(sorted(names), 4)}), not a training "
                "curve; export a run's history or a panel's CSV"
            )
    return _csv_records(keep, rows), {}


_WANDB_LONG = ("run_name", "metric", "step", "value")
"""The header of a W&B export in long form."""


def _parse_wandb_long(text: str, path, run: str | None) -> list[dict[str, float]]:
    """One record per logged step of `run` (the file's only run when None): each metric's values at that step,
    averaged when there are several (one per optimiser step)."""
    _, rows = _csv_rows(text, path)
    runs = list(dict.fromkeys(row[0] for row in rows))
    if run is None and len(runs) > 1:
        raise PgrpoSimError(
            f"{_name(path)} holds {len(runs)} runs in W&B long form; choose one with --run NAME (run=NAME): "
            f"{', '.join(runs)}"
        )
    run = runs[0] if run is None else run
    if run not in runs:
        raise PgrpoSimError(f"{_name(path)} has no run {run!r}; its runs: {', '.join(runs)}")
    values: dict[float, dict[str, list[float]]] = {}
    for i, (name, metric, step, value) in enumerate(rows, 2):
        if name != run:
            continue
        number = _numeric(step)
        if number is None or not math.isfinite(number):
            raise PgrpoSimError(f"{_name(path)}: row {i} has no numeric step ({step!r})")
        cell = _numeric(value)
        values.setdefault(number, {}).setdefault(metric, []).append(_TEXT if cell is None else cell)
    return [
        {"step": step, **{m: v[0] if len(v) == 1 else float(np.mean(v)) for m, v in metrics.items()}}
        for step, metrics in sorted(values.items())
    ]


# ------------------------------------------------------------------------------------------ TRL console

_PY_SPECIAL = re.compile(r"(:\s*)(-?)(nan|inf)\b")
_NUMPY_SCALAR = re.compile(r"np\.(?:float|int)\d*\(([^()]*)\)")


def _console_dicts(text: str):
    """Every dict that Python printed in `text` (its repr: `{'key': ...`; one per line or carriage-return segment,
    possibly after other output on it), in order."""
    for segment in re.split(r"[\r\n]", text):
        start, end = segment.find("{'"), segment.rfind("}")
        if start < 0 or end < start:
            continue
        literal = _NUMPY_SCALAR.sub(r"\1", segment[start : end + 1])
        literal = _PY_SPECIAL.sub(lambda m: m[1] + ("None" if m[3] == "nan" else m[2] + "1e999"), literal)
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
        if isinstance(value, dict):
            yield value


def _console_kind(record: Mapping[str, float]) -> str | None:
    keys = [k.lower() for k in record]
    if "train_runtime" in keys:
        return "summary"
    if any(k.startswith("eval_") for k in keys) and all(k.startswith("eval_") or k in ("epoch", "step") for k in keys):
        return "eval"
    if any(k in _TRL_CONSOLE_KEYS for k in keys):
        return "train"
    return None


def _has_trl_console_dicts(text: str) -> bool:
    if "{'" not in text:
        return False
    for raw in _console_dicts(text):
        record = {str(k): v for k, v in raw.items() if _numeric(v) is not None}
        if _console_kind(record) == "train":
            return True
    return False


def _parse_trl_console(text: str, path) -> Parsed:
    """TRL console output: the n-th dict with training metrics is step n, `eval_*` dicts and the summary belong
    to the latest step; other dicts and all other output are ignored."""
    records, step, finished = [], 0, None
    for raw in _console_dicts(text):
        record = {str(k): n for k, v in raw.items() if (n := _numeric(v)) is not None}
        kind = _console_kind(record)
        if kind is None:
            continue
        if kind == "train":
            if finished is not None:
                raise PgrpoSimError(
                    f"{_name(path)} holds more than one run: training metrics follow the end-of-training summary "
                    f"at step {finished}; keep one run's output"
                )
            step += 1
        elif kind == "summary":
            finished = step
        if kind != "summary" or step > 0:  # a summary without training is no step
            record.pop("step", None)
            records.append({"step": float(step), **record})
    if step == 0:
        raise PgrpoSimError(
            f"{_name(path)} has no TRL console dicts with training metrics ({{'loss': …, 'reward': …}})"
        )
    return records, {}


# ---------------------------------------------------------------------------------- typed JSON lines

_TYPED_ROLLOUT = re.compile(r'"type"\s*:\s*"rollout"')
_TYPED_BOOKKEEPING = frozenset({"type", "grpo_step", "step", "optimizer_step", "rollout_epoch", "train_batch_index"})


def _typed_value(objects: Sequence[Mapping], *keys: str):
    """The one value that `objects` state under the first of `keys` present (None if absent or not constant)."""
    for key in keys:
        values = [obj[key] for obj in objects if obj.get(key) is not None]
        if values:
            return values[0] if all(v == values[0] for v in values) else None
    return None


def _integer(value) -> int | None:
    number = _numeric(value)
    return int(number) if number is not None and math.isfinite(number) and number == int(number) else None


def _parse_typed(text: str, path) -> Parsed:
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
    steps: dict[float, dict] = {}
    for i, obj in enumerate(_json_objects(text, path), 1):
        kind = obj.get("type")
        step = _numeric(obj.get("grpo_step", obj.get("step")))
        if step is None or not math.isfinite(step):
            if kind in ("rollout", "train", "eval"):
                raise PgrpoSimError(f"record {i} of {_name(path)} ({kind}) has no grpo_step")
            continue  # a header or config record
        entry = steps.setdefault(step, dict(rollout=None, train=[], eval=None, other=[]))
        if kind in ("rollout", "eval"):
            if entry[kind] is not None:
                raise PgrpoSimError(
                    f"step {step:g} of {_name(path)} has two {kind} records (record {i}); "
                    "a resumed or concatenated log? keep one segment"
                )
            entry[kind] = obj
        elif kind == "train":
            entry["train"].append(obj)
        else:
            entry["other"].append(obj)
    records = []
    for step, entry in steps.items():
        record = {"step": step}
        if entry["rollout"] is not None:
            record.update({k: v for k, v in _flat(entry["rollout"]).items() if k not in _TYPED_BOOKKEEPING})
        train = [_flat(t) for t in entry["train"]]
        for key in dict.fromkeys(k for t in train for k in t if k not in _TYPED_BOOKKEEPING):
            values = [t[key] for t in train if key in t and not math.isnan(t[key])]
            if values:
                record[key if key not in record else f"train/{key}"] = float(np.mean(values))
        if entry["eval"] is not None:
            record.update({f"eval/{k}": v for k, v in _flat(entry["eval"]).items() if k not in _TYPED_BOOKKEEPING})
        for obj in entry["other"]:
            for key, value in _flat(obj).items():
                if key not in _TYPED_BOOKKEEPING:
                    record[key if key not in record else f"{obj.get('type')}/{key}"] = value
        records.append(record)
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
        epsilon=_numeric(_typed_value(updates, "cliprange_low", "cliprange")) if clips else None,
        epsilon_high=_numeric(_typed_value(updates, "cliprange_high")) if clips else None,
        beta=_numeric(_typed_value(updates, "kl_coef")),
        learning_rate=_numeric(_typed_value(updates, "learning_rate")),
        loss_type=loss_type,
    )
    return records, {
        k: v for k, v in settings.items() if v is not None and not (isinstance(v, float) and math.isnan(v))
    }


# ---------------------------------------------------------------------------------------- TensorBoard

_EVENTS = "events.out.tfevents.*"
_TENSORBOARD_EXTRA = (
    "reading TensorBoard event files needs the tensorboard package: pip install 'pgrpo-sim[tensorboard]'"
)


def _is_tensorboard(path) -> bool:
    """An event file (by name, or by the `brain.Event` version record that opens one) or a folder holding some."""
    p = Path(path)
    if p.is_dir():
        return next(p.rglob(_EVENTS), None) is not None
    if "tfevents" in p.name:
        return True
    try:
        with p.open("rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return b"brain.Event" in head


def _event_source(path) -> Path:
    """The file or folder to read: a folder without event files of its own may hold one run's folder below."""
    p = Path(path)
    if not p.exists():
        raise PgrpoSimError(f"log file not found: {path}")
    if p.is_file() and "tfevents" not in p.name:
        if not _is_tensorboard(p):  # e.g. a CSV read with --format tensorboard
            raise PgrpoSimError(
                f"{_name(path)} is not a TensorBoard event file (events.out.tfevents.*, or a folder of them)"
            )
        raise PgrpoSimError(
            f"{_name(path)} is a TensorBoard event file under another name; TensorBoard's reader takes only files "
            "named events.out.tfevents.*: rename it"
        )
    if p.is_file() or next(p.glob(_EVENTS), None) is not None:
        return p
    folders = sorted({f.parent for f in p.rglob(_EVENTS)})
    if len(folders) > 1:
        names = [str(f.relative_to(p)) for f in folders]
        raise PgrpoSimError(
            f"{_name(path)} holds event files of {len(folders)} runs ({_show(names, 4)}); pass one run's folder"
        )
    return folders[0]


def _parse_tensorboard(path) -> Parsed:
    """Every scalar of a TensorBoard log (old-style `simple_value` and TF2 tensors of the scalars plugin), one
    record per step; a tag logged twice at one step keeps its last value (TensorBoard drops the events a
    restarted run overwrote)."""
    source = _event_source(path)
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from tensorboard.util import tensor_util
    except ImportError:
        raise PgrpoSimError(_TENSORBOARD_EXTRA) from None
    guidance = {"scalars": 0, "tensors": 0, "images": 1, "audio": 1, "histograms": 1, "compressedHistograms": 1}
    accumulator = EventAccumulator(str(source), size_guidance=guidance)
    try:
        accumulator.Reload()
    except Exception as exc:  # a corrupt file raises whatever its reader meets
        raise PgrpoSimError(f"cannot read TensorBoard log {_name(path)}: {str(exc).splitlines()[0]}") from None
    tags = accumulator.Tags()
    by_step: dict[int, dict[str, float]] = {}
    for tag in tags.get("scalars", []):
        for event in accumulator.Scalars(tag):
            by_step.setdefault(event.step, {})[tag] = float(event.value)
    for tag in tags.get("tensors", []):
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue
        for event in accumulator.Tensors(tag):
            value = tensor_util.make_ndarray(event.tensor_proto)
            if value.size == 1 and np.issubdtype(value.dtype, np.number):
                by_step.setdefault(event.step, {})[tag] = float(value.reshape(()))
    if not by_step:
        raise PgrpoSimError(f"{_name(path)} holds no TensorBoard scalars")
    return [{**row, "step": float(step)} for step, row in sorted(by_step.items())], {}
