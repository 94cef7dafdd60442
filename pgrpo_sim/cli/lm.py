"""`pgrpo-sim simulate --model lm` and `pgrpo-sim sweep --model lm`: the language-model level on the command line.

Settings are TRL `GRPOConfig` names (and the level's task and model sizes), given as `--set KEY=VALUE` and, for a
sweep, `--grid KEY=V1,V2,…` (`analysis.lm_sweep`). Flags of the bandit do not apply and are refused by name.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence

import numpy as np

from ..base.checks import check_seed, check_seeds, check_steps
from ..base.errors import PgrpoSimError
from ..base.progress import report
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from ..runtime.tables import write_csv
from .common import flag_of
from .outputs import check_distinct_outputs, check_output_file

DEFAULT_STEPS = 100
"""GRPO steps of a language-model run when --steps is not given."""
DEFAULT_SEEDS = 4
"""Seeds of a language-model run (or of each grid point) when --seeds is not given."""
SIMULATE_FLAGS = frozenset({"model", "set", "steps", "seeds", "seed", "out", "plot", "overwrite", "quiet"})
"""The options `simulate --model lm` takes; any other given on the command line is refused."""
SWEEP_FLAGS = frozenset({
    "model", "set", "grid", "steps", "seeds", "seed", "out", "overwrite", "quiet",
    "coordinator", "num_processes", "process_id",
})  # fmt: skip
"""The options `sweep --model lm` takes."""
LM_SWEEP = "sweep --model lm"
"""The command named in an LM sweep's --out mark: not the bandit sweep's, so neither replaces the other's files
without --overwrite."""
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


def refuse_bandit_flags(args: argparse.Namespace, allowed: frozenset) -> None:
    """A `PgrpoSimError` naming the first option given on the command line that `--model lm` does not take."""
    given = sorted(set(getattr(args, "explicit", ())) - allowed)
    if given:
        flag = flag_of(args, given[0])
        raise PgrpoSimError(
            f"{flag} is a bandit flag; with --model lm give settings as --set KEY=VALUE under TRL GRPOConfig names "
            "(e.g. --set learning_rate=3e-3)"
        )


def run_size(args: argparse.Namespace) -> tuple[int, int]:
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
    from ..analysis import lm_sweep
    from ..base.waiting import interruptible
    from ..models import lm

    refuse_bandit_flags(args, SIMULATE_FLAGS)
    settings = lm_sweep.parse_settings(args.set)
    steps, seeds = run_size(args)
    config = lm.config(**settings)
    check_distinct_outputs({"--out": args.out, "--plot": args.plot})
    check_output_file(args.out, "--out", overwrite=args.overwrite)
    if args.plot is not None:
        check_output_file(args.plot, "--plot", image_suffixes, overwrite=args.overwrite)
    progress = stage_lines("simulate", enabled=not args.quiet)
    report(progress, f"SFT start (trained once, then cached), compiling and training {steps} steps × {seeds} seed(s)")
    # waited for in a thread: Ctrl-C stops the run (one compiled call) at once
    run = interruptible(lambda: lm.host_run(lm.run_arrays(lm.simulate(config, steps, seeds=seeds, key=args.seed))))
    report(progress, "writing")
    readouts = {name: np.asarray(value, float) for name, value in run.readouts.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a read-out NaN for every seed (eval between evaluations)
        table = {"step": np.arange(steps)}
        table.update({name: np.nanmean(readouts[name], axis=0) for name in lm.READOUTS})
        table["reward_seed_std"] = np.std(readouts["reward"], axis=0, ddof=1) if seeds > 1 else np.full(steps, np.nan)
    with staged_outputs() as staged:
        write_csv(table, staged.file(args.out))
        if args.plot is not None:
            from ..viz.figures import plot_reward_curve

            title = "language model: " + (", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults")
            plot_reward_curve(table["step"], table["reward"], table["reward_seed_std"], staged.file(args.plot),
                              title=title)  # fmt: skip
    for seed, summary in enumerate(lm_sweep.summarize_runs(run, config)):
        print(f"seed {seed}: {_summary_text(summary)}")
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else ""))


def _summary_text(summary: dict) -> str:
    if summary["verdict"] == "diverges":
        return f"diverged at step {summary['diverged_step']}"
    return (
        f"{summary['verdict']}, final reward {summary['final_reward']:.3f} (peak {summary['peak_reward']:.3f}), "
        f"entropy {summary['final_entropy']:.3f}, mean length {summary['final_mean_length']:.1f}, "
        f"eval accuracy {summary['final_eval_accuracy']:.3f}"
    )
