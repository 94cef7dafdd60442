"""`pgrpo-sim simulate --model lm` and `pgrpo-sim sweep --model lm`: the language-model level on the command line.

Settings are TRL `GRPOConfig` names (and the level's task and model sizes), given as `--set KEY=VALUE` and, for a
sweep, `--grid KEY=V1,V2,…` (`analysis.lm_sweep`). Flags of the bandit do not apply and are refused by name.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..base.checks import check_seed, check_seeds, check_steps
from ..base.errors import PgrpoSimError
from ..base.outputs import staged_outputs, write_csv
from ..base.progress import report, stage_lines
from .outputs import check_distinct_outputs, check_output_dir, check_output_file

DEFAULT_STEPS = 100
"""GRPO steps of a language-model run when --steps is not given."""
DEFAULT_SEEDS = 4
"""Seeds of a language-model run (or of each grid point) when --seeds is not given."""
SIMULATE_FLAGS = frozenset({"model", "set", "steps", "seeds", "seed", "out", "plot", "overwrite", "quiet"})
"""The options `simulate --model lm` takes; any other given on the command line is refused."""
SWEEP_FLAGS = frozenset({"model", "set", "grid", "steps", "seeds", "seed", "out", "overwrite", "quiet"})
"""The options `sweep --model lm` takes."""
LM_SWEEP = "sweep --model lm"
"""The command named in an LM sweep's --out mark: not the bandit sweep's, so neither replaces the other's files
without --overwrite."""
SWEEP_OUTPUTS = ("summary.csv", "curves.csv", "sweep.json")
"""What `sweep --model lm` writes in --out (besides `chunks/`, its resume state until it ends)."""
MODEL_HELP = (
    "bandit: the softmax bandit; lm: the small language model (settings by --set KEY=VALUE under TRL GRPOConfig "
    f"names; default {DEFAULT_STEPS} steps and {DEFAULT_SEEDS} seeds)"
)
SET_HELP = "a language-model setting under its TRL GRPOConfig name, e.g. learning_rate=3e-3 (repeatable; --model lm)"


def add_model_args(p: argparse.ArgumentParser) -> None:
    """`--model` and `--set` for `simulate` and `sweep` (this module imports nothing heavy until a command runs)."""
    p.add_argument("--model", choices=("bandit", "lm"), default="bandit", help=MODEL_HELP)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def refuse_lm_flags(args: argparse.Namespace) -> None:
    """`--set` belongs to the language model: refused with the bandit."""
    if "set" in getattr(args, "explicit", ()):
        raise PgrpoSimError("--set sets language-model settings: it needs --model lm")


def _refuse_bandit_flags(args: argparse.Namespace, allowed: frozenset) -> None:
    given = sorted(set(getattr(args, "explicit", ())) - allowed)
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise PgrpoSimError(
            f"{flag} is a bandit flag; with --model lm give settings as --set KEY=VALUE under TRL GRPOConfig names "
            "(e.g. --set learning_rate=3e-3)"
        )


def _run_size(args: argparse.Namespace) -> tuple[int, int]:
    """(steps, seeds): the flags if given, else this level's defaults; checked, with the seed."""
    explicit = getattr(args, "explicit", ())
    steps = args.steps if "steps" in explicit else DEFAULT_STEPS
    seeds = args.seeds if "seeds" in explicit else DEFAULT_SEEDS
    check_steps(steps)
    check_seeds(seeds)
    check_seed(args.seed)
    return steps, seeds


def simulate_lm(args: argparse.Namespace, image_suffixes: Sequence[str]) -> None:
    """`simulate --model lm`: one setting, --seeds runs; --out gets one row per GRPO step (each read-out's mean over
    the seeds, and the reward's spread across them), --plot the reward curve."""
    from ..analysis.lm_sweep import parse_settings, summarize_lm_runs
    from ..models.lm import READOUTS, lm_config, lm_simulate

    _refuse_bandit_flags(args, SIMULATE_FLAGS)
    settings = parse_settings(args.set)
    steps, seeds = _run_size(args)
    config = lm_config(**settings)
    check_distinct_outputs({"--out": args.out, "--plot": args.plot})
    check_output_file(args.out, "--out", overwrite=args.overwrite)
    if args.plot is not None:
        check_output_file(args.plot, "--plot", image_suffixes, overwrite=args.overwrite)
    progress = stage_lines("simulate", enabled=not args.quiet)
    report(progress, f"SFT start (trained once, then cached), compiling and training {steps} steps × {seeds} seed(s)")
    run = lm_simulate(config, steps, seeds, key=args.seed)
    report(progress, "writing")
    readouts = {name: np.asarray(value, float) for name, value in run.readouts.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a read-out NaN for every seed (eval between evaluations)
        table = {"step": np.arange(steps)}
        table.update({name: np.nanmean(readouts[name], axis=0) for name in READOUTS})
        table["reward_seed_std"] = np.std(readouts["reward"], axis=0, ddof=1) if seeds > 1 else np.full(steps, np.nan)
    with staged_outputs() as staged:
        write_csv(table, staged.file(args.out))
        if args.plot is not None:
            from ..viz.figures import plot_reward_curve

            title = "language model: " + (", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults")
            plot_reward_curve(table["step"], table["reward"], table["reward_seed_std"], staged.file(args.plot),
                              title=title)  # fmt: skip
    for seed, summary in enumerate(summarize_lm_runs(run, config)):
        print(f"seed {seed}: {_summary_text(summary)}")
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else ""))


