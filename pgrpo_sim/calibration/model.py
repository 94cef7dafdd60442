"""The population bandit a real run is calibrated to, and the observables it predicts for a log.

Four parameters θ (`PARAMETERS`), all unconstrained:
- `difficulty_mean` μ and `log_difficulty_spread` log σ: the learnable prompts' initial success probabilities are
  logit-normal, p_d = sigmoid(μ + σ z_d) with z_d the D normal quantiles Φ⁻¹((d + ½)/D) (differentiable in μ, σ);
- `log_step_scale` log s: the bandit's step per unit of the real learning rate, η = s × learning_rate;
- `unsolvable_logit` logit c: a fraction c of the prompts is never solved (reward 0 whatever the policy), which
  sets the plateau below 1 that long runs show.
A log whose reward is no success rate (it leaves [0, reward_scale], e.g. a sum of format, length and correctness
rewards) and has no success-rate column adds two (`AFFINE_PARAMETERS`): its reward is read as a + b·(the batch's
success rate), `reward_offset` a and `log_reward_gain` log b (b > 0), in the log's units; within-group stds scale
by b, the zero-std fraction does not change.
Each prompt is a two-arm softmax bandit (one correct arm), trained in expected mode (the exact mean update) with
plain SGD, the run's G, β (k3 KL to the start), clip, reuse (num_iterations × steps_per_generation optimiser
steps per rollout) and schedule. A logged step is one optimiser step for TRL's formats (its `global_step`) and
one rollout for the others; the model reads each observable at the rollout the step's batch was drawn from.

Observables of a batch of P prompts × G completions drawn from the population (prompts i.i.d.; moments over
prompts E_d, Var_d include the unsolvable ones, whose p is 0), with their sampling variance (what the likelihood
uses):
- reward: mean p̄; Var = (E_d[p(1−p)]/G + c·Var_d[p])/P, c = (N − P)/(N − 1) the finite-population correction of
  a dataset of N = dataset_size prompts (c = 1 when it is not given);
- zero_std_frac: f = E_d[p^G + (1−p)^G]; Var = f(1−f)/P;
- reward_std (TRL's mean of within-group unbiased stds): E_d[E[s_G|p]]; Var = (E_d[p(1−p)] − (E_d E[s_G|p])²)/P.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ..base.checks import check_choice, check_range, check_seed, check_steps
from ..base.errors import PgrpoSimError
from ..logs.readers import FORMATS, TrainingLog, tidy
from ..models import bandit
from ..models.bandit import simulate
from ..models.grpo import SCALE_REWARDS
from .run_config import RunConfig, check_run_config

PARAMETERS = ("difficulty_mean", "log_difficulty_spread", "log_step_scale", "unsolvable_logit")
"""Names of θ's entries, in order."""
AFFINE_PARAMETERS = ("reward_offset", "log_reward_gain")
"""θ's further entries when the log's reward is an affine map a + b·p of the success rate (module docstring)."""
OBSERVABLES = ("reward", "zero_std_frac", "reward_std")
"""Log metrics the model predicts (canonical `TrainingLog` names)."""
TRL_FORMATS = ("trl", "trl_console", "tensorboard", "wandb", "synthetic")
"""Formats TRL writes (and `synthetic_log`): a step is TRL's `global_step` (an optimiser step) and `reward_std` the
mean within-group std. In the other formats a step is one rollout and `reward_std` is not used."""
LOG_FORMATS = (*FORMATS, "synthetic", "simulation")
"""The `TrainingLog.format`s a model reads: `read_log`'s, `synthetic_log`'s and `from_run`'s."""
PROMPTS = 64
"""Quantile prompts that represent the difficulty distribution (D); a given `dataset_size` N is used instead
(clipped to [8, 256])."""
REUSE_PROMPTS = 16
"""D when rollouts are reused (num_iterations > 1): expected mode then enumerates every prompt's rollouts (G + 1
of them per step), so the population is represented more coarsely."""
NO_CLIP = (1 - 1e-6, 1e6)
"""Clip range standing for "no clip": ratios never reach it."""


