"""The "csv" format, and the tables the W&B formats share: any comma- (or tab-) separated table with a header
row, including `pgrpo-sim simulate` output. An empty cell is "not logged"; a cell that is not a number is `TEXT`."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from ...base.errors import PgrpoSimError
from .source import TEXT, LogFile, Parsed, log_name


def csv_header(text: str) -> list[str]:
    """The header fields of a comma- or tab-separated table (its first non-empty line)."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    delimiter = "\t" if line.count("\t") > line.count(",") else ","
    return [h.strip() for h in next(csv.reader([line], delimiter=delimiter), [])]


def csv_rows(text: str, path) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a table of at least one row; an error for a row of another width."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise PgrpoSimError(f"{log_name(path)} has no data rows (a CSV log needs a header and rows)")
    delimiter = "\t" if lines[0].count("\t") > lines[0].count(",") else ","
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
    header = [h.strip() for h in next(reader)]
    rows = []
    for i, row in enumerate(reader, 2):
        if len(row) != len(header):
            raise PgrpoSimError(f"{log_name(path)}: row {i} has {len(row)} fields, the header has {len(header)}")
        rows.append(row)
    return header, rows


def csv_records(header: Sequence[str | None], rows: Sequence[Sequence[str]]) -> list[dict[str, float]]:
    """One record per row; columns whose header is None are left out."""
    records = []
    for row in rows:
        record = {}
        for key, cell in zip(header, row, strict=True):
            if key is None or not cell.strip():
                continue  # an empty cell: not logged at this step
            try:
                record[key] = float(cell)
            except ValueError:
                record[key] = TEXT  # logged, but not a number ("n/a"): a skipped reward is counted
        records.append(record)
    return records


def detect(log: LogFile) -> bool:
    """Any text no other format claimed (the last format tried)."""
    return True


def read(log: LogFile) -> Parsed:
    """One record per row; no settings."""
    header, rows = csv_rows(log.text, log.path)
    return csv_records(header, rows), {}
