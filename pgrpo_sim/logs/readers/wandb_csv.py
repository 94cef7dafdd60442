"""The "wandb" format: a Weights & Biases CSV export, either a panel's (`Step`, `<run> - train/reward`,
`..__MIN`, `..__MAX`; the min/max band columns are not metrics, a single run's name prefix is removed) or a run's
history (`_step`, `_runtime`, `trainer/global_step`, ...; `trainer/global_step` is preferred to `_step`)."""

from __future__ import annotations

import re

from ...base.errors import PgrpoSimError
from .csv_table import csv_header, csv_records, csv_rows
from .source import LogFile, Parsed, log_name, show_names

# W&B exports: a panel's CSV has `<run> - <metric>` columns with `__MIN` / `__MAX` band columns; a run's history
# has W&B's own `_step`, `_runtime`, `_timestamp`; HF's W&B callback adds `trainer/global_step`.
_WANDB_BAND = re.compile(r"__(MIN|MAX)$")
_WANDB_OWN = frozenset({"_step", "_runtime", "_timestamp", "trainer/global_step"})
_WANDB_STEP = frozenset({"step", "_step", "trainer/global_step", "global_step"})
_WANDB_RUN = " - "


def detect(log: LogFile) -> bool:
    """A table with W&B columns: `…__MIN`/`…__MAX`, `_step`, `trainer/global_step`, `<run> - <metric>` after a
    `Step` column, or a runs table (`Name`, `State`, refused by `read`)."""
    header = csv_header(log.text)
    if any(_WANDB_BAND.search(h) for h in header) or any(h in _WANDB_OWN for h in header):
        return True
    if list(header[:2]) == ["Name", "State"]:  # a runs table (refused by read)
        return True
    return bool(header) and header[0].lower() == "step" and any(_WANDB_RUN in h for h in header[1:])


def read(log: LogFile) -> Parsed:
    """A W&B CSV export: band columns dropped, a single run's `<run> - ` prefix removed (several runs in one
    export are an error), a runs table (one row per run) refused; no settings."""
    path = log.path
    header, rows = csv_rows(log.text, path)
    keep = [None if _WANDB_BAND.search(h) else h for h in header]
    runs = sorted({h.rpartition(_WANDB_RUN)[0] for h in keep if h and _WANDB_RUN in h})
    if len(runs) > 1:
        raise PgrpoSimError(
            f"{log_name(path)} holds {len(runs)} W&B runs ({show_names(runs, 4)}); export one run's curves per file"
        )
    keep = [h.rpartition(_WANDB_RUN)[2] if h and _WANDB_RUN in h else h for h in keep]
    if not any(h and h.lower() in _WANDB_STEP for h in keep) and "Name" in keep and len(rows) > 1:
        names = {row[keep.index("Name")] for row in rows}
        if len(names) > 1:
            raise PgrpoSimError(
                f"{log_name(path)} is a W&B runs table (one row per run: {show_names(sorted(names), 4)}), not a "
                "training curve; export a run's history or a panel's CSV"
            )
    return csv_records(keep, rows), {}
