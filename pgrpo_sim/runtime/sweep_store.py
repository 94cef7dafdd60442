"""A sweep's files: a bandit sweep's finished chunks kept in a folder as they finish, so that a rerun resumes, and
its results written once every chunk is done (`ChunkStore`: `sweep.json`, `sweep.nc`, `summary.csv`); a
language-model sweep's finished grid points (`PointFolder`) and files (`write_lm_sweep`: `summary.csv`, `curves.csv`,
`sweep.json`, `README.md`). The library's sweeps take these as store objects (`analysis.sweep_grid.SweepStore`,
`analysis.lm_sweep.PointStore`) and write nothing themselves."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..analysis.sweep_grid import OtherSweepError, SweepError, SweepResult, SweepSpec
from ..base.files import write_atomically
from ..base.progress import progress_bar
from ..base.serialise import json_text
from ..models.bandit.renamed import current_names
from .outputs import staged_outputs
from .tables import grid_columns, write_csv, write_netcdf3


class ChunkStore:
    """A sweep kept in folder `out_dir` (the library's `SweepStore`): its finished chunks as
    `chunks/g<group>_<first index>.npz` and their sweep's spec as `chunks/sweep.json` while it runs, so that a rerun
    resumes; at the end `sweep.json`, `sweep.nc` and `summary.csv`, which replace the previous ones together once all
    are written (`outputs.staged_outputs`), and then the chunks are removed.

    Args:
        out_dir: the folder (created when the sweep opens it).
        overwrite: replace a folder that holds another sweep (else `OtherSweepError`).
        results_dir: write the final files there instead (a caller's `StagedOutputs` folder, which moves them into
            `out_dir` and removes the chunks itself).
    """

    def __init__(
        self, out_dir: str | os.PathLike, *, overwrite: bool = False, results_dir: str | os.PathLike | None = None
    ):
        self.dir = Path(out_dir)
        self.chunks = self.dir / "chunks"
        self.overwrite, self.results_dir = overwrite, results_dir

    def open(self, spec: SweepSpec) -> None:
        """Take the sweep `spec`: keep the chunks of the same sweep, remove those of another."""
        manifest = self.chunks / "sweep.json"
        try:
            for previous in (self.dir / "sweep.json", manifest):  # a finished sweep, unfinished chunks
                if previous.exists() and not _same_sweep(previous, spec) and not self.overwrite:
                    raise OtherSweepError(
                        f"{self.dir} holds a different sweep; use ChunkStore({str(self.dir)!r}, overwrite=True) "
                        "or another folder"
                    )
            if (not manifest.exists() or not _same_sweep(manifest, spec)) and self.chunks.exists():
                shutil.rmtree(self.chunks)  # a partial delete must fail loudly: leftovers would load as new chunks
            self.chunks.mkdir(parents=True, exist_ok=True)
            write_atomically(manifest, lambda handle: handle.write(spec.to_json().encode()))
        except OSError as exc:
            raise SweepError(f"cannot use output directory {self.dir}: {exc.strerror}") from None

    def load(self, group: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Yield (index, chunk) for every finished chunk of a static group."""
        for path in sorted(self.chunks.glob(f"g{group}_*.npz")):
            with np.load(path) as z:
                yield z["index"], {k: z[k] for k in z.files if k != "index"}

    def save(self, group: int, index: np.ndarray, chunk: dict) -> None:
        _keep(self.chunks / f"g{group}_{int(index[0]):09d}.npz", dict(index=index, **chunk), "chunks")

    def finish(self, result: SweepResult, progress: bool) -> None:
        """Write `sweep.json`, `sweep.nc` (netCDF-3, as xarray's scipy engine writes `result.to_dataset()`) and
        `summary.csv` (one row per grid point, trajectories left out) into `results_dir`; without one, into the
        folder through `staged_outputs`, and then remove the chunks. With `progress`, a bar of the rows written
        (the netCDF file's, then the CSV's)."""
        if self.results_dir is None:
            with staged_outputs() as staged:
                self._write(result, staged.directory(self.dir, None), progress)
            shutil.rmtree(self.chunks, ignore_errors=True)
        else:
            self._write(result, Path(self.results_dir), progress)

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


def _same_sweep(path: Path, spec: SweepSpec) -> bool:
    """Whether the spec recorded in `path` is `spec`: as written, or once its former names are TRL's (a sweep begun
    before the bandit took them resumes; `models.bandit.renamed.current_names`)."""
    text, wanted = path.read_text(), spec.to_json()
    if text == wanted:
        return True
    try:
        return json_text(current_names(json.loads(text)), sort_keys=True) == wanted
    except ValueError:
        return False


class PointFolder:
    """A language-model sweep's finished grid points in folder `folder` (the library's `analysis.lm_sweep.PointStore`),
    each as `point-<name>.npz`, written atomically (a temporary file moved into place)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    def load(self, name: str) -> dict[str, np.ndarray] | None:
        """The arrays of `point-<name>.npz`, or None where there is no such file."""
        path = self.folder / f"point-{name}.npz"
        if not path.exists():
            return None
        with np.load(path) as saved:
            return {key: saved[key] for key in saved.files}

    def save(self, name: str, arrays: Mapping[str, npt.ArrayLike]) -> None:
        """`arrays` as `point-<name>.npz`, whole or not at all; `SweepError` where it cannot be written."""
        _keep(self.folder / f"point-{name}.npz", arrays, "points")


def _keep(path: Path, arrays: Mapping[str, npt.ArrayLike], what: str) -> None:
    """`arrays` as the `.npz` file `path`, atomically; a `SweepError` naming the finished `what` kept beside it."""
    try:
        write_atomically(path, lambda handle: np.savez(handle, **arrays))  # pyright: ignore[reportArgumentType]  # numpy stub: **arrays as allow_pickle
    except OSError as exc:
        raise SweepError(
            f"cannot write {path}: {exc.strerror}; the finished {what} in {path.parent} are kept, rerun to resume"
        ) from None


LM_COLUMNS = {
    "seed": "the seed's index within its grid point (0 … seeds − 1; every point runs the same keys)",
    "final_reward": "mean reward (share of right completions) over the last 10 % of the GRPO steps",
    "final_knowledge": "chance-corrected reward k = max(r − f/m, 0)/(1 − 1/m) over the last quarter of the steps "
    "(r the reward, f the share of well-formed completions, m the task's modulus): what an LLM, whose chance of "
    "guessing is 0, would log — one answer for every prompt scores 1/m reward here and k = 0",
    "peak_reward": "highest point of the reward's trailing running mean over 10 % of the steps",
    "final_entropy": "mean token entropy over the last 10 % of the steps (nats)",
    "final_mean_length": "mean completion length over the last 10 % of the steps (tokens)",
    "final_eval_accuracy": "the last greedy (temperature 0) accuracy on the held-out prompts",
    "diverged_step": "GRPO step at which parameters or loss stopped being finite; −1 if never (the six numbers "
    "above are then empty)",
    "verdict": "learns | plateaus | flat | oscillates | collapses | diverges: what-if's rule on the reward's running "
    "mean (`analysis.summaries.verdict`); a collapse is judged on final_knowledge against its start",
    "collapse_share": "share of this grid point's seeds whose verdict is collapses (the same on each of its rows)",
    "diverge_share": "share of this grid point's seeds whose verdict is diverges (the same on each of its rows)",
}
"""What each column of a language-model sweep's `summary.csv` after the grid keys holds (its README)."""


def write_lm_sweep(into: Path, keys: Sequence[str], rows: Sequence[Mapping], curves: Mapping, spec: Mapping) -> None:
    """A finished language-model sweep's files in folder `into`: `summary.csv` (one row per grid point and seed:
    the grid `keys`, then `LM_COLUMNS`), `curves.csv` (one row per point, seed and GRPO step: every read-out),
    `sweep.json` (`spec`) and `README.md`, which explains every column.

    Args:
        into: the folder (it exists).
        keys: the grid's settings, in the grid's order.
        rows: the sweep's rows (`analysis.lm_sweep.sweep_rows`), grid order, seeds fastest.
        curves: read-out name → float32 (points, seeds, steps).
        spec: the sweep's settings, grid and points (JSON-able).
    """
    from ..analysis.lm_sweep import SHARE_FIELDS, SUMMARY_FIELDS, verdict_shares

    columns = [*keys, "seed", *SUMMARY_FIELDS, *SHARE_FIELDS]
    with open(into / "summary.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row, shares in zip(rows, verdict_shares(rows, keys), strict=True):
            row = {**row, **shares}
            writer.writerow([_cell(row[c], exact=c in keys) for c in columns])
    points, seeds, steps = next(iter(curves.values())).shape
    index = np.indices((points, seeds, steps)).reshape(3, -1)
    table = {"point": index[0], "seed": index[1], "step": index[2]}
    table.update({name: values.reshape(-1) for name, values in curves.items()})
    write_csv(table, into / "curves.csv", progress=lambda rows: None)  # in blocks: Ctrl-C is seen between them
    (into / "sweep.json").write_text(json.dumps(spec, indent=2) + "\n")
    (into / "README.md").write_text(_lm_readme(keys, list(curves), points, seeds, steps))


MEASURED_DIGITS = 8
"""Significant digits of a measured number in `summary.csv` (they come from float32 read-outs)."""


def _cell(value, exact: bool) -> str:
    """A summary.csv field: a setting (`exact`) as Python writes it, which reads back as the value that ran; a
    measured number to `MEASURED_DIGITS`; NaN empty, None as "none"."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return "" if np.isnan(value) else repr(value) if exact else f"{value:.{MEASURED_DIGITS}g}"
    return str(value)


def _lm_readme(keys: Sequence[str], readouts: Sequence[str], points: int, seeds: int, steps: int) -> str:
    lines = [
        f"# `pgrpo-sim sweep --model lm`: {points} grid point(s) × {seeds} seed(s) × {steps} GRPO steps",
        "",
        "The settings, the grid and every point's settings are in `sweep.json`. An empty field is a number that does "
        "not exist (a diverged run's, or an eval accuracy between evaluations); `none` is a setting turned off.",
        "",
        "## summary.csv: one row per grid point and seed",
        "",
        *(f"- `{key}`: the grid point's {key} (a TRL `GRPOConfig` setting)" for key in keys),
        *(f"- `{name}`: {text}" for name, text in LM_COLUMNS.items()),
        "",
        "## curves.csv: one row per grid point, seed and GRPO step",
        "",
        "- `point`: the grid point's index, in summary.csv's order (0 is its first point)",
        "- `seed`: as in summary.csv; `step`: the GRPO step (0 … steps − 1)",
        f"- the read-outs, under TRL's names (docs/lm.md): {', '.join(f'`{r}`' for r in readouts)}",
        "",
    ]
    return "\n".join(lines)
