"""Stage lines on stderr, "calibrate [  12 s] drawing the 80 % band…": the command line's `base.progress.Progress`."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..base.progress import Progress


class StageLines:
    """A `Progress` that prints each stage as one line, "COMMAND [T s] STAGE…", T the seconds since it was made, to
    `stream` (None: stderr, flushed at once). An object rather than a closure, so that a worker process can be given
    it (`watch`'s forecasts tell their stages from the worker: the monotonic clock is the machine's)."""

    def __init__(self, command: str, stream: TextIO | None = None):
        self.command, self.stream, self.start = command, stream, time.monotonic()

    def __call__(self, stage: str) -> None:
        print(f"{self.command} [{time.monotonic() - self.start:4.0f} s] {stage}…", file=self.stream or sys.stderr,
              flush=True)  # fmt: skip


def stage_lines(command: str, *, enabled: bool = True, stream: TextIO | None = None) -> Progress | None:
    """A `StageLines` for `command`, or None when not `enabled` (`--quiet`)."""
    return StageLines(command, stream) if enabled else None
