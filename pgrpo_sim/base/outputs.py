"""Output directories that never clobber each other: each command marks the directory it writes.

A command writing a directory first checks it (`check_output_dir`, nothing created), does its validation and
work, and claims it (`claim_output_dir`) before writing: the claim creates the directory and writes the mark
`.pgrpo-sim.json` naming the command. A directory is refused when it holds another command's mark, or when it
is non-empty without a mark (a foreign directory), unless `overwrite`. With `overwrite`, the previous command's
known outputs (`outputs` of its mark) are removed first; files pgrpo-sim did not write are never removed. The
same command may always reuse its own directory (a sweep resumes there).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from .errors import PgrpoSimError

MARK = ".pgrpo-sim.json"
"""The file that marks a directory as written by a pgrpo-sim command."""


def read_mark(path: str | os.PathLike) -> dict | None:
    """The mark of a directory (`{"command": ..., "outputs": [...]}`), or None when it has none."""
    mark = Path(path) / MARK
    try:
        data = json.loads(mark.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"command": "unknown", "outputs": []}
    return data if isinstance(data, dict) else {"command": "unknown", "outputs": []}


def check_output_dir(path: str | os.PathLike, command: str, *, overwrite: bool = False, flag: str = "--out") -> None:
    """Raise `PgrpoSimError` (creating nothing) unless `command` may write into directory `path`: it does not
    exist yet and can be created, or it is `command`'s own, or it is empty; another command's directory or a
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
    mark = read_mark(out)
    if mark is not None:
        if mark.get("command") != command and not overwrite:
            raise PgrpoSimError(
                f"{flag} {out} holds the output of `pgrpo-sim {mark.get('command')}`; "
                f"use another {flag} or --overwrite to replace it"
            )
        return
    if any(out.iterdir()) and not overwrite:
        raise PgrpoSimError(
            f"{flag} {out} is not empty and was not written by pgrpo-sim; use another {flag} or --overwrite"
        )


def claim_output_dir(
    path: str | os.PathLike, command: str, outputs: Iterable[str], *, overwrite: bool = False, flag: str = "--out"
) -> Path:
    """`check_output_dir`, then create the directory and mark it as `command`'s, listing the file names (or
    glob patterns) it writes. With `overwrite`, another command's listed outputs are removed first."""
    check_output_dir(path, command, overwrite=overwrite, flag=flag)
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        mark = read_mark(out)
        if mark is not None and mark.get("command") != command:
            remove_outputs(out, mark.get("outputs", []))
        (out / MARK).write_text(json.dumps({"command": command, "outputs": sorted(outputs)}) + "\n")
    except OSError as exc:
        raise PgrpoSimError(f"cannot create {flag} {out}: {exc.strerror}") from None
    return out


def remove_outputs(path: str | os.PathLike, patterns: Iterable[str]) -> None:
    """Remove the files and directories matching `patterns` (names or globs, relative to `path`)."""
    out = Path(path)
    for pattern in patterns:
        if not pattern or Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            continue
        for item in out.glob(pattern):
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.unlink(missing_ok=True)


def check_output_file(path: str | os.PathLike, flag: str, suffixes: Iterable[str] | None = None) -> None:
    """Raise `PgrpoSimError` (creating nothing) unless file `path` can be written: not a directory, its
    directory exists and accepts a new file, and (given `suffixes`) its suffix is one of them."""
    out = Path(path)
    if out.is_dir():
        raise PgrpoSimError(f"{flag} {out} is a directory; give a file name")
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


def write_csv(frame, path: str | os.PathLike) -> None:
    """A pandas DataFrame as CSV, its named index as leading columns (as `DataFrame.to_csv` writes it), with
    Apache Arrow's writer: about 8× faster than `to_csv` on a sweep's 2·10⁵ rows (benchmarks/RESULTS.md),
    the same values (floats in their shortest round-trip form, NaN as an empty field)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    if any(name is not None for name in frame.index.names):
        frame = frame.reset_index()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pa_csv.write_csv(table, path, write_options=pa_csv.WriteOptions(quoting_header="none"))
