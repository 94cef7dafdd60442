"""`pgrpo-sim sweep` and `pgrpo-sim phase-diagram`: grids of bandit configurations, resumable chunks, and the
regime map with the theory's predicted boundaries."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..analysis.sweep_grid import SweepSettings, axis_name
from ..base.checks import check_range, check_seed, check_seeds, check_steps
from ..base.progress import duration_text, report
from ..base.serialise import json_text
from ..base.sharding import agree
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from ..runtime.tables import write_csv
from .bandit_flags import (
    add_bandit_args,
    check_clip_order,
    check_kl_clamp,
    population_args,
    refuse_unused_seeds,
    rollout_args,
)
from .common import (
    MODE_HELP,
    MODES,
    UsageError,
    add_output_args,
    check_memory,
    claim,
    describe,
    finite_float,
    flag_of,
    integer,
    plot,
    wrote,
)
from .lm import add_model_args
from .outputs import check_output_dir, command_settings

SETTINGS = SweepSettings._field_defaults
"""The library's sweep defaults (the command line's --steps, 2000, is its own: the library has none)."""

GRID_FLAGS = {"lag": ("lag", "num_iterations"), "minibatches": ("steps_per_generation",)}
"""The flags that set a parameter (a grid axis, a searched name), where they are not the flag of the same name."""


def refuse_flags_setting(args: argparse.Namespace, name: str, role: str) -> None:
    """A `UsageError` if the command line gave a flag that sets `name`, which the command varies itself (`role`)."""
    for dest in GRID_FLAGS.get(name, (name,)):
        if dest in getattr(args, "explicit", ()):
            raise UsageError(f"{flag_of(args, dest)} sets {name}, {role}")


def _sweep_base(args: argparse.Namespace, axes) -> dict:
    """bandit.config keyword arguments for the parameters that are not grid axes (explicit flags only for
    optional ones)."""
    base = {
        "n_arms": args.arms,
        "n_correct": args.correct,
        "n_prompts": args.prompts,
        "learning_rate": args.learning_rate,
        "momentum": args.momentum,
        "beta": args.beta,
        "num_generations": args.num_generations,
        "kl": args.kl,
        "epsilon": args.epsilon,
        "optimizer": args.optimizer,
        **rollout_args(args),
        **population_args(args),
    }
    optional = {
        "kl_clamp": args.kl_clamp,
        "epsilon_high": args.epsilon_high,
        "dual_clip": args.dual_clip,
        "max_grad_norm": args.max_grad_norm,
    }
    base.update({k: v for k, v in optional.items() if v is not None})
    for axis in axes:
        refuse_flags_setting(args, axis.name, f"a grid axis here ({axis.spec}): drop one")
        base.pop(axis.name, None)
    values = {a.name: np.asarray(a.values) for a in axes}
    check_clip_order(values.get("epsilon", args.epsilon), values.get("epsilon_high", args.epsilon_high))
    check_kl_clamp(args.kl, values.get("kl_clamp", args.kl_clamp))
    if "ref_sync_alpha" in values and args.ref_sync_steps is None:
        raise UsageError("grid axis ref_sync_alpha sets the mix at each KL reference sync: it needs --ref-sync-steps S")
    if any(a.name == "lag" for a in axes):
        base.pop("lag", None)
        if base["lag_model"] == "none":
            raise UsageError("grid axis lag needs --lag-model stale or refresh")
    return base


SWEEP_OUTPUTS = ("sweep.json", "sweep.nc", "summary.csv", "chunks")


PHASE_OUTPUTS = (*SWEEP_OUTPUTS, "phase.png", "phase.pdf", "summary.json")


def _check_sweep_flags(args: argparse.Namespace) -> None:
    check_steps(args.steps)
    check_seeds(args.seeds)
    refuse_unused_seeds(args)
    check_seed(args.seed)
    check_range("chunk_size", args.chunk_size, 1, integer=True)
    check_range("max_memory", args.max_memory, 0.0, low_open=True)
    check_range("save_trajectories", args.save_trajectories, 0, args.steps, integer=True)  # beyond: step 0 only
    _check_process_flags(args)


def _check_process_flags(args: argparse.Namespace) -> None:
    """--coordinator, --num-processes and --process-id: all three or none, in range; with them, join the multi-host
    run (`jax.distributed.initialize`), which must come before the first JAX computation — the sweep's checks."""
    multi = (args.num_processes, args.process_id)
    if args.coordinator is None and any(v is not None for v in multi):
        raise UsageError("--num-processes and --process-id need --coordinator HOST:PORT (a multi-host run)")
    if args.coordinator is not None:
        if None in multi:
            raise UsageError("--coordinator needs --num-processes and --process-id")
        host, _, port = args.coordinator.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"--coordinator must be HOST:PORT (process 0's address), got {args.coordinator!r}")
        check_range("--num-processes", args.num_processes, 1, integer=True)
        check_range("--process-id", args.process_id, 0, args.num_processes - 1, integer=True)
        import jax

        try:
            jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        except Exception as exc:  # JAX's own errors are multi-line (XLA status, a traceback of its service)
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(
                f"--coordinator {args.coordinator}: process {args.process_id} of {args.num_processes} could not join "
                f"the multi-host run: {reason}"
            ) from None


