"""Following a training log while the run writes it (`follow_log`): the path is polled (a file's size and
modification time, or those of a TensorBoard folder's files), read again with `read_log` when it changed, and the
log is yielded each time it holds `every` more logged reward steps. A log caught mid-write (a last line without its
line end, a `trainer_state.json` being rewritten, a file not created yet) is read again at the next poll."""

from __future__ import annotations

import dataclasses
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from ..base.checks import check_choice, check_range, check_scalar
from ..base.errors import PgrpoSimError
from .readers import FORMATS, TrainingLog, check_columns, read_log
from .readers.registry import READERS


def follow_log(
    path: str | Path,
    *,
    every: int,
    format: str = "auto",
    columns: Mapping[str, str] | None = None,
    run: str | None = None,
    poll: float = 1.0,
    idle: float | None = None,
    patience: float = 60.0,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[TrainingLog]:
    """Follow a training log as the run writes it: yield it each time it holds `every` more logged reward steps.

    The path is checked every `poll` seconds (size and modification time first; read only when they changed). A
    log caught mid-write is read again at the next poll, never raised: a path that does not exist yet, an empty
    file (or a folder without event files), a `trainer_state.json` cut short while it is rewritten. A last line
    without its line end (a writer mid-line) is left out until the line is ended, and read as it is only at the
    `idle` end. A read that still fails after the log has not changed for `patience` seconds is raised: a
    malformed log, or one that logged no reward in that time. The format is detected at every read
    (`format="auto"`), so a log whose first lines read as another format is read right once more are written.

    Args:
        path: a log file, or a folder of TensorBoard event files; it may not exist yet.
        every: logged reward steps (steps with a finite reward) the log must gain between two yields; the first
            yield comes once it holds `every`; integer ≥ 1.
        format: as `read_log`: one of `FORMATS`, or "auto" to detect it.
        columns: as `read_log`: canonical name → source column. None: the built-in lookup.
        run: as `read_log`: the run of a file that holds several. None: the file's only run.
        poll: seconds between two checks of the path; > 0.
        idle: seconds without a change after which following ends, with a final yield of the log as it is (its
            last line read even without a line end) when it differs from the last one yielded: steps not yet
            yielded, however few, or values logged since (a last eval). None: never end; > 0.
        patience: seconds a log that fails to read may stay unchanged before the failure is raised; > 0. Nothing
            to read yet (no such path, an empty file or folder) is waited for until `idle` instead.
        sleep: waits the given seconds between polls (`time.sleep`; tests pass a fake).
        clock: the current time in seconds, monotonic (`time.monotonic`; tests pass a fake).

    Returns:
        An iterator of `TrainingLog`s (as `read_log` returns them), each holding at least `every` more logged
        reward steps than the one before (the final one at the `idle` end possibly fewer, or none); it ends at the
        `idle` end, or never when `idle` is None. The arguments are checked at the call, the log at each poll.

    Raises:
        PgrpoSimError: (a one-line `ValueError`) at the call: a bad `path`, `format`, `columns` or `run`, `every`
            not an integer ≥ 1, `poll` or `patience` not > 0, `idle` neither None nor > 0. While following: a log
            that fails to read (`read_log`'s message) and has not changed for `patience` seconds, or at the
            `idle` end.
    """
    if not isinstance(path, (str, Path)):
        raise PgrpoSimError(f"path must be a file path (str or Path), got {type(path).__name__}")
    check_choice("format", format, ("auto", *FORMATS))
    check_columns(columns)
    if run is not None and not isinstance(run, str):
        raise PgrpoSimError(f"run must be a run's name (str), got {type(run).__name__}")
    if run is not None and format != "auto" and READERS[format].one_run:
        raise PgrpoSimError(
            f"a {format} log holds one run: a run is chosen only in a W&B long-form CSV or a TensorBoard folder of "
            "several runs; pass run=None"
        )
    for name, value in (("every", every), ("poll", poll), ("patience", patience)):
        check_scalar(name, value)
    check_scalar("idle", idle, optional=True)
    check_range("every", every, 1, integer=True)
    for name, value in (("poll", poll), ("idle", idle), ("patience", patience)):
        check_range(name, value, 0, low_open=True)
    source = _Source(Path(path), path, format, columns, run)
    waits = _Waits(float(poll), None if idle is None else float(idle), float(patience), sleep, clock)
    return _follow(source, int(every), waits)


def _rewarded(log: TrainingLog) -> int:
    """The logged reward steps of `log`: its steps with a finite reward (an eval-only step has none)."""
    return int(np.isfinite(log["reward"]).sum())


def _same(a: TrainingLog, b: TrainingLog) -> bool:
    """Whether two reads of a log hold the same columns and values (NaN where neither logged one)."""
    columns = [(a.data, b.data), (a.other, b.other)]
    return all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=True) for k in x) for x, y in columns
    ) and np.array_equal(a.skipped_steps, b.skipped_steps)


class _NothingYet(PgrpoSimError):
    """The path holds nothing to read yet (it does not exist, or is an empty file or folder): waited for until
    `idle`, not judged by `patience`."""


