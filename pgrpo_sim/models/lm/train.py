"""GRPO training of the language-model level's policy, one pure function per configuration (jit/vmap-able).

Each GRPO step does what TRL 1.x `GRPOTrainer` does for one generation batch: draw `prompts_per_step` training
prompts, sample G completions of each at `temperature` (each prompt's G completions consecutive, as TRL's
`RepeatSampler` orders them), score them (`task_reward`), form group advantages (`group_advantages`, TRL's
ε 1e-4), compute π_old's log-probabilities (a teacher-forced pass at the rollout's parameters; with one optimiser
step per rollout TRL uses the current log-probabilities, detached, and so does this) and the reference's (the
start policy, when `kl_reference`), shuffle the batch and split it into `steps_per_generation` mini-batches, and
take `num_iterations` passes over them, one AdamW step per mini-batch (`loss.grpo_loss`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import as_key, check_seeds, check_steps
from ...base.compile_options import OPTIMISED_CODEGEN
from ...base.errors import PgrpoSimError
from ..grpo import ADVANTAGES, group_advantages
from ..schedules import schedule_factor
from .configuration import ADVANTAGE_EPS, Config
from .loss import grpo_loss
from .policy import Policy, completion_logps, sample
from .pretrain import pretrained_policy
from .task import EOS, eval_prompts, format_ok, response_mask, task_prompts, task_reward

READOUTS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "format_ok",
    "entropy",
    "completions/mean_length",
    "completions/clipped_ratio",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "kl",
    "loss",
    "grad_norm",
    "eval_accuracy",
)
"""Read-outs per GRPO step, under TRL's names where TRL has one. Rollout statistics (reward — its mean, reward_std
— as TRL's: the mean over groups of the unbiased within-group std, the batch's with batch-scaled advantages,
frac_reward_zero_std, format_ok — share of well-formed completions, completions/…) are
of the rollout drawn at that step; loss-side ones (entropy, clip_ratio/…, kl — NaN without `kl_reference`, loss,
grad_norm — before clipping) are means over the step's optimiser steps. `eval_accuracy`: greedy (temperature 0)
accuracy on the task's held-out prompts before the step's update, every `eval_every` steps (NaN between)."""


LOSS_READOUTS = ("loss", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "kl",
                 "grad_norm")  # fmt: skip
"""The read-outs `_update` averages over a rollout's optimiser steps, in the order it sums them."""


def reward_spread(groups: Array, advantage: Array) -> tuple[Array, Array]:
    """TRL's `reward_std` and `frac_reward_zero_std` of one rollout.

    Args:
        groups: the rollout's rewards, (prompts, G) float.
        advantage: the advantage kind's code (`ADVANTAGES`; traced): "batch" scales by the batch's std.

    Returns:
        (reward_std, frac_reward_zero_std), scalars: the mean over groups of the unbiased within-group std and the
        share of groups whose rewards are all equal; with batch-scaled advantages the batch's unbiased std and
        whether all of its rewards are equal (0 or 1), as TRL computes the std it scales by.
    """
    batch = advantage == ADVANTAGES.index("batch")
    rewards = groups.ravel()
    spread = jnp.where(batch, jnp.std(rewards, ddof=1), jnp.mean(jnp.std(groups, -1, ddof=1)))
    equal = jnp.where(batch, jnp.all(rewards == rewards[0]), jnp.all(groups == groups[:, :1], -1))
    return spread, jnp.mean(equal.astype(jnp.float32))


class Run(NamedTuple):
    """A run's read-outs (`READOUTS` → float32[steps], leading axes for vmapped runs), final parameters, and
    whether it diverged (non-finite parameters or loss) and at which GRPO step (−1 if never). From its divergence
    on, a run's read-outs are NaN and its parameters stay those before the divergence.

    Shapes are one run's; `simulate` adds a leading (seeds,) axis to every array, `simulate_each` a
    (configurations,) one.

    Attributes:
        readouts: `READOUTS` name → float32 (steps,), one value per GRPO step (rewards and shares in [0, 1],
            entropy and kl in nats, lengths in tokens); device arrays, or NumPy in a run held on the host.
        params: the final policy (`Policy`); None in a sweep's saved runs and a run held on the host.
        diverged: whether the run diverged; bool scalar.
        diverged_step: the GRPO step at which it diverged, −1 if never; int32 scalar.
    """

    readouts: Mapping[str, ArrayLike]
    params: Policy | None
    diverged: ArrayLike
    diverged_step: ArrayLike