class Observables(NamedTuple):
    """Predicted observables at each model step (arrays (T+1,)): means and sampling variances of a batch, and
    whether the run diverged.

    Rewards are success rates in [0, 1] (the log's reward / reward_scale), or in the log's units (a + b·p) when θ has
    the affine entries (`AFFINE_PARAMETERS`); variances are in those units squared. `vmap` over θ adds a leading axis.

    Attributes:
        reward: the batch's mean reward; (T+1,); success rate, or the log's units when affine.
        reward_var: its sampling variance over a batch of P prompts × G completions; (T+1,); units².
        zero_std_frac: share of the batch's groups whose G rewards are all equal; (T+1,); in [0, 1].
        zero_std_frac_var: its sampling variance; (T+1,).
        reward_std: TRL's mean within-group unbiased std of the reward; (T+1,); same units as `reward`.
        reward_std_var: its sampling variance; (T+1,); units².
        diverged: whether any prompt's run diverged; bool scalar.
    """

    reward: Array
    reward_var: Array
    zero_std_frac: Array
    zero_std_frac_var: Array
    reward_std: Array
    reward_std_var: Array
    diverged: Array

    def mean(self, name: str) -> Array:
        """The predicted batch mean of observable `name` (one of `OBSERVABLES`); (T+1,)."""
        return getattr(self, name)

    def var(self, name: str) -> Array:
        """The batch sampling variance of observable `name` (one of `OBSERVABLES`); (T+1,)."""
        return getattr(self, f"{name}_var")


class LogReading(NamedTuple):
    """What `population_observables` needs besides the bandit, all static (hashable, a compilation's key):
    `read` the model step read at each logged step, `prompts` D, `batch` P prompts per logged batch, `fpc` the
    finite-population correction (module doc).

    Attributes:
        read: per logged step 0 … T, the per-prompt model's step (rollout × epochs) it is read at; length T+1.
        prompts: D, quantile prompts that represent the difficulty distribution; ≥ 1.
        batch: P, prompts per logged batch (`RunConfig.prompts_per_step`); ≥ 1.
        fpc: the finite-population correction (N − P)/(N − 1) of a dataset of N prompts, 1 when N is not given;
            in [0, 1].
    """

    read: tuple[int, ...]
    prompts: int
    batch: int
    fpc: float


