"""A sweep's files: its finished chunks kept on disk as they finish, so that a rerun resumes (`ChunkStore`), its
results written once every chunk is done (`sweep.json`, `sweep.nc`, `summary.csv`), and `load_sweep`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from ..base.outputs import grid_columns, staged_outputs, write_csv, write_netcdf3
from ..base.progress import progress_bar
from .sweep_grid import OtherSweepError, SweepError, SweepResult, SweepSpec


class ChunkStore:
    """Finished chunks as `DIR/chunks/g<group>_<first index>.npz`, their sweep's spec in `DIR/chunks/sweep.json`;
    the finished sweep's spec in `DIR/sweep.json`."""

    def __init__(self, out_dir, spec: SweepSpec, overwrite: bool):
        self.dir = Path(out_dir)
        self.chunks = self.dir / "chunks"
        manifest = self.chunks / "sweep.json"
        try:
            for previous in (self.dir / "sweep.json", manifest):  # a finished sweep, unfinished chunks
                if previous.exists() and previous.read_text() != spec.to_json() and not overwrite:
                    raise OtherSweepError(f"{self.dir} holds a different sweep; pass overwrite=True or another out_dir")
            if not manifest.exists() or manifest.read_text() != spec.to_json():
                if self.chunks.exists():  # a partial delete must fail loudly: leftovers would load as new chunks
                    shutil.rmtree(self.chunks)
            self.chunks.mkdir(parents=True, exist_ok=True)
            _write_atomically(manifest, spec.to_json().encode())
        except OSError as exc:
            raise SweepError(f"cannot use output directory {self.dir}: {exc.strerror}") from None

    def load(self, group: int):
        """Yield (index, chunk) for every finished chunk of a static group."""
        for path in sorted(self.chunks.glob(f"g{group}_*.npz")):
            with np.load(path) as z:
                yield z["index"], {k: z[k] for k in z.files if k != "index"}

    def save(self, group: int, index: np.ndarray, chunk: dict) -> None:
        path = self.chunks / f"g{group}_{int(index[0]):09d}.npz"
        try:
            with open(path.with_suffix(".tmp"), "wb") as fh:
                np.savez(fh, index=index, **chunk)
            os.replace(path.with_suffix(".tmp"), path)
        except OSError as exc:
            raise SweepError(
                f"cannot write {path}: {exc.strerror}; the finished chunks in {self.chunks} are kept, rerun to resume"
            ) from None

    def finish(self, result: SweepResult, results_dir, progress: bool) -> None:
        """Write `sweep.json`, `sweep.nc` (netCDF-3, as xarray's scipy engine writes `result.to_dataset()`) and
        `summary.csv` (one row per grid point, trajectories left out) into `results_dir`; without one, into the
        directory through `staged_outputs`, and then remove the chunks. With `progress`, a bar of the rows written
        (the netCDF file's, then the CSV's)."""
        if results_dir is None:
            with staged_outputs() as staged:
                self._write(result, staged.directory(self.dir, None), progress)
            shutil.rmtree(self.chunks, ignore_errors=True)
        else:
            self._write(result, Path(results_dir), progress)

    def _write(self, result: SweepResult, into: Path, progress: bool) -> None:
        coords = result.coords()
        summaries = {k: v for k, v in result.fields.items() if k != "trajectory"}
        bar = progress_bar(2 * result.size, progress, desc="writing", unit="row")
        try:
            (into / "sweep.json").write_text(result.spec.to_json())
            write_netcdf3(into / "sweep.nc", coords, result.variables(), result.attrs())
            bar.update(result.size)
            table = grid_columns({a.name: coords[a.name] for a in result.axes}, summaries)
            write_csv(table, into / "summary.csv", progress=bar.update)
        except OSError as exc:
            raise SweepError(f"cannot write the dataset to {self.dir}: {exc.strerror}") from None
        finally:
            bar.close()


def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file beside it, renamed into place (errors are raised)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def load_sweep(out_dir: str | os.PathLike):
    """The dataset a finished sweep saved in `out_dir` (`sweep.nc`).

    Args:
        out_dir: the finished sweep's folder (`compute_sweep`'s `out_dir`).

    Returns:
        The labelled `xarray.Dataset`, as `run_sweep` makes it, loaded into memory: one dimension per axis (static
        axes first), "step" (optimiser steps) with trajectories; the spec and spacings as JSON attributes.

    Raises:
        SweepError: `out_dir` holds no `sweep.nc` (no sweep, or one not finished).
    """
    import xarray as xr

    path = Path(out_dir) / "sweep.nc"
    if not path.is_file():
        raise SweepError(f"no finished sweep in {out_dir}: {path.name} is missing (a sweep writes it when it ends)")
    return xr.load_dataset(path, engine="scipy")
