"""Output directories that never clobber each other, and outputs replaced only when complete.

A command writing a directory first checks it (`cli.outputs.check_output_dir`, nothing created), does its validation and
work, and then writes its outputs through `staged_outputs`: into a hidden folder inside the directory (single
files: a hidden temporary file beside each), moved into place (`os.replace`) only once every output is complete,
with Ctrl-C held off while they move. An error or interrupt before that leaves the previous results as they were
and removes the temporaries. The directory's mark `.pgrpo-sim.json` names the command, its outputs (file
names or glob patterns) and its settings. A directory is refused when it holds another command's mark, the same
command's run with other settings, or when it is non-empty without a mark (a foreign directory), unless
`overwrite`; the previous command's known outputs are then removed when the new ones are moved in. Files pgrpo-sim
did not write are never removed. The same command with the same settings may always reuse its own directory (a
sweep resumes there).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ..base.errors import PgrpoSimError
from ..base.serialise import json_text
from .interrupts import deferred_interrupts, interrupt_requested

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


def other_settings(
    path: str | os.PathLike, command: str, settings: Mapping | None, translate: Callable[[dict], dict] | None = None
) -> tuple | None:
    """Where directory `path` holds the output of `command` run with other settings than `settings` (its mark's
    record, as JSON): (the first setting that differs, its value there, its value now); else None (no mark, another
    command's, no settings recorded or given, or the same ones).

    Args:
        path: the output directory.
        command: the command that would write it.
        settings: its settings (JSON-able values, `json_text`); None: not compared.
        translate: maps a recorded settings dict to today's names before comparing (a record written by an older
            version); None: compared as recorded.

    Returns:
        (name, value there, value now), a missing value None; or None.
    """
    mark = read_mark(path)
    if settings is None or mark is None or mark.get("command") != command or "settings" not in mark:
        return None
    old, new = mark["settings"], json.loads(json_text(settings))
    if isinstance(old, dict) and translate is not None:
        old = translate(old)
    if not isinstance(old, dict) or old == new:
        return None
    name = next((k for k in sorted({*old, *new}) if old.get(k) != new.get(k)), None)
    return None if name is None else (name, old.get(name), new.get(name))  # None: they differ only by absent Nones


def output_dir_owner(path: str | os.PathLike) -> str | None:
    """Who holds directory `path`: the command named by its mark, "" for a non-empty directory without one (files
    pgrpo-sim did not write), None for a free one (absent or empty)."""
    out = Path(path)
    if not out.is_dir():
        return None
    mark = read_mark(out)
    if mark is not None:
        return str(mark.get("command"))
    return "" if any(out.iterdir()) else None


STAGE_PREFIX = ".pgrpo-sim-new-"
"""Name prefix of the temporaries of `staged_outputs` (a folder in an output directory, a file beside an output
file), followed by the writing process's id."""


