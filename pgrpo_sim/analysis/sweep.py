"""Hyperparameter sweeps of the bandit: grid specs, chunked nested-vmap execution, device sharding,
results kept in a store as they finish (resumable) and a labelled xarray dataset.

A grid is a list of axes (`parse_axis("learning_rate=log:1e-3:1:48")`). Traced hyperparameters (η, μ, β, p_ref,
clip ranges, lag, ref_sync_alpha) are flattened into one configuration axis and run with `vmap` in fixed-size
chunks (one compilation per static structure); `num_generations` and `minibatches` set array shapes, so each of their
values is its own static group. The configuration axis of a chunk is sharded over `jax.devices()`. With a `store`
(`SweepStore`; `ps.ChunkStore` keeps it in a folder) every finished chunk is kept at once, and a rerun with the same
spec skips the configurations already done, so an interrupted sweep resumes and ends with identical results; the
compiled calls are waited for in a worker thread (`base.waiting.interruptible`), so Ctrl-C stops a sweep at once.
The store keeps the result at the end; this module writes no file.
Sampled mode uses the same seeds at every grid point (common random numbers).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from ..base.checks import check_choice, check_range, check_seed, check_seeds, check_steps
from ..base.compile_options import RUN_BOUND_OPTIONS
from ..base.errors import PgrpoSimError
from ..base.progress import progress_bar
from ..base.sharding import agree, gather_processes, shard_batch, share_from_first
from ..base.waiting import interruptible
from ..models import bandit
from ..models.bandit import check_mode, initial_state, make_optimizer, rewards_are_binary, rollout_count, run, step
from ..models.bandit.configuration import check_settings
from ..models.bandit.hyperparameters import hyperparameter, set_hyperparameters
from .summaries import summarize_curves
from .sweep_grid import (
    STATIC_AXES as STATIC_AXES,
    TRACED_AXES as TRACED_AXES,
    Axis as Axis,
    OtherSweepError as OtherSweepError,
    SweepError as SweepError,
    SweepResult as SweepResult,
    SweepSettings as SweepSettings,
    SweepSpec as SweepSpec,
    SweepStore as SweepStore,
    grid_axes as grid_axes,
    parse_axis as parse_axis,
)

if TYPE_CHECKING:  # imported where a Dataset is made: it costs a command 0.3–0.4 s
    import xarray

VMAP_BATCH = 4096
"""Most configurations vmapped together in a batch (on 2 CPU cores, 4096 runs 2× faster than 256: the
per-step work of a batch is large enough to hide the loop's overhead, its state still fits in cache)."""
MAX_CHUNK_WORK = 2**28
"""Most run-steps (configurations × seeds × steps) in one chunk: a few seconds of work on CPU."""


def _summarize_batch(curves, diverged, diverged_step, mode: str, decimate: int):
    """Summaries of a batch of B runs from their reward curves, time-major: (T+1, B) in expected mode,
    (T+1, B, seeds) sampled (judged on the seed-mean curve against its standard error); (B,) fields."""
    rewards = curves
    if mode == "sampled":
        curves = jnp.mean(rewards, axis=-1)
        stderr = jnp.std(rewards, axis=-1, ddof=1) / jnp.sqrt(rewards.shape[-1])
    else:
        stderr = None
    batch = curves.shape[1]
    diverged_any = jnp.any(diverged.reshape(batch, -1), axis=1)
    summary = summarize_curves(curves, diverged_any, stderr)._asdict()
    late = max(1, curves.shape[0] // 4)
    # expected mode: temporal variance of the late window; sampled: variance across seeds, averaged over it
    if mode == "expected":
        summary["late_variance"] = jnp.var(curves[-late:], axis=0)
    else:
        summary["late_variance"] = jnp.mean(jnp.var(rewards[-late:], axis=-1), axis=0)
    summary["diverged"] = jnp.mean(diverged.reshape(batch, -1).astype(curves.dtype), axis=1)
    steps = jnp.where(diverged_step >= 0, diverged_step, jnp.iinfo(jnp.int32).max)
    first = jnp.min(steps.reshape(batch, -1), axis=1)
    summary["diverged_step"] = jnp.where(diverged_any, first, -1).astype(jnp.int32)
    if decimate:
        summary["trajectory"] = curves[::decimate].T
    return summary


def _batch_curves(base: bandit.Config, params: dict, keys: jax.Array, steps: int, mode: str, binary: bool):
    """Reward curves of a batch of configurations (`params`: (B,) per traced name), time-major, (T+1, B) or
    (T+1, B, seeds), with each run's divergence flag and step: the loop of `models.bandit.run` with the
    batch inside it, so each step writes one row of the curves in place (vmapping `run` itself writes them
    configuration-major, and transposing them back costs as much as a third of the kernel). `binary`: every
    reward is 0 or 1 (`models.bandit.rewards_are_binary`), so expected-mode reuse enumerates fewer rollouts."""
    if mode == "expected" and base.lag_model == "refresh":  # rollout reuse runs by branches: `run` itself
        one = lambda c: run(c, keys[0], steps, mode, binary_rewards=binary)
        result = jax.vmap(lambda p: one(set_hyperparameters(base, p)))(params)
        return result.reward.T, result.diverged, result.diverged_step

    # the config is rebuilt inside each vmapped call, so only the swept leaves carry the batch axis (a vmapped
    # config would broadcast every leaf to (B, ...): 1.5× slower)
    def start(p):
        config = set_hyperparameters(base, p)
        state = initial_state(config, make_optimizer(config), config.init_logits)
        if mode == "sampled":  # one state per seed
            state = jax.tree.map(lambda x: jnp.broadcast_to(x, (keys.shape[0], *x.shape)), state)
        return state

    def advance(p, state, key):
        config = set_hyperparameters(base, p)
        return step(config, make_optimizer(config), mode, state, key)

    if mode == "sampled":  # each seed its own key stream, as in `simulate`; the same for every configuration
        advance_all = jax.vmap(jax.vmap(advance, in_axes=(None, 0, 0)), in_axes=(0, 0, None))
        xs = jnp.swapaxes(jax.vmap(lambda k: jax.random.split(k, steps + 1))(keys), 0, 1)  # (T+1, seeds)
    else:
        advance_all = jax.vmap(advance, in_axes=(0, 0, None))
        xs = jax.random.split(keys[0], steps + 1)

    def body(state, key):
        nxt, metrics = advance_all(params, state, key)
        return nxt, metrics["reward"]

    # steps + 1 updates: the last one only reads out θ_T (as `run` does); its own divergence does not count
    final, curves = jax.lax.scan(body, jax.vmap(start)(params), xs)
    within = (final.diverged_step >= 0) & (final.diverged_step < steps)
    return curves, within, jnp.where(within, final.diverged_step, -1)


def chunk_summaries(base, params, seed, steps, mode, decimate, batch, seeds, binary):
    """Summaries of one chunk: `params` (configurations,) per traced name, `batch` configurations at a time;
    `seeds` runs of each from the PRNG seed `seed` (split here: eager key ops would compile apart).

    Args:
        base: the static group's `bandit.Config`; `params` replace its traced hyperparameters.
        params: traced hyperparameter name → its value per configuration, config units; (configurations,), the
            configurations a multiple of `jax.device_count()` × `batch`.
        seed: the sweep's PRNG seed; uint32 scalar (every configuration runs on the same keys).
        steps: optimiser steps per run; static in `run_chunk`.
        mode: "expected" or "sampled"; static.
        decimate: > 0 also keeps every `decimate`-th point of each (seed-mean) reward curve; 0 keeps none; static.
        batch: configurations vmapped together on a device; static.
        seeds: runs per configuration in sampled mode (expected mode runs one, on the first key); static.
        binary: every reward is 0 or 1 (`models.bandit.rewards_are_binary`), so expected-mode reuse enumerates
            fewer rollouts; static.

    Returns:
        Summary name → its value per configuration, (configurations,): the fields of `SweepResult.fields` at one
        grid point each; with `decimate`, "trajectory" (configurations, steps // decimate + 1), the bandit's reward
        units.
    """
    keys = jax.random.split(jax.random.key(seed), seeds)

    def one_batch(p):  # the batch's curves, then one pass over them for the summaries
        return _summarize_batch(*_batch_curves(base, p, keys, steps, mode, binary), mode, decimate)

    # (devices, batches per device, batch): vmap over the sharded device axis, and on each device a loop over
    # batches, whose state and curves stay in cache (a plain vmap over thousands of configurations is slower)
    n_dev = jax.device_count()
    split = jax.tree.map(lambda x: x.reshape(n_dev, -1, batch, *x.shape[1:]), params)
    out = jax.vmap(lambda p: jax.lax.map(one_batch, p))(split)
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[3:]), out)