@dataclasses.dataclass(frozen=True)
class PopulationModel:
    """A run configuration turned into a simulator of its observables: `observables(θ)` at model steps
    0…`steps` (logged steps after the first). Static structure only; θ is traced.

    The D prompts have their own logits and plain SGD, so they evolve independently: each is run as a one-prompt
    bandit (`vmap` over their starts), which is what lets expected mode enumerate a reused rollout's outcomes.
    With m = steps_per_generation mini-batches a prompt is in one of the m optimiser steps of each epoch, with
    weight m/P instead of 1/P: per prompt, one step of s × learning_rate × m per epoch (read at the rollouts, so
    where in the epoch it falls does not matter; the schedule is taken as constant within a rollout).

    Attributes:
        run: the run's configuration (`RunConfig`).
        steps: T, logged steps simulated after the first (model steps 0 … T); ≥ 1.
        optimizer_steps_per_logged: optimiser steps per logged step: 1 for `TRL_FORMATS` (a step is TRL's
            `global_step`), `run.steps_per_rollout` for the others (a step is one rollout).
        horizon: the learning-rate schedule's length, in logged steps; ≥ 1.
        prompts: D, quantile prompts of the population (default `PROMPTS`).
    """

    run: RunConfig
    steps: int
    optimizer_steps_per_logged: int
    horizon: int
    prompts: int = PROMPTS

    @property
    def epochs(self) -> int:
        """Passes over each rollout, `run.num_iterations`."""
        return self.run.num_iterations

    def read_steps(self) -> np.ndarray:
        """Per logged step after the first, the per-prompt model's step at the rollout its batch was drawn at.

        Returns:
            Model step indices, int (steps+1,), for logged steps 0 … steps.
        """
        rollout = np.arange(self.steps + 1) * self.optimizer_steps_per_logged // self.run.steps_per_rollout
        return rollout * self.epochs

    def config(self) -> bandit.Config:
        """One prompt's bandit at p_0 = ½ and s = 1 (`population_observables` sets both from θ).

        Returns:
            A `bandit.Config` with η = learning_rate × steps_per_generation per model step, and warm-up and decay
            lengths in model steps.
        """
        run, epochs = self.run, self.epochs
        clip = run.clip or NO_CLIP
        rollouts = lambda logged: logged * self.optimizer_steps_per_logged / run.steps_per_rollout
        return bandit.config(
            p_ref=0.5,
            learning_rate=run.learning_rate * run.steps_per_generation,
            beta=run.beta,
            num_generations=run.num_generations,
            # one prompt's bandit: no spread across prompts for a batch std, so "batch" scales by the group's
            advantage="std" if run.scale_rewards == "batch" else SCALE_REWARDS[run.scale_rewards],
            epsilon=clip[0],
            epsilon_high=clip[1],
            lag_model="refresh" if epochs > 1 else "none",
            lag=epochs if epochs > 1 else 0,
            lr_scheduler_type=run.lr_scheduler_type,
            warmup_steps=int(np.ceil(rollouts(run.warmup_steps(self.horizon)))) * epochs,
            decay_steps=max(int(np.ceil(rollouts(self.horizon))) * epochs, 1),
        )

    def reading(self) -> LogReading:
        """The static rest of the model: how its steps map to the log's, and the batch the observables describe.

        Returns:
            The `LogReading` (hashable: a compilation's key).
        """
        run = self.run
        n, batch = run.dataset_size, run.prompts_per_step
        fpc = 1.0 if n is None else (n - batch) / max(n - 1, 1)
        return LogReading(tuple(int(r) for r in self.read_steps()), self.prompts, batch, float(fpc))

    def observables(self, theta: Array) -> Observables:
        """Means and batch sampling variances of the observables at model steps 0…steps (see module doc).

        Args:
            theta: θ, the unconstrained parameters (`PARAMETERS`, then `AFFINE_PARAMETERS` if affine); (4,) or (6,).

        Returns:
            `Observables`, each array (steps+1,).
        """
        return population_observables(self.config(), self.reading(), theta)


def prompt_starts(prompts: int, theta: Array) -> Array:
    """The D = `prompts` prompts' initial logits (D, 1, 2): success probability sigmoid(μ + σ z_d), z_d the normal
    quantiles Φ⁻¹((d + ½)/D).

    Args:
        prompts: D, the number of quantile prompts; ≥ 1.
        theta: θ; (4,) or (6,); only θ[0] = μ (logit) and θ[1] = log σ are read.

    Returns:
        Per prompt, the log-probabilities (log p_d, log(1 − p_d)) of its correct and wrong arm, as one-prompt
        bandit logits; (D, 1, 2), θ's dtype.
    """
    theta = jnp.asarray(theta)
    z = jax.scipy.stats.norm.ppf((jnp.arange(prompts) + 0.5) / prompts).astype(theta.dtype)
    x = theta[0] + jnp.exp(theta[1]) * z
    return jnp.stack([jax.nn.log_sigmoid(x), jax.nn.log_sigmoid(-x)], -1)[:, None, :]


