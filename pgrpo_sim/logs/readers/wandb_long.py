"""The "wandb_long" format: a W&B export in long form, `run_name,metric,step,value`, one row per logged value,
often several runs of a sweep in one file: `run` picks one (required when the file holds several; the error lists
them). A metric logged several times at one step (per optimiser step, e.g. `train/grad_norm` with 16 updates per
rollout) is averaged there."""

from __future__ import annotations

import math

import numpy as np

from ...base.errors import PgrpoSimError
from .csv_table import csv_header, csv_rows
from .source import TEXT, LogFile, Parsed, log_name, numeric

HEADER = ("run_name", "metric", "step", "value")
"""The header of a W&B export in long form."""


def detect(log: LogFile) -> bool:
    """The header `run_name,metric,step,value` (any case)."""
    return [h.lower() for h in csv_header(log.text)] == list(HEADER)


def read(log: LogFile) -> Parsed:
    """One record per logged step of `log.run` (the file's only run when None): each metric's values at that step,
    averaged when there are several (one per optimiser step); no settings."""
    path, run = log.path, log.run
    _, rows = csv_rows(log.text, path)
    runs = list(dict.fromkeys(row[0] for row in rows))
    if run is None and len(runs) > 1:
        raise PgrpoSimError(
            f"{log_name(path)} holds {len(runs)} runs in W&B long form; choose one with run=NAME: {', '.join(runs)}"
        )
    run = runs[0] if run is None else run
    if run not in runs:
        raise PgrpoSimError(f"{log_name(path)} has no run {run!r}; its runs: {', '.join(runs)}")
    values: dict[float, dict[str, list[float]]] = {}
    for i, (name, metric, step, value) in enumerate(rows, 2):
        if name != run:
            continue
        number = numeric(step)
        if number is None or not math.isfinite(number):
            raise PgrpoSimError(f"{log_name(path)}: row {i} has no numeric step ({step!r})")
        cell = numeric(value)
        values.setdefault(number, {}).setdefault(metric, []).append(TEXT if cell is None else cell)
    records = [
        {"step": step, **{m: v[0] if len(v) == 1 else float(np.mean(v)) for m, v in metrics.items()}}
        for step, metrics in sorted(values.items())
    ]
    return records, {}