def _sweep_kwargs(args: argparse.Namespace) -> dict:
    return dict(
        steps=args.steps,
        mode=args.mode,
        seeds=args.seeds,
        seed=args.seed,
        chunk_size=args.chunk_size,
        max_memory=args.max_memory,
        decimate=args.save_trajectories,
    )


def _check_sweep(args: argparse.Namespace, base: dict, axes) -> None:
    """Validate the whole sweep as it will run (every setting and grid value), and the size of its files
    (`_check_size`). Creates nothing."""
    from ..analysis.sweep import SweepError, output_bytes

    try:
        sizes = output_bytes(base, axes, **_sweep_kwargs(args))  # validates as `check_sweep`
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    _check_size(args, args.command, sizes)


CONFIRM_BYTES = 1e9
"""Sweeps that write more than this (bytes) run only with --yes."""
CONFIRM_SECONDS = 3600.0
"""Sweeps estimated to run longer than this (seconds) run only with --yes."""


def _check_size(args: argparse.Namespace, command: str, sizes: dict, seconds: float | None = None) -> str:
    """A sweep's files (bytes by output) and estimated run time (seconds; None: no estimate): refused if the files
    would not fit in the free space of --out's disk, and above `CONFIRM_BYTES` or `CONFIRM_SECONDS` without --yes.
    Returns the estimate as words, for a progress line."""
    import shutil

    total, where = sum(sizes.values()), Path(args.out).absolute()
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    parts = ", ".join(f"{name} {_size_text(size)}" for name, size in sizes.items())
    if total > free:
        raise UsageError(
            f"{command}: its files need about {_size_text(total)} ({parts}), more than the "
            f"{free / 1e9:.3g} GB free in {where}: a smaller grid, or another --out"
        )
    need = f"its files need about {_size_text(total)} ({parts})"
    if seconds is not None:
        need += f" and its runs roughly {duration_text(seconds)} on this machine's CPU"
    if (total > CONFIRM_BYTES or (seconds or 0.0) > CONFIRM_SECONDS) and not args.yes:
        raise UsageError(f"{command}: {need}: pass --yes to run it")
    return need


def _size_text(size: float) -> str:
    """Bytes as kB, MB or GB (3 significant digits; GB from 1 GB on)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size / 1e3:.3g} kB"


class _KeptNote:
    """The interrupt line's note of a resumable sweep, worded when it is printed: how many finished pieces
    (`count()`) are kept in `chunks`, a folder that exists then, or that none had finished."""

    def __init__(self, chunks: Path, count, unit: str) -> None:
        self.chunks, self.count, self.unit = chunks, count, unit

    def __str__(self) -> str:
        done = self.count() if self.chunks.is_dir() else 0
        if done:
            return f"the finished {self.unit}s are kept in {self.chunks} ({done}); rerun the same command to resume"
        return f"no {self.unit} had finished, so none is kept; rerun the same command to start again"


def _claim_sweep(args: argparse.Namespace, staged, command: str, outputs: Sequence[str]) -> Path | None:
    """Claim --out for a checked sweep (`_check_sweep`): the last step before its first chunk. Returns the folder
    for its final files (`claim`; None on the processes of a multi-host run that do not write)."""
    import jax

    def claimed() -> Path | None:
        if jax.process_index() != 0:  # a multi-host run's process 0 checks and writes --out
            return None
        check_output_dir(args.out, command, overwrite=args.overwrite, settings=command_settings(args))
        stage = claim(args, staged, command, outputs, resumable=True)
        chunks = Path(args.out) / "chunks"
        args.interrupt_note = _KeptNote(chunks, lambda: len(list(chunks.glob("g*_*.npz"))), "chunk")
        return stage

    return agree(claimed)  # process 0 refused --out: every process stops


def _run_sweep_command(args: argparse.Namespace, base: dict, axes, results: Path | None):
    """The sweep's `SweepResult`: its chunks kept in --out as they finish, its final files written to `results`."""
    from ..analysis.sweep import OtherSweepError, SweepError, compute_sweep
    from ..runtime.sweep_store import ChunkStore

    store = ChunkStore(args.out, overwrite=args.overwrite, results_dir=results)
    try:
        return compute_sweep(base, axes, store=store, progress=not args.quiet, **_sweep_kwargs(args))
    except OtherSweepError:
        raise UsageError(f"--out {args.out} holds a different sweep; use --overwrite or another --out") from None
    except SweepError as exc:
        raise UsageError(str(exc)) from None


