"""`pgrpo-sim simulate`: one bandit configuration, expected or sampled, to a CSV of per-step read-outs (the
language-model level's `--model lm` is `lm`)."""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from ..base.checks import check_seed, check_seeds, check_steps
from ..base.progress import report
from ..models.bandit.readouts import TABLE_READOUTS
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from .bandit_flags import add_bandit_args, config_from_flags, refuse_unused_seeds
from .common import (
    IMAGE_SUFFIXES,
    MODE_HELP,
    MODES,
    check_file_outputs,
    check_memory,
    describe,
    integer,
    plot,
    write_table,
)
from .lm import add_model_args

SIMULATE_COLUMNS = ("step", "reward", "reward_std", *TABLE_READOUTS[1:])
"""The columns of `simulate`'s table: the step, the reward and its spread over seeds, the other read-outs."""


def _cmd_simulate(args: argparse.Namespace) -> None:
    from .lm import refuse_lm_flags, simulate_lm

    if args.model == "lm":
        return simulate_lm(args, IMAGE_SUFFIXES)
    refuse_lm_flags(args)
    import jax

    from ..models.bandit import STEP_READOUTS, simulate_in_chunks
    from ..viz.figures import plot_reward_curve

    check_steps(args.steps)
    check_seeds(args.seeds)
    refuse_unused_seeds(args)
    check_seed(args.seed)
    # every read-out of every run and step is held, on the device and again as float64 on the host; expected
    # mode is one run whatever --seeds says
    runs = args.seeds if args.mode == "sampled" else 1
    check_memory(
        "simulate: --seeds × --steps",
        runs * (args.steps + 1) * len(STEP_READOUTS) * 12,
        "read-outs",
        "fewer seeds or steps (a sweep streams its summaries: pgrpo-sim sweep)",
    )
    config = config_from_flags(args)
    check_file_outputs(args)
    # stage lines only for a long run (about a second or more of simulation): a short one is over before they help
    progress = stage_lines("simulate", enabled=not args.quiet and runs * args.steps >= 100_000)
    report(progress, f"compiling and simulating {args.steps} steps × {runs} run(s)")
    # in pieces of steps: Ctrl-C stops a long run within a second or two
    run = simulate_in_chunks(config, args.steps, mode=args.mode, seeds=args.seeds, key=jax.random.key(args.seed))
    report(progress, "writing")
    reward = np.atleast_2d(np.asarray(run.reward))
    diverged = np.atleast_1d(np.asarray(run.diverged))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one seed: no degrees of freedom
        # across seeds, as `from_run`: undefined (NaN) for one sampled seed; 0 for the exact expected-mode run
        spread = reward.std(0, ddof=1) if args.mode == "sampled" else np.where(np.isnan(reward[0]), np.nan, 0.0)
        table = {"step": np.arange(args.steps + 1), "reward": reward.mean(0), "reward_std": spread}
        for name in SIMULATE_COLUMNS[3:]:
            table[name] = np.atleast_2d(np.asarray(getattr(run, name))).mean(0)
    rows = np.column_stack([table[c] for c in SIMULATE_COLUMNS])
    with staged_outputs() as staged:
        write_table(staged, args.out, SIMULATE_COLUMNS, rows, integer_first=True)
        if args.plot:
            figure = staged.file(args.plot)
            plot(plot_reward_curve, table["step"], table["reward"], table["reward_std"], figure, title=describe(args))
    n_div = int(diverged.sum())
    final = "diverged" if n_div == diverged.size else f"{np.nanmean(reward[~diverged, -1]):.6f}"
    print(f"final reward {final}; {n_div} of {diverged.size} run(s) diverged; wrote {args.out}")


def add_parser(sub) -> None:
    """`pgrpo-sim simulate`."""
    p = sub.add_parser("simulate", help="run the softmax-bandit GRPO environment or the small language model")
    add_model_args(p)
    add_bandit_args(p)
    p.add_argument("--steps", type=integer, default=1000, help="optimiser steps (>= 1)")
    p.add_argument("--mode", choices=MODES, default="expected", help=MODE_HELP)
    p.add_argument("--seeds", type=integer, default=64, help="independent seeds in sampled mode (>= 1)")
    p.add_argument("--seed", type=integer, default=0, help="PRNG seed (>= 0)")
    p.add_argument("--out", required=True, help="CSV file, one row per step")
    p.add_argument("--plot", default=None, help="figure of the reward curve (mean ± std band): .png, .pdf or .svg")
    p.add_argument("--overwrite", action="store_true", help="replace existing --out and --plot files")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_cmd_simulate)
