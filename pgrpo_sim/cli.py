"""The `pgrpo-sim` command line. Bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

from .base import boot  # noqa: F401  (first: Ctrl-C while the other modules load)

# isort: split
import argparse
import csv
import math
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base.checks import check_normal, check_range, check_seed, check_seeds, check_steps
from .base.errors import PgrpoSimError
from .base.outputs import (
    check_distinct_outputs,
    check_output_dir,
    check_output_file,
    json_text,
    staged_outputs,
    write_csv,
)
from .base.progress import report, stage_lines
from .base.runtime import deferred_interrupts, interrupt_handling, interrupt_requested
from .cli_lm import add_model_args
from .cli_lm_forecast import add_level_args, answering_model
from .logs.readers import FORMATS
from .models.hyperparameters import HYPERPARAMETERS


class UsageError(PgrpoSimError):
    """A user error of the command line itself (flags, files), printed like every `PgrpoSimError`."""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help with every option's default, as `ArgumentDefaultsHelpFormatter`, except where the help text
    already states it or there is none to state (None, off, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or action.default is False or action.default in ([], argparse.SUPPRESS)
        if unset or "default" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)".lstrip()


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        # no abbreviations: `--steps` must never be read as `--steps-per-generation` (nor any prefix as a flag)
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        # values that start with "-" but are numbers or lists of them (-1e9, -1,2, -.5) are values, not flags
        self._negative_number_matcher = re.compile(r"^-(?:\d|\.\d)[\d.,:eE+-]*$")

    def error(self, message: str):  # argparse's own errors: one line, exit 2
        raise UsageError(message)

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, and a command's parser also records the options given on the command line as `explicit`
        (their dests; a default is not a choice the user made): parsed again into a namespace that already holds
        a placeholder for every option, which argparse leaves where no value was given."""
        parsed, rest = super().parse_known_args(args, namespace)
        if self._subparsers is None:
            unset = {
                a.dest: None if a.nargs == 0 or "append" in type(a).__name__.lower() else _UNSET for a in self._actions
            }
            unset.pop(argparse.SUPPRESS, None)
            probe = argparse.Namespace(**unset)  # None where argparse adds to the value (append, count)
            super().parse_known_args(args, probe)
            parsed.explicit = frozenset(dest for dest, value in unset.items() if getattr(probe, dest) is not value)
        return parsed, rest


_UNSET = object()
"""Placeholder of an option not given on the command line (`_Parser.parse_known_args`)."""


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


IMAGE_SUFFIXES = ("png", "pdf", "svg")
"""File types `--plot` writes (by its suffix)."""
MODES = ("expected", "sampled")
MODE_HELP = "expected: the exact mean update, one run; sampled: drawn groups, --seeds runs"
FORMAT_HELP = "log format (auto: from the file's name and contents)"
RUN_HELP = "the run to read from a file that holds several (a W&B long-form CSV: run_name,metric,step,value)"


def _add_oscillator_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eta", type=_finite_float, required=True, help="learning rate η (> 0)")
    p.add_argument("--momentum", type=_finite_float, default=0.0, help="heavy-ball momentum μ in [0, 1)")
    p.add_argument("--lag", type=_finite_float, default=0.0, help="off-policy lag τ in steps (>= 0)")
    p.add_argument("--stiffness", type=_finite_float, required=True, help="stiffness K (> 0)")


def _help(name: str, note: str = "") -> str:
    """Help text of a hyperparameter flag from the hyperparameter table: label, note, allowed range."""
    row = HYPERPARAMETERS[name]
    span = row.domain.describe()
    return f"{row.label} {note} ({span})".replace("  ", " ").replace(" :", ":")


def _add_bandit_args(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--arms", type=_integer, default=2, help="number of arms N (>= 2)")
    a("--correct", type=_integer, default=1, help="number of correct arms c in [1, N-1]")
    a("--p-ref", type=_finite_float, default=0.2, help=_help("p_ref", "(= KL reference)"))
    a("--prompts", type=_integer, default=1, help="independent bandits sharing the hyperparameters")
    a("--eta", "--learning-rate", type=_finite_float, default=0.1, help=_help("eta", "(TRL learning_rate)"))
    a("--momentum", type=_finite_float, default=0.0, help=_help("momentum", "(Adam: b1)"))
    a("--beta", type=_finite_float, default=0.0, help=_help("beta", "(TRL beta)"))
    a("--group-size", "--num-generations", type=_integer, default=8, help=_help("group_size", "(TRL num_generations)"))
    a(
        "--lag-model",
        choices=("none", "refresh", "refresh_fresh", "stale"),
        default="none",
        help="none | refresh: one rollout per refresh, reused (TRL/verl) | refresh_fresh: a fresh group from the "
        "stale π_old every step (the infinite-batch limit) | stale: gradient from θ_{n-lag}",
    )
    a(
        "--lag",
        type=_integer,
        default=0,
        help=_help("lag", ": stale lag τ, or optimiser steps per rollout K = epochs × mini-batches (0 as 1)"),
    )
    a(
        "--num-iterations",
        type=_integer,
        default=None,
        metavar="E",
        help="epochs over each rollout (TRL num_iterations, verl ppo_epochs; >= 1); implies --lag-model refresh",
    )
    a(
        "--steps-per-generation",
        type=_integer,
        default=None,
        metavar="M",
        help="mini-batches per epoch, one optimiser step each (TRL steps_per_generation; divides --prompts)",
    )
    a(
        "--ref-sync-steps",
        type=_integer,
        default=None,
        metavar="S",
        help="KL reference sync every S steps (TRL ref_model_sync_steps; >= 1; default: never)",
    )
    a("--ref-sync-alpha", type=_finite_float, default=0.6, help=_help("ref_sync_alpha", "(TRL default 0.6)"))
    a(
        "--advantage",
        choices=("std", "mean", "rloo", "batch"),
        default=None,
        help="std (GRPO, default) | mean (Dr. GRPO) | rloo | batch (group mean, batch std)",
    )
    a(
        "--scale-rewards",
        choices=tuple(SCALE_REWARDS),
        default=None,
        help="TRL's name for the advantage scaling: group (= std), batch, none (= mean)",
    )
    a(
        "--loss-type",
        type=_loss_type,
        default=None,
        metavar="|".join(LOSS_TYPES),
        help="TRL's token aggregation: a bandit's completion is one token, so every one of these is the mean over "
        "the completions (accepted, the same run)",
    )
    a(
        "--difficulty",
        default=None,
        metavar="A,B",
        help="prompt population: the --prompts prompts start at the quantiles of Beta(A, B) (success probability)",
    )
    a(
        "--batch-prompts",
        type=_integer,
        default=None,
        metavar="P",
        help="prompts per rollout, drawn without replacement through the dataset's epochs (default: all)",
    )
    a("--dynamic-sampling", action="store_true", help="drop groups whose rewards are all equal (DAPO)")
    a(
        "--shared-features",
        type=_integer,
        default=None,
        metavar="F",
        help="shared parameters: a linear-softmax policy over F Gaussian prompt features (fixed seed 0)",
    )
    a("--kl", choices=("k1", "k2", "k3", "exact"), default="k3", help="KL estimator (exact: the full sum over arms)")
    a("--kl-clamp", type=_finite_float, default=None, help="clamp k3 to [-c, c] (verl: 10)")
    a(
        "--clip",
        "--epsilon",
        type=_finite_float,
        default=0.2,
        help=_help("clip", "(TRL epsilon; ε_high too unless given)"),
    )
    a("--clip-high", "--epsilon-high", type=_finite_float, default=None, help=_help("clip_high", "(TRL epsilon_high)"))
    a("--dual-clip", type=_finite_float, default=None, help="dual-clip constant c > 1 (verl: 3)")
    a("--grad-clip", type=_finite_float, default=None, help="global gradient-norm bound")
    a("--optimizer", choices=("sgd", "nesterov", "adam"), default="sgd", help="optimiser of the logits")


SCALE_REWARDS = {"group": "std", "batch": "batch", "none": "mean"}
"""TRL `scale_rewards` → the advantage kind."""
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
"""TRL loss types that only aggregate the clipped surrogate's tokens differently: on one-token completions they
coincide (TRL's others — cispo, sapo, luspo, vespo — change the surrogate, which the bandit does not simulate)."""


def _loss_type(text: str) -> str:
    if text not in LOSS_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not simulated: the bandit has TRL's clipped surrogate, whose token aggregations "
            f"({', '.join(LOSS_TYPES)}) coincide on its one-token completions"
        )
    return text


