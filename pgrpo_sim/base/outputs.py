"""Output directories that never clobber each other, and outputs replaced only when complete.

A command writing a directory first checks it (`check_output_dir`, nothing created), does its validation and
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
import math
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from .errors import PgrpoSimError
from .runtime import deferred_interrupts, interrupt_requested

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


def grid_columns(coords: Mapping[str, np.ndarray], fields: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Gridded data as a table, one row per grid point: the point's coordinates (the last axis varying fastest),
    then each field (shaped by the coordinates' sizes) flattened, as xarray's `Dataset.to_dataframe()` lays it
    out with its index as leading columns."""
    grids = np.meshgrid(*coords.values(), indexing="ij")
    return {**{k: g.ravel() for k, g in zip(coords, grids, strict=True)}, **{k: np.ravel(v) for k, v in fields.items()}}


CSV_BLOCK_ROWS = 1 << 20
"""Rows `write_csv` writes at a time when it reports progress."""


def write_csv(table, path: str | os.PathLike, *, progress: Callable[[int], object] | None = None) -> None:
    """A table as CSV with Apache Arrow's writer: about 8× faster than pandas' `to_csv` on a sweep's 2·10⁵ rows
    (benchmarks/RESULTS.md), the same text (floats in their shortest round-trip form, NaN as an empty field).
    `table`: a mapping of column name → 1-D numeric array (`grid_columns`; written without importing pandas),
    or a pandas DataFrame, whose named index is written as leading columns (as `DataFrame.to_csv` writes it).
    `progress`: called with the number of rows of each block of `CSV_BLOCK_ROWS` written (the same text)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    if isinstance(table, Mapping):
        arrow = pa.Table.from_arrays([_arrow_column(k, v) for k, v in table.items()], names=list(table))
    else:
        frame = table.reset_index() if any(name is not None for name in table.index.names) else table
        arrow = pa.Table.from_pandas(frame, preserve_index=False)
    options = pa_csv.WriteOptions(quoting_header="none")
    if progress is None:
        pa_csv.write_csv(arrow, path, write_options=options)
        return
    with pa_csv.CSVWriter(path, arrow.schema, write_options=options) as writer:
        for start in range(0, max(arrow.num_rows, 1), CSV_BLOCK_ROWS):
            block = arrow.slice(start, CSV_BLOCK_ROWS)
            writer.write_table(block)
            progress(block.num_rows)


def _arrow_column(name: str, values: np.ndarray):
    """A numeric NumPy column as an Arrow array, NaN as null (an empty field, as pandas writes it). Built from
    its buffers: `pyarrow.array` would import pandas to check the input's type (0.2 s of a command's run)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.ndim != 1 or values.dtype.kind not in "fiu":
        raise PgrpoSimError(
            f"column {name}: a 1-D array of numbers is needed, got {values.dtype} of shape {values.shape}"
        )
    valid = None
    if values.dtype.kind == "f" and np.isnan(values).any():
        valid = pa.py_buffer(np.packbits(~np.isnan(values), bitorder="little"))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size, [valid, pa.py_buffer(values)])


def write_netcdf3(
    path: str | os.PathLike,
    coords: Mapping[str, np.ndarray],
    variables: Mapping[str, tuple[Sequence[str], np.ndarray, Mapping[str, str]]],
    attrs: Mapping[str, str],
) -> None:
    """A netCDF-3 (64-bit offset) file as xarray's scipy engine writes the Dataset of these coordinates (one
    per dimension), variables (dimension names, values, attributes) and global attributes, so that
    `xarray.load_dataset` reads back that Dataset; written by `scipy.io.netcdf_file`, without importing xarray.
    Encoded as xarray encodes for netCDF-3: floating-point variables get `_FillValue` NaN, 64-bit integers are
    stored as 32-bit (refused if a value does not fit)."""
    from scipy.io import netcdf_file

    with netcdf_file(path, "w", version=2) as nc:
        for name, value in attrs.items():
            setattr(nc, name, value)
        for name, values in coords.items():
            nc.createDimension(name, len(values))
        for name, (dims, values, extra) in [*variables.items(), *((k, ((k,), v, {})) for k, v in coords.items())]:
            values = _netcdf3_values(name, values)
            var = nc.createVariable(name, values.dtype, tuple(dims))
            if values.dtype.kind == "f":
                var._FillValue = values.dtype.type(np.nan)
            for key, value in extra.items():
                setattr(var, key, value)
            var[...] = values


def _netcdf3_values(name: str, values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype == np.int64:
        info = np.iinfo(np.int32)
        if values.size and (values.min() < info.min or values.max() > info.max):
            raise PgrpoSimError(f"{name}: integers beyond the 32-bit range cannot be stored in netCDF-3")
        return values.astype(np.int32)
    if values.dtype not in (np.float32, np.float64, np.int32, np.int16, np.int8):
        raise PgrpoSimError(f"{name}: dtype {values.dtype} is not written to netCDF-3 (floats and integers only)")
    return values


def finite_or_none(value) -> float | None:
    """`value` as a float, or None when it is None, NaN or ±∞ (a number that does not exist, for JSON and tables)."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def json_text(data, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """`data` as strict JSON: NaN and ±∞ (a quantity that does not exist, e.g. the stationary variance of an
    unstable oscillator) become null; NumPy (and JAX) scalars and arrays become numbers and lists. `TypeError`
    for other objects."""

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if hasattr(value, "__array__") and not isinstance(value, np.generic):  # NumPy or JAX arrays
            value = np.asarray(value)
            return clean(value.tolist()) if value.ndim else clean(value.item())
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if isinstance(value, np.generic):
            value = value.item()
        return None if isinstance(value, float) and not math.isfinite(value) else value

    return json.dumps(clean(data), indent=indent, sort_keys=sort_keys, allow_nan=False)