run_chunk = jax.jit(
    chunk_summaries,
    static_argnames=("steps", "mode", "decimate", "batch", "seeds", "binary"),
    compiler_options=RUN_BOUND_OPTIONS,
)
"""`chunk_summaries` compiled (one program per static structure): what `compute_sweep` calls once per chunk, and
the hook a test or benchmark wraps to interrupt or time the chunks."""


def _reuse_rollouts(config: bandit.Config, mode: str) -> tuple[bool, int]:
    """(binary, branches): expected-mode rollout reuse runs one branch per distinct rollout of its prompt
    (`models.bandit.rollout_count`), fewer when every reward is 0 or 1; every other run is one branch."""
    if mode != "expected" or config.lag_model != "refresh":
        return False, 1
    binary = rewards_are_binary(config)
    return binary, rollout_count(config, binary)


def _bytes_per_run(config: bandit.Config, steps: int, seeds: int, branches: int) -> int:
    """Peak memory of one configuration while its batch runs (bytes): its reward curves (all seeds) and
    their summaries' temporaries, plus its state (one per seed, or per branch of expected-mode reuse)."""
    itemsize = np.dtype(config.rewards.dtype).itemsize
    state = config.rewards.size * (config.max_lag + 4) * itemsize * seeds * branches
    return int((steps + 1) * seeds * itemsize * 4 + state)


