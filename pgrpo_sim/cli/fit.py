"""`pgrpo-sim fit`: the closed-form laws and failure-mode diagnostics of a real training log."""

from __future__ import annotations

import argparse
import warnings

from ..base.progress import report
from ..logs.readers import FORMATS
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from .common import FORMAT_HELP, RUN_HELP, add_output_args, claim, integer, wrote
from .outputs import check_output_dir, command_settings

FIT_OUTPUTS = ("report.md", "fit.json", "fit.png", "diagnostics.png")


def read_log_flags(args: argparse.Namespace):
    """The log named by the command line (`--format`, `--column`); its skipped records are counted in the reports
    and summary lines, so the reader's warning about them is not repeated."""
    from ..logs.readers import parse_column_map, read_log

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*skipped .* record", category=UserWarning)
        return read_log(args.log, args.format, parse_column_map(args.column), run=args.run)


def _cmd_fit(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # least-squares normal equations in float64
    from ..reports.log_report import analyse_log, check_analysis, write_analysis

    log = read_log_flags(args)
    check_analysis(log, metric=args.metric, n_samples=args.samples_per_step)
    check_output_dir(args.out, "fit", overwrite=args.overwrite, settings=command_settings(args))
    progress = stage_lines("fit", enabled=not args.quiet)
    analysis = analyse_log(log, metric=args.metric, n_samples=args.samples_per_step, progress=progress)
    report(progress, "writing the report and figures")
    with staged_outputs() as staged:
        result = write_analysis(analysis, log, claim(args, staged, "fit", FIT_OUTPUTS))
    r2 = ", ".join(f"{law} {'—' if f['r2'] is None else format(f['r2'], '.3f')}" for law, f in result["fits"].items())
    pred = result["prediction"]
    zeta = ""
    if pred["damping_ratio"] is not None:
        err = "—" if pred["damping_ratio_stderr"] is None else f"{pred['damping_ratio_stderr']:.2g}"
        zeta = f" (ζ = {pred['damping_ratio']:.3g} ± {err})"
    if pred.get("regime_reason"):  # why no regime, however tight ζ's error
        zeta += f": {pred['regime_reason']}"
    skipped = result["rows_without_reward"]
    print(
        f"fitted {result['n_points']} points of {result['source']} ({skipped['count']} row(s) without a usable "
        f"reward skipped): R² {r2}; regime {pred['regime']}{zeta}; "
        f"first flag {result['diagnostics']['first'] or 'none'}; {wrote(args.out, FIT_OUTPUTS)}"
    )


def add_parser(sub) -> None:
    """`pgrpo-sim fit`."""
    p = sub.add_parser("fit", help="fit the closed-form laws to a training log and diagnose its failure modes")
    p.add_argument("log", help="TRL trainer_state.json, verl JSONL or console log, JSONL or CSV")
    p.add_argument("--format", choices=("auto", *FORMATS), default="auto", help=FORMAT_HELP)
    p.add_argument("--metric", default="reward", help="canonical metric to fit (reward, eval_reward, true_reward)")
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="read canonical metric NAME from column SOURCE, e.g. reward=train/reward (repeatable)",
    )
    p.add_argument("--run", default=None, metavar="NAME", help=RUN_HELP)
    p.add_argument(
        "--samples-per-step",
        type=integer,
        default=None,
        help="rewards averaged per step (prompts × group size), for the noise level of the fit",
    )
    add_output_args(p, "output directory: report.md, fit.json, fit.png, diagnostics.png")
    p.set_defaults(func=_cmd_fit)
