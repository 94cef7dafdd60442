"""A log file as the format readers see it (`LogFile`: its path, the run asked for, its text read once on first
use) and the values in it: numbers written as numbers or as text (`numeric`), text that is not a number (`TEXT`),
flat numeric records (`flat`), what a reader returns (`Parsed`), and the file's name in messages."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...base.errors import PgrpoSimError

Parsed = tuple[list[dict[str, float]], dict[str, object]]
"""A parser's result: the flat numeric records in file order, and the run settings the log states."""

TEXT = float("nan")  # a NaN object of its own (not `math.nan`, which JSON null becomes)
"""A CSV cell or JSON string that is text, not a number ("n/a"): NaN, told apart from a logged NaN by identity
(`is TEXT`)."""


@dataclasses.dataclass(frozen=True)
class LogFile:
    """The file (or, for TensorBoard, folder) `read_log` was given, and the run asked for (`run`, W&B long form);
    `text` reads it as UTF-8 on first use, so a format recognised by its path never reads it."""

    path: str | Path
    run: str | None = None

    @functools.cached_property
    def text(self) -> str:
        return _read_text(self.path)


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


def log_name(path) -> str:
    """The file's name in a message ("the log" for none)."""
    return "the log" if path is None else Path(path).name


def show_names(names: Sequence[str], limit: int = 12) -> str:
    """The first `limit` of `names`, comma-separated, and how many more there are."""
    return ", ".join(names[:limit]) + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def numeric(value) -> float | None:
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


def flat(obj: Mapping) -> dict[str, float]:
    """Numeric fields of a record, text ones as `TEXT` (a logged value that is not a number); a verl `data`
    object is merged into the top level."""
    items = dict(obj)
    if isinstance(items.get("data"), dict):
        items.update(items.pop("data"))
    out = {}
    for key, value in items.items():
        number = numeric(value)
        if number is not None:
            out[str(key)] = number
        elif isinstance(value, str):
            out[str(key)] = TEXT
    return out
