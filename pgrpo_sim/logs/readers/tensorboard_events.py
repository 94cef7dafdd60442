"""The "tensorboard" format: an event file (`events.out.tfevents.*`) or a folder holding one run's event files,
read with tensorboard's own `EventAccumulator` (optional extra: `pip install 'pgrpo-sim[tensorboard]'`); every
scalar, old-style or TF2 tensor, one record per step. TRL writes `train/<key>` and `eval/<key>` tags. Recognised by
its path (the file's name or its first record), so its bytes are never read as text."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.errors import PgrpoSimError
from .source import LogFile, Parsed, log_name, show_names

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


def _event_source(path, run: str | None = None) -> Path:
    """The file or folder to read: a folder without event files of its own may hold runs' folders below, one of
    them, or the one named by `run` (its path below the folder, as the error listing them spells it)."""
    p = Path(path)
    if not p.exists():
        raise PgrpoSimError(f"log file not found: {path}")
    if p.is_file() and "tfevents" not in p.name:
        if not _is_tensorboard(p):  # e.g. a CSV read with --format tensorboard
            raise PgrpoSimError(
                f"{log_name(path)} is not a TensorBoard event file (events.out.tfevents.*, or a folder of them)"
            )
        raise PgrpoSimError(
            f"{log_name(path)} is a TensorBoard event file under another name; TensorBoard's reader takes only files "
            "named events.out.tfevents.*: rename it"
        )
    if p.is_file() or next(p.glob(_EVENTS), None) is not None:
        if run is not None:
            raise PgrpoSimError(f"{log_name(path)} holds one run's event files: pass run=None")
        return p
    folders = sorted({f.parent for f in p.rglob(_EVENTS)})
    names = [str(f.relative_to(p)) for f in folders]
    if run is not None:
        if run not in names:
            raise PgrpoSimError(f"{log_name(path)} has no run {run!r}; its runs: {show_names(names, 8)}")
        return folders[names.index(run)]
    if len(folders) > 1:
        raise PgrpoSimError(
            f"{log_name(path)} holds event files of {len(folders)} runs ({show_names(names, 4)}); pass one run's "
            "folder, or choose one with run=NAME"
        )
    return folders[0]


def detect(log: LogFile) -> bool:
    """An event file or a folder holding some (by its path; the text is not read)."""
    return _is_tensorboard(log.path)


def read(log: LogFile) -> Parsed:
    """Every scalar of a TensorBoard log (old-style `simple_value` and TF2 tensors of the scalars plugin), one
    record per step; a tag logged twice at one step keeps its last value (TensorBoard drops the events a
    restarted run overwrote); no settings."""
    path = log.path
    source = _event_source(path, log.run)
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
        raise PgrpoSimError(f"cannot read TensorBoard log {log_name(path)}: {str(exc).splitlines()[0]}") from None
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
        raise PgrpoSimError(f"{log_name(path)} holds no TensorBoard scalars")
    return [{**row, "step": float(step)} for step, row in sorted(by_step.items())], {}
