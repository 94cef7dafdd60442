"""Runs of the bandit (docs/design.md §3, "Measured each step"): `run` and `run_loop`, the scanned loop of `step`
or of rollout reuse's branches; `simulate`, the checked and jitted entry point, with its read-outs (`Run`,
`STEP_READOUTS`), a checkpointed scan for reverse-mode derivatives and the divergence flags; and
`simulate_in_chunks`, the same run in pieces that Ctrl-C can stop."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from ...base.autodiff import scan
from ...base.checks import as_key, check_choice, check_seeds, check_steps, in_range, nan_unless
from ...base.waiting import interruptible
from ..grpo import ADVANTAGES
from .common import check_mode
from .configuration import LEAF_RANGES, Config
from .enumeration import rewards_are_binary, rollout_outcomes
from .optimizer import make_optimizer
from .readouts import STEP_READOUTS, attributes
from .reuse import collapse_branches, reuse_branch_step
from .state import State, initial_state, step

RunFields = NamedTuple(
    "RunFields",
    [  # the fields computed from STEP_READOUTS: pyright reads only literal field lists
        *((name, Array | None if name == "true_reward" else Array) for name in STEP_READOUTS),  # pyright: ignore[reportArgumentType]
        ("final_logits", Array),
        ("final_opt_state", optax.OptState),
        ("diverged", Array),
        ("diverged_step", Array),
    ],
)


class Run(RunFields):
    __slots__ = ()

    @property
    def readouts(self) -> dict[str, Array]:
        """The per-step read-outs by name (`STEP_READOUTS`, those computed), as the language model's `Run` holds
        them: `run.readouts["reward"]` is `run.reward` on both levels."""
        return {name: getattr(self, name) for name in STEP_READOUTS if getattr(self, name) is not None}


Run.__doc__ = """Result of `simulate`: the per-step read-outs of `models.bandit.readouts.READOUTS` and the final state.

Per-step arrays have shape (steps+1,) in expected mode and (seeds, steps+1) in sampled mode; index n describes the
policy θ_n (n = 0 is the start) and the update taken from it; a read-out left out by `simulate(readouts=…)` is None.
After a run diverges (`diverged`, at update `diverged_step`, −1 if never) its per-step values are NaN. Expected-mode
rollout reuse (lag model "refresh") follows one branch per possible rollout of the current cycle: its read-outs are
averages over the branches (the expected reward E[p(θ_n)]), and at each refresh the branches collapse into their
weighted mean state (`collapse_branches`), from which the next cycle starts; so `final_logits` is that mean, and
p(final_logits) differs from the last `reward` by the branches' spread.

