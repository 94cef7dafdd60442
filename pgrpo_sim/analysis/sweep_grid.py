"""A bandit sweep's grid and what it produces: the axes (`parse_axis`, `grid_axes`), the spec a resumed sweep must
match (`SweepSpec`), the finished result (`SweepResult`) and the error of a sweep that cannot run (`SweepError`).
The running is `analysis.sweep`'s."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from ..base.errors import PgrpoSimError
from ..base.regimes import DISCRETE_REGIMES
from ..base.serialise import json_text
from ..models.bandit.hyperparameters import STATIC, TRACED, hyperparameter
from ..models.bandit.renamed import current_name

TRACED_AXES, STATIC_AXES = TRACED, STATIC
"""Sweepable hyperparameters (`models.bandit.hyperparameters`): traced ones share one compilation."""


class SweepError(PgrpoSimError):
    """A sweep could not start or continue (bad spec, a store holding something else, a write failure); a
    `PgrpoSimError`."""


class OtherSweepError(SweepError):
    """The store holds a different sweep (its spec or unfinished chunks); `ChunkStore(DIR, overwrite=True)`
    replaces it."""


@dataclasses.dataclass(frozen=True)
class Axis:
    """One grid axis: a hyperparameter name, its values, and how they were spaced.

    Attributes:
        name: the swept hyperparameter, one of `TRACED_AXES` or `STATIC_AXES` (dashes read as underscores).
        values: its values, in the spec's order; ints for an integer hyperparameter, else floats, config units.
        spacing: how they were spaced: "list", "linear", "log" (figures draw log axes) or "int".
        spec: the text `parse_axis` read under `name`, e.g. "learning_rate=log:0.001:1:50" for "eta=log:0.001:1:50"
            (what `SweepSpec` records, so that a sweep resumes whichever alias names its axis).
    """

    name: str
    values: tuple
    spacing: str
    spec: str

    def __post_init__(self):
        if self.name not in TRACED_AXES + STATIC_AXES:  # a sweep would drop it, while its spec recorded it
            raise SweepError(f"unknown axis {self.name!r} (sweepable: {', '.join(TRACED_AXES + STATIC_AXES)})")

    @property
    def size(self) -> int:
        return len(self.values)


SHORT_DIGITS = 6
"""Significant digits of the values a grid spaces out (`short_values`): at least these, more only where needed."""
SHORT_MAX_VALUES = 100_000
"""Most values `short_values` shortens (each is formatted as text, ~1 µs): a longer axis keeps its computed values,
which its files print in full (10⁷ values took 25 s to shorten before a sweep that size was refused)."""


def short_values(values) -> list[float]:
    """Computed grid values (a log or linear spacing) to the fewest significant digits, `SHORT_DIGITS` or more, that
    keep distinct values distinct: what a sweep runs and what its files print, e.g. 0.000316228 for
    0.00031622776601683794 (a value read back from a file is then the value that ran).

    Args:
        values: the computed values; finite floats; any config units.

    Returns:
        The rounded values, in order, as Python floats; more than `SHORT_MAX_VALUES` values as computed.
    """
    values = np.asarray(values, float)
    if values.size > SHORT_MAX_VALUES:
        return values.tolist()
    distinct = np.unique(values).size
    for digits in range(SHORT_DIGITS, 18):
        short = np.array([float(f"{v:.{digits}g}") for v in values.tolist()])
        if np.unique(short).size == distinct:
            return short.tolist()
    return values.tolist()


def axis_name(text: str) -> str:
    """The hyperparameter a grid axis's name means: dashes read as underscores, a short alias as TRL's name
    (`models.bandit.renamed.current_name`, e.g. "group-size" → "num_generations"); not checked here."""
    return current_name(text.strip().replace("-", "_"))


def _count(spec: str, text: str) -> int:
    """The NUM of a spaced grid spec: an integer ≥ 1 (a step such as 0.1 is named as not a count)."""
    try:
        num = int(text)
    except ValueError:
        num = 0  # not an integer: refused below, as a count below 1 is
    if num < 1:
        raise SweepError(f"grid spec {spec!r}: num {text!r} is a count of values, an integer >= 1")
    return num


def parse_axis(spec: str) -> Axis:
    """Parse `name=v1,v2,…`, `name=start:stop:num` (linear, inclusive), `name=log:start:stop:num` (log-spaced,
    inclusive) or `name=start:stop` (integers, inclusive, step 1); spaced values are rounded (`short_values`).

    Args:
        spec: the axis as text; `name` a sweepable hyperparameter (`TRACED_AXES`, `STATIC_AXES`) or a former name of
            one (`models.bandit.renamed.RENAMED`, e.g. eta for learning_rate), in config units.

    Returns:
        The `Axis`: its values in order (ints for an integer hyperparameter), its spacing and `spec` under the
        hyperparameter's name (TRL's, whichever alias `spec` used).

    Raises:
        SweepError: naming the spec: no `=` or no values, an unknown name, a malformed form or number, log spacing
            with start or stop ≤ 0, a num not an integer ≥ 1 (or 1 with start ≠ stop), a non-integer start:stop
            range, no values, a value that is not finite, or a non-integer value of an integer hyperparameter.
    """
    name, sep, body = spec.partition("=")
    name = axis_name(name)  # the short aliases, as the command line's flags take them
    if not sep or not body:
        raise SweepError(f"grid spec {spec!r}: expected name=values")
    if name not in TRACED_AXES + STATIC_AXES:
        raise SweepError(
            f"grid spec {spec!r}: unknown parameter {name!r} (sweepable: {', '.join(TRACED_AXES + STATIC_AXES)})"
        )
    try:
        parts = body.split(":")
        if "," in body or len(parts) == 1:
            values, spacing = np.array([float(v) for v in body.split(",")]), "list"
        elif parts[0] == "log" and len(parts) == 4:
            lo, hi, num = float(parts[1]), float(parts[2]), _count(spec, parts[3])
            if lo <= 0 or hi <= 0:
                raise SweepError(f"grid spec {spec!r}: log spacing needs start and stop > 0")
            values, spacing = np.asarray(short_values(np.geomspace(lo, hi, num))), "log"
        elif len(parts) == 3:
            lo, hi, num = float(parts[0]), float(parts[1]), _count(spec, parts[2])
            if num == 1 and lo != hi:  # linspace would give START alone: a STEP read as NUM
                raise SweepError(f"grid spec {spec!r}: start:stop:num with num 1 gives start alone; num counts values")
            values, spacing = np.linspace(lo, hi, num), "linear"
            values = np.asarray(short_values(values)) if np.all(np.isfinite(values)) else values
        elif len(parts) == 2:
            lo, hi = float(parts[0]), float(parts[1])
            if lo != round(lo) or hi != round(hi):
                raise SweepError(f"grid spec {spec!r}: start:stop ranges are integer ranges")
            values, spacing = np.arange(int(lo), int(hi) + 1, dtype=float), "int"
        else:
            raise SweepError(f"grid spec {spec!r}: expected list, start:stop:num, log:start:stop:num or start:stop")
    except SweepError:
        raise
    except ValueError:  # float() or int() of a malformed number
        raise SweepError(f"grid spec {spec!r}: could not read the numbers") from None
    if values.size == 0:
        raise SweepError(f"grid spec {spec!r}: empty range")
    if not np.all(np.isfinite(values)):
        raise SweepError(f"grid spec {spec!r}: values must be finite")
    if hyperparameter(name).integer:
        if np.any(values != np.round(values)):
            raise SweepError(f"grid spec {spec!r}: {name} takes integer values")
        values = values.astype(int)
    return Axis(name, tuple(values.tolist()), spacing, f"{name}={body}")  # one record whatever alias was typed


def grid_axes(axes: Sequence[Axis]) -> list[Axis]:
    """The axes in the order of the dataset's dimensions: static axes (group size) first, then traced ones.

    Args:
        axes: the grid's axes, in any order.

    Returns:
        The same axes reordered (each group keeping its order given); an axis of an unknown name is left out.
    """
    return [a for a in axes if a.name in STATIC_AXES] + [a for a in axes if a.name in TRACED_AXES]


class SweepSettings(NamedTuple):
    """How a sweep runs beside its grid: the keyword arguments `compute_sweep`, `run_sweep`, `check_sweep` and
    `output_bytes` share (they take them as `**settings`).

    Attributes:
        steps: optimiser steps per run; an integer in [1, MAX_STEPS].
        mode: "expected" (one exact run per grid point) or "sampled" (`seeds` drawn runs; at least 2).
        seeds: drawn runs per grid point in sampled mode.
        seed: the sweep's PRNG seed; an integer in [0, MAX_SEED].
        chunk_size: configurations per chunk; None: as many as `max_memory` allows.
        max_memory: memory budget of a chunk's runs, bytes; > 0.
        decimate: > 0 also keeps every `decimate`-th point of each (seed-mean) reward curve; 0 keeps none.
    """

    steps: int
    mode: str = "expected"
    seeds: int = 1
    seed: int = 0
    chunk_size: int | None = None
    max_memory: float = 2e9
    decimate: int = 0


@dataclasses.dataclass
class SweepSpec:
    """Everything that determines a sweep's numbers (what a resumed run must match).

    Attributes:
        base: `bandit.config` keyword arguments of the fixed parameters.
        axes: each grid axis's spec text (`Axis.spec`), in the order given.
        steps: optimiser steps per run.
        mode: "expected" or "sampled".
        seeds: drawn runs per grid point (sampled mode).
        seed: the sweep's PRNG seed.
        decimate: every `decimate`-th step of each reward curve kept; 0: no trajectories.
    """

    base: dict
    axes: list[str]
    steps: int
    mode: str
    seeds: int
    seed: int
    decimate: int

    def to_json(self) -> str:
        """The spec as canonical JSON (sorted keys; arrays in `base`, e.g. prompt features, as nested lists):
        what the output directory records and a resumed sweep must match. `TypeError` for other objects."""
        return json_text(dataclasses.asdict(self), sort_keys=True)


class SweepResult(NamedTuple):
    """A finished sweep as NumPy arrays: what `run_sweep` labels as an xarray Dataset (`to_dataset`).

    Attributes:
        fields: summary name → array of shape (axis sizes…): the `CurveSummary` fields (rewards in the bandit's
            reward units, steps in optimiser steps), `late_variance` (reward units², over the last quarter of the
            curve), `diverged` (the share of a point's seeds that diverged, in [0, 1]) and `diverged_step` (the
            first divergence's optimiser step, −1 if none); with `decimate`, "trajectory" (axis sizes…,
            steps // decimate + 1): the (seed-mean) reward at optimiser steps 0, decimate, ….
        axes: the grid's axes in dimension order (`grid_axes`: static axes first).
        spec: the `SweepSpec`.
    """

    fields: dict[str, np.ndarray]
    axes: list[Axis]
    spec: SweepSpec

    @property
    def size(self) -> int:
        """Grid points."""
        return math.prod(a.size for a in self.axes)

    def coords(self) -> dict[str, np.ndarray]:
        """Each dimension's values: the axes', and "step" (optimiser steps) where trajectories are kept."""
        coords = {a.name: np.asarray(a.values) for a in self.axes}
        if "trajectory" in self.fields:
            coords["step"] = np.arange(0, self.spec.steps + 1, self.spec.decimate)
        return coords

    def variables(self) -> dict[str, tuple[list[str], np.ndarray, dict]]:
        """Each field as (dimension names, values, attributes)."""
        dims = [a.name for a in self.axes]
        codes = {"codes": ", ".join(f"{i}={name}" for i, name in enumerate(DISCRETE_REGIMES))}
        return {
            k: (dims + (["step"] if k == "trajectory" else []), v, codes if k == "regime" else {})
            for k, v in self.fields.items()
        }

    def attrs(self) -> dict[str, str]:
        """The sweep's spec and each axis's spacing, as JSON."""
        return {"spec": self.spec.to_json(), "spacing": json.dumps({a.name: a.spacing for a in self.axes})}

    def to_dataset(self):
        """The labelled `xarray.Dataset`: one data variable per field, a coordinate per dimension."""
        import xarray as xr

        variables = {k: xr.Variable(dims, v, attrs) for k, (dims, v, attrs) in self.variables().items()}
        return xr.Dataset(variables, coords=self.coords(), attrs=self.attrs())


class SweepStore(Protocol):
    """Where `compute_sweep` keeps a sweep's finished chunks and results, so that a rerun resumes: the library
    computes, a store keeps (`runtime.sweep_store.ChunkStore` keeps them in a folder, `ps.ChunkStore`). In a
    multi-host run only process 0 uses it. A refusal or a write failure is a `SweepError` (one line; in a multi-host
    run every process stops with it)."""

    def open(self, spec: SweepSpec) -> None:
        """Take the sweep `spec` before its first chunk; `OtherSweepError` where the store holds another sweep."""
        ...

    def load(self, group: int) -> Iterable[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """(configuration indices, their summaries) of every finished chunk of static group `group`."""
        ...

    def save(self, group: int, index: np.ndarray, chunk: dict[str, np.ndarray]) -> None:
        """Keep a finished chunk of static group `group`: configuration indices and summaries."""
        ...

    def finish(self, result: SweepResult, progress: bool) -> None:
        """Keep the finished sweep (and drop its chunks); `progress`: a bar on stderr."""
        ...