def population_observables(config: bandit.Config, reading: LogReading, theta: Array) -> Observables:
    """`PopulationModel.observables` from its parts: `config` (`PopulationModel.config()`, whose float leaves —
    learning rate, β, clip, schedule lengths — may be traced, so run configs that differ only there share a
    compilation) and `reading`.

    Args:
        config: one prompt's bandit (`PopulationModel.config()`); its η is multiplied by s = exp(θ[2]).
        reading: the static `LogReading` (`PopulationModel.reading()`).
        theta: θ; (4,), or (6,) when the reward is read as a + b·p (`AFFINE_PARAMETERS`).

    Returns:
        `Observables`, each array (T+1,) with T+1 = len(reading.read).
    """
    theta = jnp.asarray(theta)
    read = np.asarray(reading.read)
    config = config.replace(learning_rate=jnp.exp(theta[2]) * config.learning_rate)
    steps = max(int(read[-1]), 1)
    runs = jax.vmap(lambda logits: simulate(config.replace(init_logits=logits), steps, binary_rewards=True))(
        prompt_starts(reading.prompts, theta)
    )
    per_prompt = lambda x: x[:, read]
    p = per_prompt(runs.reward)
    solvable = jax.nn.sigmoid(-theta[3])  # 1 − c
    mean = solvable * jnp.mean(p, 0)
    within = solvable * jnp.mean(p * (1 - p), 0)
    spread2 = solvable * jnp.mean(p**2, 0) - mean**2
    zero = 1 - solvable * (1 - jnp.mean(per_prompt(runs.zero_adv_frac), 0))
    std = solvable * jnp.mean(per_prompt(runs.group_reward_std), 0)
    g, batch = config.num_generations, reading.batch
    offset, gain = (theta[4], jnp.exp(theta[5])) if theta.shape[0] > len(PARAMETERS) else (0.0, 1.0)
    return Observables(
        reward=offset + gain * mean,
        reward_var=gain**2 * (within / g + reading.fpc * spread2) / batch,
        zero_std_frac=zero,
        zero_std_frac_var=zero * (1 - zero) / batch,
        reward_std=gain * std,
        reward_std_var=gain**2 * jnp.maximum(within - std**2, 0.0) / batch,
        diverged=jnp.any(runs.diverged),
    )


def population_model(run: RunConfig, steps: int, *, log_format: str = "jsonl", horizon: int | None = None):
    """The `PopulationModel` of a run read from a log of `log_format`, simulated over `steps` logged steps after
    the first. The schedule's length (logged steps) is `run.max_steps`, else `horizon`, else `steps`.

    Args:
        run: the run's configuration (`RunConfig`).
        steps: logged steps to simulate after the first; integer in [1, 10⁸].
        log_format: the log's `TrainingLog.format`, one of `LOG_FORMATS`; sets what a logged step is.
        horizon: the schedule's length in logged steps when `run.max_steps` is None; integer ≥ 1, or None.

    Returns:
        The `PopulationModel`, with D = `PROMPTS` (`REUSE_PROMPTS` when num_iterations > 1), or the dataset size
        clipped to [8, 256] when `run.dataset_size` is given.

    Raises:
        PgrpoSimError: `run` is not a `RunConfig`, or `log_format`, `steps` or `horizon` is out of range.
    """
    check_run_config(run)
    check_choice("log_format", log_format, LOG_FORMATS)
    check_steps(steps)
    check_range("horizon", horizon, 1, integer=True)
    per = run.steps_per_rollout if log_format not in TRL_FORMATS else 1
    horizon = run.max_steps or horizon or steps
    default = PROMPTS if run.num_iterations == 1 else REUSE_PROMPTS
    prompts = default if run.dataset_size is None else int(np.clip(run.dataset_size, 8, 4 * PROMPTS))
    return PopulationModel(
        run=run, steps=int(steps), optimizer_steps_per_logged=per, horizon=int(horizon), prompts=prompts
    )


