"""The `pgrpo-sim` command line. Bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Sequence

import numpy as np

from .base.checks import describe_range
from .base.errors import PgrpoSimError
from .models.hyperparameters import HYPERPARAMETERS


class UsageError(PgrpoSimError):
    """A user error of the command line itself (flags, files), printed like every `PgrpoSimError`."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        raise UsageError(message)


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _finite_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _add_oscillator_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eta", type=_finite_float, required=True, help="learning rate η (> 0)")
    p.add_argument("--momentum", type=_finite_float, default=0.0, help="heavy-ball momentum μ in [0, 1)")
    p.add_argument("--lag", type=_finite_float, default=0.0, help="off-policy lag τ in steps (>= 0)")
    p.add_argument("--stiffness", type=_finite_float, required=True, help="stiffness K (> 0)")


def _help(name: str, note: str = "") -> str:
    """Help text of a hyperparameter flag from the hyperparameter table: label, note, allowed range."""
    row = HYPERPARAMETERS[name]
    span = describe_range(row.low, row.high, row.low_open, row.high_open)
    return f"{row.label} {note} ({span})".replace("  ", " ").replace(" :", ":")


def _add_bandit_args(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--arms", type=_integer, default=2, help="number of arms N (>= 2)")
    a("--correct", type=_integer, default=1, help="number of correct arms c in [1, N-1]")
    a("--p-ref", type=_finite_float, default=0.2, help=_help("p_ref", "(= KL reference)"))
    a("--prompts", type=_integer, default=1, help="independent bandits sharing the hyperparameters")
    a("--eta", type=_finite_float, default=0.1, help=_help("eta"))
    a("--momentum", type=_finite_float, default=0.0, help=_help("momentum", "(Adam: b1)"))
    a("--beta", type=_finite_float, default=0.0, help=_help("beta"))
    a("--group-size", type=_integer, default=8, help=_help("group_size"))
    a("--lag-model", choices=("none", "refresh", "stale"), default="none")
    a("--lag", type=_integer, default=0, help=_help("lag", ": stale lag τ or refresh period K_ref"))
    a("--advantage", choices=("std", "mean", "rloo"), default="std")
    a("--kl", choices=("k1", "k2", "k3", "exact"), default="k3")
    a("--kl-clamp", type=_finite_float, default=None, help="clamp k3 to [-c, c] (verl: 10)")
    a("--clip", type=_finite_float, default=0.2, help=_help("clip", "(ε_low, and ε_high unless given)"))
    a("--clip-high", type=_finite_float, default=None, help=_help("clip_high"))
    a("--dual-clip", type=_finite_float, default=None, help="dual-clip constant c > 1 (verl: 3)")
    a("--grad-clip", type=_finite_float, default=None, help="global gradient-norm bound")
    a("--optimizer", choices=("sgd", "nesterov", "adam"), default="sgd")


def _bandit_config(args: argparse.Namespace):
    from .models.config import bandit_config

    return bandit_config(
        n_arms=args.arms,
        n_correct=args.correct,
        p_ref=args.p_ref,
        n_prompts=args.prompts,
        eta=args.eta,
        momentum=args.momentum,
        beta=args.beta,
        group_size=args.group_size,
        advantage=args.advantage,
        kl=args.kl,
        kl_clamp=args.kl_clamp,
        clip=args.clip,
        clip_high=args.clip_high,
        dual_clip=args.dual_clip,
        lag_model=args.lag_model,
        lag=args.lag,
        optimizer=args.optimizer,
        grad_clip=args.grad_clip,
    )


def _cmd_theory(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # closed forms are cheap: report them in float64
    from .models import linear, theory

    osc = (args.eta, args.momentum, args.lag, args.stiffness)
    coef = theory.coefficients(*osc)
    out = dict(
        mass=float(coef.mass),
        damping=float(coef.damping),
        stiffness=float(coef.stiffness),
        damping_ratio=float(theory.damping_ratio(*osc)),
        natural_frequency=float(theory.natural_frequency(*osc)),
        regime=theory.regime(*osc),
        critical_lag=float(theory.critical_lag(args.eta, args.momentum, args.stiffness)),
    )
    if args.lag != round(args.lag):
        raise UsageError("theory: --lag must be an integer for the exact discrete map")
    for model in ("stale", "refresh"):
        disc = (args.eta, args.momentum, int(args.lag), args.stiffness)
        out[f"spectral_radius_{model}"] = float(linear.spectral_radius(*disc, lag_model=model))
        out[f"discrete_regime_{model}"] = linear.discrete_regime(*disc, lag_model=model)
    if (args.noise is None) != (args.group_size is None):
        raise UsageError("theory: give both --noise and --group-size for the stationary variance")
    if args.noise is not None:
        out["stationary_variance"] = float(theory.stationary_variance(*osc, args.noise, args.group_size))
    if args.json:
        print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}))
    else:
        _print_table(out)


