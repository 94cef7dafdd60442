"""Files written whole or not at all: the one atomic write (a sweep's chunks and manifest, its points, the on-disk
cache of SFT starts and calibration runs)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write `path` through `write(handle)` into a hidden temporary file beside it, renamed into place when complete
    (`os.replace`), so a reader, a resumed run or a concurrent process never sees half a file.

    Args:
        path: the file; its folder is created if missing.
        write: writes the content to a binary handle (e.g. `lambda h: np.savez(h, **arrays)`).

    Raises:
        OSError: the folder or the file cannot be written; the temporary file is removed, `path` left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False) as handle:
        try:
            write(handle)
        except BaseException:
            handle.close()
            os.unlink(handle.name)
            raise
    try:
        os.replace(handle.name, path)
    except OSError:
        os.unlink(handle.name)
        raise


def save_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> bool:
    """`write_atomically` for a cache: False (and nothing left) when the folder cannot be written, as a cache that
    cannot be written only costs the work next time."""
    try:
        write_atomically(path, write)
    except OSError:
        return False
    return True