def synthetic_log(run: RunConfig, theta, steps: int, *, seed: int = 0, scale: float = 1.0) -> TrainingLog:
    """A log with known θ, logged as TRL would: a sampled-mode run over a dataset of N = `run.dataset_size`
    (default P) prompts with logit-normal starts at their quantiles, P = `run.prompts_per_step` per rollout drawn
    without replacement, G completions each; per step the batch's `reward`, `reward_std` (mean within-group std)
    and `frac_reward_zero_std`. round(c·N) prompts are unsolvable (both arms reward 0). Use N = P: with N > P
    the prompts have no shared parameters, so each learns only when drawn and a batch of not-yet-drawn prompts
    shows no learning (the model's prompts learn at every step, as an LLM's shared parameters let them).

    The model's per-prompt step is s × learning_rate × m per epoch; in the dataset run a prompt is in a rollout
    with probability P/dataset and carries weight m/P there, so the run takes η = s·lr·dataset. `scale`
    multiplies the logged rewards (as a reward worth `scale` when correct).

    Args:
        run: the run's configuration (`RunConfig`); N = `run.dataset_size`, else `run.prompts_per_step`.
        theta: the true θ (`PARAMETERS` only, no affine entries); shape (4,).
        steps: optimiser steps after the first; integer in [1, 10⁸].
        seed: the sampled run's PRNG seed; integer in [0, 2³² − 1].
        scale: factor on the logged `reward` and `reward_std` (the reward of a correct completion); > 0.

    Returns:
        A `TrainingLog` of format "synthetic": steps+1 records at steps 1 … steps+1 (one per optimiser step) with
        `reward` and `reward_std` (in [0, scale]) and `zero_std_frac` (in [0, 1]).

    Raises:
        PgrpoSimError: `run`, `steps`, `seed` or `scale` is invalid, or `theta` is not of shape (4,).
    """
    model = population_model(run, steps, log_format="synthetic")
    check_seed(seed)
    check_range("scale", scale, 0.0, low_open=True)
    if np.shape(theta) != (len(PARAMETERS),):
        raise PgrpoSimError(
            f"theta must hold {len(PARAMETERS)} numbers ({', '.join(PARAMETERS)}), got shape {np.shape(theta)}"
        )
    theta, dataset = np.asarray(theta, float), run.dataset_size or run.prompts_per_step
    unsolvable = round(float(dataset / (1 + np.exp(-theta[3]))))
    learnable = dataset - unsolvable
    z = jax.scipy.stats.norm.ppf((np.arange(learnable) + 0.5) / max(learnable, 1))
    x = np.concatenate([theta[0] + np.exp(theta[1]) * np.asarray(z), np.zeros(unsolvable)])
    rewards = np.zeros((dataset, 2))
    rewards[:learnable, 0] = 1.0
    one = model.config()
    config = bandit.config(
        n_prompts=dataset,
        rewards=rewards,
        init_logits=np.stack([-np.logaddexp(0, -x), -np.logaddexp(0, x)], -1),
        learning_rate=float(np.exp(theta[2]) * run.learning_rate * dataset),
        beta=run.beta,
        num_generations=run.num_generations,
        advantage=one.advantage,
        epsilon=float(one.epsilon),
        epsilon_high=float(one.epsilon_high),
        lag_model="refresh" if run.steps_per_rollout > 1 else "none",  # m mini-batches of a rollout: reuse
        lag=run.steps_per_rollout if run.steps_per_rollout > 1 else 0,
        minibatches=run.steps_per_generation,
        batch_prompts=run.prompts_per_step,
        lr_scheduler_type=one.lr_scheduler_type,
        warmup_steps=int(one.warmup_steps) * run.steps_per_generation,
        decay_steps=int(one.decay_steps) * run.steps_per_generation,
    )
    sim = simulate(config, steps, mode="sampled", key=jax.random.key(seed))
    read = np.arange(steps + 1)  # one record per optimiser step, as TRL logs
    names = {"reward": sim.batch_reward, "reward_std": sim.group_reward_std, "zero_std_frac": sim.zero_adv_frac}
    values = {k: np.asarray(v, float)[0, read] for k, v in names.items()}
    values["reward"] = values["reward"] * scale
    values["reward_std"] = values["reward_std"] * scale
    records = [{"step": float(i + 1), **{k: float(v[i]) for k, v in values.items()}} for i in range(steps + 1)]
    return tidy(records, format="synthetic", path=None, columns={k: k for k in values})