def sweep_lm(args: argparse.Namespace) -> None:
    """`sweep --model lm`: every --grid point × --seeds runs; --out gets summary.csv (one row per point and seed),
    curves.csv (every read-out per point, seed and step) and sweep.json (the settings). Finished points are kept in
    --out/chunks as they finish: a rerun of the same command resumes, and they are removed once the sweep ends."""
    from ..analysis.lm_sweep import grid_points, parse_lm_grid, parse_settings, run_lm_sweep

    _refuse_bandit_flags(args, SWEEP_FLAGS)
    settings = parse_settings(args.set)
    grid = parse_lm_grid(args.grid)
    if not grid:
        raise PgrpoSimError("sweep --model lm: give at least one --grid KEY=V1,V2,…")
    steps, seeds = _run_size(args)
    points = grid_points(settings, grid)  # every point checked before anything is created
    check_output_dir(args.out, LM_SWEEP, overwrite=args.overwrite)
    out = Path(args.out)
    progress = stage_lines("sweep", enabled=not args.quiet)
    with staged_outputs() as staged:
        results = staged.directory(out, LM_SWEEP, SWEEP_OUTPUTS, overwrite=args.overwrite, resumable=True)
        args.interrupt_note = f"the finished grid points are kept in {out}/chunks; rerun the same command to resume"
        rows, curves = run_lm_sweep(
            settings, grid, seeds=seeds, steps=steps, seed=args.seed, chunks=out / "chunks", progress=progress
        )
        report(progress, "writing")
        _write_summary(results / "summary.csv", list(grid), rows)
        _write_curves(results / "curves.csv", curves)
        spec = dict(model="lm", settings=settings, grid=grid, seeds=seeds, steps=steps, seed=args.seed)
        (results / "sweep.json").write_text(json.dumps(dict(spec, points=points), indent=2) + "\n")
    shutil.rmtree(out / "chunks", ignore_errors=True)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in dict.fromkeys(r["verdict"] for r in rows)}
    verdicts = ", ".join(f"{n} {v}" for v, n in counts.items())
    print(f"{len(points)} grid point(s) × {seeds} seed(s): {verdicts}; wrote {out}/summary.csv and curves.csv")


def _summary_text(summary: dict) -> str:
    if summary["verdict"] == "diverges":
        return f"diverged at step {summary['diverged_step']}"
    return (
        f"{summary['verdict']}, final reward {summary['final_reward']:.3f} (peak {summary['peak_reward']:.3f}), "
        f"entropy {summary['final_entropy']:.3f}, mean length {summary['final_mean_length']:.1f}, "
        f"eval accuracy {summary['final_eval_accuracy']:.3f}"
    )


def _cell(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return "" if np.isnan(value) else repr(value)
    return str(value)


def _write_summary(path: Path, keys: Sequence[str], rows: Sequence[dict]) -> None:
    from ..analysis.lm_sweep import SUMMARY_FIELDS

    columns = [*keys, "seed", *SUMMARY_FIELDS]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows([_cell(row[c]) for c in columns] for row in rows)


def _write_curves(path: Path, curves: dict[str, np.ndarray]) -> None:
    """Long form: one row per grid point (in summary.csv's order), seed and step, a column per read-out."""
    points, seeds, steps = next(iter(curves.values())).shape
    index = np.indices((points, seeds, steps)).reshape(3, -1)
    table = {"point": index[0], "seed": index[1], "step": index[2]}
    table.update({name: values.reshape(-1) for name, values in curves.items()})
    write_csv(table, path)