SIMULATE_COLUMNS = (
    "step",
    "reward",
    "reward_std",
    "entropy",
    "kl_ref",
    "grad_norm",
    "ratio_max",
    "clip_frac",
    "zero_adv_frac",
)


def _cmd_simulate(args: argparse.Namespace) -> None:
    import jax

    from .models.bandit import simulate
    from .viz.figures import plot_reward_curve

    config = _bandit_config(args)
    run = simulate(config, args.steps, mode=args.mode, seeds=args.seeds, key=jax.random.key(args.seed))
    reward = np.atleast_2d(np.asarray(run.reward))
    diverged = np.atleast_1d(np.asarray(run.diverged))
    with np.errstate(all="ignore"):
        table = {"step": np.arange(args.steps + 1), "reward": reward.mean(0), "reward_std": reward.std(0)}
        for name in SIMULATE_COLUMNS[3:]:
            table[name] = np.atleast_2d(np.asarray(getattr(run, name))).mean(0)
    _write_csv(args.out, SIMULATE_COLUMNS, np.column_stack([table[c] for c in SIMULATE_COLUMNS]), integer_first=True)
    if args.plot:
        plot_reward_curve(table["step"], table["reward"], table["reward_std"], args.plot, title=_describe(args))
    n_div = int(diverged.sum())
    final = "diverged" if n_div == diverged.size else f"{np.nanmean(reward[~diverged, -1]):.6f}"
    print(f"final reward {final}; {n_div} of {diverged.size} run(s) diverged; wrote {args.out}")


