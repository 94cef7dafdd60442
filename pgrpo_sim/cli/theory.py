"""`pgrpo-sim theory`, `predict` and `oscillator`: the oscillator's closed forms, the bandit's predicted oscillator,
and the reduced SDE's ensemble."""

from __future__ import annotations

import argparse

import numpy as np

from ..base.checks import check_normal, check_range, check_seed, check_steps
from ..base.serialise import json_text
from ..runtime.outputs import staged_outputs
from .bandit_flags import add_bandit_args, add_oscillator_args, config_from_flags
from .common import (
    UsageError,
    check_file_outputs,
    check_memory,
    finite_float,
    integer,
    plot,
    print_table,
    write_table,
)


def _cmd_theory(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # closed forms are cheap: report them in float64
    from ..models.oscillator import linear, theory

    osc = (args.learning_rate, args.momentum, args.lag, args.stiffness)
    coef = theory.coefficients(*osc)  # the inputs' own ranges first, then the range float64 can compute them in
    theory.check_representable(*osc)
    out = dict(
        mass=float(coef.mass),
        damping=float(coef.damping),
        stiffness=float(coef.stiffness),
        damping_ratio=float(theory.damping_ratio(*osc)),
        natural_frequency=float(theory.natural_frequency(*osc)),
        regime=theory.regime(*osc),
        critical_lag=float(theory.critical_lag(args.learning_rate, args.momentum, args.stiffness)),
    )
    if args.lag != round(args.lag):
        raise UsageError("theory: --lag must be an integer for the exact discrete map")
    radius = {}
    for model in ("stale", "refresh"):
        disc = (args.learning_rate, args.momentum, int(args.lag), args.stiffness)
        radius[model] = out[f"spectral_radius_{model}"] = float(linear.spectral_radius(*disc, lag_model=model))
        out[f"discrete_regime_{model}"] = linear.discrete_regime(*disc, lag_model=model)
    # the slowest multiplier is 1 − Kη/(1−μ) to first order: below float64's spacing at 1 it rounds to 1, and the
    # map would read as unstable whatever its true radius
    shift, eps = args.stiffness * args.learning_rate / (1 - args.momentum), float(np.finfo(np.float64).eps)
    if radius["stale"] >= 1 and shift < eps:
        raise UsageError(
            f"theory: Kη/(1−μ) = {shift:.3g} is below float64's resolution at 1 ({eps:.3g}): the discrete map's "
            "slowest multiplier 1 − Kη/(1−μ) rounds to 1, so its stability cannot be computed; give a larger η or K"
        )
    if (args.noise is None) != (args.num_generations is None):
        raise UsageError("theory: give both --noise and --num-generations for the stationary variance")
    if args.noise is not None:
        out["stationary_variance"] = float(theory.stationary_variance(*osc, args.noise, args.num_generations))
        if float(coef.damping) > 0:  # else +inf by definition: no stationary distribution
            check_normal("stationary variance D/(2GCK)", out["stationary_variance"], np.float64, " at these inputs")
    if args.json:
        print(json_text(out))
    else:
        print_table(out)


def _cmd_predict(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # root-finding and Jacobians in float64
    from ..prediction import predict

    out = predict(config_from_flags(args)).as_dict()
    if args.json:
        print(json_text(out))
    else:
        print_table(out)


def _cmd_oscillator(args: argparse.Namespace) -> None:
    import jax

    from ..models.oscillator import sde, theory
    from ..viz.figures import plot_ensemble

    check_steps(args.steps)
    check_range("paths", args.paths, 1, integer=True)
    given = "sample_paths" in getattr(args, "explicit", ())  # the default (5) shows what --paths has
    check_range("sample_paths", args.sample_paths, 0, args.paths if given else None, integer=True)
    check_seed(args.seed)
    check_range("noise", args.noise, 0.0)
    check_range("num_generations", args.num_generations, 2.0)
    osc = (args.learning_rate, args.momentum, args.lag, args.stiffness)
    theory.check_representable(*osc)
    # every path's value at every step is held, on the device and again on the host
    itemsize = np.dtype(jax.dtypes.canonicalize_dtype(float)).itemsize
    check_memory(
        "oscillator: --paths × --steps", 2 * args.paths * (args.steps + 1) * itemsize, "paths", "fewer paths or steps"
    )
    limit = sde.euler_step_limit(*osc, span=args.steps)
    if limit == 0.0:
        raise UsageError("oscillator: no Euler step down to 2^-30 resolves these dynamics")
    if args.dt is None:
        dt = min(0.25, limit)
    else:
        check_range("dt", args.dt, 0.0, 1.0, low_open=True)
        if args.dt > limit:
            raise UsageError(
                f"dt must be <= {limit:g} for these dynamics (a larger Euler step misses their decay rate or "
                f"frequency by more than 10 %), got {args.dt:g}"
            )
        dt = args.dt
    check_file_outputs(args)
    ts = np.arange(args.steps + 1, dtype=float)
    ens = sde.solve_ensemble(
        ts,
        args.e0,
        args.v0,
        *osc,
        args.noise,
        args.num_generations,
        paths=args.paths,
        key=jax.random.key(args.seed),
        dt=dt,
    )
    shown = min(args.sample_paths, args.paths)
    paths = np.asarray(ens.paths)
    header = ["step", "mean", "std"] + [f"path_{i}" for i in range(shown)]
    rows = np.column_stack([ts, np.asarray(ens.mean), np.asarray(ens.std), paths[:shown].T])
    with staged_outputs() as staged:
        write_table(staged, args.out, header, rows, integer_first=True)
        if args.plot:
            closed = np.asarray(theory.trajectory(ts, args.e0, args.v0, *osc))
            figure = staged.file(args.plot)
            plot(plot_ensemble, ts, np.asarray(ens.mean), np.asarray(ens.std), paths[:shown], closed, figure)
    var = float(theory.stationary_variance(*osc, args.noise, args.num_generations))
    if theory.regime(*osc) == "unstable" or not np.all(np.isfinite(paths)):  # growing without bound: no number
        late = "diverged (unstable: damping C <= 0 at this lag)" if np.isinf(var) else "diverged (overflow)"
    else:
        late = f"late std {paths[:, -1].std():.4g} (stationary {np.sqrt(var):.4g})"
    print(f"{args.paths} paths (Euler step {dt:g}); {late}; wrote {args.out}")


def add_theory_parser(sub) -> None:
    """`pgrpo-sim theory`."""
    p = sub.add_parser("theory", help="closed-form oscillator and exact discrete map for one setting")
    add_oscillator_args(p)
    p.add_argument("--noise", type=finite_float, default=None, help="noise scale D (>= 0)")
    p.add_argument("--num-generations", "--group-size", type=integer, default=None, help="group size G (>= 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_theory)


def add_predict_parsers(sub) -> None:
    """`pgrpo-sim predict` and `pgrpo-sim oscillator`."""
    p = sub.add_parser("predict", help="fixed point, stiffness, noise and oscillator of a bandit configuration")
    add_bandit_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("oscillator", help="ensemble of the reduced SDE M ë + C ė + K e = √(D/G) ξ")
    add_oscillator_args(p)
    p.add_argument("--noise", type=finite_float, required=True, help="noise scale D (>= 0)")
    p.add_argument("--num-generations", "--group-size", type=integer, required=True, help="group size G (>= 2)")
    p.add_argument("--e0", type=finite_float, default=-0.5, help="initial deviation e(0) = p0 - p*")
    p.add_argument("--v0", type=finite_float, default=0.0, help="initial velocity de/dt(0) per step")
    p.add_argument("--steps", type=integer, default=500, help="length in optimiser steps (>= 1)")
    p.add_argument("--paths", type=integer, default=1000, help="number of sample paths (>= 1)")
    p.add_argument(
        "--dt",
        type=finite_float,
        default=None,
        help="Euler–Maruyama step in optimiser steps, in (0, 1] and small enough to resolve the dynamics "
        "(default: 0.25, or the largest power of 2 that resolves them)",
    )
    p.add_argument(
        "--sample-paths", type=integer, default=5, help="sample paths in the CSV (0 … --paths; default 5 or --paths)"
    )
    p.add_argument("--seed", type=integer, default=0, help="PRNG seed (>= 0)")
    p.add_argument("--out", required=True, help="CSV: step, mean, std, path_0, …")
    p.add_argument(
        "--plot", default=None, help="figure (.png, .pdf or .svg): mean ± std, sample paths and the closed form"
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing --out and --plot files")
    p.set_defaults(func=_cmd_oscillator)
