"""The "verl" format: verl's metrics, either its `file` logger's JSON lines (`{"step": n, "data": {...}}` or flat
objects with `actor/…`, `critic/…`, `val-core/…` keys) or its console lines (`step:12 - critic/score/mean:0.4 -
actor/entropy:0.9 - ...`, other output ignored)."""

from __future__ import annotations

import re

from ...base.errors import PgrpoSimError
from . import jsonl
from .source import LogFile, Parsed, log_name

_CONSOLE = re.compile(r"step:\s*(\d+)\s+-\s+(.*)$")
_NUMBER = re.compile(
    r"^(?:np\.float\d*\(|np\.int\d*\()?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)\)?$"
)


def detect(log: LogFile) -> bool:
    """JSON lines whose first record has a `data` object or verl-style keys, or (text that is not JSON) a console
    line `step:N - key:value - …` among the first 2000 lines."""
    first = jsonl.first_record(log)
    if first is not None:
        data = first.get("data")
        keys = set(first) | set(data) if isinstance(data, dict) else set(first)
        return isinstance(data, dict) or any(str(k).split("/")[0] in ("actor", "critic", "val-core") for k in keys)
    if log.text.strip().startswith(("{", "[")):
        return False
    return any(_CONSOLE.search(line) for line in log.text.splitlines()[:2000])


def read(log: LogFile) -> Parsed:
    """JSON lines as the "jsonl" format reads them; console lines one record each; no settings."""
    if log.text.lstrip().startswith("{"):
        return jsonl.read(log)
    records = []
    for line in log.text.splitlines():
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
        raise PgrpoSimError(f"{log_name(log.path)} has no verl console lines (step:N - key:value - …)")
    return records, {}