""" + "\n".join(
    [
        attributes(STEP_READOUTS),
        "    final_logits: θ after the last update; (prompts, arms), with a leading seeds axis when sampled.",
        "    final_opt_state: the optimiser state after the last update (an optax state pytree).",
        "    diverged: whether the run diverged (a non-finite value); bool, (seeds,) when sampled.",
        "    diverged_step: the update at which it diverged, −1 if never; int, (seeds,) when sampled.",
    ]
)


def valid_hyperparameters(config: Config) -> Array:
    """Whether every hyperparameter leaf is in the range `Config` checks eagerly (a bool array): the in-jit
    form of those checks, for traced values (a caller's `vmap` may hold an η ≤ 0, or a stale lag beyond the
    `max_lag` its buffer holds, which would wrap around it).

    Args:
        config: the configuration (`Config`), concrete or traced: its lag (against the lag model, `max_lag`
            and `minibatches`), the leaves of `LEAF_RANGES` (those not None), the advantage code, and the step
            counts `ref_sync_steps`, `warmup_steps` and `decay_steps`.

    Returns:
        A bool array, 0-d for one configuration (the broadcast shape of the leaves if they carry axes): True where
        every range holds.
    """
    ok = in_range(config.lag, 0, config.max_lag if config.lag_model == "stale" else None)
    if config.lag_model == "refresh":  # whole epochs of mini-batches
        ok &= config.lag % config.minibatches == 0
    if config.lag_model == "none":
        ok &= config.lag == 0
    for name, interval in LEAF_RANGES.items():
        if getattr(config, name) is not None:
            ok &= interval.holds(getattr(config, name))
    ok &= in_range(config.advantage, 0, len(ADVANTAGES) - 1) & in_range(config.warmup_steps, 0)
    for name in ("ref_sync_steps", "decay_steps"):  # a step count (0 would divide by zero)
        if getattr(config, name) is not None:
            ok &= in_range(getattr(config, name), 1)
    if config.decay_steps is not None and config.lr_scheduler_type in ("linear", "cosine"):
        ok &= config.warmup_steps <= config.decay_steps
    return ok


def run(
    config: Config, key: Array, steps: int, mode: str, *, binary_rewards: bool = False, checkpoint: bool = False
) -> Run:
    """(Low-level API) one run of `steps` updates (a single seed), unjitted and unchecked; pure, so it can be
    vmapped over configs and keys inside the caller's own jit (`simulate` is the checked, jitted entry).
    `binary_rewards`: every reward is exactly 0 or 1, which lets expected-mode reuse enumerate fewer rollouts.
    `checkpoint`: reverse-mode derivatives keep O(√steps) states (`base.autodiff.scan`). A run whose (traced)
    hyperparameters are out of range (`valid_hyperparameters`) steps by a NaN η: diverged at step 0, NaN after.

    Args:
        config: the configuration (`Config`); unchecked.
        key: a JAX PRNG key (not an int seed), split into one key per step; unused in expected mode.
        steps: optimiser steps (updates); a static integer >= 1.
        mode: "expected" or "sampled" (`MODES`); static.
        binary_rewards: expected-mode reuse (lag model "refresh") only: every reward is exactly 0 or 1 (default
            False; `rewards_are_binary` decides it for `simulate`).
        checkpoint: rematerialise blocks of about √steps steps on the backward pass (default False).

    Returns:
        A `Run` of one seed: per-step read-outs of shape (steps + 1,) (`true_reward` None without true
        rewards), `final_logits` (D, N), `final_opt_state`, and 0-d `diverged` (bool) and `diverged_step` (int32).

    Raises:
        PgrpoSimError: (while tracing) for a configuration `check_mode` refuses in `mode`, or from
            `rollout_outcomes` (expected-mode reuse).
    """
    carry, update, final_state = run_loop(config, mode, binary_rewards=binary_rewards)
    keys = jax.random.split(key, steps + 1)
    carry, metrics = scan(update, carry, keys[:steps], steps, checkpoint=checkpoint)
    _, last = update(carry, keys[steps])
    metrics = jax.tree.map(lambda seq, end: jnp.concatenate([seq, end[None]]), metrics, last)
    return _bandit_run(metrics, final_state(carry))


def run_loop(
    config: Config, mode: str, *, binary_rewards: bool = False
) -> tuple[Any, Callable[[Any, Array], tuple[Any, dict[str, Array | None]]], Callable[[Any], State]]:
    """(Low-level API) the loop of `run`: (carry, update, final_state), its carry before step 0, its step
    (carry, key) → (carry, the read-outs of the step) (the key unused in expected mode), and the `State` of a
    carry. Pure and unchecked, as `run`; for a caller that runs the steps in pieces (`simulate_in_chunks`).

    Args:
        config: the configuration (`Config`); unchecked. Its η becomes NaN unless `valid_hyperparameters`.
        mode: "expected" or "sampled" (`MODES`); static.
        binary_rewards: as `run`'s (keyword only, default False).

    Returns:
        (carry, update, final_state): the carry of step 0, the `State` of `initial_state` (expected-mode
        reuse: (branches, weights), a `State` with a leading axis of O rollouts and their (O,) weights);
        `update`, (carry, key) → (carry, the read-outs of the step: a dict keyed by `STEP_READOUTS` of 0-d
        floats); `final_state`, carry → its `State` (reuse: `collapse_branches`).

    Raises:
        PgrpoSimError: for a configuration `check_mode` refuses in `mode` (expected-mode reuse: when called;
            otherwise when `update` is traced).
    """
    config = eqx.tree_at(
        lambda c: c.learning_rate, config, nan_unless(valid_hyperparameters(config), config.learning_rate)
    )
    optimizer = make_optimizer(config)
    state = initial_state(config, optimizer, config.init_logits)
    if mode == "expected" and config.lag_model == "refresh":
        check_mode(config, mode)
        outcomes = rollout_outcomes(config, binary_rewards=binary_rewards)
        size = outcomes[0].shape[0]
        branches = jax.tree.map(lambda x: jnp.broadcast_to(x, (size, *jnp.shape(x))), state)
        weights = jnp.full(size, 1.0 / size, config.rewards.dtype)  # replaced at the first refresh (step 0)

        def update(carry: tuple[State, Array], _):
            b, w, m = reuse_branch_step(config, optimizer, *carry, outcomes)
            return (b, w), m

        return (branches, weights), update, lambda carry: collapse_branches(*carry)
    return state, functools.partial(step, config, optimizer, mode), lambda carry: carry


def _bandit_run(metrics: dict, final: State) -> Run:
    return Run(
        **metrics,
        final_logits=final.logits,
        final_opt_state=final.opt_state,
        diverged=final.diverged,
        diverged_step=final.diverged_step,
    )


@functools.partial(jax.jit, static_argnames=("steps", "mode", "seeds", "binary_rewards", "readouts", "checkpoint"))
def _simulate(
    config: Config,
    key: Array,
    steps: int,
    mode: str,
    seeds: int,
    binary_rewards: bool = False,
    readouts: tuple[str, ...] = STEP_READOUTS,
    checkpoint: bool = False,
) -> Run:
    if mode == "expected":
        out = run(config, key, steps, mode, binary_rewards=binary_rewards, checkpoint=checkpoint)
    else:
        out = jax.vmap(lambda k: run(config, k, steps, mode, checkpoint=checkpoint))(jax.random.split(key, seeds))
    return out._replace(**{name: None for name in STEP_READOUTS if name not in readouts})  # dead code for XLA


def simulate(
    config: Config,
    steps: int,
    *,
    mode: str = "expected",
    seeds: int = 1,
    key: Array | None = None,
    binary_rewards: bool | None = None,
    readouts: Sequence[str] | None = None,
    checkpoint: bool = False,
) -> Run:
    """Run GRPO on the bandit for `steps` optimiser steps: the checked, jitted entry point.

    Jitted once per static structure (config's static fields, steps, mode, seeds, readouts): other hyperparameter
    values reuse the compiled code, and callers may `jax.vmap` over config leaves. Derivatives (forward or reverse
    mode) are exact for runs that do not diverge; a diverged run's (its read-outs NaN, its final state frozen) are
    not meaningful.

    Args:
        config: the bandit configuration (`config`).
        steps: optimiser steps; an integer in [1, MAX_STEPS].
        mode: "expected" (the exact expectation over the group: one deterministic run; `seeds` and `key` ignored)
            or "sampled" (drawn groups).
        seeds: independent sampled runs; an integer in [1, MAX_SEED].
        key: a JAX PRNG key or an int seed; default `jax.random.key(0)`.
        binary_rewards: expected-mode reuse only: every reward is exactly 0 or 1, so fewer rollouts are
            enumerated; None detects it from concrete rewards (a caller whose rewards are traced may assert it).
        readouts: the per-step read-outs to compute (names in `STEP_READOUTS`; default all), the others are None:
            a run that keeps only what it needs compiles faster (the reward alone: in a third of the XLA time in
            expected mode, half in sampled mode) and holds seeds × (steps + 1) floats per read-out less.
        checkpoint: for reverse-mode derivatives of long runs: the steps run in blocks of about √steps,
            rematerialised on the backward pass, so it holds O(√steps) states instead of every step's (through a
            wide `vmap` also about twice as fast: benchmarks/RESULTS.md, "Gradients through a run"). Values and
            forward-mode derivatives are the same either way.

    Returns:
        A `Run`: per-step read-outs of shape (steps+1,) in expected mode, (seeds, steps+1) in sampled mode,
        the final state and the divergence flags.

    Raises:
        PgrpoSimError: an argument out of its range, or a configuration `mode` has no exact form for
            (`check_mode`).
    """
    key, binary, keep = _simulate_args(
        config, steps, mode=mode, seeds=seeds, key=key, binary_rewards=binary_rewards, readouts=readouts
    )
    return _simulate(
        config,
        key,
        steps=int(steps),
        mode=mode,
        seeds=int(seeds),
        binary_rewards=binary,
        readouts=keep,
        checkpoint=bool(checkpoint),
    )


def _simulate_args(config, steps, *, mode="expected", seeds=1, key=None, binary_rewards=None, readouts=None):
    """`simulate`'s checks; returns its key, whether expected-mode reuse takes rewards as binary, and the read-outs
    to keep."""
    check_steps(steps)
    if isinstance(readouts, str):  # one name
        readouts = (readouts,)
    if readouts is not None:
        for name in readouts:
            check_choice("readouts", name, STEP_READOUTS)
    check_seeds(seeds)
    check_mode(config, mode)
    key = as_key(0 if key is None else key)
    binary = rewards_are_binary(config, binary_rewards) and mode == "expected" and config.lag_model == "refresh"
    keep = STEP_READOUTS if readouts is None else tuple(name for name in STEP_READOUTS if name in readouts)
    return key, binary, keep


CHUNK_WORK = 2**17
"""Run-steps (steps × seeds) per piece of `simulate_in_chunks`: ~0.07 s of sampled steps on an idle CPU core pair
(smaller pieces than this cost no measurable speed)."""


def simulate_in_chunks(config: Config, steps: int, *, chunk: int | None = None, **options) -> Run:
    """`simulate` (same arguments and numbers), its steps run in pieces of `chunk` steps (default: `CHUNK_WORK`
    run-steps a piece) that carry the state: one compiled program called once a piece, whose read-outs are
    brought to the host (as NumPy arrays) before the next starts. Each piece (and the keys of every step, drawn
    first) is waited for in a thread (`base.waiting.interruptible`), so Ctrl-C stops a long run at once, its
    compilation included, where `simulate` is one call that runs to its end. The same keys drive the same steps: the
    numbers equal `simulate`'s, up to float rounding where XLA compiles the loop differently.

    Args:
        config: the bandit configuration.
        steps: optimiser steps; an integer in [1, MAX_STEPS].
        chunk: steps per piece; None: `CHUNK_WORK` run-steps a piece.
        **options: `simulate`'s keyword arguments mode, seeds, key, binary_rewards and readouts (not checkpoint:
            a piece is not differentiated through).

    Returns:
        The `Run` of `simulate`, its per-step read-outs as NumPy arrays.
    """
    key, binary, keep = _simulate_args(config, steps, **options)
    mode, steps, seeds = options.get("mode", "expected"), int(steps), int(options.get("seeds", 1))
    runs = seeds if mode == "sampled" else 1
    chunk = min(steps + 1, chunk or max(1, CHUNK_WORK // runs))
    padded = -(-(steps + 1) // chunk) * chunk
    carry, keys = interruptible(
        lambda: jax.block_until_ready(_chunks_start(config, key, steps, padded, mode, seeds, binary))
    )

    def piece(carry, first):
        carry, metrics = _chunk_advance(config, carry, keys, first, steps, chunk, mode, binary, keep)
        return carry, jax.tree.map(np.asarray, metrics)  # waits for the piece

    pieces = []
    for first in range(0, steps + 1, chunk):
        carry, metrics = interruptible(functools.partial(piece, carry, first))
        pieces.append(metrics)
    axis = 1 if mode == "sampled" else 0  # the step axis
    within = (slice(None),) * axis + (slice(steps + 1),)
    joined = {k: np.concatenate([p[k] for p in pieces], axis)[within] for k in keep if pieces[0][k] is not None}
    final = _chunks_final(config, carry, mode, binary)
    return _bandit_run({name: joined.get(name) for name in STEP_READOUTS}, final)


@functools.partial(jax.jit, static_argnames=("steps", "padded", "mode", "seeds", "binary"))
def _chunks_start(config, key, steps, padded, mode, seeds, binary):
    """The carry before step 0 and the keys of every step (as `_simulate` splits them), padded to `padded` steps."""
    carry = lambda: run_loop(config, mode, binary_rewards=binary)[0]
    pad = lambda k: jnp.concatenate([k, jnp.broadcast_to(k[-1:], (padded - steps - 1,))])
    if mode == "expected":
        return carry(), pad(jax.random.split(key, steps + 1))
    seed_keys = jax.random.split(key, seeds)
    return jax.vmap(lambda _: carry())(seed_keys), jax.vmap(lambda k: pad(jax.random.split(k, steps + 1)))(seed_keys)


@functools.partial(jax.jit, static_argnames=("chunk", "mode", "binary", "keep"))
def _chunk_advance(config, carry, keys, first, steps, chunk, mode, binary, keep):
    """Steps `first` … `first + chunk - 1` of the run(s) and their read-outs; the state stays at step `steps`."""
    _, update, _ = run_loop(config, mode, binary_rewards=binary)

    def piece(carry, keys):
        def body(carry, x):
            n, k = x
            new, metrics = update(carry, k)
            carry = jax.tree.map(lambda a, b: jnp.where(n < steps, a, b), new, carry)  # step `steps`: read only
            return carry, {name: metrics[name] for name in keep}

        return jax.lax.scan(body, carry, (first + jnp.arange(chunk), jax.lax.dynamic_slice_in_dim(keys, first, chunk)))

    return jax.vmap(piece)(carry, keys) if mode == "sampled" else piece(carry, keys)


@functools.partial(jax.jit, static_argnames=("mode", "binary"))
def _chunks_final(config, carry, mode, binary):
    final = run_loop(config, mode, binary_rewards=binary)[2]
    return jax.vmap(final)(carry) if mode == "sampled" else final(carry)