def _parse_axes(specs: Sequence[str]):
    from ..analysis.sweep import SweepError, parse_axis

    try:
        return [parse_axis(spec) for spec in specs]
    except SweepError as exc:
        raise UsageError(str(exc)) from None


def _cmd_sweep(args: argparse.Namespace) -> None:
    from .lm import refuse_lm_flags

    if args.model == "lm":
        return _cmd_sweep_lm(args)
    refuse_lm_flags(args)
    _check_sweep_flags(args)
    axes = _parse_axes(args.grid)
    if not axes:
        raise UsageError("sweep: give at least one --grid name=values")
    base = _sweep_base(args, axes)
    agree(lambda: _check_sweep(args, base, axes))  # one host's free disk may refuse: every process stops
    with staged_outputs() as staged:
        stage = _claim_sweep(args, staged, "sweep", SWEEP_OUTPUTS)
        result = _run_sweep_command(args, base, axes, stage)
    if stage is not None:  # a multi-host run's process 0 wrote the files; the others say nothing
        print(f"{result.size} grid points; wrote {args.out}/sweep.nc and {args.out}/summary.csv")


LM_OUTPUTS = ("summary.csv", "curves.csv", "sweep.json", "README.md", "chunks")
"""What `sweep --model lm` writes in --out (`chunks/`: its finished grid points, until it ends)."""


def _cmd_sweep_lm(args: argparse.Namespace) -> None:
    """`sweep --model lm`: every --grid point × --seeds runs (`analysis.lm_sweep.sweep_rows`); --out gets
    summary.csv, curves.csv, sweep.json and README.md (`runtime.sweep_store.write_lm_sweep`). Checked first as the
    bandit's sweep is (`_check_size`: the files, and the runs' estimated time on CPU); finished points are kept in
    --out/chunks as they finish, so a rerun of the same command resumes, and removed once the sweep ends. A
    multi-host run (--coordinator, --num-processes, --process-id, as the bandit's sweep) spreads the grid points over
    its processes, one point per process at a time; process 0 keeps the finished points and writes --out, the others
    write nothing."""
    import shutil

    import jax

    from ..analysis import lm_sweep
    from ..models.lm import READOUTS
    from ..runtime.sweep_store import PointFolder, write_lm_sweep
    from .lm import LM_SWEEP, SWEEP_FLAGS, refuse_bandit_flags, run_size

    refuse_bandit_flags(args, SWEEP_FLAGS | {"yes"})
    _check_process_flags(args)
    settings = lm_sweep.parse_settings(args.set)
    grid = lm_sweep.parse_grid(args.grid)
    if not grid:
        raise UsageError("sweep --model lm: give at least one --grid KEY=V1,V2,…")
    steps, seeds = run_size(args)
    points = lm_sweep.grid_points(settings, grid)  # every point checked before anything is created
    writer = jax.process_index() == 0

    def checked() -> str:  # on every process (each host's memory and disk); --out on process 0
        if writer:
            check_output_dir(args.out, LM_SWEEP, overwrite=args.overwrite, settings=command_settings(args))
        runs = len(points) * seeds * steps
        check_memory(LM_SWEEP, runs * (len(READOUTS) * 8 + 24), "read-outs", "fewer grid points, seeds or steps")
        work = lm_sweep.sweep_flops(settings, grid, seeds=seeds, steps=steps)
        seconds = work / lm_sweep.CPU_FLOPS if jax.default_backend() == "cpu" else None
        return _check_size(args, LM_SWEEP, lm_sweep.lm_output_bytes(grid, seeds=seeds, steps=steps), seconds)

    need = agree(checked)  # a refusal on any process stops every process
    progress = stage_lines("sweep", enabled=not args.quiet)
    report(progress, f"{len(points)} grid point(s) × {seeds} seed(s) × {steps} steps: {need}")
    if not writer:  # a multi-host run's other processes: their points, shared with process 0
        agree(lambda: None)  # process 0's claim of --out
        lm_sweep.sweep_rows(settings, grid, seeds=seeds, steps=steps, seed=args.seed, progress=progress)
        return
    out = Path(args.out)
    with staged_outputs() as staged:
        results = agree(lambda: claim(args, staged, LM_SWEEP, LM_OUTPUTS, resumable=True))
        finished = lambda: len(list((out / "chunks").glob("point-*.npz")))  # temporary files are hidden
        args.interrupt_note = _KeptNote(out / "chunks", finished, "grid point")
        rows, curves = lm_sweep.sweep_rows(
            settings,
            grid,
            seeds=seeds,
            steps=steps,
            seed=args.seed,
            store=PointFolder(out / "chunks"),
            progress=progress,
        )
        report(progress, "writing")
        spec = dict(model="lm", settings=settings, grid=grid, seeds=seeds, steps=steps, seed=args.seed, points=points)
        write_lm_sweep(results, list(grid), rows, curves, spec)
    shutil.rmtree(out / "chunks", ignore_errors=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in dict.fromkeys(r["verdict"] for r in rows)}
    verdicts = ", ".join(f"{n} {v}" for v, n in counts.items())
    print(f"{len(points)} grid point(s) × {seeds} seed(s): {verdicts}; {wrote(out, LM_OUTPUTS)}")


