"""`pgrpo-sim validate`: every claim of the theory against the exact models, in one report."""

from __future__ import annotations

import argparse

from ..base.checks import check_seed
from ..runtime.outputs import staged_outputs
from .common import add_output_args, claim, integer

VALIDATE_OUTPUTS = ("report.md", "results.json", "*.png")


def _cmd_validate(args: argparse.Namespace) -> None:
    from ..reports.validate import validate
    from ..runtime.jax_setup import cpu_cores

    check_seed(args.seed)
    log = lambda line: print(line, flush=True)
    with staged_outputs() as staged:
        stage = claim(args, staged, "validate", VALIDATE_OUTPUTS)
        results = validate(stage, quick=args.quick, seed=args.seed, log=log, workers=cpu_cores())
    held = sum(r["verdict"]["holds"] for r in results.values())
    print(f"{held} of {len(results)} claims hold; wrote {args.out}/report.md and {args.out}/results.json")


def add_parser(sub) -> None:
    """`pgrpo-sim validate`."""
    p = sub.add_parser("validate", help="the theory's claims against exact bandit runs, in one report")
    p.add_argument(
        "--quick",
        action="store_true",
        help="lower resolution (about 3 minutes on 2 CPU cores with an empty cache, most of it the language-model "
        "section)",
    )
    p.add_argument("--seed", type=integer, default=0, help="PRNG seed (>= 0)")
    add_output_args(p, "output directory (default: validation)", default="validation", quiet_help=None)
    p.set_defaults(func=_cmd_validate, compile_bound=True)  # its sections compile in processes, one per core