def _cmd_predict(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # root-finding and Jacobians in float64
    from .prediction import predict

    out = predict(_bandit_config(args)).as_dict()
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(out)


def _cmd_oscillator(args: argparse.Namespace) -> None:
    import jax

    from .models import sde, theory
    from .viz.figures import plot_ensemble

    ts = np.arange(args.steps + 1, dtype=float)
    osc = (args.eta, args.momentum, args.lag, args.stiffness)
    ens = sde.solve_ensemble(
        ts,
        args.e0,
        args.v0,
        *osc,
        args.noise,
        args.group_size,
        paths=args.paths,
        key=jax.random.key(args.seed),
        dt=args.dt,
    )
    shown = min(args.sample_paths, args.paths)
    paths = np.asarray(ens.paths)
    header = ["step", "mean", "std"] + [f"path_{i}" for i in range(shown)]
    rows = np.column_stack([ts, np.asarray(ens.mean), np.asarray(ens.std), paths[:shown].T])
    _write_csv(args.out, header, rows, integer_first=True)
    if args.plot:
        closed = np.asarray(theory.trajectory(ts, args.e0, args.v0, *osc))
        plot_ensemble(ts, np.asarray(ens.mean), np.asarray(ens.std), paths[:shown], closed, args.plot)
    var = float(theory.stationary_variance(*osc, args.noise, args.group_size))
    print(f"{args.paths} paths; late std {paths[:, -1].std():.4g} (stationary {np.sqrt(var):.4g}); wrote {args.out}")


def _sweep_base(args: argparse.Namespace, axes) -> dict:
    """bandit_config keyword arguments for the parameters that are not grid axes (explicit flags only for
    optional ones)."""
    base = {
        "n_arms": args.arms,
        "n_correct": args.correct,
        "p_ref": args.p_ref,
        "n_prompts": args.prompts,
        "eta": args.eta,
        "momentum": args.momentum,
        "beta": args.beta,
        "group_size": args.group_size,
        "advantage": args.advantage,
        "kl": args.kl,
        "clip": args.clip,
        "lag_model": args.lag_model,
        "lag": args.lag,
        "optimizer": args.optimizer,
    }
    optional = {
        "kl_clamp": args.kl_clamp,
        "clip_high": args.clip_high,
        "dual_clip": args.dual_clip,
        "grad_clip": args.grad_clip,
    }
    base.update({k: v for k, v in optional.items() if v is not None})
    for axis in axes:
        base.pop(axis.name, None)
    if any(a.name == "lag" for a in axes):
        base.pop("lag", None)
        if base["lag_model"] == "none":
            raise UsageError("grid axis lag needs --lag-model stale or refresh")
    return base


def _run_sweep_command(args: argparse.Namespace, axes):
    from .analysis.sweep import SweepError, run_sweep

    if args.coordinator:
        import jax

        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)

    try:
        return run_sweep(
            _sweep_base(args, axes),
            axes,
            steps=args.steps,
            mode=args.mode,
            seeds=args.seeds,
            seed=args.seed,
            out_dir=args.out,
            chunk_size=args.chunk_size,
            max_memory=args.max_memory,
            decimate=args.save_trajectories,
            overwrite=args.overwrite,
            progress=not args.quiet,
        )
    except SweepError as exc:
        raise UsageError(str(exc)) from None


def _parse_axes(specs: Sequence[str]):
    from .analysis.sweep import SweepError, parse_axis

    try:
        return [parse_axis(spec) for spec in specs]
    except SweepError as exc:
        raise UsageError(str(exc)) from None


def _cmd_sweep(args: argparse.Namespace) -> None:
    axes = _parse_axes(args.grid)
    if not axes:
        raise UsageError("sweep: give at least one --grid name=values")
    ds = _run_sweep_command(args, axes)
    print(f"{ds['regime'].size} grid points; wrote {args.out}/sweep.nc and {args.out}/summary.csv")


DEFAULT_PHASE_GRIDS = {"eta": "eta=log:1e-3:1:48", "lag": "lag=0:12", "momentum": "momentum=0:0.99:34"}


def _cmd_phase_diagram(args: argparse.Namespace) -> None:
    from pathlib import Path

    from .analysis.boundaries import phase_boundaries
    from .analysis.phase import agreement, predict_grid
    from .viz.figures import plot_phase_diagram

    axes = _parse_axes(args.grid)
    given = {a.name for a in axes}
    for name in (args.x, args.y):
        if name not in given:
            if name not in DEFAULT_PHASE_GRIDS:
                raise UsageError(
                    f"phase-diagram: give --grid for {name} (defaults exist for {', '.join(DEFAULT_PHASE_GRIDS)})"
                )
            axes += _parse_axes([DEFAULT_PHASE_GRIDS[name]])
    if {a.name for a in axes if a.size > 1} != {args.x, args.y} or args.x == args.y:
        raise UsageError("phase-diagram: the grid must vary exactly --x and --y")
    ds = _run_sweep_command(args, axes)
    ds = ds.squeeze(drop=False)
    prediction = predict_grid(ds)
    summary = agreement(ds["regime"].values, prediction)
    stem = str(Path(args.out) / "phase")
    boundaries = phase_boundaries(ds, args.x, args.y)  # None unless both axes are among eta, momentum, lag
    plot_phase_diagram(ds, prediction, args.x, args.y, stem, boundaries=boundaries, title=_describe(args))
    _write_phase_tables(args.out, ds, prediction, summary)
    print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))
    print(f"wrote {stem}.png, {stem}.pdf, {args.out}/summary.json, {args.out}/summary.csv, {args.out}/sweep.nc")


