"""What the command line checks of its output paths (--out, --plot) before it validates or runs anything: each one
refused in one line naming the flag, creating nothing (docs/guide/command-line.md, "Outputs"). The writing itself,
staged and marked, is `base.outputs`'."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..base.errors import PgrpoSimError
from ..base.outputs import output_dir_owner


def check_output_dir(path: str | os.PathLike, command: str, *, overwrite: bool = False, flag: str = "--out") -> None:
    """Raise `PgrpoSimError` (creating nothing) unless `pgrpo-sim {command}` may write into directory `path`: it does
    not exist yet and can be created, or it is `command`'s own, or it is empty; another command's directory or a
    non-empty foreign one only with `overwrite`."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise PgrpoSimError(f"{flag} {out} is a file, not a directory")
    if not out.exists():
        parent = next((p for p in out.absolute().parents if p.exists()), None)
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise PgrpoSimError(f"{flag} {out} cannot be created: {parent} is not a writable directory")
        return
    if not os.access(out, os.W_OK | os.X_OK):
        raise PgrpoSimError(f"{flag} {out} is not writable")
    owner = output_dir_owner(out)
    if owner in (None, command) or overwrite:
        return
    if owner:
        raise PgrpoSimError(
            f"{flag} {out} holds the output of `pgrpo-sim {owner}`; use another {flag} or --overwrite to replace it"
        )
    raise PgrpoSimError(
        f"{flag} {out} is not empty and was not written by pgrpo-sim; use another {flag} or --overwrite"
    )


def check_output_file(
    path: str | os.PathLike, flag: str, suffixes: Iterable[str] | None = None, *, overwrite: bool = False
) -> None:
    """Raise `PgrpoSimError` (creating nothing) unless file `path` can be written: not a directory, not an
    existing file (unless `overwrite`), its directory exists and accepts a new file, and (given `suffixes`) its
    suffix is one of them."""
    out = Path(path)
    if out.is_dir():
        raise PgrpoSimError(f"{flag} {out} is a directory; give a file name")
    if out.exists() and not overwrite:
        raise PgrpoSimError(f"{flag} {out} exists; give another file name or --overwrite to replace it")
    if suffixes is not None:
        allowed = sorted(suffixes)
        if out.suffix.lower().lstrip(".") not in allowed:
            raise PgrpoSimError(f"{flag} {out} must end in one of {', '.join('.' + s for s in allowed)}")
    existed = out.exists()
    try:
        with open(out, "ab"):
            pass
    except OSError as exc:
        raise PgrpoSimError(f"cannot write {flag} {out}: {exc.strerror}") from None
    if not existed:
        out.unlink()


def check_distinct_outputs(outputs: Mapping[str, str | os.PathLike | None]) -> None:
    """Raise `PgrpoSimError` when two of one command's outputs (flag → path; None: not given) name the same file,
    which the second would silently replace."""
    seen: dict[str, str] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        key = os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise PgrpoSimError(f"{seen[key]} and {flag} name the same file {path}: give each output its own name")
        seen[key] = flag
