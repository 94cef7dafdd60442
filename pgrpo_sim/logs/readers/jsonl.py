"""The "jsonl" format, and the JSON lines every JSON format shares: any file of one JSON object per line, or one
JSON array of objects (pandas' `to_json(orient="records")`); strings holding a number (`"0.125"`) are numbers.
`json_objects` reads the objects; `json_object` and `first_record` are what the JSON formats are told apart by."""

from __future__ import annotations

import json

from ...base.errors import PgrpoSimError
from .source import LogFile, Parsed, flat, log_name

_NOT_RECORDS = 'a log needs records with named fields, e.g. {"step": 1, "reward": 0.5}'


def json_objects(text: str, path) -> list[dict]:
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
                raise PgrpoSimError(f"{log_name(path)} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
            raise PgrpoSimError(
                f"{log_name(path)} holds JSON arrays, not objects (first line {first[:40]!r}): {_NOT_RECORDS}"
            ) from None
        if not all(isinstance(obj, dict) for obj in whole):
            kind = next(type(obj).__name__ for obj in whole if not isinstance(obj, dict))
            raise PgrpoSimError(f"{log_name(path)} is a JSON array of {kind} values, not of objects: {_NOT_RECORDS}")
        return whole
    objects = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PgrpoSimError(f"{log_name(path)} is not valid JSON lines (line {i}: {exc.msg})") from None
        if not isinstance(obj, dict):
            raise PgrpoSimError(f"{log_name(path)}: line {i} is not a JSON object")
        objects.append(obj)
    return objects


def json_object(log: LogFile) -> dict | None:
    """The text as one JSON object (TRL's trainer_state.json is one); None for text that is not (JSON lines)."""
    stripped = log.text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        return None


def first_record(log: LogFile) -> dict | None:
    """The record on the first line of a text that opens with `{`; None for other text and for a first line that
    is not JSON (console output may print dicts). A JSON object over several lines without `log_history` is an
    error: the only one read is TRL's trainer_state.json."""
    stripped = log.text.strip()
    if not stripped.startswith("{"):
        return None
    whole = json_object(log)
    if isinstance(whole, dict) and "log_history" not in whole and "\n" in stripped:
        raise PgrpoSimError(f"{log_name(log.path)} is a JSON object without log_history (not a TRL trainer_state.json)")
    try:
        return json.loads(stripped.splitlines()[0])
    except json.JSONDecodeError:
        return None


def detect(log: LogFile) -> bool:
    """A JSON array, or JSON lines (tried after the JSON formats that name their keys, and TRL's console); text
    that opens with `{` but is neither is an error."""
    stripped = log.text.strip()
    if stripped.startswith("[") or first_record(log) is not None:
        return True
    if not stripped.startswith("{"):
        return False
    try:
        json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise PgrpoSimError(f"{log_name(log.path)} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return True  # one JSON object whose lines break at another line separator: read as JSON lines (an error there)


def read(log: LogFile) -> Parsed:
    """One record per object; no settings."""
    return [flat(obj) for obj in json_objects(log.text, log.path)], {}
