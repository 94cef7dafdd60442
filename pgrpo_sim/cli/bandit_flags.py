"""The bandit's flags, shared by `simulate`, `sweep`, `phase-diagram`, `predict` and `tune` (short names and TRL
`GRPOConfig` names), and the `bandit.Config` they describe. Defaults and choices come from the model layer's tables
(`bandit.DEFAULTS`, `LAG_MODELS`, `ADVANTAGES`, `KL_KINDS`, `OPTIMIZERS`), help texts and ranges of the
hyperparameters from `models.bandit.hyperparameters.HYPERPARAMETERS`."""

from __future__ import annotations

import argparse

import numpy as np

from ..models import bandit
from ..models.bandit.configuration import KL_KINDS, LAG_MODELS, OPTIMIZERS
from ..models.bandit.hyperparameters import HYPERPARAMETERS
from ..models.grpo import ADVANTAGES, SCALE_REWARDS, TOKEN_AGGREGATIONS
from .common import UsageError, finite_float, integer


def add_oscillator_args(p: argparse.ArgumentParser) -> None:
    """The oscillator's flags (`theory`, `oscillator`): η, μ, τ, K."""
    p.add_argument("--learning-rate", "--eta", type=finite_float, required=True, help=_help("learning_rate"))
    p.add_argument("--momentum", type=finite_float, default=0.0, help=_help("momentum"))
    p.add_argument("--lag", type=finite_float, default=0.0, help="off-policy lag τ in steps (>= 0)")
    p.add_argument("--stiffness", type=finite_float, required=True, help="stiffness K (> 0)")


def _help(name: str, note: str = "") -> str:
    """Help text of a hyperparameter flag from the hyperparameter table: label, note, allowed range."""
    row = HYPERPARAMETERS[name]
    span = row.domain.describe()
    return f"{row.label} {note} ({span})".replace("  ", " ").replace(" :", ":")


def add_bandit_args(p: argparse.ArgumentParser) -> None:
    """The bandit's flags under their short and TRL names (the defaults are `bandit.config`'s)."""
    a, D = p.add_argument, bandit.DEFAULTS
    a("--arms", type=integer, default=D["n_arms"], help="number of arms N (>= 2)")
    a("--correct", type=integer, default=D["n_correct"], help="number of correct arms c in [1, N-1]")
    a("--p-ref", type=finite_float, default=D["p_ref"], help=_help("p_ref", "(= KL reference)"))
    a("--prompts", type=integer, default=D["n_prompts"], help="independent bandits sharing the hyperparameters")
    a("--learning-rate", "--eta", type=finite_float, default=D["learning_rate"], help=_help("learning_rate"))
    a("--momentum", type=finite_float, default=D["momentum"], help=_help("momentum", "(Adam: b1)"))
    a("--beta", type=finite_float, default=D["beta"], help=_help("beta", "(TRL beta)"))
    a(
        "--num-generations",
        "--group-size",
        type=integer,
        default=D["num_generations"],
        help=_help("num_generations"),
    )
    a(
        "--lag-model",
        choices=LAG_MODELS,
        default=D["lag_model"],
        help="none | refresh: one rollout per refresh, reused (TRL/verl) | refresh_fresh: a fresh group from the "
        "stale π_old every step (the infinite-batch limit) | stale: gradient from θ_{n-lag}",
    )
    a(
        "--lag",
        type=integer,
        default=D["lag"],
        help=_help("lag", ": stale lag τ, or optimiser steps per rollout K = epochs × mini-batches (0 as 1)"),
    )
    a(
        "--num-iterations",
        type=integer,
        default=None,
        metavar="E",
        help="epochs over each rollout (TRL num_iterations, verl ppo_epochs; >= 1); implies --lag-model refresh",
    )
    a(
        "--steps-per-generation",
        type=integer,
        default=None,
        metavar="M",
        help="mini-batches per epoch, one optimiser step each (TRL steps_per_generation; divides --prompts)",
    )
    a(
        "--ref-sync-steps",
        type=integer,
        default=None,
        metavar="S",
        help="KL reference sync every S steps (TRL ref_model_sync_steps; >= 1; default: never)",
    )
    a(
        "--ref-sync-alpha",
        type=finite_float,
        default=D["ref_sync_alpha"],
        help=_help("ref_sync_alpha", "(TRL default 0.6)"),
    )
    a(
        "--advantage",
        choices=ADVANTAGES,
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
        metavar="|".join(TOKEN_AGGREGATIONS),
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
        type=integer,
        default=None,
        metavar="P",
        help="prompts per rollout, drawn without replacement through the dataset's epochs (default: all)",
    )
    a("--dynamic-sampling", action="store_true", help="drop groups whose rewards are all equal (DAPO)")
    a(
        "--shared-features",
        type=integer,
        default=None,
        metavar="F",
        help="shared parameters: a linear-softmax policy over F Gaussian prompt features (fixed seed 0)",
    )
    a("--kl", choices=KL_KINDS, default=D["kl"], help="KL estimator (exact: the full sum over arms)")
    a("--kl-clamp", type=finite_float, default=None, help="clamp k3 to [-c, c] (verl: 10)")
    a(
        "--epsilon",
        "--clip",
        type=finite_float,
        default=D["epsilon"],
        help=_help("epsilon", "(ε_high too unless given)"),
    )
    a(
        "--epsilon-high",
        "--clip-high",
        type=finite_float,
        default=None,
        help=_help("epsilon_high"),
    )
    a("--dual-clip", type=finite_float, default=None, help="dual-clip constant c > 1 (verl: 3)")
    a("--max-grad-norm", "--grad-clip", type=finite_float, default=None, help="global gradient-norm bound")
    a("--optimizer", choices=OPTIMIZERS, default=D["optimizer"], help="optimiser of the logits")


