"""Progress of long work: library functions that take long accept `progress`, a `Progress` callback called with each
stage as it starts (default None: silent); the command line passes `runtime.stage_lines.stage_lines(command)`, its
lines on stderr, unless `--quiet`. Sweeps show a bar (`progress_bar`) and say what is left (`duration_text`).
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]
"""Called with the name of each stage as it starts (no trailing punctuation)."""


def duration_text(seconds: float) -> str:
    """A duration as a person reads it, to two significant digits: "40 s", "12 min", "3.5 h", "74 days".

    Args:
        seconds: the duration, in seconds; ≥ 0.

    Returns:
        The text, in the largest unit (s, min, h, days) in which it is at least 1 (seconds below a minute).
    """
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            number = f"{seconds / size:.2g}" if seconds < 10 * size else f"{seconds / size:.0f}"
            return f"{number} {'day' if unit == 'days' and number == '1' else unit}"
    return f"{seconds:.0f} s"


def report(progress: Progress | None, stage: str) -> None:
    """Tell `progress`, if any, that `stage` starts."""
    if progress is not None:
        progress(stage)


class QuietBar:
    """The progress bar of a quiet run: does nothing. Not a disabled tqdm bar: tqdm's first bar creates a
    multiprocessing lock, which a worker process stopped by its parent (`validate`) would leave behind, with a warning
    at exit."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, enabled: bool, desc: str = "sweep", unit: str = "cfg"):
    """A tqdm bar of `total` units on stderr, or a `QuietBar` when not `enabled`; both have `update(n)` and
    `close()`."""
    if not enabled:
        return QuietBar()
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, smoothing=0.1)