def _version() -> str:
    """The installed package's version (importlib.metadata), or "unknown" when it is run from a bare source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pgrpo-sim")
    except PackageNotFoundError:
        return "unknown"


def _population_args(args: argparse.Namespace) -> dict:
    """Advantage kind, the start (p_ref or a difficulty distribution), batch size and dynamic sampling."""
    advantage = args.advantage or "std"
    if args.scale_rewards is not None:
        advantage = SCALE_REWARDS[args.scale_rewards]
        if args.advantage not in (None, advantage):
            raise UsageError(
                f"--scale-rewards {args.scale_rewards} means --advantage {advantage}, not {args.advantage}"
            )
    out = dict(advantage=advantage, dynamic_sampling=args.dynamic_sampling, p_ref=args.p_ref)
    if args.batch_prompts is not None:
        out["batch_prompts"] = args.batch_prompts
    if args.shared_features is not None:
        if args.shared_features < 1:
            raise UsageError(f"--shared-features must be >= 1, got {args.shared_features}")
        rng = np.random.default_rng(0)  # the features define the dataset: the same for every run
        out["features"] = rng.standard_normal((args.prompts, args.shared_features)) / np.sqrt(args.shared_features)
    if args.difficulty is not None:
        try:
            a, b = (float(v) for v in args.difficulty.split(","))
        except ValueError:
            raise UsageError(f"--difficulty expects A,B (two numbers > 0), got {args.difficulty!r}") from None
        out.update(difficulty=(a, b), p_ref=None)
    return out


def _rollout_args(args: argparse.Namespace) -> dict:
    """Lag model, lag, mini-batches and reference sync from the flags: `--num-iterations E` and
    `--steps-per-generation M` mean rollout reuse with K = E × M optimiser steps per rollout; `--lag-model refresh
    --lag K` alone means K epochs of one mini-batch."""
    lag_model, lag = args.lag_model, args.lag
    m = 1 if args.steps_per_generation is None else args.steps_per_generation
    if args.num_iterations is not None or args.steps_per_generation is not None:
        if lag_model not in ("none", "refresh"):
            raise UsageError(f"--num-iterations and --steps-per-generation need --lag-model refresh, got {lag_model}")
        for flag, value in (("--num-iterations", args.num_iterations), ("--steps-per-generation", m)):
            if value is not None and value < 1:
                raise UsageError(f"{flag} must be >= 1, got {value}")
        epochs = args.num_iterations if args.num_iterations is not None else max(args.lag // m, 1)
        if args.lag not in (0, epochs * m):
            raise UsageError(
                f"--lag {args.lag} disagrees with --num-iterations × --steps-per-generation = {epochs * m}"
            )
        lag_model, lag = "refresh", epochs * m
    out = dict(lag_model=lag_model, lag=lag, minibatches=m, ref_sync_alpha=args.ref_sync_alpha)
    if args.ref_sync_steps is not None:
        out["ref_sync_steps"] = args.ref_sync_steps
    elif "ref_sync_alpha" in getattr(args, "explicit", ()):
        raise UsageError("--ref-sync-alpha sets the mix at each KL reference sync: it needs --ref-sync-steps S")
    return out


def _check_clip_order(clip, clip_high) -> None:
    """A `UsageError` where ε_high (`clip_high`, None: = ε_low) lies below ε_low (`clip`): each a value or the values
    of a grid axis. The bandit would clip a gain before a loss of the same size, the opposite of DAPO's clip-higher;
    TRL and verl do not refuse it, so a typo would pass silently."""
    if clip_high is not None and np.min(clip_high) < np.max(clip):
        raise UsageError(
            f"ε_high (--clip-high/--epsilon-high {np.min(clip_high):g}) must be >= ε_low (--clip/--epsilon "
            f"{np.max(clip):g}): a smaller upper clip is not a clip-higher setting; leave it out for a symmetric clip"
        )


def _refuse_unused_seeds(args: argparse.Namespace) -> None:
    """A `UsageError` for --seeds in expected mode, which is one exact run whatever it says."""
    if args.mode == "expected" and "seeds" in getattr(args, "explicit", ()):
        raise UsageError("--seeds counts the runs of --mode sampled; expected mode is one exact run: drop --seeds")


def _bandit_config(args: argparse.Namespace):
    from .models.config import bandit_config

    _check_clip_order(args.clip, args.clip_high)
    return bandit_config(
        n_arms=args.arms,
        n_correct=args.correct,
        n_prompts=args.prompts,
        eta=args.eta,
        momentum=args.momentum,
        beta=args.beta,
        group_size=args.group_size,
        kl=args.kl,
        kl_clamp=args.kl_clamp,
        clip=args.clip,
        clip_high=args.clip_high,
        dual_clip=args.dual_clip,
        optimizer=args.optimizer,
        grad_clip=args.grad_clip,
        **_rollout_args(args),
        **_population_args(args),
    )


def _cmd_theory(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # closed forms are cheap: report them in float64
    from .models import linear, theory

    osc = (args.eta, args.momentum, args.lag, args.stiffness)
    coef = theory.coefficients(*osc)  # the inputs' own ranges first, then the range float64 can compute them in
    theory.check_representable(*osc)
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
    # the slowest multiplier is 1 − Kη/(1−μ) to first order: below float64's spacing at 1 it rounds to 1, and the
    # map would read as unstable whatever its true radius
    shift, eps = args.stiffness * args.eta / (1 - args.momentum), float(np.finfo(np.float64).eps)
    if out["spectral_radius_stale"] >= 1 and shift < eps:
        raise UsageError(
            f"theory: Kη/(1−μ) = {shift:.3g} is below float64's resolution at 1 ({eps:.3g}): the discrete map's "
            "slowest multiplier 1 − Kη/(1−μ) rounds to 1, so its stability cannot be computed; give a larger η or K"
        )
    if (args.noise is None) != (args.group_size is None):
        raise UsageError("theory: give both --noise and --group-size for the stationary variance")
    if args.noise is not None:
        out["stationary_variance"] = float(theory.stationary_variance(*osc, args.noise, args.group_size))
        if out["damping"] > 0:  # else +inf by definition: no stationary distribution
            check_normal("stationary variance D/(2GCK)", out["stationary_variance"], np.float64, " at these inputs")
    if args.json:
        print(json_text(out))
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
    "batch_reward",
    "group_reward_std",
    "clip_low_frac",
    "clip_high_frac",
    "kl",
    "prompt_spread",
)


def _check_file_outputs(args: argparse.Namespace) -> None:
    """--out and --plot: not the same file, and each one writable (creating nothing)."""
    check_distinct_outputs({"--out": args.out, "--plot": args.plot})
    check_output_file(args.out, "--out", overwrite=args.overwrite)
    if args.plot is not None:
        check_output_file(args.plot, "--plot", IMAGE_SUFFIXES, overwrite=args.overwrite)


def _cmd_simulate(args: argparse.Namespace) -> None:
    from .cli_lm import refuse_lm_flags, simulate_lm

    if args.model == "lm":
        return simulate_lm(args, IMAGE_SUFFIXES)
    refuse_lm_flags(args)
    import jax

    from .models.bandit import STEP_READOUTS, simulate_in_chunks
    from .viz.figures import plot_reward_curve

    check_steps(args.steps)
    check_seeds(args.seeds)
    _refuse_unused_seeds(args)
    check_seed(args.seed)
    # every read-out of every run and step is held, on the device and again as float64 on the host; expected
    # mode is one run whatever --seeds says
    runs = args.seeds if args.mode == "sampled" else 1
    _check_memory(
        "simulate: --seeds × --steps",
        runs * (args.steps + 1) * len(STEP_READOUTS) * 12,
        "read-outs",
        "fewer seeds or steps (a sweep streams its summaries: pgrpo-sim sweep)",
    )
    config = _bandit_config(args)
    _check_file_outputs(args)
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
        _write_csv(staged, args.out, SIMULATE_COLUMNS, rows, integer_first=True)
        if args.plot:
            figure = staged.file(args.plot)
            _plot(plot_reward_curve, table["step"], table["reward"], table["reward_std"], figure, title=_describe(args))
    n_div = int(diverged.sum())
    final = "diverged" if n_div == diverged.size else f"{np.nanmean(reward[~diverged, -1]):.6f}"
    print(f"final reward {final}; {n_div} of {diverged.size} run(s) diverged; wrote {args.out}")


def _check_memory(what: str, need: int, held: str, advice: str) -> None:
    """A `UsageError` when `need` bytes of `held` results (what a command keeps of its runs) exceed this machine's
    physical memory: refused in one line before a run that would end in an out-of-memory traceback."""
    from .base.runtime import physical_memory

    have = physical_memory()
    if have is not None and need > have:
        raise UsageError(
            f"{what} needs about {need / 1e9:.3g} GB of {held}, more than this machine's {have / 1e9:.3g} GB: {advice}"
        )


def _plot(draw, *args, **kwargs) -> None:
    """Call a figure function; a write error becomes one line naming --plot."""
    try:
        draw(*args, **kwargs)
    except OSError as exc:
        raise UsageError(f"cannot write --plot: {exc.strerror or exc}") from None


def _cmd_predict(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # root-finding and Jacobians in float64
    from .prediction import predict

    out = predict(_bandit_config(args)).as_dict()
    if args.json:
        print(json_text(out))
    else:
        _print_table(out)


def _cmd_oscillator(args: argparse.Namespace) -> None:
    import jax

    from .models import sde, theory
    from .viz.figures import plot_ensemble

    check_steps(args.steps)
    check_range("paths", args.paths, 1, integer=True)
    check_range("sample_paths", args.sample_paths, 0, integer=True)
    check_seed(args.seed)
    check_range("noise", args.noise, 0.0)
    check_range("group_size", args.group_size, 2.0)
    osc = (args.eta, args.momentum, args.lag, args.stiffness)
    theory.check_representable(*osc)
    # every path's value at every step is held, on the device and again on the host
    itemsize = np.dtype(jax.dtypes.canonicalize_dtype(float)).itemsize
    _check_memory(
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
    _check_file_outputs(args)
    ts = np.arange(args.steps + 1, dtype=float)
    ens = sde.solve_ensemble(
        ts,
        args.e0,
        args.v0,
        *osc,
        args.noise,
        args.group_size,
        paths=args.paths,
        key=jax.random.key(args.seed),
        dt=dt,
    )
    shown = min(args.sample_paths, args.paths)
    paths = np.asarray(ens.paths)
    header = ["step", "mean", "std"] + [f"path_{i}" for i in range(shown)]
    rows = np.column_stack([ts, np.asarray(ens.mean), np.asarray(ens.std), paths[:shown].T])
    with staged_outputs() as staged:
        _write_csv(staged, args.out, header, rows, integer_first=True)
        if args.plot:
            closed = np.asarray(theory.trajectory(ts, args.e0, args.v0, *osc))
            figure = staged.file(args.plot)
            _plot(plot_ensemble, ts, np.asarray(ens.mean), np.asarray(ens.std), paths[:shown], closed, figure)
    var = float(theory.stationary_variance(*osc, args.noise, args.group_size))
    if theory.regime(*osc) == "unstable" or not np.all(np.isfinite(paths)):  # growing without bound: no number
        late = "diverged (unstable: damping C <= 0 at this lag)" if np.isinf(var) else "diverged (overflow)"
    else:
        late = f"late std {paths[:, -1].std():.4g} (stationary {np.sqrt(var):.4g})"
    print(f"{args.paths} paths (Euler step {dt:g}); {late}; wrote {args.out}")


GRID_FLAGS = {"lag": ("lag", "num_iterations"), "minibatches": ("steps_per_generation",)}
"""The flags that set a parameter (a grid axis, a searched name), where they are not the flag of the same name."""


def _refuse_flags_setting(args: argparse.Namespace, name: str, role: str) -> None:
    """A `UsageError` if the command line gave a flag that sets `name`, which the command varies itself (`role`)."""
    for dest in GRID_FLAGS.get(name, (name,)):
        if dest in getattr(args, "explicit", ()):
            raise UsageError(f"--{dest.replace('_', '-')} sets {name}, {role}")


def _sweep_base(args: argparse.Namespace, axes) -> dict:
    """bandit_config keyword arguments for the parameters that are not grid axes (explicit flags only for
    optional ones)."""
    base = {
        "n_arms": args.arms,
        "n_correct": args.correct,
        "n_prompts": args.prompts,
        "eta": args.eta,
        "momentum": args.momentum,
        "beta": args.beta,
        "group_size": args.group_size,
        "kl": args.kl,
        "clip": args.clip,
        "optimizer": args.optimizer,
        **_rollout_args(args),
        **_population_args(args),
    }
    optional = {
        "kl_clamp": args.kl_clamp,
        "clip_high": args.clip_high,
        "dual_clip": args.dual_clip,
        "grad_clip": args.grad_clip,
    }
    base.update({k: v for k, v in optional.items() if v is not None})
    for axis in axes:
        _refuse_flags_setting(args, axis.name, f"a grid axis here ({axis.spec}): drop one")
        base.pop(axis.name, None)
    values = {a.name: np.asarray(a.values) for a in axes}
    _check_clip_order(values.get("clip", args.clip), values.get("clip_high", args.clip_high))
    if "ref_sync_alpha" in values and args.ref_sync_steps is None:
        raise UsageError("grid axis ref_sync_alpha sets the mix at each KL reference sync: it needs --ref-sync-steps S")
    if any(a.name == "lag" for a in axes):
        base.pop("lag", None)
        if base["lag_model"] == "none":
            raise UsageError("grid axis lag needs --lag-model stale or refresh")
    return base


SWEEP_OUTPUTS = ("sweep.json", "sweep.nc", "summary.csv", "chunks")
PHASE_OUTPUTS = SWEEP_OUTPUTS + ("phase.png", "phase.pdf", "summary.json")
VALIDATE_OUTPUTS = ("report.md", "results.json", "*.png")
FIT_OUTPUTS = ("report.md", "fit.json", "fit.png", "diagnostics.png")
TUNE_OUTPUTS = ("summary.json", "convergence.png")
"""What each command writes into its --out directory (removed when another command --overwrite's it)."""


def _claim(args: argparse.Namespace, staged, command: str, outputs: Sequence[str], *, resumable: bool = False) -> Path:
    """Claim --out for `command` (refusing another command's or a foreign directory): the folder in it where the
    command writes its outputs, moved into place only when `staged` (`base.outputs.staged_outputs`) commits them;
    and what an interrupt leaves, for its one line: a resumable command's finished chunks, or the previous results.
    """
    out = Path(args.out)
    note = _untouched_note(args)
    stage = staged.directory(out, command, outputs, overwrite=args.overwrite, resumable=resumable)
    if resumable:
        args.interrupt_note = f"the finished chunks are kept in {out}/chunks; rerun the same command to resume"
    else:
        args.interrupt_note = note
    return stage


def _untouched_note(args: argparse.Namespace) -> str:
    """What an interrupt before the outputs are written leaves: the previous results in --out, or nothing."""
    out = getattr(args, "out", None)
    existed = out is not None and Path(out).is_dir() and any(Path(out).iterdir())
    return f"the previous results in {out} are unchanged" if existed else "nothing was written"


def _check_sweep_flags(args: argparse.Namespace) -> None:
    check_steps(args.steps)
    check_seeds(args.seeds)
    _refuse_unused_seeds(args)
    check_seed(args.seed)
    check_range("chunk_size", args.chunk_size, 1, integer=True)
    check_range("max_memory", args.max_memory, 0.0, low_open=True)
    check_range("save_trajectories", args.save_trajectories, 0, integer=True)
    multi = (args.num_processes, args.process_id)
    if args.coordinator is None and any(v is not None for v in multi):
        raise UsageError("--num-processes and --process-id need --coordinator HOST:PORT (a multi-host run)")
    if args.coordinator is not None:
        if None in multi:
            raise UsageError("--coordinator needs --num-processes and --process-id")
        check_range("num_processes", args.num_processes, 1, integer=True)
        check_range("process_id", args.process_id, 0, args.num_processes - 1, integer=True)


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
    """Validate the whole sweep as it will run (every setting and grid value), and the size of its files: refused
    if they would not fit in the free space of --out's disk, and above `CONFIRM_BYTES` without --yes. Creates
    nothing."""
    import shutil

    from .analysis.sweep import SweepError, output_bytes

    try:
        sizes = output_bytes(base, axes, **_sweep_kwargs(args))  # validates as `check_sweep`
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    total, where = sum(sizes.values()), Path(args.out).absolute()
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    parts = ", ".join(f"{name} {size / 1e9:.3g} GB" for name, size in sizes.items())
    if total > free:
        raise UsageError(
            f"{args.command}: its files need about {total / 1e9:.3g} GB ({parts}), more than the "
            f"{free / 1e9:.3g} GB free in {where}: a smaller grid, or another --out"
        )
    if total > CONFIRM_BYTES and not args.yes:
        raise UsageError(
            f"{args.command}: its files need about {total / 1e9:.3g} GB ({parts}): pass --yes to write them"
        )


CONFIRM_BYTES = 1e9
"""Sweeps that write more than this (bytes) run only with --yes."""


def _claim_sweep(args: argparse.Namespace, staged, command: str, outputs: Sequence[str]) -> Path | None:
    """Claim --out for a checked sweep (`_check_sweep`): the last step before its first chunk. Returns the folder
    for its final files (`_claim`; None on the processes of a multi-host run that do not write)."""
    check_output_dir(args.out, command, overwrite=args.overwrite)
    if args.coordinator:
        import jax

        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        if jax.process_index() != 0:  # process 0 writes
            return None
    return _claim(args, staged, command, outputs, resumable=True)


def _run_sweep_command(args: argparse.Namespace, base: dict, axes, results: Path | None):
    """The sweep's `SweepResult`: its chunks kept in --out as they finish, its final files written to `results`."""
    from .analysis.sweep import SweepError, compute_sweep

    try:
        return compute_sweep(
            base,
            axes,
            out_dir=args.out,
            results_dir=results,
            overwrite=args.overwrite,
            progress=not args.quiet,
            **_sweep_kwargs(args),
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
    from .cli_lm import refuse_lm_flags, sweep_lm

    if args.model == "lm":
        return sweep_lm(args)
    refuse_lm_flags(args)
    _check_sweep_flags(args)
    axes = _parse_axes(args.grid)
    if not axes:
        raise UsageError("sweep: give at least one --grid name=values")
    base = _sweep_base(args, axes)
    _check_sweep(args, base, axes)
    with staged_outputs() as staged:
        result = _run_sweep_command(args, base, axes, _claim_sweep(args, staged, "sweep", SWEEP_OUTPUTS))
    print(f"{result.size} grid points; wrote {args.out}/sweep.nc and {args.out}/summary.csv")


DEFAULT_PHASE_GRIDS = {"eta": "eta=log:1e-3:1:48", "lag": "lag=0:12", "momentum": "momentum=0:0.99:34"}


def _cmd_phase_diagram(args: argparse.Namespace) -> None:
    from .analysis.boundaries import phase_boundaries
    from .analysis.phase import agreement, predict_cells
    from .analysis.sweep import grid_axes
    from .viz.figures import plot_phase_diagram

    _check_sweep_flags(args)
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
    base = _sweep_base(args, axes)
    _check_sweep(args, base, axes)
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
        ds = _run_sweep_command(args, base, axes, stage).to_dataset()
        kept = [a.name for a in ordered if a.size > 1]
        ds = ds.squeeze(drop=False)
        assert list(ds["regime"].dims) == kept, (ds["regime"].dims, kept)
        prediction = type(prediction)(*(np.reshape(v, ds["regime"].shape) for v in prediction))
        summary = agreement(ds["regime"].values, prediction)
        target = Path(args.out) if stage is None else stage
        boundaries = phase_boundaries(ds, args.x, args.y)  # None unless both axes are among eta, momentum, lag
        title = _describe(args, swept=(args.x, args.y))
        figure = str(target / "phase")
        _plot(plot_phase_diagram, ds, prediction, args.x, args.y, figure, boundaries=boundaries, title=title)
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
    from .base.regimes import DISCRETE_REGIMES

    names = np.asarray(DISCRETE_REGIMES + ("none",))  # "none": no prediction (code -1)
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


def _cmd_validate(args: argparse.Namespace) -> None:
    from .base.runtime import cpu_cores
    from .reports.validate import validate

    check_seed(args.seed)
    log = lambda line: print(line, flush=True)  # noqa: E731
    with staged_outputs() as staged:
        stage = _claim(args, staged, "validate", VALIDATE_OUTPUTS)
        results = validate(stage, quick=args.quick, seed=args.seed, log=log, workers=cpu_cores())
    held = sum(r["verdict"]["holds"] for r in results.values())
    print(f"{held} of {len(results)} claims hold; wrote {args.out}/report.md and {args.out}/results.json")


def _read_log(args: argparse.Namespace):
    """The log named by the command line (`--format`, `--column`); its skipped records are counted in the reports
    and summary lines, so the reader's warning about them is not repeated."""
    from .logs.readers import parse_column_map, read_log

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*skipped .* record", category=UserWarning)
        return read_log(args.log, args.format, parse_column_map(args.column), run=args.run)


def _cmd_fit(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # least-squares normal equations in float64
    from .reports.log_report import analyse_log, check_analysis, write_analysis

    log = _read_log(args)
    check_analysis(log, metric=args.metric, n_samples=args.samples_per_step)
    check_output_dir(args.out, "fit", overwrite=args.overwrite)
    progress = stage_lines("fit", enabled=not args.quiet)
    analysis = analyse_log(log, metric=args.metric, n_samples=args.samples_per_step, progress=progress)
    report(progress, "writing the report and figures")
    with staged_outputs() as staged:
        result = write_analysis(analysis, log, _claim(args, staged, "fit", FIT_OUTPUTS))
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
        f"first flag {result['diagnostics']['first'] or 'none'}; wrote {args.out}/report.md and fit.json"
    )


def _calibration_inputs(args: argparse.Namespace, command: str):
    """Read the log and run config, check every flag and --out (creating nothing), and return (log, run,
    fit_until)."""
    from .calibration.forecast import horizon_limit
    from .calibration.run_config import kl_warning, load_run_config, log_settings, resolve_run_config
    from .calibration.success import success_rate_log

    log = _read_log(args)
    loaded = load_run_config(args.run_config) if args.run_config else None
    run = resolve_run_config(loaded and loaded.keys, log_settings(log))
    run = run.with_notes(*(loaded.summary() if loaded else ()))
    run = run.with_notes(kl_warning(run, log))
    if not any(item.partition("=")[0].strip() == "reward" for item in args.column):  # the user's choice stands
        log, run, _ = success_rate_log(log, run)
    steps = log.series("reward")[0] if "reward" in log else np.array([])
    if steps.size == 0:
        raise UsageError(f"{command}: {args.log} has no reward to calibrate on")
    fit_until = getattr(args, "fit_until", None)
    fraction = getattr(args, "fit_fraction", None)
    if fit_until is not None and fraction is not None:
        raise UsageError(f"{command}: give --fit-until or --fit-fraction, not both")
    if fraction is not None:
        check_range("fit-fraction", fraction, 0.0, 1.0, low_open=True)
        fit_until = float(steps[max(int(math.ceil(fraction * steps.size)) - 1, 0)])
    if fit_until is not None:
        check_range("fit-until", fit_until, float(steps[0]), float(steps[-1]))
    window_end = float(steps[-1]) if fit_until is None else fit_until
    limit = horizon_limit(float(steps[0]), window_end)
    until = getattr(args, "until", None)
    if until is not None:  # a logged step, from the fit window's end on
        check_range("until", until, window_end, limit, integer=True)
    if getattr(args, "steps", None) is not None:  # what-if: N logged steps from the first, itself included
        check_range("steps", args.steps, 2, limit - float(steps[0]) + 1, integer=True)
    check_range("band", args.band, 0.0, 1.0, low_open=True, high_open=True)
    check_seed(args.seed)
    check_output_dir(args.out, command, overwrite=args.overwrite)
    if loaded and loaded.not_used:  # after every check: bad input stays one line
        print(
            f"pgrpo-sim: note: --run-config {args.run_config}: {len(loaded.not_used)} keys not used (no counterpart "
            f"in the bandit: {', '.join(loaded.not_used[:3])}, …), all listed in the report",
            file=sys.stderr,
        )
    return log, run, fit_until


def _run_notes(run) -> list[str]:
    """The clauses a calibration's summary line adds about its run configuration: the settings assumed (TRL's
    defaults) and a warning where the log contradicts one (`RunConfig.assumed`, `kl_warning`)."""
    return [note for note in (run.assumed(), *run.notes) if note.startswith(("assumed:", "warning:"))]


def _not_stationary(cal) -> str:
    """The command line's warning for a calibration whose MAP is not a stationary point (docs/guide/calibration.md,
    "Outputs")."""
    return f"not a stationary point ({cal.map_offset:.2g} s.e. off): ± unreliable"


def _refuse_unfitted(args: argparse.Namespace, command: str, fit_check) -> None:
    """Refuse (exit 2, one line naming the check and its numbers) a forecast or what-if from a calibration that
    fails its goodness-of-fit check, unless --force."""
    if not fit_check.passed and not args.force:
        raise UsageError(
            f"{command}: the calibration {fit_check.describe()}; no {command} from it (--force gives one, marked "
            "'calibration failed')"
        )


def _cmd_calibrate(args: argparse.Namespace) -> None:
    from .calibration.inference import calibrate
    from .reports.calibration_report import CALIBRATE_OUTPUTS, calibration_band, write_calibration

    log, run, fit_until = _calibration_inputs(args, "calibrate")
    progress = stage_lines("calibrate", enabled=not args.quiet)
    cal = calibrate(log, run, fit_until=fit_until, progress=progress)
    band, fit_check = calibration_band(log, cal, level=args.band, seed=args.seed, progress=progress)
    out = Path(args.out)
    with staged_outputs() as staged:
        stage = _claim(args, staged, "calibrate", CALIBRATE_OUTPUTS)
        data = write_calibration(log, cal, band, fit_check, stage)
    undetermined = [k for k, v in data["parameters"].items() if v["undetermined"]]
    print(
        ("" if fit_check.passed else f"CALIBRATION FAILED: it {fit_check.describe()}; ")
        + f"calibrated on {cal.n_points} steps of {args.log}: "
        + ", ".join(f"{k} {v['value']:.3g} ± {v['stderr']:.2g}" for k, v in data["parameters"].items())
        + f"; overdispersion {cal.overdispersion:.3g}"
        + (f"; undetermined: {', '.join(undetermined)}" if undetermined else "")
        + ("" if cal.stationary else f"; {_not_stationary(cal)}")
        + "".join(f"; {note}" for note in _run_notes(run))
        + f"; wrote {out}/calibration.json and report.md"
    )


def _cmd_forecast(args: argparse.Namespace) -> None:
    from .calibration.forecast import draws_note, forecast, goodness_of_fit
    from .calibration.inference import calibrate
    from .reports.calibration_report import FAILED, FORECAST_OUTPUTS, write_forecast

    log, run, fit_until = _calibration_inputs(args, "forecast")
    if answering_model(args) == "lm":
        from .cli_lm_forecast import lm_forecast_command

        claim = lambda staged, outputs: _claim(args, staged, "forecast", outputs)  # noqa: E731
        return lm_forecast_command(args, log, run, fit_until, claim)
    progress = stage_lines("forecast", enabled=not args.quiet)
    cal = calibrate(log, run, fit_until=fit_until, horizon=_horizon(args, log), progress=progress)
    result, band = forecast(log, cal, until=args.until, level=args.band, seed=args.seed, progress=progress)
    fit_check = goodness_of_fit(log, cal, band)
    _refuse_unfitted(args, "forecast", fit_check)
    out = Path(args.out)
    with staged_outputs() as staged:
        write_forecast(log, cal, result, band, fit_check, _claim(args, staged, "forecast", FORECAST_OUTPUTS))
    held = result.get("heldout")
    if held is None:
        score = "no held-out steps to score"
    elif held["mae"] is None:
        score = f"diverged, no score on {held['n']} held-out steps"
    else:
        score = (
            f"held-out MAE {held['mae']:.4f} over {held['n']} steps, coverage {held['coverage']:.2f} of a "
            f"{args.band:.0%} band (persistence MAE {held['baselines']['persistence']:.4f})"
        )
    notes = [draws_note(band)] + ([] if cal.stationary else [_not_stationary(cal)]) + _run_notes(run)
    print(
        ("" if fit_check.passed else f"{FAILED.upper()}: ")
        + f"forecast to step {result['steps'][-1]:g} from a fit up to step {cal.fit_until:g}: {score}"
        + "".join(f"; {note}" for note in notes if note)
        + f"; wrote {out}"
    )


def _horizon(args: argparse.Namespace, log) -> int:
    """The schedule's length in logged steps: max_steps, or the later of the log's end and --until."""
    steps = log.series("reward")[0]
    last = max(float(steps[-1]), args.until or 0.0)
    return int(round(last - float(steps[0]))) + 1


def _cmd_what_if(args: argparse.Namespace) -> None:
    from .calibration.forecast import check_scenario, draws_note, goodness_of_fit, what_if
    from .calibration.inference import calibrate
    from .calibration.run_config import parse_scenario
    from .cli_lm_forecast import lm_what_if_command
    from .reports.calibration_report import WHATIF_OUTPUTS, marked, write_whatif

    scenarios = [parse_scenario(text) for text in args.scenario]
    log, run, fit_until = _calibration_inputs(args, "what-if")
    if answering_model(args, scenarios) == "lm":
        claim = lambda staged, outputs: _claim(args, staged, "what-if", outputs)  # noqa: E731
        return lm_what_if_command(args, log, run, fit_until, scenarios, claim)
    for changes in scenarios:
        check_scenario(run, changes)  # every scenario is checked before the calibration starts
    steps = log.series("reward")[0]
    first = float(steps[0])
    until = float(steps[-1]) if args.steps is None else first + args.steps - 1
    progress = stage_lines("what-if", enabled=not args.quiet)
    cal = calibrate(log, run, fit_until=fit_until, horizon=int(until - first) + 1, progress=progress)
    result, bands = what_if(cal, scenarios, until=until, level=args.band, seed=args.seed, progress=progress)
    fit_check = goodness_of_fit(log, cal, bands["baseline"], level=args.band, seed=args.seed)
    _refuse_unfitted(args, "what-if", fit_check)
    out = Path(args.out)
    with staged_outputs() as staged:
        write_whatif(log, cal, result, bands, fit_check, _claim(args, staged, "what-if", WHATIF_OUTPUTS))
    rows = [("calibrated run", result["baseline"])] + [
        (",".join(f"{k}={v}" for k, v in s["set"].items()), s) for s in result["scenarios"]
    ]
    for (label, entry), band in zip(rows, bands.values()):
        final = "—" if entry["final_reward"] is None else f"{entry['final_reward']:.3f}"
        note = draws_note(band)
        print(f"{label}: {marked(entry['verdict'], fit_check)}, final reward {final}" + (f" ({note})" if note else ""))
    if not cal.stationary:
        print(f"calibration: {_not_stationary(cal)}")
    for note in _run_notes(run):
        print(f"calibration: {note}")
    if not fit_check.passed:
        print(f"calibration: it {fit_check.describe()}")
    print(f"wrote {out}/whatif.json and report.md")


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
    from .analysis.search import DEFAULT_BOUNDS

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
    from .analysis.search import search, searched_names
    from .viz.figures import plot_convergence

    check_output_dir(args.out, "tune", overwrite=args.overwrite)
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
    names = [n.strip().replace("-", "_") for n in args.search.split(",")] if args.search else None
    for name in searched_names(args.objective, names):
        _refuse_flags_setting(args, name, f"which tune searches: drop it, or bound it (--bound {name}=LOW:HIGH)")
    progress = stage_lines("tune", enabled=not args.quiet)
    result = search(
        args.objective,
        _bandit_config(args),
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
            stage = _claim(args, staged, "tune", TUNE_OUTPUTS)
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


def _print_table(out: dict) -> None:
    width = max(map(len, out))
    for k, v in out.items():
        print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")


def _write_csv(staged, path: str, header: Sequence[str], rows: np.ndarray, *, integer_first: bool) -> None:
    """The table as CSV at --out `path`, through `staged` (`base.outputs.staged_outputs`)."""
    try:
        with open(staged.file(path), "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            for row in rows:
                first = int(row[0]) if integer_first else f"{row[0]:.8g}"
                writer.writerow([first] + [f"{v:.8g}" for v in row[1:]])
    except OSError as exc:
        raise UsageError(f"cannot write --out {path}: {exc.strerror}") from None


def _describe(args: argparse.Namespace, swept: Sequence[str] = ()) -> str:
    """The fixed settings of a run, for a figure title; `swept` parameters are named as axes, not values."""
    parts = [
        ("", f"N={args.arms} c={args.correct}"),
        ("p_ref", f"p_ref={args.p_ref}"),
        ("eta", f"η={args.eta}"),
        ("momentum", f"μ={args.momentum}"),
        ("beta", f"β={args.beta}"),
        ("group_size", f"G={args.group_size}"),
        ("lag", f"{args.lag_model}(lag={args.lag})"),
    ]
    fixed = [text for name, text in parts if name not in swept]
    if "lag" in swept:
        fixed.append(f"{args.lag_model} lag")
    text = " ".join(fixed) + f" {args.mode}"
    if swept:
        text += "; swept: " + ", ".join(_axis_symbol(n) for n in swept)
    return text


def _axis_symbol(name: str) -> str:
    return {"eta": "η", "momentum": "μ", "beta": "β", "lag": "τ", "group_size": "G"}.get(name, name)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `pgrpo-sim` and its subcommands."""
    parser = _Parser(prog="pgrpo-sim", description="Simulate GRPO training dynamics and test the oscillator theory.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not keep compiled programs in the per-user cache (~/.cache/pgrpo-sim/jax; also "
        "PGRPO_SIM_NO_COMPILE_CACHE=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("theory", help="closed-form oscillator and exact discrete map for one setting")
    _add_oscillator_args(p)
    p.add_argument("--noise", type=_finite_float, default=None, help="noise scale D (>= 0)")
    p.add_argument("--group-size", type=_integer, default=None, help="group size G (>= 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_theory)

    p = sub.add_parser("simulate", help="run the softmax-bandit GRPO environment or the small language model")
    add_model_args(p)
    _add_bandit_args(p)
    p.add_argument("--steps", type=_integer, default=1000, help="optimiser steps (>= 1)")
    p.add_argument("--mode", choices=MODES, default="expected", help=MODE_HELP)
    p.add_argument("--seeds", type=_integer, default=64, help="independent seeds in sampled mode (>= 1)")
    p.add_argument("--seed", type=_integer, default=0, help="PRNG seed (>= 0)")
    p.add_argument("--out", required=True, help="CSV file, one row per step")
    p.add_argument("--plot", default=None, help="figure of the reward curve (mean ± std band): .png, .pdf or .svg")
    p.add_argument("--overwrite", action="store_true", help="replace existing --out and --plot files")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_cmd_simulate)

    for name, help_text in (
        ("sweep", "run the bandit or the small language model over a hyperparameter grid (resumable)"),
        ("phase-diagram", "regime map of a 2-D sweep with the predicted boundaries"),
    ):
        p = sub.add_parser(name, help=help_text)
        if name == "sweep":
            add_model_args(p)
        _add_bandit_args(p)
        if name == "phase-diagram":
            p.add_argument("--x", default="eta", help="horizontal axis (a grid parameter)")
            p.add_argument("--y", default="lag", help="vertical axis (a grid parameter)")
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
        p.add_argument("--steps", type=_integer, default=2000, help="optimiser steps per run (>= 1)")
        p.add_argument("--mode", choices=MODES, default="expected", help=MODE_HELP)
        p.add_argument(
            "--seeds",
            type=_integer,
            default=1,
            help="seeds per grid point in sampled mode (>= 2 there: regimes are judged against their standard error)",
        )
        p.add_argument("--seed", type=_integer, default=0, help="PRNG seed (>= 0)")
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
        p.add_argument(
            "--overwrite", action="store_true", help="replace a different sweep or another command's output in --out"
        )
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--yes", action="store_true", help="write files of more than 1 GB (the size is told first)")
        p.add_argument(
            "--coordinator",
            default=None,
            metavar="HOST:PORT",
            help="multi-host run: jax.distributed coordinator address (with --num-processes, --process-id)",
        )
        p.add_argument("--num-processes", type=_integer, default=None)
        p.add_argument("--process-id", type=_integer, default=None)

    p = sub.add_parser("validate", help="the theory's claims against exact bandit runs, in one report")
    p.add_argument(
        "--quick",
        action="store_true",
        help="lower resolution (5 to 12 minutes on 2 CPU cores, most of it the language-model section)",
    )
    p.add_argument("--seed", type=_integer, default=0, help="PRNG seed (>= 0)")
    p.add_argument("--out", default="validation", help="output directory (default: validation)")
    p.add_argument("--overwrite", action="store_true", help="replace another command's output in --out")
    p.set_defaults(func=_cmd_validate, compile_bound=True)  # its sections compile in processes, one per core

    p = sub.add_parser("predict", help="fixed point, stiffness, noise and oscillator of a bandit configuration")
    _add_bandit_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("oscillator", help="ensemble of the reduced SDE M ë + C ė + K e = √(D/G) ξ")
    _add_oscillator_args(p)
    p.add_argument("--noise", type=_finite_float, required=True, help="noise scale D (>= 0)")
    p.add_argument("--group-size", type=_integer, required=True, help="group size G (>= 2)")
    p.add_argument("--e0", type=_finite_float, default=-0.5, help="initial deviation e(0) = p0 - p*")
    p.add_argument("--v0", type=_finite_float, default=0.0, help="initial velocity de/dt(0) per step")
    p.add_argument("--steps", type=_integer, default=500, help="length in optimiser steps (>= 1)")
    p.add_argument("--paths", type=_integer, default=1000, help="number of sample paths (>= 1)")
    p.add_argument(
        "--dt",
        type=_finite_float,
        default=None,
        help="Euler–Maruyama step in optimiser steps, in (0, 1] and small enough to resolve the dynamics "
        "(default: 0.25, or the largest power of 2 that resolves them)",
    )
    p.add_argument("--sample-paths", type=_integer, default=5, help="sample paths written to the CSV (>= 0)")
    p.add_argument("--seed", type=_integer, default=0, help="PRNG seed (>= 0)")
    p.add_argument("--out", required=True, help="CSV: step, mean, std, path_0, …")
    p.add_argument(
        "--plot", default=None, help="figure (.png, .pdf or .svg): mean ± std, sample paths and the closed form"
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing --out and --plot files")
    p.set_defaults(func=_cmd_oscillator)
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
        type=_integer,
        default=None,
        help="rewards averaged per step (prompts × group size), for the noise level of the fit",
    )
    p.add_argument("--out", required=True, help="output directory: report.md, fit.json, fit.png, diagnostics.png")
    p.add_argument("--overwrite", action="store_true", help="replace another command's output in --out")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_cmd_fit)

    formats = ("auto", *FORMATS)
    for name, func, help_text in (
        ("calibrate", _cmd_calibrate, "fit the population bandit to a training log (parameters with uncertainty)"),
        ("forecast", _cmd_forecast, "calibrate on the start of a log and forecast the rest with a band"),
        ("what-if", _cmd_what_if, "rerun a calibrated log with changed run-config keys, with verdicts"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "log", help="training log (TRL trainer_state.json or console, JSONL, TensorBoard, W&B CSV, verl)"
        )
        p.add_argument("--format", choices=formats, default="auto", help=FORMAT_HELP)
        p.add_argument(
            "--column",
            action="append",
            default=[],
            metavar="NAME=SOURCE",
            help="read canonical metric NAME from column SOURCE, e.g. reward=rewards/correctness_reward_func",
        )
        p.add_argument("--run", default=None, metavar="NAME", help=RUN_HELP)
        p.add_argument(
            "--run-config", default=None, help="JSON or YAML file of TRL GRPOConfig keys (docs/guide/calibration.md)"
        )
        p.add_argument("--band", type=_finite_float, default=0.8, help="central probability of the band, in (0, 1)")
        p.add_argument("--seed", type=_integer, default=0, help="seed of the band's draws (>= 0)")
        p.add_argument("--fit-until", type=_finite_float, default=None, help="last logged step of the fit window")
        if name != "calibrate":
            add_level_args(p)
        if name == "forecast":
            p.add_argument(
                "--fit-fraction", type=_finite_float, default=None, help="fit window as a fraction of the log"
            )
            p.add_argument(
                "--until", type=_finite_float, default=None, help="forecast up to this step (default: log end)"
            )
        if name == "what-if":
            p.add_argument(
                "--scenario",
                action="append",
                required=True,
                metavar="KEY=VALUE[,KEY=VALUE…]",
                help="run-config keys to change (repeatable: one scenario each)",
            )
            p.add_argument(
                "--steps",
                type=_integer,
                default=None,
                help="logged steps to simulate, the first one included (>= 2; default: to the log's last)",
            )
        own_json = "" if name == "calibrate" else f", {name.replace('-', '')}.json"
        p.add_argument(
            "--out",
            required=True,
            help=f"output directory (calibration.json{own_json}, report.md, figure)",
        )
        p.add_argument("--overwrite", action="store_true", help="replace another command's output in --out")
        p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
        if name != "calibrate":
            p.add_argument(
                "--force",
                action="store_true",
                help="answer even when the calibration fails its goodness-of-fit check (marked 'calibration failed')",
            )
        p.set_defaults(func=func)

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
    p.add_argument(
        "--search-lr",
        type=_finite_float,
        default=0.3,
        help="the search's Adam step, in logit(box coordinate) units (--learning-rate is the run's η)",
    )
    p.add_argument("--seed", type=_integer, default=0, help="seed of the restarts")
    p.add_argument("--out", required=True, help="output directory: summary.json, convergence.png")
    p.add_argument("--overwrite", action="store_true", help="replace another command's output in --out")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    # β = 0 has no interior fixed point p*, which every objective's stability constraint needs: as phase-diagram's
    p.set_defaults(beta=0.5, func=_cmd_tune)
    return parser


def _use_agg_backend() -> None:
    """Matplotlib's file-only backend, without importing matplotlib before a command needs it."""
    if "matplotlib" in sys.modules:
        sys.modules["matplotlib"].use("Agg")
    else:
        os.environ["MPLBACKEND"] = "Agg"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pgrpo-sim` console script; returns the exit code: 0 done, 2 bad input or an output that
    cannot be written (one line on stderr), 130 interrupted (one line). Outputs are replaced only when all are
    complete (`base.outputs.staged_outputs`): after 2 or 130 the previous results are as they were."""
    _use_agg_backend()  # the command line only writes figures to files
    args = None
    with interrupt_handling():
        try:
            args = build_parser().parse_args(argv)
            from .base.runtime import configure_jax

            configure_jax(compile_cache=not args.no_compile_cache, compile_bound=getattr(args, "compile_bound", False))
            args.interrupt_note = _untouched_note(args)  # until the command claims --out (a long fit comes first)
            args.func(args)
            if interrupt_requested():  # it came while the outputs were moved into place, or a callback dropped it
                args.interrupt_note = "the command had finished: its outputs are complete"
                raise KeyboardInterrupt
            code = 0
        except PgrpoSimError as exc:
            print(f"pgrpo-sim: error: {exc}", file=sys.stderr)
            code = 2
        except KeyboardInterrupt:
            with deferred_interrupts():  # a second Ctrl-C does not cut the line short
                note = getattr(args, "interrupt_note", None) or "nothing was written"  # None: while parsing
                print(f"pgrpo-sim: interrupted; {note}", file=sys.stderr, flush=True)
            code = 130
    if argv is None:  # the program itself, not a call from Python: its interpreter is about to exit
        import signal

        # its exit runs JAX's clean-up (atexit) callbacks: a Ctrl-C there would print "Exception ignored in atexit
        # callback"; after an interrupt, JAX's runtime may still be running work dispatched to its threads, whose
        # clean-up under way once crashed (`tune`, exit 139): exit at once, nothing is left to write
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if code == 130:
            import gc

            # a stopped worker pool (validate) is held in reference cycles: collected, its semaphores are released;
            # left to os._exit, multiprocessing's resource tracker warns of them on stderr after the one line
            gc.collect()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