def _write_phase_tables(out: str, ds, prediction, summary: dict) -> None:
    from pathlib import Path

    from .base.regimes import DISCRETE_REGIMES

    names = np.asarray(DISCRETE_REGIMES)
    table = ds.drop_vars("trajectory", errors="ignore")
    table["regime_name"] = (ds["regime"].dims, names[ds["regime"].values])
    table["predicted_continuous"] = (ds["regime"].dims, names[prediction.continuous])
    table["predicted_discrete"] = (ds["regime"].dims, names[prediction.discrete])
    table["damping_ratio_predicted"] = (ds["regime"].dims, prediction.damping_ratio)
    table["spectral_radius_predicted"] = (ds["regime"].dims, prediction.radius)
    try:
        table.to_dataframe().to_csv(Path(out) / "summary.csv")
        (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2))
    except OSError as exc:
        raise UsageError(f"cannot write to {out}: {exc.strerror}") from None


def _cmd_validate(args: argparse.Namespace) -> None:
    from pathlib import Path

    from .reports.validate import validate

    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {args.out}: {exc.strerror}") from None
    results = validate(args.out, quick=args.quick, seed=args.seed, log=lambda line: print(line, flush=True))
    held = sum(r["verdict"]["holds"] for r in results.values())
    print(f"{held} of {len(results)} claims hold; wrote {args.out}/report.md and {args.out}/results.json")


