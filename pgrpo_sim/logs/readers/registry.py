"""The formats `read_log` understands, one table row each (`READERS`: format name → its detector and reader, in
the order `detect_format` tries them), and the two functions that consult it, `detect_format` and `read_log`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

from ...base.errors import PgrpoSimError
from . import (
    csv_table,
    jsonl,
    tensorboard_events,
    trl,
    trl_console,
    typed_jsonl,
    verl,
    wandb_csv,
    wandb_long,
)
from .source import LogFile, Parsed, log_name
from .table import TrainingLog, check_columns, tidy

FORMATS = ("trl", "trl_console", "typed_jsonl", "verl", "tensorboard", "wandb", "wandb_long", "jsonl", "csv")
"""Log formats `read_log` understands ("auto" detects one of these); each has its row in `READERS`."""


@dataclasses.dataclass(frozen=True)
class LogFormat:
    """How one format is recognised (`detect`: does this file hold it? it may raise `PgrpoSimError` for content
    that no format reads) and read (`read`: its records and the settings it states). `one_run`: a file holds one
    run, so choosing one (`run`) is an error; W&B long form reads `run`, TensorBoard too (a folder's
    run is chosen by its path, or by `run`: its folder below the one given).

    Attributes:
        detect: `LogFile` → whether the file holds this format.
        read: `LogFile` → `Parsed`, the flat numeric records in file order and the run settings the log states.
        one_run: whether a file of this format holds a single run (then `read_log` refuses a `run`).
    """

    detect: Callable[[LogFile], bool]
    read: Callable[[LogFile], Parsed]
    one_run: bool = True


READERS: dict[str, LogFormat] = {
    "tensorboard": LogFormat(tensorboard_events.detect, tensorboard_events.read, one_run=False),
    "trl": LogFormat(trl.detect, trl.read),
    "typed_jsonl": LogFormat(typed_jsonl.detect, typed_jsonl.read),
    "verl": LogFormat(verl.detect, verl.read),
    "trl_console": LogFormat(trl_console.detect, trl_console.read),
    "jsonl": LogFormat(jsonl.detect, jsonl.read),
    "wandb": LogFormat(wandb_csv.detect, wandb_csv.read),
    "wandb_long": LogFormat(wandb_long.detect, wandb_long.read, one_run=False),
    "csv": LogFormat(csv_table.detect, csv_table.read),
}
"""Format → its detector and reader, in the order `detect_format` tries them (the first that recognises a file
names its format): TensorBoard first, by the path, so an event file is never read as text; then the formats that
name their keys before the generic JSON lines, and tables last, "csv" taking whatever is left."""


def detect_format(path: str | Path) -> str:
    """The format of a log, from its content: a TensorBoard event file (by name or its first record) or a folder
    holding event files is "tensorboard"; a JSON object with `log_history` is "trl"; JSON lines with a `rollout`
    record (`"type": "rollout"`), or opening with a record that has `type` and `grpo_step`, "typed_jsonl"; JSON
    lines with verl-style keys (`actor/…`, `critic/…`, `val-core/…`, or a `data` object) or console lines
    `step:N - key:value - …` are "verl"; other JSON lines "jsonl"; text holding TRL's printed dicts
    (`{'loss': …, 'reward': …}`) "trl_console"; a table with W&B columns (`…__MIN`/`…__MAX`, `_step`,
    `trainer/global_step`, `<run> - <metric>`) "wandb"; the header `run_name,metric,step,value` "wandb_long";
    anything else "csv".

    Args:
        path: a log file, or a folder of TensorBoard event files.

    Returns:
        The format's name, one of `FORMATS`.

    Raises:
        PgrpoSimError: the file is missing or unreadable (not UTF-8 text), or holds content no format reads.
    """
    return _detect(LogFile(path))


def _detect(log: LogFile) -> str:
    return next(name for name, entry in READERS.items() if entry.detect(log))


def read_log(
    path: str | Path, format: str = "auto", columns: Mapping[str, str] | None = None, run: str | None = None
) -> TrainingLog:
    """Read a training log into a `TrainingLog` (see the package docstring for formats and rules).

    Args:
        path: a log file, or for TensorBoard also a folder of event files.
        format: one of `FORMATS`, or "auto" to detect it (`detect_format`).
        columns: canonical name → source column name; overrides the built-in lookup (`CANONICAL`). None: none.
        run: the run to read from a file that holds several (W&B long form; TensorBoard: a subfolder); None: the
            file's only run.

    Returns:
        `TrainingLog`: float64 columns aligned on the log's steps (optimiser steps); rewards in the log's units.

    Raises:
        PgrpoSimError: (a one-line `ValueError`) a `path` or `run` of the wrong type, a missing or unreadable
            file, an unknown `format`, a bad `columns`, malformed content, no reward column, backwards steps or
            conflicting duplicates, a file of several runs without `run`, or `run` on a one-run format.
    """
    if run is not None and not isinstance(run, str):
        raise PgrpoSimError(f"run must be a run's name (str), got {type(run).__name__}")
    if not isinstance(path, (str, Path)):
        raise PgrpoSimError(f"path must be a file path (str or Path), got {type(path).__name__}")
    if format != "auto" and format not in FORMATS:
        raise PgrpoSimError(f"format must be auto or one of {', '.join(FORMATS)}; got {format!r}")
    check_columns(columns)
    log = LogFile(path, run)
    if format == "auto":
        format = _detect(log)
    reader = READERS[format]
    if run is not None and reader.one_run:
        _ = log.text  # a missing or unreadable file is the error to report first, as when the format is detected
        raise PgrpoSimError(
            f"{log_name(path)} is a {format} log of one run: a run is chosen only in a W&B long-form CSV "
            f"({','.join(wandb_long.HEADER)}) or a TensorBoard folder of several runs; pass run=None"
        )
    records, settings = reader.read(log)
    return tidy(records, format=format, path=str(path), columns=columns, settings=settings)
