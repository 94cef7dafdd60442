"""`pgrpo-sim tune`: gradient search for bandit hyperparameters under stability constraints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..analysis.search_settings import OBJECTIVES, OPTIMISER_DEFAULTS, SearchSettings
from ..base.checks import check_range
from ..base.progress import report
from ..base.serialise import json_text
from ..models.bandit.hyperparameters import HYPERPARAMETERS
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from .bandit_flags import add_bandit_args, config_from_flags
from .common import UsageError, add_output_args, claim, finite_float, integer
from .outputs import check_output_dir, command_settings
from .sweep import refuse_flags_setting

TUNE_OUTPUTS = ("summary.json", "convergence.png")
"""What each command writes into its --out directory (removed when another command --overwrite's it)."""


def _int_list(flag: str, text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"tune: {flag} expects comma-separated integers, got {text!r}") from None


BOX_EDGE = 0.01
"""A searched value within this fraction of its box's width (in the box's own scale, logarithmic for η, β, clip) of
a bound counts as on the edge: Adam moves in logit(box coordinate), which reaches the bounds only asymptotically,
so a best point this close to one was still pushing outwards."""


def _box_edges(best: dict, bounds: dict) -> dict[str, str]:
    """The searched names whose `best` value lies on the edge of their search box (`bounds`, else the default box):
    name → "lower" or "upper"."""
    from ..analysis.search import DEFAULT_BOUNDS

    edges = {}
    for name, value in best.items():
        if name not in DEFAULT_BOUNDS:  # an integer outer-grid value (lag, group size): no box
            continue
        scale = np.log if HYPERPARAMETERS[name].log_scale else np.asarray
        low, high = (float(scale(v)) for v in bounds.get(name, DEFAULT_BOUNDS[name]))
        u = (float(scale(value)) - low) / (high - low)
        if u <= BOX_EDGE or u >= 1 - BOX_EDGE:
            edges[name] = "lower" if u <= BOX_EDGE else "upper"
    return edges


def _cmd_tune(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # fixed points, long scans and their gradients in float64
    from ..analysis.search import search, searched_names
    from ..viz.figures import plot_convergence

    check_output_dir(args.out, "tune", overwrite=args.overwrite, settings=command_settings(args))
    check_range("search_lr", args.search_lr, 0.0, low_open=True)
    bounds = {}
    for spec in args.bound:
        name, _, body = spec.partition("=")
        low, sep, high = body.partition(":")
        try:
            bounds[name.strip().replace("-", "_")] = (float(low), float(high))
        except ValueError:
            sep = ""
        if not sep:
            raise UsageError(f"tune: --bound {spec!r}: expected NAME=LOW:HIGH")
    names = None if args.search is None else [n.strip().replace("-", "_") for n in args.search.split(",")]
    if names is not None and not all(names):
        raise UsageError(f"tune: --search {args.search!r}: expected comma-separated names (or leave it out)")
    for name in searched_names(args.objective, names):
        refuse_flags_setting(args, name, f"which tune searches: drop it, or bound it (--bound {name}=LOW:HIGH)")
    progress = stage_lines("tune", enabled=not args.quiet)
    result = search(
        args.objective,
        config_from_flags(args),
        target=args.target,
        search=names,
        bounds=bounds or None,
        steps=args.steps,
        min_damping_ratio=args.min_damping_ratio,
        radius_margin=args.radius_margin,
        restarts=args.restarts,
        iterations=args.iterations,
        learning_rate=args.search_lr,
        lags=_int_list("--lags", args.lags),
        group_sizes=_int_list("--group-sizes", args.group_sizes),
        seed=args.seed,
        progress=progress,
    )
    report(progress, "writing")
    summary = result.summary()
    summary["on_box_edge"] = _box_edges(result.best, bounds)
    if summary["on_box_edge"]:
        summary["warning"] = (
            "the best point lies on the edge of the search box ("
            + ", ".join(f"{k} at its {side} bound" for k, side in summary["on_box_edge"].items())
            + "): the optimum may lie outside it; widen the box with --bound NAME=LOW:HIGH"
        )
        print(f"pgrpo-sim: warning: {summary['warning']}", file=sys.stderr)
    out = Path(args.out)
    try:
        with staged_outputs() as staged:
            stage = claim(args, staged, "tune", TUNE_OUTPUTS)
            (stage / "summary.json").write_text(json_text(summary, indent=2))
            plot_convergence(result, str(stage / "convergence.png"))
    except OSError as exc:
        raise UsageError(f"cannot write to {args.out}: {exc.strerror}") from None
    best = " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.best.items())
    c = result.constraints
    print(f"best {best}: {args.objective} {result.objective_value:.6g} ({result.evaluations} evaluations)")
    print(
        f"at the best point: damping ratio {c['damping_ratio']}, spectral radius {c['spectral_radius']}, "
        f"feasible {c['feasible']}"
    )
    grid = result.summary()["outer_grid"]
    if grid:
        rows = "; ".join(
            ", ".join(f"{k}={row[k]}" for k in grid) + f": {row['objective_value']}" for row in result.outer
        )
        print(f"{', '.join(grid)}: integer, not differentiated: searched as an outer grid ({rows})")
    print(f"wrote {out}/summary.json and {out}/convergence.png")


SETTINGS = SearchSettings._field_defaults
"""The search's settings' defaults (its optimiser's: `OPTIMISER_DEFAULTS`)."""


def add_parser(sub) -> None:
    """`pgrpo-sim tune`."""
    p = sub.add_parser("tune", help="gradient search for hyperparameters of a bandit configuration")
    add_bandit_args(p)
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        required=True,
        help="what to minimise: damping-ratio ((ζ − --target)²), time-to-threshold (the smooth time to --target of "
        "the way from p_ref to p*) or final-reward (its negative)",
    )
    p.add_argument(
        "--target",
        type=finite_float,
        default=None,
        help="damping-ratio: the target ζ (1.0: critical); time-to-threshold: fraction of the way p_ref → p*",
    )
    p.add_argument("--min-damping-ratio", type=finite_float, default=None, help="constraint ζ >= Z")
    p.add_argument(
        "--radius-margin",
        type=finite_float,
        default=SETTINGS["radius_margin"],
        help="constraint: exact discrete spectral radius <= 1 - margin",
    )
    p.add_argument(
        "--search",
        default=None,
        metavar="NAMES",
        help="comma-separated, from learning_rate, momentum, beta, p_ref, epsilon "
        "(default: learning_rate for damping-ratio, else learning_rate,momentum)",
    )
    p.add_argument(
        "--bound", action="append", default=[], metavar="NAME=LOW:HIGH", help="search box of one searched name"
    )
    p.add_argument("--lags", default=None, help="outer grid of integer lags, e.g. 0,1,2 (not differentiated)")
    p.add_argument("--group-sizes", default=None, help="outer grid of group sizes, e.g. 4,8 (not differentiated)")
    p.add_argument(
        "--steps",
        type=integer,
        default=SETTINGS["steps"],
        help="expected-mode steps per evaluation (final-reward: the budget)",
    )
    p.add_argument(
        "--restarts", type=integer, default=OPTIMISER_DEFAULTS["restarts"], help="vmapped restarts (Latin hypercube)"
    )
    p.add_argument(
        "--iterations", type=integer, default=OPTIMISER_DEFAULTS["iterations"], help="Adam iterations per restart"
    )
    p.add_argument(
        "--search-lr",
        type=finite_float,
        default=OPTIMISER_DEFAULTS["learning_rate"],
        help="the search's Adam step, in logit(box coordinate) units (--learning-rate is the run's η)",
    )
    p.add_argument("--seed", type=integer, default=0, help="seed of the restarts")
    add_output_args(p, "output directory: summary.json, convergence.png")
    # β = 0 has no interior fixed point p*, which every objective's stability constraint needs: as phase-diagram's
    p.set_defaults(beta=0.5, func=_cmd_tune)