class StagedOutputs:
    """One command's outputs, written under temporary names and moved into place together (`staged_outputs`)."""

    def __init__(self) -> None:
        self._files: list[tuple[Path, Path]] = []  # (temporary, final) of single files
        self._dirs: list[tuple[Path, Path, bool, bool, list[str]]] = []  # (dir, staging folder, created, resumable,
        # outputs)

    def file(self, path: str | os.PathLike) -> Path:
        """Where to write output file `path`: a temporary file beside it (on the same file system, so that the
        move is atomic) with the same suffix (figure writers choose the format by it)."""
        final = Path(path)
        _remove_abandoned(final.parent)
        temp = final.with_name(f"{STAGE_PREFIX}{os.getpid()}-{final.name}")
        self._files.append((temp, final))
        return temp

    def directory(
        self,
        path: str | os.PathLike,
        command: str | None,
        outputs: Iterable[str] = (),
        *,
        overwrite: bool = False,
        resumable: bool = False,
        settings: Mapping | None = None,
        translate: Callable[[dict], dict] | None = None,
    ) -> Path:
        """Where to write the outputs of `command` into directory `path`: a staging folder in it, created here, with
        the directory if needed; refused where the directory holds another command's output, the same command's run
        with other `settings` (`other_settings`) or files pgrpo-sim did not write (`output_dir_owner`), unless
        `overwrite`. `outputs`: the names (or glob patterns) the command writes, and `settings` (JSON-able), for the
        directory's mark. A `resumable` command (a sweep) keeps its resume state in the directory itself: it is
        marked at once, listing also the outputs of the command it replaces, so that a rerun finds its work.
        `translate`: as `other_settings`'. `command` None: no check and no mark."""
        out, outputs = Path(path), sorted(outputs)
        owner = output_dir_owner(out) if command is not None else None
        if owner not in (None, command) and not overwrite:
            held = f"the output of {owner!r}" if owner else "files pgrpo-sim did not write"
            raise PgrpoSimError(f"{out} holds {held}; pass overwrite=True to replace them")
        differs = other_settings(out, command, settings, translate) if command is not None and not overwrite else None
        if differs is not None:
            raise PgrpoSimError(
                f"{out} holds the output of {command!r} with other settings ({differs[0]} {differs[1]!r} there, "
                f"{differs[2]!r} now); pass overwrite=True to replace it"
            )
        created = not out.exists()
        stage = out / f"{STAGE_PREFIX}{os.getpid()}"
        # known before it exists: a Ctrl-C or SIGTERM between its creation and its mark still removes it (`discard`)
        self._dirs.append((out, stage, created, resumable, outputs))
        try:
            out.mkdir(parents=True, exist_ok=True)
            _remove_abandoned(out)
            stage.mkdir()
            if command is not None:
                _write_mark(stage, command, outputs, settings)
                if resumable:
                    old = read_mark(out)
                    replaced = old.get("outputs", []) if old and old.get("command") != command else []
                    _write_mark(out, command, [*outputs, *replaced], settings)
        except OSError as exc:
            raise PgrpoSimError(f"cannot create {out}: {exc.strerror}") from None
        return stage

    def commit(self) -> None:
        """Move every output into place; what it replaces (the previous results, and the outputs of the command a
        directory held before, by its mark) is removed. Ctrl-C is held off meanwhile, and one that came before
        (even one a callback dropped) discards the outputs instead: `KeyboardInterrupt`. An old output that cannot
        be moved away: `PgrpoSimError`, and everything stays as it was."""
        with deferred_interrupts():
            if interrupt_requested():
                self.discard()
                raise KeyboardInterrupt
            moves: dict[Path, Path | None] = {final: temp for temp, final in self._files}  # final ← new (None: gone)
            for out, stage, _, _, outputs in self._dirs:
                new = {item.name: item for item in stage.iterdir()}
                mark = read_mark(out) or {}
                for pattern in {*outputs, *mark.get("outputs", [])}:
                    for item in _matches(out, pattern):
                        if item.name not in new and not item.name.startswith(STAGE_PREFIX):
                            moves[item] = None
                moves.update({out / name: item for name, item in new.items()})
            try:
                _swap(moves)
            except OSError as exc:
                self.discard()
                raise PgrpoSimError(
                    f"cannot replace {exc.filename}: {exc.strerror}; the previous results are unchanged"
                ) from None
            self.discard()

    def discard(self) -> None:
        """Remove the temporaries (and a directory this created, if left empty); the previous results stay."""
        with deferred_interrupts():
            for temp, _ in self._files:
                with contextlib.suppress(OSError):
                    temp.unlink(missing_ok=True)
            for out, stage, created, resumable, _ in self._dirs:
                shutil.rmtree(stage, ignore_errors=True)
                with contextlib.suppress(OSError):
                    _mark_temp(out).unlink(missing_ok=True)  # a mark interrupted half-written
                if created and not resumable:
                    with contextlib.suppress(OSError):
                        out.rmdir()  # only if empty


@contextlib.contextmanager
def staged_outputs() -> Iterator[StagedOutputs]:
    """A command's outputs, replaced only when all are complete: write each to the path that `StagedOutputs.file`
    or `.directory` gives; they are moved into place when the block ends (`StagedOutputs.commit`), or removed if it
    raises (an error, Ctrl-C), the previous results left as they were."""
    staged = StagedOutputs()
    try:
        yield staged
    except BaseException:
        staged.discard()
        raise
    staged.commit()


def _swap(moves: Mapping[Path, Path | None]) -> None:
    """Put each new file (or folder) at its final path, replacing what is there (None: only remove it): every old
    one is first renamed aside, and if one cannot be, those already renamed are put back (`OSError`)."""
    aside = []
    try:
        for final in moves:
            if final.exists() or final.is_symlink():
                spare = final.with_name(f"{STAGE_PREFIX}{os.getpid()}-old-{final.name}")
                os.replace(final, spare)
                aside.append((final, spare))
    except OSError:
        for final, spare in reversed(aside):
            os.replace(spare, final)
        raise
    for final, new in moves.items():
        if new is not None:
            os.replace(new, final)
    for _, spare in aside:
        _remove(spare)


def _remove(item: Path) -> None:
    if item.is_dir() and not item.is_symlink():
        shutil.rmtree(item, ignore_errors=True)
    else:
        item.unlink(missing_ok=True)


def _matches(out: Path, pattern: str) -> list[Path]:
    """The items of `out` matching a mark's name or glob pattern (none for an absolute or escaping pattern)."""
    if not pattern or Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        return []
    return list(out.glob(pattern))


def _write_mark(directory: Path, command: str, outputs: Iterable[str], settings: Mapping | None = None) -> None:
    temp = _mark_temp(directory)
    mark = {"command": command, "outputs": sorted(set(outputs))}
    if settings is not None:
        mark["settings"] = settings
    temp.write_text(json_text(mark, sort_keys=True) + "\n")
    os.replace(temp, directory / MARK)


def _mark_temp(directory: Path) -> Path:
    """Where this process writes `directory`'s mark before moving it into place."""
    return directory / f"{STAGE_PREFIX}{os.getpid()}-mark"


def _remove_abandoned(directory: Path) -> None:
    """Remove the temporaries that a killed pgrpo-sim process (no longer running) left in `directory`."""
    try:
        items = [item for item in directory.iterdir() if item.name.startswith(STAGE_PREFIX)]
    except OSError:
        return
    for item in items:
        pid = item.name[len(STAGE_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            _remove(item)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True
