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
import math
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

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


def grid_columns(coords: Mapping[str, np.ndarray], fields: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Gridded data as a table, one row per grid point: the point's coordinates (the last axis varying fastest),
    then each field (shaped by the coordinates' sizes) flattened, as xarray's `Dataset.to_dataframe()` lays it
    out with its index as leading columns."""
    grids = np.meshgrid(*coords.values(), indexing="ij")
    return {**{k: g.ravel() for k, g in zip(coords, grids)}, **{k: np.ravel(v) for k, v in fields.items()}}


def write_csv(table, path: str | os.PathLike) -> None:
    """A table as CSV with Apache Arrow's writer: about 8× faster than pandas' `to_csv` on a sweep's 2·10⁵ rows
    (benchmarks/RESULTS.md), the same text (floats in their shortest round-trip form, NaN as an empty field).
    `table`: a mapping of column name → 1-D numeric array (`grid_columns`; written without importing pandas),
    or a pandas DataFrame, whose named index is written as leading columns (as `DataFrame.to_csv` writes it)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    if isinstance(table, Mapping):
        arrow = pa.Table.from_arrays([_arrow_column(k, v) for k, v in table.items()], names=list(table))
    else:
        frame = table.reset_index() if any(name is not None for name in table.index.names) else table
        arrow = pa.Table.from_pandas(frame, preserve_index=False)
    pa_csv.write_csv(arrow, path, write_options=pa_csv.WriteOptions(quoting_header="none"))


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