def run_arrays(run: Run) -> dict[str, ArrayLike]:
    """A run's arrays by name, as a `.npz` file keeps them (`np.savez(file, **run_arrays(run))`): every read-out
    under its name, `diverged` and `diverged_step`; not the parameters."""
    return dict(run.readouts, diverged=run.diverged, diverged_step=run.diverged_step)


def host_run(arrays: Mapping[str, ArrayLike]) -> Run:
    """The run `run_arrays` gave (e.g. a loaded `.npz` file): the read-outs `READOUTS`, `diverged` and
    `diverged_step`, as NumPy arrays, `params` None.

    Raises:
        KeyError: an array is missing (a file of other code, or not a run's).
    """
    readouts = {name: np.asarray(arrays[name]) for name in READOUTS}
    return Run(readouts, None, np.asarray(arrays["diverged"]), np.asarray(arrays["diverged_step"]))


def make_optimizer(config: Config, run_steps: ArrayLike) -> optax.GradientTransformation:
    """HF Trainer's optimiser as optax: global-norm clipping at `max_grad_norm` (∞: off; optax divides by the norm,
    torch by norm + 1e-6), then AdamW (decoupled weight decay on matrices only, as HF excludes biases and LayerNorm)
    at `learning_rate` × the HF schedule factor (`models.schedules.schedule_factor`) over `config.max_steps`
    optimiser steps, or over the run's `run_steps` when `max_steps` is 0.

    Args:
        config: the run's `Config` (in `make_run`, the `hyper` one, whose hyperparameters may be traced).
        run_steps: the simulated run's length, in optimiser steps (GRPO steps × `steps_per_rollout`); ≥ 1; may be
            traced.

    Returns:
        The optax optimiser (clip, then AdamW).
    """
    total = jnp.where(config.max_steps > 0, config.max_steps, run_steps)

    def learning_rate(count):
        factor = schedule_factor(
            config.lr_scheduler_type, count, config.warmup_steps, total, jnp, config.learning_rate.dtype
        )
        return config.learning_rate * factor

    adamw = optax.adamw(
        learning_rate,
        b1=config.adam_beta1,
        b2=config.adam_beta2,
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
        mask=lambda params: jax.tree.map(lambda leaf: leaf.ndim >= 2, params),
    )
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adamw)


NOT_DIFFERENTIABLE = (
    "the language-model level has no derivative in its hyperparameters: its rewards count sampled tokens (piecewise "
    "constant), so jax.grad through a run would be 0; compare runs at nearby values over many seeds, or "
    "differentiate the bandit level (its expected mode is exact and differentiable)"
)
"""The one-line refusal of a derivative through a run (`jax.grad`, `jax.jvp`, `jax.jacfwd`, …)."""


@jax.custom_jvp
def _not_differentiable(x: Array) -> Array:
    """The identity; differentiating through it raises `PgrpoSimError` (`NOT_DIFFERENTIABLE`) while tracing."""
    return x


@_not_differentiable.defjvp
def _refuse_derivative(primals, tangents):
    raise PgrpoSimError(NOT_DIFFERENTIABLE)


def _finite(tree) -> Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)]))


_draw = jax.vmap(sample, in_axes=(None, 0, 0, None, None))
"""`sample` for a batch of prompts, one key each."""
_logps = jax.vmap(completion_logps, in_axes=(None, 0, 0, None))
"""`completion_logps` for a batch of (prompt, completion) pairs."""


def _eval_accuracy(config: Config, params: Policy, held_out: tuple[Array, Array], key: Array) -> Array:
    """Greedy (temperature 0) accuracy of `params` on the task's held-out prompts (`eval_prompts`)."""
    prompts, answers = held_out
    greedy, _ = _draw(params, prompts, jax.random.split(key, prompts.shape[0]), 0.0, config.task.max_response_len)
    return jnp.mean(task_reward(config.task, greedy, answers))


