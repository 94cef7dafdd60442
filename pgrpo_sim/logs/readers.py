"""Readers for real GRPO training logs, into one tidy table with canonical metric names.

Formats (`FORMATS`; `detect_format` picks one from the file's content):
- "trl": Hugging Face TRL `trainer_state.json` (GRPOTrainer `log_history`), both the older key names
  (Unsloth era: `reward`, `reward_std`, `kl`, `rewards/<fn>`) and TRL 0.26's (`entropy`,
  `frac_reward_zero_std`, `clip_ratio/region_mean`, `completions/*`, `eval_*`).
- "verl": verl metrics, either its `file` logger's JSONL (`{"step": n, "data": {...}}` or flat objects) or
  its console lines (`step:12 - critic/score/mean:0.4 - actor/entropy:0.9 - ...`).
- "jsonl": any other file of one JSON object per line.
- "csv": any comma- (or tab-) separated table with a header row, including `pgrpo-sim simulate` output.

Each canonical metric (`CANONICAL`) is looked up under its known source names (ignoring case), first match
wins; a column map (`{"reward": "train/reward"}`) overrides the lookup. Source names are kept
(`TrainingLog.sources`), as are the numeric columns that map to no canonical name (`TrainingLog.other`).
Metrics that a log lacks are listed in `TrainingLog.missing`, never filled in.

Records sharing a step are merged (TRL logs eval metrics as a separate record at the training step). A
record whose reward is logged but not a finite number (NaN, inf, null, or a CSV cell such as "n/a") is
dropped with a warning and counted in `TrainingLog.skipped_steps` (an empty CSV cell is "not logged");
steps that go backwards and a metric logged twice at one step with different values are errors. Every error
is a one-line `ValueError`.
"""

from __future__ import annotations

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

from ..base.errors import PgrpoSimError

if TYPE_CHECKING:  # the bandit (and JAX) are not needed to read logs
    from ..models.bandit import BanditRun

FORMATS = ("trl", "verl", "jsonl", "csv")
"""Log formats `read_log` understands ("auto" detects one of these)."""

