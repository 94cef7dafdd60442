"""`ps.lm.sweep`: a language-model sweep (`lm_sweep.sweep_rows`) as a labelled `xarray.Dataset`, the result form
`ps.bandit.sweep` also returns (`analysis.sweep.sweep`): one dimension per grid setting, `final_reward` among its
variables. The language model's adds a `seed` dimension (near an edge its runs split by seed, which a mean would
hide), the per-step read-outs and each point's `collapse_share` and `diverge_share`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .lm_sweep import SHARE_FIELDS, SUMMARY_FIELDS, sweep_rows, verdict_shares

if TYPE_CHECKING:
    import xarray

DEFAULT_SEEDS = 4
"""Runs per grid point of `sweep` unless given: the collapse share then resolves quarters (the command line's
default too)."""


def sweep(
    base: Mapping,
    grid: Mapping[str, Sequence],
    *,
    steps: int,
    seeds: int = DEFAULT_SEEDS,
    key: int = 0,
    progress: Callable[[str], object] | None = None,
) -> xarray.Dataset:
    """The language-model level at every point of `grid` over `base`, `seeds` runs each (`lm_sweep.sweep_rows`).

    Args:
        base: `lm.config` keyword arguments shared by every point (TRL `GRPOConfig` names and the level's sizes).
        grid: setting → its values, e.g. {"learning_rate": [1e-3, 3e-3]}; None turns a nullable setting off; no key of
            `base`.
        steps: GRPO steps per run; integer in [1, 10⁸].
        seeds: runs per point, each with its own key drawn from `key`; integer in [1, 2²⁰].
        key: the seed of every point's runs (the same at each point: common random numbers); integer in
            [0, 2³² − 1].
        progress: called with one line before each point; None: silent.

    Returns:
        An `xarray.Dataset` with dimensions the grid's settings (their values as coordinates, in the grid's order),
        `seed` and `step` (GRPO steps 0 … steps − 1): per point and seed the run's summary (`SUMMARY_FIELDS`:
        `final_reward`, `final_knowledge`, `peak_reward`, … and `verdict`, a string); per point its seeds' shares
        (`collapse_share`, `diverge_share`, in [0, 1]); per point, seed and step every read-out (`lm.READOUTS`, with
        "/" written "_": netCDF names, e.g. `completions_mean_length`); float32 read-outs, NaN after a divergence.

    Raises:
        PgrpoSimError: `steps`, `seeds` or `key` out of range, or a grid point `lm.config` refuses (naming it).
    """
    import xarray as xr

    rows, curves = sweep_rows(base, grid, seeds=seeds, steps=steps, seed=key, progress=progress)
    keys = list(grid)
    shape = (*(len(grid[k]) for k in keys), seeds)
    coords = {k: np.asarray(list(grid[k]), dtype=object if _mixed(grid[k]) else None) for k in keys}
    coords |= {"seed": np.arange(seeds), "step": np.arange(steps)}
    data = {}
    for field in SUMMARY_FIELDS:
        values = np.asarray([row[field] for row in rows]).reshape(shape)
        data[field] = ([*keys, "seed"], values)
    shares = verdict_shares(rows, keys)  # the same on each of a point's seeds: its first seed's
    for share in SHARE_FIELDS:
        data[share] = (keys, np.asarray([s[share] for s in shares]).reshape(shape)[..., 0])
    for name, values in curves.items():
        data[name.replace("/", "_")] = ([*keys, "seed", "step"], values.reshape(*shape, steps))
    return xr.Dataset(data, coords=coords, attrs=dict(model="lm", steps=steps, seeds=seeds, key=key))


def _mixed(values: Sequence) -> bool:
    """Whether a grid axis holds values a numeric coordinate cannot (None, text)."""
    return any(v is None or isinstance(v, str) for v in values)
