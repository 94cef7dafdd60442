"""`write_csv`, `grid_columns` and `write_netcdf3` against pandas' and xarray's own writers: the same data read
back."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.base.serialise import json_text
from pgrpo_sim.runtime import tables
from pgrpo_sim.runtime.tables import grid_columns, write_csv, write_netcdf3


def test_write_csv_reads_back_as_pandas_writes_it(tmp_path):
    """A frame with a named MultiIndex, float32 and float64 columns (NaN, ±inf, 1/3, a tiny value), integers and
    strings that need quoting: read back by pandas, Arrow's file equals `to_csv`'s exactly (float32 values in
    their shortest round-trip form, so float32(read) is bit-equal to the original)."""
    index = pd.MultiIndex.from_product([[0.001, 0.1], [0.0, 0.5]], names=["learning_rate", "momentum"])
    frame = pd.DataFrame(
        {
            "reward": np.array([0.1, np.nan, np.inf, -1e-30], np.float32),
            "variance": [1.0 / 3, np.nan, -np.inf, 2.0],
            "step": [1, -1, 0, 7],
            "regime": ["a", "b,c", 'q"', "none"],
        },
        index=index,
    )
    write_csv(frame, tmp_path / "arrow.csv")
    frame.to_csv(tmp_path / "pandas.csv")
    ours, theirs = pd.read_csv(tmp_path / "arrow.csv"), pd.read_csv(tmp_path / "pandas.csv")
    pd.testing.assert_frame_equal(ours, theirs)
    assert np.array_equal(ours["reward"].to_numpy(np.float32), frame["reward"].to_numpy(), equal_nan=True)
    assert (tmp_path / "arrow.csv").read_text().splitlines()[0] == "learning_rate,momentum,reward,variance,step,regime"


def _dataset() -> xr.Dataset:
    """Float32 and int32 fields on an (η, lag) grid with NaN, a float64 and an int64 coordinate, attributes."""
    reward = np.array([[0.25, np.nan, 1e-30], [1 / 3, -np.inf, 0.5]], np.float32)
    step = np.array([[1, -1, 0], [7, 8, 9]], np.int32)
    return xr.Dataset(
        {
            "reward": (("learning_rate", "lag"), reward, {"note": "per grid point"}),
            "step": (("learning_rate", "lag"), step),
        },
        coords={"learning_rate": [0.001, 0.1], "lag": np.array([0, 2, 5])},
        attrs={"spec": '{"steps": 10}'},
    )


def test_grid_columns_lay_out_rows_as_to_dataframe(tmp_path):
    """The columns are the Dataset's table, and written as columns (NumPy, no pandas) or as that table (pandas)
    they give the same file, NaN as an empty field."""
    ds = _dataset()
    columns = grid_columns(
        {d: ds[d].values for d in ("learning_rate", "lag")}, {k: ds[k].values for k in ("reward", "step")}
    )
    pd.testing.assert_frame_equal(pd.DataFrame(columns), ds.to_dataframe().reset_index())
    write_csv(columns, tmp_path / "columns.csv")
    write_csv(ds.to_dataframe(), tmp_path / "frame.csv")
    text = (tmp_path / "columns.csv").read_text()
    assert text == (tmp_path / "frame.csv").read_text() and "0.001,2,,-1\n" in text
    with pytest.raises(PgrpoSimError, match="column name: a 1-D array of numbers"):
        write_csv({"name": np.array(["a", "b"])}, tmp_path / "strings.csv")


def test_write_netcdf3_reads_back_as_xarray_writes_it(tmp_path):
    """Read back by xarray, the file equals the Dataset and the file xarray's scipy engine writes of it (NaN
    fill values, the int64 coordinate stored as int32, attributes)."""
    ds = _dataset()
    variables = {k: (ds[k].dims, ds[k].values, ds[k].attrs) for k in ds.data_vars}
    write_netcdf3(tmp_path / "ours.nc", {d: ds[d].values for d in ds.dims}, variables, ds.attrs)
    ds.to_netcdf(tmp_path / "xarray.nc", engine="scipy")
    ours = xr.load_dataset(tmp_path / "ours.nc", engine="scipy")
    xr.testing.assert_identical(ours, xr.load_dataset(tmp_path / "xarray.nc", engine="scipy"))
    xr.testing.assert_identical(ours, ds)


def test_write_netcdf3_refuses_what_netcdf3_cannot_hold(tmp_path):
    too_big = {"n": (("i",), np.array([0, 2**40]), {})}
    with pytest.raises(PgrpoSimError, match="n: integers beyond the 32-bit range"):
        write_netcdf3(tmp_path / "a.nc", {"i": np.arange(2)}, too_big, {})
    with pytest.raises(PgrpoSimError, match="flag: dtype bool"):
        write_netcdf3(tmp_path / "b.nc", {"i": np.arange(2)}, {"flag": (("i",), np.array([True, False]), {})}, {})


def test_json_text_is_strict_json_with_null_for_what_does_not_exist():
    """NaN and ±∞ (e.g. the stationary variance of an unstable oscillator) become null, as the README says; NumPy
    scalars and arrays become numbers and lists; the text parses under a strict parser (no NaN/Infinity)."""
    import json

    data = {"a": float("nan"), "b": np.float32(np.inf), "c": [1.5, -np.inf], "d": np.arange(2), "e": {"f": np.nan}}
    text = json_text(data)
    strict = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert strict == {"a": None, "b": None, "c": [1.5, None], "d": [0, 1], "e": {"f": None}}


def test_json_text_takes_jax_arrays_and_sorts_keys_on_request():
    """JAX arrays (a sweep spec's prompt features) become lists, a NaN inside one null; `sort_keys` gives the
    canonical text a resumed sweep compares; other objects are refused."""
    import jax.numpy as jnp

    data = {"z": jnp.asarray([[1.0, jnp.nan]]), "a": jnp.int32(3), "m": np.float64(0.25)}
    assert json_text(data, sort_keys=True) == '{"a": 3, "m": 0.25, "z": [[1.0, null]]}'
    with pytest.raises(TypeError):
        json_text({"x": object()})


def test_write_csv_in_blocks_writes_the_same_text(tmp_path, monkeypatch):
    """With `progress` (a sweep's final files), blocks of rows each reported, and the same file."""

    monkeypatch.setattr(tables, "CSV_BLOCK_ROWS", 3)
    columns = {"learning_rate": np.linspace(0.1, 1.0, 10), "reward": np.array([np.nan, *np.arange(9)], np.float32)}
    seen = []
    write_csv(columns, tmp_path / "blocks.csv", progress=seen.append)
    write_csv(columns, tmp_path / "whole.csv")
    assert seen == [3, 3, 3, 1]
    assert (tmp_path / "blocks.csv").read_text() == (tmp_path / "whole.csv").read_text()