@dataclasses.dataclass(frozen=True)
class _Waits:
    """`follow_log`'s timing: its `poll`, `idle` and `patience` (seconds), and its `sleep` and `clock`."""

    poll: float
    idle: float | None
    patience: float
    sleep: Callable[[float], object]
    clock: Callable[[], float]


@dataclasses.dataclass(frozen=True)
class _Source:
    """The followed path (`given` as the caller spelled it) and how `read_log` reads it."""

    path: Path
    given: str | Path
    format: str
    columns: Mapping[str, str] | None
    run: str | None

    def signature(self) -> tuple | None:
        """What a poll compares: a file's (inode, size, modification time), or (name, size, modification time) of
        each file below a folder; None while the path does not exist."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:  # e.g. no permission: reading it reports the error
            return ("unreadable", exc.errno)
        if not stat.S_ISDIR(info.st_mode):
            return (info.st_ino, info.st_size, info.st_mtime_ns)
        files = []
        for folder, _, names in os.walk(self.path):
            for name in names:
                try:
                    found = os.stat(os.path.join(folder, name))
                except OSError:  # removed since it was listed
                    continue
                files.append((os.path.relpath(os.path.join(folder, name), self.path), found.st_size, found.st_mtime_ns))
        return tuple(sorted(files))

    def read(self, *, final: bool) -> TrainingLog:
        """The log as it is now. A file's last line without a line end is left out (the writer may be mid-line)
        unless the log only reads with it, or first of all when `final`; the message of a failure is that of the
        whole file. Raises `_NothingYet` for nothing to read yet, `PgrpoSimError` for a log that does not read."""
        if self.path.is_dir() or self.format == "tensorboard" or "tfevents" in self.path.name:
            return self._read_events()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise _NothingYet(f"log file not found: {self.given}") from None
        except OSError as exc:
            raise PgrpoSimError(f"cannot read log {self.given}: {exc.strerror or exc}") from None
        if not data.strip():
            raise _NothingYet(f"{self.path.name} is empty")
        complete = data[: data.rfind(b"\n") + 1]  # up to the last line end
        if complete == data or not complete.strip():
            return self._read_copy(data)
        first, then = (data, complete) if final else (complete, data)
        try:
            return self._read_copy(first)
        except PgrpoSimError as exc:
            whole = exc if first is data else None
        try:
            return self._read_copy(then)
        except PgrpoSimError as exc:
            raise (whole or exc) from None

    def _read_events(self) -> TrainingLog:
        """A TensorBoard event file or folder, read in place (its reader stops at a record cut short)."""
        if not self.path.exists():
            raise _NothingYet(f"log file not found: {self.given}")
        if self.path.is_dir() and next(self.path.rglob("events.out.tfevents.*"), None) is None:
            raise _NothingYet(f"{self.path.name} holds no TensorBoard event files (events.out.tfevents.*) yet")
        return read_log(self.given, self.format, self.columns, self.run)

    def _read_copy(self, data: bytes) -> TrainingLog:
        """`data` read as the log: a copy under the file's name (formats and messages go by it) in a folder of its
        own, so that the text read is the text the poll took."""
        with tempfile.TemporaryDirectory(prefix="pgrpo-sim-follow-") as folder:
            copy = Path(folder) / self.path.name
            copy.write_bytes(data)
            try:
                log = read_log(copy, self.format, self.columns, self.run)
            except PgrpoSimError as exc:
                raise PgrpoSimError(str(exc).replace(str(copy), str(self.given))) from None
        return dataclasses.replace(log, path=str(self.given))


def _follow(source: _Source, every: int, waits: _Waits) -> Iterator[TrainingLog]:
    """The generator behind `follow_log` (a generator's body runs at the first `next`, hence the split: the
    arguments are checked at the call)."""
    seen: object = object()  # the signature last read: none yet
    changed = 0.0  # when the log last changed: set by the first poll (the start counts as a change)
    failure: PgrpoSimError | None = None  # why the log as last read does not read
    shown: TrainingLog | None = None  # the last log yielded
    base = 0  # the logged reward steps `every` counts from: those of `shown`, or fewer if the log was cut since
    while True:
        signature, now = source.signature(), waits.clock()
        if signature != seen:
            seen, changed = signature, now
            try:
                log = source.read(final=False)
            except PgrpoSimError as exc:
                failure = exc
            else:
                failure, count = None, _rewarded(log)
                base = min(base, count)  # a log rewritten shorter counts from where it is now
                if count - base >= every:
                    shown, base = log, count
                    yield log
        else:
            quiet = now - changed
            if waits.idle is not None and quiet >= waits.idle:
                try:
                    log = source.read(final=True)
                except PgrpoSimError as exc:
                    raise PgrpoSimError(f"{exc} (no change for {quiet:.3g} s)") from None
                if shown is None or not _same(log, shown):
                    yield log
                return
            if failure is not None and not isinstance(failure, _NothingYet) and quiet >= waits.patience:
                raise PgrpoSimError(f"{failure} (no change for {quiet:.3g} s)") from None
        waits.sleep(waits.poll)