def _cmd_fit(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # least-squares normal equations in float64
    from .logs.readers import parse_column_map, read_log
    from .reports.log_report import write_report

    log = read_log(args.log, args.format, parse_column_map(args.column))
    result = write_report(log, args.out, metric=args.metric, n_samples=args.samples_per_step)
    r2 = ", ".join(f"{law} {'—' if f['r2'] is None else format(f['r2'], '.3f')}" for law, f in result["fits"].items())
    print(
        f"fitted {result['n_points']} points of {result['source']}: R² {r2}; regime {result['prediction']['regime']}; "
        f"first flag {result['diagnostics']['first'] or 'none'}; wrote {args.out}/report.md and fit.json"
    )


def _int_list(flag: str, text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"tune: {flag} expects comma-separated integers, got {text!r}") from None


def _cmd_tune(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # fixed points, long scans and their gradients in float64
    from pathlib import Path

    from .analysis.search import search
    from .viz.figures import plot_convergence

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
    result = search(
        args.objective,
        _bandit_config(args),
        target=args.target,
        search=[n.strip().replace("-", "_") for n in args.search.split(",")] if args.search else None,
        bounds=bounds or None,
        steps=args.steps,
        min_damping_ratio=args.min_damping_ratio,
        radius_margin=args.radius_margin,
        restarts=args.restarts,
        iterations=args.iterations,
        learning_rate=args.learning_rate,
        lags=_int_list("--lags", args.lags),
        group_sizes=_int_list("--group-sizes", args.group_sizes),
        seed=args.seed,
    )
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(result.summary(), indent=2))
        plot_convergence(result, str(out / "convergence.png"))
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


def _print_table(out: dict) -> None:
    width = max(map(len, out))
    for k, v in out.items():
        print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")


def _write_csv(path: str, header: Sequence[str], rows: np.ndarray, *, integer_first: bool) -> None:
    try:
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            for row in rows:
                first = int(row[0]) if integer_first else f"{row[0]:.8g}"
                writer.writerow([first] + [f"{v:.8g}" for v in row[1:]])
    except OSError as exc:
        raise UsageError(f"cannot write --out {path}: {exc.strerror}") from None


def _describe(args: argparse.Namespace) -> str:
    return (
        f"N={args.arms} c={args.correct} p_ref={args.p_ref} η={args.eta} μ={args.momentum} β={args.beta} "
        f"G={args.group_size} {args.lag_model}(lag={args.lag}) {args.mode}"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `pgrpo-sim` and its subcommands."""
    parser = _Parser(prog="pgrpo-sim", description="Simulate GRPO training dynamics and test the oscillator theory.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("theory", help="closed-form oscillator and exact discrete map for one setting")
    _add_oscillator_args(p)
    p.add_argument("--noise", type=_finite_float, default=None, help="noise scale D (>= 0)")
    p.add_argument("--group-size", type=_finite_float, default=None, help="group size G (>= 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_theory)

    p = sub.add_parser("simulate", help="run the softmax-bandit GRPO environment")
    _add_bandit_args(p)
    p.add_argument("--steps", type=_integer, default=1000, help="optimiser steps (>= 1)")
    p.add_argument("--mode", choices=("expected", "sampled"), default="expected")
    p.add_argument("--seeds", type=_integer, default=64, help="independent seeds in sampled mode (>= 1)")
    p.add_argument("--seed", type=_integer, default=0, help="PRNG seed")
    p.add_argument("--out", required=True, help="CSV file, one row per step")
    p.add_argument("--plot", default=None, help="PNG of the reward curve (mean ± std band)")
    p.set_defaults(func=_cmd_simulate)

    for name, help_text in (
        ("sweep", "run the bandit over a hyperparameter grid (resumable)"),
        ("phase-diagram", "regime map of a 2-D sweep with the predicted boundaries"),
    ):
        p = sub.add_parser(name, help=help_text)
        _add_bandit_args(p)
        if name == "phase-diagram":
            p.add_argument("--x", default="eta", help="horizontal axis (a grid parameter)")
            p.add_argument("--y", default="lag", help="vertical axis (a grid parameter)")
            p.set_defaults(lag_model="stale", func=_cmd_phase_diagram)
        else:
            p.set_defaults(func=_cmd_sweep)
        p.add_argument(
            "--grid",
            action="append",
            default=[],
            metavar="NAME=SPEC",
            help="grid axis: name=v1,v2 | name=start:stop:num | name=log:start:stop:num | name=start:stop",
        )
        p.add_argument("--steps", type=_integer, default=2000, help="optimiser steps per run (>= 1)")
        p.add_argument("--mode", choices=("expected", "sampled"), default="expected")
        p.add_argument("--seeds", type=_integer, default=1, help="seeds per grid point in sampled mode")
        p.add_argument("--seed", type=_integer, default=0, help="PRNG seed")
        p.add_argument(
            "--chunk-size", type=_integer, default=None, help="configurations per chunk (overrides --max-memory)"
        )
        p.add_argument("--max-memory", type=_finite_float, default=2e9, help="memory budget per chunk in bytes")
        p.add_argument(
            "--save-trajectories",
            type=_integer,
            default=0,
            metavar="EVERY",
            help="also store every EVERY-th step of each reward curve (0: none)",
        )
        p.add_argument("--out", required=True, help="output directory")
        p.add_argument("--overwrite", action="store_true", help="replace a different sweep already in --out")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument(
            "--coordinator",
            default=None,
            metavar="HOST:PORT",
            help="multi-host run: jax.distributed coordinator address (with --num-processes, --process-id)",
        )
        p.add_argument("--num-processes", type=_integer, default=None)
        p.add_argument("--process-id", type=_integer, default=None)

    p = sub.add_parser("validate", help="the theory's claims against exact bandit runs, in one report")
    p.add_argument("--quick", action="store_true", help="lower resolution (under 3 minutes on 2 CPU cores)")
    p.add_argument("--seed", type=_integer, default=0, help="PRNG seed")
    p.add_argument("--out", default="validation", help="output directory (default: validation)")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("predict", help="fixed point, stiffness, noise and oscillator of a bandit configuration")
    _add_bandit_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("oscillator", help="ensemble of the reduced SDE M ë + C ė + K e = √(D/G) ξ")
    _add_oscillator_args(p)
    p.add_argument("--noise", type=_finite_float, required=True, help="noise scale D (>= 0)")
    p.add_argument("--group-size", type=_finite_float, required=True, help="group size G (>= 2)")
    p.add_argument("--e0", type=_finite_float, default=-0.5, help="initial deviation e(0) = p0 - p*")
    p.add_argument("--v0", type=_finite_float, default=0.0, help="initial velocity de/dt(0) per step")
    p.add_argument("--steps", type=_integer, default=500, help="length in optimiser steps (>= 1)")
    p.add_argument("--paths", type=_integer, default=1000, help="number of sample paths (>= 1)")
    p.add_argument("--dt", type=_finite_float, default=0.25, help="Euler–Maruyama step (optimiser steps)")
    p.add_argument("--sample-paths", type=_integer, default=5, help="sample paths written to the CSV")
    p.add_argument("--seed", type=_integer, default=0, help="PRNG seed")
    p.add_argument("--out", required=True, help="CSV: step, mean, std, path_0, …")
    p.add_argument("--plot", default=None, help="PNG: mean ± std, sample paths and the closed form")
    p.set_defaults(func=_cmd_oscillator)
    p = sub.add_parser("fit", help="fit the closed-form laws to a training log and diagnose its failure modes")
    p.add_argument("log", help="TRL trainer_state.json, verl JSONL or console log, JSONL or CSV")
    p.add_argument("--format", choices=("auto", "trl", "verl", "jsonl", "csv"), default="auto")
    p.add_argument("--metric", default="reward", help="canonical metric to fit (reward, eval_reward, true_reward)")
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="read canonical metric NAME from column SOURCE, e.g. reward=train/reward (repeatable)",
    )
    p.add_argument(
        "--samples-per-step",
        type=_finite_float,
        default=None,
        help="rewards averaged per step (prompts × group size), for the noise level of the fit",
    )
    p.add_argument("--out", required=True, help="output directory: report.md, fit.json, fit.png, diagnostics.png")
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser("tune", help="gradient search for hyperparameters of a bandit configuration")
    _add_bandit_args(p)
    p.add_argument("--objective", choices=("damping-ratio", "time-to-threshold", "final-reward"), required=True)
    p.add_argument(
        "--target",
        type=_finite_float,
        default=None,
        help="damping-ratio: the target ζ (1.0: critical); time-to-threshold: fraction of the way p_ref → p*",
    )
    p.add_argument("--min-damping-ratio", type=_finite_float, default=None, help="constraint ζ >= Z")
    p.add_argument(
        "--radius-margin",
        type=_finite_float,
        default=0.01,
        help="constraint: exact discrete spectral radius <= 1 - margin (default 0.01)",
    )
    p.add_argument(
        "--search",
        default=None,
        metavar="NAMES",
        help="comma-separated, from eta, momentum, beta, p_ref, clip "
        "(default: eta for damping-ratio, else eta,momentum)",
    )
    p.add_argument(
        "--bound", action="append", default=[], metavar="NAME=LOW:HIGH", help="search box of one searched name"
    )
    p.add_argument("--lags", default=None, help="outer grid of integer lags, e.g. 0,1,2 (not differentiated)")
    p.add_argument("--group-sizes", default=None, help="outer grid of group sizes, e.g. 4,8 (not differentiated)")
    p.add_argument(
        "--steps", type=_integer, default=300, help="expected-mode steps per evaluation (final-reward: the budget)"
    )
    p.add_argument("--restarts", type=_integer, default=8, help="vmapped restarts (Latin hypercube)")
    p.add_argument("--iterations", type=_integer, default=100, help="Adam iterations per restart")
    p.add_argument("--learning-rate", type=_finite_float, default=0.3, help="Adam step, in logit(box coordinate) units")
    p.add_argument("--seed", type=_integer, default=0, help="seed of the restarts")
    p.add_argument("--out", required=True, help="output directory: summary.json, convergence.png")
    p.set_defaults(func=_cmd_tune)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pgrpo-sim` console script; returns the exit code."""
    import matplotlib

    matplotlib.use("Agg")  # the command line only writes figures to files
    try:
        args = build_parser().parse_args(argv)
        args.func(args)
    except PgrpoSimError as exc:
        print(f"pgrpo-sim: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