DEFAULT_PHASE_GRIDS = {
    "learning_rate": "learning_rate=log:1e-3:1:48",
    "lag": "lag=0:12",
    "momentum": "momentum=0:0.99:34",
}


def _cmd_phase_diagram(args: argparse.Namespace) -> None:
    from ..analysis.boundaries import phase_boundaries
    from ..analysis.phase import agreement, predict_cells
    from ..analysis.sweep import grid_axes
    from ..viz.figures import plot_phase_diagram

    _check_sweep_flags(args)
    axes = _parse_axes(args.grid)
    given = {a.name for a in axes}
    args.x, args.y = axis_name(args.x), axis_name(args.y)  # as --grid reads an axis's name
    for name in (args.x, args.y):
        if name not in given:
            if name not in DEFAULT_PHASE_GRIDS:
                raise UsageError(
                    f"phase-diagram: give --grid for {name} (defaults exist for {', '.join(DEFAULT_PHASE_GRIDS)})"
                )
            axes += _parse_axes([DEFAULT_PHASE_GRIDS[name]])
    if {a.name for a in axes if a.size > 1} != {args.x, args.y} or args.x == args.y:
        raise UsageError("phase-diagram: the grid must vary exactly --x and --y")
    base = _sweep_base(args, axes)
    agree(lambda: _check_sweep(args, base, axes))
    # the predictions first: a configuration the theory cannot describe is refused before the sweep runs
    ordered = grid_axes(axes)
    prediction = predict_cells(base, {a.name: np.asarray(a.values) for a in ordered})
    if not prediction.valid.any():
        raise UsageError(
            "phase-diagram: no cell of the grid has an interior fixed point with K > 0 (at beta = 0 the policy "
            "runs to the boundary), so the theory predicts no regime to compare with; give --beta > 0"
        )
    with staged_outputs() as staged:
        stage = _claim_sweep(args, staged, "phase-diagram", PHASE_OUTPUTS)
        result = _run_sweep_command(args, base, axes, stage)
        if stage is None:  # a multi-host run's other processes: process 0 draws and writes
            return
        ds = result.to_dataset()
        kept = [a.name for a in ordered if a.size > 1]
        ds = ds.squeeze(drop=False)
        assert list(ds["regime"].dims) == kept, (ds["regime"].dims, kept)
        prediction = type(prediction)(*(np.reshape(v, ds["regime"].shape) for v in prediction))
        summary = agreement(ds["regime"].values, prediction)
        target = stage
        boundaries = phase_boundaries(
            ds, args.x, args.y
        )  # None unless both axes are among learning_rate, momentum, lag
        title = describe(args, swept=(args.x, args.y))
        figure = str(target / "phase")
        plot(plot_phase_diagram, ds, prediction, args.x, args.y, figure, boundaries=boundaries, title=title)
        _write_phase_tables(target, ds, prediction, summary)
    stem = str(Path(args.out) / "phase")
    print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))
    if summary["cells_without_prediction"]:
        print(
            f"note: {summary['cells_without_prediction']} of {summary['cells']} cells have no interior fixed point "
            "(no predicted regime); the agreements are over the other cells"
        )
    print(f"wrote {stem}.png, {stem}.pdf, {args.out}/summary.json, {args.out}/summary.csv, {args.out}/sweep.nc")


