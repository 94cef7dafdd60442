"""Tables on disk: gridded data as rows (`grid_columns`), CSV by Apache Arrow's writer (`write_csv`) and netCDF-3 as
xarray writes it, without importing xarray (`write_netcdf3`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..base.errors import PgrpoSimError


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