def _chunk_shape(n: int, config: bandit.Config, settings: SweepSettings, branches: int):
    """(configurations per chunk, configurations per vmapped batch) for a static group of n configurations.
    A chunk is a whole number of batches on every device; both depend on n, not on what is left to do, so a
    resumed sweep computes every chunk exactly as an uninterrupted one. Memory: a batch's curves and a chunk's
    summaries (and trajectories) within `max_memory`; a chunk holds at most `MAX_CHUNK_WORK` run-steps (a step
    of expected-mode reuse counts once per branch), so that finished work is saved (and the progress bar moves)
    every few seconds."""
    steps, seeds, decimate, chunk_size, max_memory = (
        settings.steps,
        settings.seeds,
        settings.decimate,
        settings.chunk_size,
        settings.max_memory,
    )
    n_dev = jax.device_count()
    itemsize = np.dtype(config.rewards.dtype).itemsize
    batch_cap = max(1, int(max_memory // (n_dev * _bytes_per_run(config, steps, seeds, branches))))
    out_bytes = 16 * 8 + ((steps // decimate + 1) * itemsize * 2 if decimate else 0)
    size = chunk_size or max(1, min(int(max_memory // out_bytes), MAX_CHUNK_WORK // (steps * seeds * branches)))
    per_device = math.ceil(min(size, n) / n_dev)
    batches = math.ceil(per_device / min(VMAP_BATCH, batch_cap))
    batch = math.ceil(per_device / batches)
    return batches * batch * n_dev, batch


def load_sweep(out_dir: str | os.PathLike):
    """The dataset a finished sweep saved in `out_dir` (`sweep.nc`).

    Args:
        out_dir: the finished sweep's folder (a `ChunkStore`'s).

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


def run_sweep(base: dict, axes: Sequence[Axis], **options) -> xarray.Dataset:
    """Run the bandit at every grid point: `compute_sweep`, labelled.

    Args:
        base: `bandit.config` keyword arguments of the fixed parameters.
        axes: the grid, one `Axis` per swept parameter.
        **options: the keyword arguments of `compute_sweep` (store, progress and the `SweepSettings`).

    Returns:
        An `xarray.Dataset` with one dimension per axis and one data variable per summary (`CurveSummary` fields,
        late_variance, diverged, diverged_step; trajectory with `decimate`).
    """
    return compute_sweep(base, axes, **options).to_dataset()


def sweep(
    base: Mapping,
    grid: Mapping[str, Sequence],
    *,
    steps: int,
    seeds: int = 1,
    key: int = 0,
    mode: str = "expected",
    progress: bool = False,
) -> xarray.Dataset:
    """The bandit at every point of `grid` over `base`: `ps.bandit.sweep`, the verb `ps.lm.sweep` shares
    (`analysis.lm_dataset`); `run_sweep` on list axes, held in memory.

    Args:
        base: `bandit.config` keyword arguments of the fixed parameters (TRL's names).
        grid: hyperparameter → its values (`TRACED_AXES`, `STATIC_AXES`, or a short alias of one, as the command
            line's `--grid`), e.g. {"learning_rate": [0.05, 0.1], "lag": [0, 2]}; numbers in config units.
        steps: optimiser steps per run; integer in [1, `MAX_STEPS`].
        seeds: drawn runs per point, "sampled" mode only (its curves' mean is summarised); integer ≥ 2 there, 1 in
            "expected" mode.
        key: the sweep's PRNG seed (the same draws at every point: common random numbers); integer in
            [0, `MAX_SEED`].
        mode: "expected" (the exact expectation over groups) or "sampled".
        progress: a progress bar on stderr.

    Returns:
        The `xarray.Dataset` of `run_sweep`: one dimension per grid hyperparameter (its values as coordinates),
        `final_reward` and the other summaries of each point's curve (`CurveSummary`), `regime`, `diverged`.

    Raises:
        SweepError: a grid axis that is not sweepable or a value that is not a number; PgrpoSimError: as `run_sweep`.
    """
    axes = []
    for name, values in grid.items():
        try:  # repr: the shortest text that reads back as the value (an integer as one)
            text = [repr(int(v)) if isinstance(v, (int, np.integer)) else repr(float(v)) for v in values]
        except (TypeError, ValueError):
            raise SweepError(f"grid {name}: values must be numbers, got {list(values)!r}") from None
        axes.append(parse_axis(f"{name}=" + ",".join(text)))
    return run_sweep(dict(base), axes, steps=steps, mode=mode, seeds=seeds, seed=key, progress=progress)


def compute_sweep(
    base: dict,
    axes: Sequence[Axis],
    *,
    store: SweepStore | None = None,
    progress: bool = True,
    **settings,
) -> SweepResult:
    """Run the bandit at every grid point; its summaries as NumPy arrays (`run_sweep` labels them as an xarray
    Dataset, whose import costs a command 0.3–0.4 s).

    With a `store`, each chunk is kept there as it finishes, and a rerun with the same store resumes from them; the
    store keeps the result at the end (`ps.ChunkStore(DIR)`: in a folder, as `sweep.json`, `sweep.nc`, read back by
    `load_sweep`, and `summary.csv`; a folder holding a different sweep is refused unless told to overwrite it).

    Args:
        base: `bandit.config` keyword arguments of the fixed parameters.
        axes: the grid, one `Axis` per swept parameter (`parse_axis` reads "learning_rate=log:0.001:1:50").
        store: where finished chunks and the result are kept (`SweepStore`; in a multi-host run, process 0's alone
            is used); None: nothing is kept.
        progress: show a progress bar on stderr.
        **settings: the fields of `SweepSettings` (`steps` required; mode, seeds, seed, chunk_size, max_memory,
            decimate).

    Returns:
        A `SweepResult`: per grid point, the `CurveSummary` fields, late variance and divergence flags.

    Raises:
        SweepError: an invalid grid, or a `store` holding another sweep; `PgrpoSimError` for a setting out of its
            range (nothing is created then).
    """
    settings = SweepSettings(**settings)
    steps, mode, seeds, seed, decimate = settings.steps, settings.mode, settings.seeds, settings.seed, settings.decimate
    spec, traced, static, configs = _plan(base, axes, settings)
    store = store if jax.process_index() == 0 else None  # in a multi-host run, process 0 keeps the chunks
    agree(lambda: store.open(spec) if store is not None else None)  # refused: every process stops
    if traced:
        grid = np.stack(np.meshgrid(*[np.asarray(a.values) for a in traced], indexing="ij"), -1)
        grid = grid.reshape(-1, len(traced))
    n_traced = grid.shape[0] if traced else 1
    groups = []
    bar = progress_bar(n_traced * len(configs), progress)
    try:
        for g, config in enumerate(configs):
            if traced:
                params_all = {a.name: grid[:, i] for i, a in enumerate(traced)}
            else:  # only static axes: one configuration per group (η substituted by itself)
                params_all = {"learning_rate": np.asarray(config.learning_rate, float).reshape(1)}
            results = _Results(n_traced)
            kept = list(store.load(g)) if store is not None else []
            for index, chunk in share_from_first(kept):  # process 0's, to every one
                results.put(index, chunk)
            todo = np.flatnonzero(~results.filled)
            bar.update(n_traced - todo.size)
            binary, branches = _reuse_rollouts(config, mode)
            size, batch = _chunk_shape(n_traced, config, settings, branches)
            pending = None  # the chunk in flight: the next one is dispatched before it is saved

            def finish(done, out, g=g, results=results):
                gathered = interruptible(lambda: gather_processes(out, tiled=True))  # Ctrl-C: at once
                chunk = {k: v[: done.size] for k, v in gathered.items()}
                if store is not None:
                    store.save(g, done, chunk)
                results.put(done, chunk)
                bar.update(done.size)

            # compiles on the first call: in a thread, so that Ctrl-C is not held off
            def launch(params, config=config, batch=batch, binary=binary):
                return interruptible(
                    lambda: run_chunk(config, params, np.uint32(seed), steps, mode, decimate, batch, seeds, binary)
                )

            for start in range(0, todo.size, size):
                index = todo[start : start + size]
                padded = np.concatenate([index, np.full(size - index.size, index[0])])
                try:
                    params = {k: shard_batch(v[padded].astype(_dtype(k, config))) for k, v in params_all.items()}
                    launched = (index, launch(params))
                except BaseException as exc:  # an error while dispatching: keep the chunk already done
                    if pending is not None and (not isinstance(exc, KeyboardInterrupt) or _done_soon(pending[1])):
                        finish(*pending)  # on Ctrl-C only if it is done within `PENDING_WAIT_S`
                    raise
                if pending is not None:
                    finish(*pending)
                pending = launched
            if pending is not None:
                finish(*pending)
            groups.append(results.arrays)
    finally:
        bar.close()  # before any error message: it must not be glued onto the bar's line
    result = _assemble(groups, traced, static, spec)
    if store is not None:
        store.finish(result, progress)
    return result


def check_sweep(
    base: dict,
    axes: Sequence[Axis],
    **settings,
) -> None:
    """Validate a sweep as `run_sweep` would (every setting, every grid value, every static group's configuration)
    without running or creating anything.

    Args:
        base: `bandit.config` keyword arguments of the fixed parameters.
        axes: the grid, one `Axis` per swept parameter.
        **settings: the fields of `SweepSettings`.

    Raises:
        SweepError: an invalid grid; `PgrpoSimError` for a setting out of its range.
    """
    _plan(base, axes, SweepSettings(**settings))


CSV_WIDTHS = {"f4": 12, "f8": 20, "i": 4}
"""Typical characters of a value in `summary.csv` (with its comma), by dtype: a float32 in its shortest round-trip
form, e.g. 0.20096147 or 2.5774158e-9; a float64; a small integer (a regime code, a step)."""


def output_bytes(
    base: dict,
    axes: Sequence[Axis],
    **settings,
) -> dict[str, int]:
    """About how many bytes a sweep kept in a folder (`ps.ChunkStore`) writes, validated as `check_sweep`. The fields
    and their dtypes are the summaries' own (traced, not run); the CSV's widths are typical ones (`CSV_WIDTHS`, each
    coordinate's from its values).

    Args:
        base: `bandit.config` keyword arguments of the fixed parameters.
        axes: the grid, one `Axis` per swept parameter.
        **settings: the fields of `SweepSettings`.

    Returns:
        Bytes by output: {"summary.csv", "sweep.nc", "chunks"}, all on disk at once before the chunks are removed.
    """
    settings = SweepSettings(**settings)
    steps, mode, seeds, decimate = settings.steps, settings.mode, settings.seeds, settings.decimate
    _, _, _, configs = _plan(base, axes, settings)
    runs = (1, seeds) if mode == "sampled" else (1,)
    curves = jax.ShapeDtypeStruct((steps + 1, *runs), configs[0].rewards.dtype)
    flags = jax.ShapeDtypeStruct(runs, bool), jax.ShapeDtypeStruct(runs, jnp.int32)
    fields = jax.eval_shape(lambda c, d, s: _summarize_batch(c, d, s, mode, decimate), curves, *flags)
    per_point = sum(f.dtype.itemsize * math.prod(f.shape[1:]) for f in fields.values())
    row = sum(CSV_WIDTHS.get(f.dtype.str[1:], CSV_WIDTHS["i"]) for k, f in fields.items() if k != "trajectory")
    for a in axes:  # each coordinate's typical width, from up to 1000 of its values
        row += int(np.mean([len(repr(v)) for v in a.values[:: max(1, a.size // 1000)]])) + 1
    n, coords = math.prod(a.size for a in axes), 8 * sum(a.size for a in axes)
    return {"summary.csv": n * row, "sweep.nc": n * per_point + coords, "chunks": n * (per_point + 8)}  # + index


def _plan(base: dict, axes: Sequence[Axis], settings: SweepSettings):
    """Validate everything, before anything is created: a sweep that fails validation leaves no trace.
    Returns the spec, the traced and static axes and one configuration per static group."""
    steps, mode, seeds, seed, chunk_size, max_memory, decimate = settings
    check_steps(steps)
    check_seeds(seeds)
    check_seed(seed)
    check_range("decimate", decimate, 0, integer=True)
    check_choice("mode", mode, ("expected", "sampled"))
    check_range("chunk_size", chunk_size, 1, integer=True)
    check_range("max_memory", max_memory, 0.0, low_open=True)
    if mode == "sampled" and seeds < 2:
        raise SweepError(
            "a sampled sweep needs seeds >= 2: its regimes are judged on the seed-mean curve against the "
            f"standard error across seeds; got seeds {seeds}"
        )
    check_settings(base)
    if isinstance(axes, (Axis, str)) or not all(isinstance(a, Axis) for a in axes):
        raise SweepError("axes must be a list of Axis (parse_axis reads 'learning_rate=log:0.001:1:50')")
    if not axes:
        raise SweepError("a sweep needs at least one grid axis")
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise SweepError(f"each parameter may have one grid axis, got {names}")
    for a in axes:
        if a.name in base:
            raise SweepError(f"{a.name} is both fixed and a grid axis")
    spec = SweepSpec(
        base=dict(base), axes=[a.spec for a in axes], steps=steps, mode=mode, seeds=seeds, seed=seed, decimate=decimate
    )
    try:
        spec.to_json()
    except TypeError as exc:
        raise SweepError(
            f"the fixed settings must be numbers, strings or arrays to be saved with the sweep: {exc}"
        ) from None
    traced = [a for a in axes if a.name in TRACED_AXES]
    static = [a for a in axes if a.name in STATIC_AXES]
    configs = _group_configs(base, traced, static)
    try:
        for config in configs:  # static groups differ in group size, mini-batches: so may the rollouts enumerated
            check_mode(config, mode)
    except PgrpoSimError as exc:
        raise SweepError(str(exc)) from None
    return spec, traced, static, configs


def _group_configs(base: dict, traced: Sequence[Axis], static: Sequence[Axis]) -> list[bandit.Config]:
    """One validated `bandit.Config` per combination of static axis values (every grid value range-checked)."""
    for a in static:
        try:
            hyperparameter(a.name).check(np.asarray(a.values))
        except PgrpoSimError as exc:
            raise SweepError(f"grid axis {a.spec!r}: {exc}") from None
    configs = []
    for static_index in list(np.ndindex(*[a.size for a in static])) if static else [()]:
        fixed = dict(base)
        fixed.update({a.name: a.values[i] for a, i in zip(static, static_index, strict=True)})
        lag_axis = next((a for a in traced if a.name == "lag"), None)
        if lag_axis is not None:
            fixed["max_lag"] = max(max(lag_axis.values), 0)
        try:
            config = bandit.config(**fixed)
        except ValueError as exc:
            raise SweepError(str(exc)) from None
        _check_grid_values(traced, config)
        configs.append(config)
    return configs


class _Results:
    """Per-configuration results of one static group, filled chunk by chunk in any order."""

    def __init__(self, n: int):
        self.arrays: dict[str, np.ndarray] = {}
        self.filled = np.zeros(n, bool)

    def put(self, index: np.ndarray, chunk: dict[str, np.ndarray]) -> None:
        for k, v in chunk.items():
            if k not in self.arrays:
                self.arrays[k] = np.zeros((self.filled.size, *v.shape[1:]), v.dtype)
            self.arrays[k][index] = v
        self.filled[index] = True


def _check_grid_values(traced: Sequence[Axis], config: bandit.Config) -> None:
    """Validate every grid value eagerly: its range from the hyperparameter table (all values at once), and
    the configuration's cross-field rules (e.g. lag 0 without a lag model) at each float axis's extremes and at
    every value of an integer axis (a lag must be a multiple of the mini-batches)."""
    for a in traced:
        values = np.asarray(a.values)
        row = hyperparameter(a.name)
        try:
            row.check(values)
            for v in np.unique(values).tolist() if row.integer else {values.min().item(), values.max().item()}:
                set_hyperparameters(config, {a.name: v})
        except PgrpoSimError as exc:
            raise SweepError(f"grid axis {a.spec!r}: {exc}") from None


def _dtype(name: str, config: bandit.Config) -> np.dtype:
    """The NumPy dtype of a traced axis's values (converted on the host: on the device each conversion compiles)."""
    return np.dtype(np.int32 if name == "lag" else config.rewards.dtype)


PENDING_WAIT_S = 1.0
"""How long Ctrl-C waits for the chunk in flight to be done, to keep it (seconds)."""


def _done_soon(out: dict) -> bool:
    """Whether a dispatched chunk's results are computed within `PENDING_WAIT_S`."""
    import time

    arrays = [x for x in jax.tree.leaves(out) if isinstance(x, jax.Array)]
    deadline = time.monotonic() + PENDING_WAIT_S
    while not all(x.is_ready() for x in arrays):  # pyright: ignore[reportAttributeAccessIssue]  # jax.Array's stub lacks it
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _assemble(groups: list[dict[str, np.ndarray]], traced: Sequence[Axis], static: Sequence[Axis], spec: SweepSpec):
    """Stack per-group results into a `SweepResult`, one array dimension per grid axis (static axes first)."""
    axes = grid_axes(list(static) + list(traced))
    shape = [a.size for a in axes]
    fields = {}
    for field in groups[0]:
        stacked = np.stack([g[field] for g in groups])
        fields[field] = stacked.reshape(shape + list(stacked.shape[2:]))
    return SweepResult(fields, axes, spec)