def _loss_type(text: str) -> str:
    """TRL's token aggregations (`TOKEN_AGGREGATIONS`) are the bandit's one loss; TRL's others (cispo, sapo, luspo,
    vespo) change the surrogate, which the bandit does not simulate."""
    if text not in TOKEN_AGGREGATIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not simulated: the bandit has TRL's clipped surrogate, whose token aggregations "
            f"({', '.join(TOKEN_AGGREGATIONS)}) coincide on its one-token completions"
        )
    return text


def population_args(args: argparse.Namespace) -> dict:
    """Advantage kind, the start (p_ref or a difficulty distribution), batch size and dynamic sampling."""
    advantage = args.advantage or bandit.DEFAULTS["advantage"]
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


def rollout_args(args: argparse.Namespace) -> dict:
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


def check_clip_order(epsilon, epsilon_high) -> None:
    """A `UsageError` where ε_high (`epsilon_high`, None: = ε_low) lies below ε_low (`epsilon`): each a value or the
    values of a grid axis. The bandit would clip a gain before a loss of the same size, the opposite of DAPO's
    clip-higher; TRL and verl do not refuse it, so a typo would pass silently."""
    if epsilon_high is not None and np.min(epsilon_high) < np.max(epsilon):
        raise UsageError(
            f"ε_high (--epsilon-high {np.min(epsilon_high):g}) must be >= ε_low (--epsilon "
            f"{np.max(epsilon):g}): a smaller upper clip is not a clip-higher setting; leave it out for a symmetric "
            "clip"
        )


def check_kl_clamp(kl: str, kl_clamp) -> None:
    """A `UsageError` for a clamp (`kl_clamp`: a value, a grid axis's values or None) with an estimator other than
    k3, which ignores it: the flag would do nothing."""
    if kl_clamp is not None and kl != "k3":
        raise UsageError(f"--kl-clamp bounds the k3 estimator, which --kl {kl} does not use: drop it or use --kl k3")


def refuse_unused_seeds(args: argparse.Namespace) -> None:
    """A `UsageError` for --seeds in expected mode, which is one exact run whatever it says."""
    if args.mode == "expected" and "seeds" in getattr(args, "explicit", ()):
        raise UsageError("--seeds counts the runs of --mode sampled; expected mode is one exact run: drop --seeds")


def config_from_flags(args: argparse.Namespace):
    """The `bandit.Config` the bandit flags describe (checked as `models.bandit.configuration.config` checks it)."""
    from ..models import bandit

    check_clip_order(args.epsilon, args.epsilon_high)
    check_kl_clamp(args.kl, args.kl_clamp)
    return bandit.config(
        n_arms=args.arms,
        n_correct=args.correct,
        n_prompts=args.prompts,
        learning_rate=args.learning_rate,
        momentum=args.momentum,
        beta=args.beta,
        num_generations=args.num_generations,
        kl=args.kl,
        kl_clamp=args.kl_clamp,
        epsilon=args.epsilon,
        epsilon_high=args.epsilon_high,
        dual_clip=args.dual_clip,
        optimizer=args.optimizer,
        max_grad_norm=args.max_grad_norm,
        **rollout_args(args),
        **population_args(args),
    )
