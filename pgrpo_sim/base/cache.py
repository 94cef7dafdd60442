"""Files of the on-disk cache (SFT starts, the language-model calibration's runs): written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def save_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> bool:
    """Write `path` through `write(handle)` into a temporary file beside it, renamed into place when complete, so a
    concurrent reader never sees half a file. Returns False (and leaves nothing) when the folder cannot be written:
    a cache that cannot be written only costs the work next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
            write(handle)
        os.replace(handle.name, path)
    except OSError:
        return False
    return True