def _write_phase_tables(out: Path, ds, prediction, summary: dict) -> None:
    from ..base.regimes import DISCRETE_REGIMES

    names = np.asarray((*DISCRETE_REGIMES, "none"))  # "none": no prediction (code -1)
    table = ds.drop_vars(["trajectory", "step"], errors="ignore")  # one row a cell
    table["regime_name"] = (ds["regime"].dims, names[ds["regime"].values])
    for name in ("continuous", "discrete"):
        codes = np.where(prediction.valid, getattr(prediction, name), -1)
        table[f"predicted_{name}"] = (ds["regime"].dims, names[codes])
    table["damping_ratio_predicted"] = (ds["regime"].dims, prediction.damping_ratio)
    table["spectral_radius_predicted"] = (ds["regime"].dims, prediction.radius)
    try:
        write_csv(table.to_dataframe(), Path(out) / "summary.csv")
        (Path(out) / "summary.json").write_text(json_text(summary, indent=2))
    except OSError as exc:
        raise UsageError(f"cannot write to {out}: {exc.strerror}") from None


def add_parsers(sub) -> None:
    """`pgrpo-sim sweep` and `pgrpo-sim phase-diagram`."""
    for name, help_text in (
        ("sweep", "run the bandit or the small language model over a hyperparameter grid (resumable)"),
        ("phase-diagram", "regime map of a 2-D sweep with the predicted boundaries"),
    ):
        p = sub.add_parser(name, help=help_text)
        if name == "sweep":
            add_model_args(p)
        add_bandit_args(p)
        if name == "phase-diagram":
            p.add_argument("--x", default="learning_rate", help="horizontal axis (a grid parameter or its alias)")
            p.add_argument("--y", default="lag", help="vertical axis (a grid parameter or its alias)")
            # β = 0 has no interior fixed point, so nothing to predict: the phase diagram's default β is 0.5
            p.set_defaults(lag_model="stale", beta=0.5, func=_cmd_phase_diagram)
        else:
            p.set_defaults(func=_cmd_sweep)
        p.add_argument(
            "--grid",
            action="append",
            default=[],
            metavar="NAME=SPEC",
            help="grid axis: name=v1,v2 | name=start:stop:num | name=log:start:stop:num | name=start:stop",
        )
        p.add_argument("--steps", type=integer, default=2000, help="optimiser steps per run (>= 1)")
        p.add_argument("--mode", choices=MODES, default="expected", help=MODE_HELP)
        p.add_argument(
            "--seeds",
            type=integer,
            default=1,
            help="seeds per grid point in sampled mode (>= 2 there: regimes are judged against their standard error)",
        )
        p.add_argument("--seed", type=integer, default=0, help="PRNG seed (>= 0)")
        p.add_argument(
            "--chunk-size", type=integer, default=None, help="configurations per chunk (overrides --max-memory)"
        )
        p.add_argument(
            "--max-memory", type=finite_float, default=SETTINGS["max_memory"], help="memory budget per chunk in bytes"
        )
        p.add_argument(
            "--save-trajectories",
            type=integer,
            default=0,
            metavar="EVERY",
            help="also store every EVERY-th step of each reward curve (0: none; at most --steps)",
        )
        overwrite = "replace a different sweep or another command's output in --out"
        add_output_args(p, "output directory", overwrite_help=overwrite, quiet_help="no progress bar")
        p.add_argument(
            "--yes", action="store_true", help="run a sweep of more than 1 GB of files or (--model lm) an hour of runs"
        )
        p.add_argument(
            "--coordinator",
            default=None,
            metavar="HOST:PORT",
            help="multi-host run: jax.distributed coordinator address (with --num-processes, --process-id)",
        )
        p.add_argument("--num-processes", type=integer, default=None, help="multi-host run: processes in all (>= 1)")
        p.add_argument(
            "--process-id", type=integer, default=None, help="multi-host run: this process's index (0 … processes − 1)"
        )