CANONICAL: dict[str, tuple[str, ...]] = {
    "step": ("step", "global_step", "trainer/global_step", "_step"),
    "reward": ("reward", "critic/score/mean", "mean_reward", "train/reward", "reward_mean", "rewards/mean"),
    "reward_std": ("reward_std", "train/reward_std", "critic/score/std"),
    "eval_reward": ("eval_reward", "eval/reward", "val/reward", "eval_mean_reward"),
    "true_reward": ("true_reward",),
    "entropy": ("entropy", "actor/entropy", "train/entropy", "actor/entropy_loss"),
    "kl": ("kl", "kl_ref", "train/kl", "actor/kl_loss"),
    "policy_kl": ("actor/ppo_kl", "approx_kl", "ppo_kl"),
    "grad_norm": ("grad_norm", "actor/grad_norm", "train/grad_norm"),
    "clip_frac": (
        "clip_frac",
        "clip_ratio/region_mean",
        "actor/pg_clipfrac",
        "clip_ratio",
        "train/clip_ratio/region_mean",
    ),
    "ratio_max": ("ratio_max",),
    "zero_std_frac": ("frac_reward_zero_std", "zero_std_frac", "zero_adv_frac", "train/frac_reward_zero_std"),
    "adv_var": ("adv_var",),
    "n_samples": ("n_samples", "rollout_count"),
    "learning_rate": ("learning_rate", "actor/lr", "train/learning_rate"),
}
"""Canonical metric → the source names looked up, in order. Units: reward as logged; entropy and KL in nats
(per token for LLM logs); `kl` is KL(π‖π_ref), `policy_kl` the per-update KL(π_old‖π); `clip_frac` and
`zero_std_frac` fractions in [0, 1]; `n_samples` rewards averaged per step (prompts × group size)."""

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
    `path` of the file (None for a simulation); `skipped_steps`: steps dropped for a non-finite reward.
    """

    data: dict[str, np.ndarray]
    sources: dict[str, str]
    other: dict[str, np.ndarray]
    format: str
    path: str | None
    skipped_steps: np.ndarray

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
        """JSON-ready description: format, rows, sources, missing and constant metrics, skipped steps."""
        return dict(
            format=self.format,
            path=self.path,
            rows=len(self),
            sources=dict(self.sources),
            missing=list(self.missing),
            constant=list(self.constant),
            skipped_steps=[float(s) for s in self.skipped_steps],
        )


def parse_column_map(items: Sequence[str]) -> dict[str, str]:
    """`["reward=train/reward", ...]` → `{"reward": "train/reward"}`; names must be in `CANONICAL`."""
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
    """The format of a log file, from its content: a JSON object with `log_history` is "trl"; JSON lines
    with verl-style keys (`actor/…`, `critic/…`, `val-core/…`, or a `data` object) or console lines
    `step:N - key:value - …` are "verl"; other JSON lines "jsonl"; anything else "csv"."""
    text = _read_text(path)
    return _detect(text, path)


def _detect(text: str, path) -> str:
    stripped = text.strip()
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
            raise PgrpoSimError(f"{_name(path)} is not valid JSON (line {error.lineno}: {error.msg})") from None
        data = first.get("data") if isinstance(first, dict) else None
        keys = set(first) | set(data) if isinstance(data, dict) else set(first)
        if isinstance(data, dict) or any(str(k).split("/")[0] in ("actor", "critic", "val-core") for k in keys):
            return "verl"
        return "jsonl"
    if any(_CONSOLE.search(line) for line in text.splitlines()[:2000]):
        return "verl"
    return "csv"


def read_log(path: str | Path, format: str = "auto", columns: Mapping[str, str] | None = None) -> TrainingLog:
    """Read a training log into a `TrainingLog` (see the module docstring for formats and rules).

    `columns` maps canonical names to source column names and overrides the built-in lookup. Raises a
    one-line `ValueError` for a missing or unreadable file, malformed content, no reward column, backwards
    steps or conflicting duplicates.
    """
    text = _read_text(path)
    if format == "auto":
        format = _detect(text, path)
    if format not in FORMATS:
        raise PgrpoSimError(f"format must be auto or one of {', '.join(FORMATS)}; got {format!r}")
    parser = {"trl": _parse_trl, "verl": _parse_verl, "jsonl": _parse_json_lines, "csv": _parse_csv}[format]
    return tidy(parser(text, path), format=format, path=str(path), columns=columns)


def from_run(run: BanditRun, *, index: int | None = None) -> TrainingLog:
    """A `TrainingLog` from a `BanditRun` (step n = θ_n). Sampled runs are averaged over seeds, with
    `reward_std` the spread across seeds and `n_samples` the number of seeds (so the per-step error of the
    mean is reward_std/√seeds); `index` picks a single seed instead. Steps after a divergence are NaN and
    therefore skipped (see `TrainingLog.skipped_steps`)."""
    names = {
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
    arrays = {k: np.asarray(getattr(run, v), float) for k, v in names.items() if getattr(run, v) is not None}
    if index is not None:
        arrays = {k: np.atleast_2d(v)[index] for k, v in arrays.items()}
    elif arrays["reward"].ndim == 2:
        reward = arrays["reward"]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after every seed diverged
            arrays = {k: np.nanmean(v, 0) if k != "reward" else np.mean(v, 0) for k, v in arrays.items()}
            arrays["reward_std"] = np.std(reward, 0, ddof=1) if reward.shape[0] > 1 else np.zeros(reward.shape[1])
        arrays["n_samples"] = np.full(reward.shape[1], float(reward.shape[0]))
    steps = np.arange(arrays["reward"].size, dtype=float)
    records = [{"step": float(s), **{k: float(v[i]) for k, v in arrays.items()}} for i, s in enumerate(steps)]
    return tidy(records, format="simulation", path=None, columns={k: k for k in arrays})


def tidy(
    records: Sequence[Mapping[str, float]], *, format: str, path: str | None, columns: Mapping[str, str] | None = None
) -> TrainingLog:
    """Merge flat numeric records (one dict per logged record, in file order) into a `TrainingLog`, by the
    rules of the module docstring; records without a step column are numbered from 0."""
    columns = dict(columns or {})
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
            if found is None and name == "eval_reward":
                found = next((c for c in present if any(p.match(c) for p in _EVAL_PATTERNS)), None)
            if found is not None and found not in sources.values():
                sources[name] = found
    if "reward" not in sources:
        raise PgrpoSimError(
            f"no reward column in {_name(path)} (looked for {', '.join(CANONICAL['reward'])}); "
            f"columns: {_show(present)}; map one with reward=NAME"
        )
    step_key = sources.get("step")
    merged: dict[float, dict[str, float]] = {}
    last_step, skipped = -math.inf, []
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
    return TrainingLog(data, sources, other, format, path, np.array(skipped, float))


# ---------------------------------------------------------------------------------------------- parsers


def _read_text(path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PgrpoSimError(f"log file not found: {path}") from None
    except IsADirectoryError:
        raise PgrpoSimError(f"log path is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PgrpoSimError(f"cannot read log {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _name(path) -> str:
    return "the log" if path is None else Path(path).name


def _show(names: Sequence[str], limit: int = 12) -> str:
    return ", ".join(names[:limit]) + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def _numeric(value) -> float | None:
    """A float for numbers, None (not a metric) for strings, booleans, lists and objects; null → NaN."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _flat(obj: Mapping) -> dict[str, float]:
    """Numeric fields of a record; a verl `data` object is merged into the top level."""
    items = dict(obj)
    if isinstance(items.get("data"), dict):
        items.update(items.pop("data"))
    out = {}
    for key, value in items.items():
        number = _numeric(value)
        if number is not None:
            out[str(key)] = number
    return out


def _parse_trl(text: str, path) -> list[dict[str, float]]:
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PgrpoSimError(f"{_name(path)} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise PgrpoSimError(f"{_name(path)} is not a TRL trainer_state.json (no log_history list)")
    return [_flat(entry) for entry in history if isinstance(entry, dict)]


def _parse_json_lines(text: str, path) -> list[dict[str, float]]:
    records = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PgrpoSimError(f"{_name(path)} is not valid JSON lines (line {i}: {exc.msg})") from None
        if not isinstance(obj, dict):
            raise PgrpoSimError(f"{_name(path)}: line {i} is not a JSON object")
        records.append(_flat(obj))
    return records


def _parse_verl(text: str, path) -> list[dict[str, float]]:
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
    return records


def _parse_csv(text: str, path) -> list[dict[str, float]]:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise PgrpoSimError(f"{_name(path)} has no data rows (a CSV log needs a header and rows)")
    delimiter = "\t" if lines[0].count("\t") > lines[0].count(",") else ","
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
    header = [h.strip() for h in next(reader)]
    records = []
    for i, row in enumerate(reader, 2):
        if len(row) != len(header):
            raise PgrpoSimError(f"{_name(path)}: row {i} has {len(row)} fields, the header has {len(header)}")
        record = {}
        for key, cell in zip(header, row):
            if not cell.strip():
                continue  # an empty cell: not logged at this step
            try:
                record[key] = float(cell)
            except ValueError:
                record[key] = math.nan  # logged, but not a number ("n/a"): a skipped reward is counted
        records.append(record)
    return records