def _old_logps(config: Config, hyper: Config, params: Policy, prompts: Array, completions: Array) -> Array:
    """π_old's log-probabilities of the rollout, (n, L): a teacher-forced pass at the rollout's parameters when a
    rollout takes more than one optimiser step; zeros (unread: the loss takes the current ones, detached, as TRL
    does) when it takes one. With one mini-batch per pass the epochs are traced, so the pass runs under `lax.cond`
    (skipped, not masked, when the epochs are not vmapped)."""
    if config.steps_per_generation > 1:
        return _logps(params, prompts, completions, hyper.temperature)[0]
    return jax.lax.cond(
        hyper.num_iterations > 1,
        lambda: _logps(params, prompts, completions, hyper.temperature)[0],
        lambda: jnp.zeros(completions.shape, jnp.float32),
    )


def _rollout(config: Config, hyper: Config, params: Policy, start: Policy, key: Array) -> tuple[dict, dict]:
    """One generation batch, as TRL makes it: `prompts_per_step` prompts, G completions each (consecutive), their
    rewards and group advantages, π_old's and the reference's log-probabilities where the loss needs them, shuffled
    and split into `steps_per_generation` mini-batches. Returns (the batch, arrays with a leading mini-batch axis; the
    rollout's read-outs: reward, reward_std, frac_reward_zero_std, format_ok, completions/…)."""
    spec, g, p, n, s = (
        config.task, config.num_generations, config.prompts_per_step, config.generation_batch,
        config.steps_per_generation,
    )  # fmt: skip
    prompt_key, sample_key, shuffle_key = jax.random.split(key, 3)
    prompts, answers = task_prompts(spec, prompt_key, p)
    prompts, answers = jnp.repeat(prompts, g, axis=0), jnp.repeat(answers, g)
    completions, _ = _draw(params, prompts, jax.random.split(sample_key, n), hyper.temperature, spec.max_response_len)
    lengths = response_mask(spec, completions)
    truncated = ~jnp.any(completions == EOS, axis=-1)
    mask = lengths * ~truncated[:, None] if config.mask_truncated_completions else lengths
    rewards = task_reward(spec, completions, answers)
    groups = rewards.reshape(p, g)
    advantages = group_advantages(groups, hyper.advantage, eps=ADVANTAGE_EPS).ravel()
    batch = dict(prompts=prompts, completions=completions, mask=mask, advantages=advantages)
    batch["old"] = _old_logps(config, hyper, params, prompts, completions)
    if config.kl_reference:
        batch["ref"] = _logps(start, prompts, completions, hyper.temperature)[0]
    order = jax.random.permutation(shuffle_key, n)
    batch = jax.tree.map(lambda x: x[order].reshape(s, n // s, *x.shape[1:]), batch)
    reward_std, zero_std = reward_spread(groups, hyper.advantage)
    readouts = {
        "reward": jnp.mean(rewards),
        "reward_std": reward_std,
        "frac_reward_zero_std": zero_std,
        "format_ok": jnp.mean(format_ok(spec, completions).astype(jnp.float32)),
        "completions/mean_length": jnp.mean(jnp.sum(lengths, -1)),
        "completions/clipped_ratio": jnp.mean(truncated.astype(jnp.float32)),
    }
    return batch, readouts


def _update(config: Config, hyper: Config, optimizer, params: Policy, opt_state, batch: dict):
    """`num_iterations` passes over the batch's mini-batches, one optimiser step each (`grpo_loss`), in a loop whose
    length is traced. Returns the new parameters and optimiser state, the loss-side read-outs (means over the
    steps) and whether every loss was finite."""
    s = config.steps_per_generation
    items = jnp.sum(batch["mask"])
    reused = hyper.steps_per_rollout > 1  # else π_old is the current policy, detached (TRL's num_iterations = 1)

    def optimiser_step(i, state):
        params, opt_state, sums, finite = state
        mini = jax.tree.map(lambda x: x[i % s], batch)

        def loss(params):
            logp, entropy = _logps(params, mini["prompts"], mini["completions"], hyper.temperature)
            return grpo_loss(
                logp,
                jnp.where(reused, mini["old"], jax.lax.stop_gradient(logp)),
                mini["advantages"],
                mini["mask"],
                loss_type=hyper.loss_type,
                epsilon=hyper.epsilon,
                epsilon_high=hyper.epsilon_high,
                delta=hyper.delta,
                beta=hyper.beta,
                ref_logp=mini.get("ref"),
                entropy=entropy,
                num_items_in_batch=items,
                steps_per_generation=s,
                importance_sampling_level=config.importance_sampling_level,
            )

        (value, stats), grads = jax.value_and_grad(loss, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        step = (value, stats.entropy, stats.clip_low, stats.clip_high, stats.clip_region, stats.kl,
                optax.tree.norm(grads))  # fmt: skip
        sums = jax.tree.map(lambda total, x: total + x.astype(jnp.float32), sums, step)
        return optax.apply_updates(params, updates), opt_state, sums, finite & jnp.isfinite(value)

    zeros = (jnp.zeros((), jnp.float32),) * len(LOSS_READOUTS)
    params, opt_state, sums, finite = jax.lax.fori_loop(
        0, hyper.steps_per_rollout, optimiser_step, (params, opt_state, zeros, jnp.asarray(True))
    )
    readouts = {name: total / hyper.steps_per_rollout for name, total in zip(LOSS_READOUTS, sums, strict=True)}
    return params, opt_state, readouts, finite


def make_run(config: Config, steps: int, start: Policy | None = None):
    """`run(hyper, key) -> Run`: `steps` GRPO steps from the start policy, pure and jit/vmap-able. `hyper` is an
    `Config` with `config`'s static structure (its traced hyperparameters may be vmapped); `start` the initial
    (and reference) parameters, by default the SFT start `pretrained_policy(config.task, config.policy,
    config.start_accuracy, config.sft_seed, config.start_format)`.

    Args:
        config: the run's `Config` (its static structure is the program's).
        steps: GRPO steps; integer in [1, 10⁸].
        start: the initial and reference `Policy` (of `config.policy`'s shape); None: the SFT start (trained or
            read from the cache now).

    Returns:
        `run(hyper, key) -> Run`, `key` a JAX PRNG key or an int seed; read-outs float32 (steps,). `run` raises
        `PgrpoSimError` when `hyper`'s static structure is not `config`'s.

    Raises:
        PgrpoSimError: `config` is not a `Config` or `steps` is out of range; or as `pretrained_policy`.
    """
    if not isinstance(config, Config):
        raise PgrpoSimError(f"config must be a ps.lm.Config (build it with ps.lm.config), got {type(config).__name__}")
    check_steps(steps)
    if start is None:
        start = pretrained_policy(
            config.task, config.policy, config.start_accuracy, config.sft_seed, config.start_format
        )
    structure = jax.tree.structure(config)
    held_out = eval_prompts(config.task)

    def run(hyper: Config, key) -> Run:
        key = as_key(key)
        if jax.tree.structure(hyper) != structure:
            raise PgrpoSimError("hyper must have the static structure (sizes, code paths) of the run's config")
        # the policy is float32 (also under x64): so are its hyperparameters, or optax's state would change dtype;
        # a derivative with respect to them is refused (sampled tokens have none: it would be a silent 0)
        hyper = jax.tree.map(
            lambda x: _not_differentiable(x.astype(jnp.float32)) if jnp.issubdtype(x.dtype, jnp.floating) else x, hyper
        )
        optimizer = make_optimizer(hyper, steps * hyper.steps_per_rollout)
        eval_key, key = jax.random.split(key)

        def grpo_step(carry, xs):
            params, opt_state, diverged, diverged_step = carry
            index, step_key = xs
            eval_accuracy = jax.lax.cond(
                index % config.eval_every == 0,
                lambda params: _eval_accuracy(config, params, held_out, eval_key),
                lambda _: jnp.asarray(jnp.nan, jnp.float32),
                params,
            )
            batch, rollout_readouts = _rollout(config, hyper, params, start, step_key)
            new_params, new_opt_state, loss_readouts, finite = _update(
                config, hyper, optimizer, params, opt_state, batch
            )
            blown = ~(_finite(new_params) & finite)
            readouts = {**rollout_readouts, **loss_readouts, "eval_accuracy": eval_accuracy}
            readouts = {name: jnp.where(diverged, jnp.nan, readouts[name].astype(jnp.float32)) for name in READOUTS}
            now_diverged = diverged | blown
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(now_diverged, b, a), new, old)
            carry = (
                keep(new_params, params),
                keep(new_opt_state, opt_state),
                now_diverged,
                jnp.where(blown & ~diverged, index, diverged_step),
            )
            return carry, readouts

        start_state = optimizer.init(start)  # pyright: ignore[reportArgumentType]  # optax types no eqx.Module pytrees
        init = (start, start_state, jnp.asarray(False), jnp.asarray(-1, jnp.int32))
        xs = (jnp.arange(steps, dtype=jnp.int32), jax.random.split(key, steps))
        (params, _, diverged, diverged_step), readouts = jax.lax.scan(grpo_step, init, xs)
        return Run(readouts, params, diverged, diverged_step)

    return run


PROGRAM_CACHE_SIZE = 8
"""Compiled `simulate` programs kept, by static structure and steps (oldest dropped first)."""
_programs: dict = {}
_programs_lock = threading.Lock()


def _program(config: Config, steps: int, start: Policy | None, hyper_axis: int | None):
    """`make_run` vmapped over keys (and over the hyperparameters' leading axis when `hyper_axis` is 0) and
    jitted with optimised machine code (a run takes seconds; `base.compile_options.OPTIMISED_CODEGEN`); for the SFT
    start, one program per static structure, `steps` and vmap layout, so configurations that differ only in traced
    hyperparameters share its compilation."""
    cache_key = (jax.tree.structure(config), steps, hyper_axis)
    with _programs_lock:  # threads of one process (`calibration.language_model.cached_runs_each`) share the cache
        if start is None and cache_key in _programs:
            return _programs[cache_key]
        run = jax.vmap(make_run(config, steps, start), in_axes=(hyper_axis, 0))
        program = jax.jit(run, compiler_options=dict(OPTIMISED_CODEGEN))
        if start is None:
            while len(_programs) >= PROGRAM_CACHE_SIZE:
                _programs.pop(next(iter(_programs)))
            _programs[cache_key] = program
    return program


def _check_call(config, steps: int) -> None:
    if not isinstance(config, Config):
        raise PgrpoSimError(f"config must be a ps.lm.Config (build it with ps.lm.config), got {type(config).__name__}")
    check_steps(steps)


def simulate(config: Config, steps: int, *, seeds: int = 1, key=0, start: Policy | None = None) -> Run:
    """`steps` GRPO steps of `config` for `seeds` independent seeds (rollout randomness; one SFT start), vmapped
    in one compiled program: read-outs float32[seeds, steps]. `key` an int seed or a JAX key. With the SFT start
    (`start` None), a configuration that differs from an earlier one only in traced hyperparameters (learning rate,
    ε, β, temperature, …) reuses its compilation.

    Args:
        config: the run's `Config`.
        steps: GRPO steps; integer in [1, 10⁸].
        seeds: independent seeds; integer in [1, 2²⁰].
        key: an int seed in [0, 2³² − 1] or a JAX PRNG key; split into one key per seed.
        start: the initial and reference `Policy`; None: the SFT start of `config` (`pretrained_policy`).

    Returns:
        The `Run`, every array with a leading (seeds,) axis: read-outs float32 (seeds, steps).

    Raises:
        PgrpoSimError: `config` is not a `Config`, or `steps`, `seeds` or `key` is invalid; or as
            `pretrained_policy`.
    """
    _check_call(config, steps)
    check_seeds(seeds)
    keys = jax.random.split(as_key(key), seeds)
    return _program(config, steps, start, None)(config, keys)


def simulate_each(configs: list[Config], steps: int, key=0) -> Run:
    """`steps` GRPO steps of each configuration in `configs` (one static structure, traced hyperparameters free:
    e.g. one learning rate per run), each with its own seed drawn from `key`, vmapped in one compiled program from
    their shared SFT start: read-outs float32[len(configs), steps].

    Args:
        configs: `Config`s of one static structure; at least one.
        steps: GRPO steps; integer in [1, 10⁸].
        key: an int seed in [0, 2³² − 1] or a JAX PRNG key; split into one key per configuration.

    Returns:
        The `Run`, every array with a leading (len(configs),) axis: read-outs float32 (len(configs), steps).

    Raises:
        PgrpoSimError: `configs` is empty, holds a non-`Config` or two static structures, or `steps` or `key` is
            invalid; or as `pretrained_policy`.
    """
    if not configs:
        raise PgrpoSimError("configs must hold at least one Config")
    for config in configs:
        _check_call(config, steps)
    structure = jax.tree.structure(configs[0])
    if any(jax.tree.structure(c) != structure for c in configs):
        raise PgrpoSimError("configs must share one static structure (sizes, code paths); only hyperparameters vary")
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *configs)
    keys = jax.random.split(as_key(key), len(configs))
    return _program(configs[0], steps, None, 0)(stacked, keys)
