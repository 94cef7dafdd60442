"""One optimiser step of a run (low-level API; docs/design.md §3, "Off-policy lag: three models"): the run's state
(`State`, `initial_state`) and `step`, either mode under each lag model; `rollout_step`, the inner step on a
given rollout; the prompts of a rollout, its mini-batches and the reference sync; the read-outs of the policy
(`policy_metrics`); the divergence guard, which freezes a run whose logits become non-finite."""

from __future__ import annotations

from typing import NamedTuple, cast

import jax
import jax.numpy as jnp
import optax
from jax import Array

from ...base.autodiff import where_frozen
from ...base.errors import PgrpoSimError
from ...base.small_axes import axis_sum, softmax
from ..grpo import entropy, kl_divergence
from .common import UpdateStats, check_mode
from .configuration import Config
from .expected import expected_loss, on_policy_grad
from .sampled import draw_rollout, sampled_loss, sampled_on_policy_grad


class State(NamedTuple):
    """State of one run between steps (low-level API): the policy and its parameters, the optimiser's state, what
    the lag models and rollout reuse remember, the dataset's epoch, the step counter and the divergence guard.

    D prompts in the dataset, P per rollout (`Config.prompts_per_rollout`), N arms, G samples per group.
    Shapes are one run's: a `vmap` over seeds (sampled `simulate`) or the branches of expected-mode rollout reuse
    add leading axes.

    Attributes:
        logits: θ_n, (D, N) float logits (nats).
        params: the shared parameters W, (F, N), when prompts have features (θ = θ_0 + Φ W); (0, N) otherwise.
        opt_state: the optax state of the optimiser on the logits (or on W).
        old_logits: π_old's logits, (D, N): the current rollout's sampling policy ("refresh", "refresh_fresh");
            the start otherwise.
        history: the stale-lag ring buffer of past logits, (max_lag + 1, D, N) for "stale", (1, D, N) otherwise.
        ref_logits: the KL reference's logits, (D, N): `init_logits`, moved by reference sync.
        rollout_arms: the current rollout's arms, (P, G) int32 (reused by "refresh").
        rollout_rewards: their rewards, (P, G) float.
        rollout_order: the rollout's prompt order, (P,) int32, a permutation that sets its mini-batches (with
            minibatches > 1, a new one each pass).
        batch: the rollout's prompts, (P,) int32 indices into the dataset.
        dataset_order: the dataset epoch's order, (D,) int32, a permutation of the prompts.
        cursor: how many prompts of `dataset_order` are used, 0-d int32 (D at the start: the first batched
            rollout starts a shuffled epoch).
        step: the step counter n, 0-d int32.
        diverged: whether the logits became non-finite (the run then stays frozen), 0-d bool.
        diverged_step: the update at which it diverged, −1 if never; 0-d int32.
    """

    logits: Array
    params: Array
    opt_state: optax.OptState
    old_logits: Array
    history: Array
    ref_logits: Array
    rollout_arms: Array
    rollout_rewards: Array
    rollout_order: Array
    batch: Array
    dataset_order: Array
    cursor: Array
    step: Array
    diverged: Array
    diverged_step: Array


def initial_state(config: Config, optimizer, logits: Array) -> State:
    """(Low-level API) a run at rest at `logits`: zero optimiser state, π_old and the stale-lag history equal to it.

    Args:
        config: the configuration (`Config`); unchecked.
        optimizer: its optax transformation (`make_optimizer(config)`).
        logits: θ_0, (D, N) logits (`run` uses `config.init_logits`); with features, W starts at 0 and θ = logits
            + Φ W.

    Returns:
        The `State` of step 0 (shapes as in `State`): KL reference `config.init_logits`, rollout
        buffers zero, orders the identity, `cursor` D, not diverged.
    """
    history_len = config.max_lag + 1 if config.lag_model == "stale" else 1
    if config.features is None:
        params = jnp.zeros((0, logits.shape[-1]), logits.dtype)
        opt_state = optimizer.init(logits)
    else:
        params = jnp.zeros((config.features.shape[-1], logits.shape[-1]), logits.dtype)
        opt_state = optimizer.init(params)
    return State(
        logits=logits,
        params=params,
        opt_state=opt_state,
        old_logits=logits,
        history=jnp.broadcast_to(logits, (history_len, *logits.shape)),
        ref_logits=config.init_logits,
        rollout_arms=jnp.zeros((config.prompts_per_rollout, config.num_generations), jnp.int32),
        rollout_rewards=jnp.zeros((config.prompts_per_rollout, config.num_generations), logits.dtype),
        rollout_order=jnp.arange(config.prompts_per_rollout, dtype=jnp.int32),
        batch=jnp.arange(config.prompts_per_rollout, dtype=jnp.int32),
        dataset_order=jnp.arange(config.n_prompts, dtype=jnp.int32),
        cursor=jnp.asarray(config.n_prompts, jnp.int32),  # exhausted: the first rollout starts a shuffled epoch
        step=jnp.asarray(0, jnp.int32),
        diverged=jnp.asarray(False),
        diverged_step=jnp.asarray(-1, jnp.int32),
    )


def _expected_reward(logits: Array, rewards: Array) -> Array:
    return jnp.mean(axis_sum(softmax(logits) * rewards))


def minibatch_weights(config: Config, phase: Array, order: Array) -> Array | None:
    """Prompt weights of mini-batch `phase mod m` of the epoch whose prompt order is `order` (a permutation
    of the P prompts): the j-th block of P/m prompts in that order, weight m/P each; None for m = 1.

    Args:
        config: the configuration of the rollout's P prompts (`Config`, e.g. `batch_config`'s):
            P = `n_prompts`, m = `minibatches` (dividing P).
        phase: the optimiser step within the rollout, an integer (0-d, may be traced), taken mod m.
        order: (P,) int32, a permutation of the P prompts.

    Returns:
        (P,) weights in the rewards' float dtype, m/P on the mini-batch's prompts and 0 elsewhere (summing to 1),
        for `sampled_loss`'s `prompt_weights`; None for m = 1.
    """
    m = config.minibatches
    if m == 1:
        return None
    size = config.n_prompts // m
    position = jnp.argsort(order)  # where each prompt stands in this epoch's order
    chosen = position // size == phase % m
    return chosen.astype(config.rewards.dtype) / size


def policy_metrics(config: Config, theta: Array) -> dict[str, Array | None]:
    """The read-outs of the policy θ itself: reward, true reward, entropy and KL(π‖π_ref).

    Args:
        config: the configuration (`Config`): rewards, true_rewards and the reference init_logits (D, N).
        theta: the logits θ, (D, N).

    Returns:
        A dict of 0-d floats: prompt_spread, reward, true_reward (None without true rewards), entropy and kl_ref
        (`models.bandit.readouts.READOUTS` gives their units).
    """
    success = axis_sum(softmax(theta) * config.rewards)
    return dict(
        prompt_spread=jnp.std(success),
        reward=jnp.mean(success),
        true_reward=None if config.true_rewards is None else _expected_reward(theta, config.true_rewards),
        entropy=jnp.mean(entropy(theta)),
        kl_ref=jnp.mean(kl_divergence(theta, config.init_logits)),
    )


def _apply(config: Config, optimizer, state: State, grad: Array, stats: UpdateStats, **changes):
    """Take the optimiser step `grad` from state θ_n (frozen once diverged) and the read-outs of step n. The freeze
    keeps a diverged run's final state finite; derivatives are the update's own (`where_frozen`): exact for a run
    that has not diverged, not meaningful for one that has, whose read-outs are NaN."""
    n, theta = state.step, state.logits
    params = state.params
    if config.features is None:  # the logits are the parameters
        updates, opt_state = optimizer.update(grad, state.opt_state, theta)
        proposed = cast(Array, optax.apply_updates(theta, updates))  # optax types it as any pytree
    else:  # shared parameters W: θ = θ_0 + Φ W, so ∂L/∂W = Φᵀ ∂L/∂θ
        grad = config.features.T @ grad
        updates, opt_state = optimizer.update(grad, state.opt_state, params)
        params = optax.apply_updates(params, updates)
        proposed = theta + config.features @ updates
    blown = ~jnp.all(jnp.isfinite(proposed))
    diverged = state.diverged | blown
    keep = lambda new, cur: where_frozen(diverged, cur, new)
    nxt = state._replace(
        logits=keep(proposed, theta),
        params=keep(params, state.params),
        opt_state=jax.tree.map(keep, opt_state, state.opt_state),
        step=n + 1,
        diverged=diverged,
        diverged_step=jnp.where(blown & ~state.diverged, n, state.diverged_step),
        **changes,
    )
    metrics = dict(policy_metrics(config, theta), grad_norm=optax.tree_utils.tree_norm(grad), **stats._asdict())
    nan = jnp.asarray(jnp.nan, theta.dtype)
    metrics = jax.tree.map(lambda v: jnp.where(state.diverged, nan, v.astype(theta.dtype)), metrics)
    return nxt, metrics


def synced(config: Config, state: State) -> tuple[Config, Array]:
    """Reference sync (TRL `sync_ref_model`): every `ref_sync_steps` steps (n > 0) π_ref ← α·π + (1 − α)·π_ref
    on the logits; returns the configuration whose reference (`init_logits`) is the current one, and it.

    Args:
        config: the configuration (`Config`).
        state: the `State` of step n (its `ref_logits` and `logits`).

    Returns:
        (config, ref_logits): `config` with `init_logits` replaced by the reference of step n, and that
        reference, (D, N); without sync (ref_sync_steps None) `config` itself and `state.ref_logits`.
    """
    if config.ref_sync_steps is None:
        return config, state.ref_logits
    n, alpha = state.step, config.ref_sync_alpha
    sync = (n > 0) & (n % config.ref_sync_steps == 0)
    ref = jnp.where(sync, alpha * state.logits + (1 - alpha) * state.ref_logits, state.ref_logits)
    return config.replace(init_logits=ref), ref


def batch_config(config: Config, batch: Array | None) -> Config:
    """The configuration of the rollout's prompts `batch` (indices into the dataset; None: all of them).

    Args:
        config: the configuration of the dataset (`Config`, D prompts).
        batch: (P,) integer indices into the dataset, or None.

    Returns:
        A `Config` of P prompts (rewards, init_logits, true_rewards and features taken at `batch`,
        `batch_prompts` None); `config` itself for None.
    """
    if batch is None:
        return config
    true = None if config.true_rewards is None else config.true_rewards[batch]
    features = None if config.features is None else config.features[batch]
    return config.replace(
        rewards=config.rewards[batch],
        init_logits=config.init_logits[batch],
        true_rewards=true,
        features=features,
        batch_prompts=None,
    )


def _gathered(batch: Array | None):
    return (lambda x: x) if batch is None else (lambda x: x[batch])


def rollout_step(
    config: Config,
    optimizer,
    state: State,
    arms: Array,
    rewards: Array,
    order: Array,
    batch: Array | None = None,
):
    """(Low-level API) one optimiser step on a given rollout (`arms`, `rewards` (P, G) of the prompts `batch`,
    drawn from π_old = softmax(`state.old_logits`)), mini-batch `n mod m` in the prompt `order`: the inner step
    of rollout reuse.

    Args:
        config: the configuration (`Config`) of the whole dataset (D prompts); unchecked.
        optimizer: its optax transformation (`make_optimizer(config)`).
        state: the `State` of step n; its `old_logits` are π_old.
        arms: the rollout's arms, (P, G) integers in [0, N).
        rewards: their rewards, (P, G) float.
        order: the rollout's prompt order, (P,) int32, a permutation that sets the mini-batches.
        batch: the rollout's prompts, (P,) int32 indices into the dataset; None: all D (P = D) (default).

    Returns:
        (state, metrics): the `State` of step n + 1 (recording the rollout, its order and batch), and the
        read-outs of step n, a dict keyed by `STEP_READOUTS` of 0-d floats (NaN once diverged; `true_reward`
        None without true rewards).
    """
    config, ref = synced(config, state)
    sub, pick = batch_config(config, batch), _gathered(batch)
    weights = minibatch_weights(sub, state.step % jnp.maximum(config.lag, 1), order)

    def loss(theta):
        return sampled_loss(pick(theta), pick(state.old_logits), arms, rewards, sub, weights)

    grad, stats = jax.grad(loss, has_aux=True)(state.logits)
    changes = dict(rollout_arms=arms, rollout_rewards=rewards, rollout_order=order, ref_logits=ref)
    if batch is not None:
        changes["batch"] = batch
    return _apply(config, optimizer, state, grad, stats, **changes)


def _next_batch(config: Config, state: State, key: Array, boundary: Array):
    """At a rollout boundary, the next P prompts of the dataset epoch's order (a new permutation of the D
    prompts, from `key`, once the epoch cannot fill a batch): sampling without replacement through epochs."""
    d, p = config.n_prompts, config.prompts_per_rollout
    fresh = boundary & (state.cursor + p > d)
    shuffled = jax.random.permutation(jax.random.fold_in(key, 2), d).astype(jnp.int32)
    order = jnp.where(fresh, shuffled, state.dataset_order)
    cursor = jnp.where(fresh, 0, state.cursor)
    batch = jnp.where(boundary, jax.lax.dynamic_slice(order, (cursor,), (p,)), state.batch)
    return batch, dict(dataset_order=order, cursor=jnp.where(boundary, cursor + p, cursor))


def step(config: Config, optimizer, mode: str, state: State, key: Array):
    """One optimiser step from θ_n (low-level API, pure): returns the next state and the read-outs of step n
    (the per-step fields of `Run`). `optimizer` is `make_optimizer(config)`; `key` is unused in
    expected mode. Expected mode with rollout reuse (lag model "refresh") is not a single-state step: `run`
    takes it through `reuse_branch_step`. Expected mode averages over batches, so it uses every prompt.

    Args:
        config: the configuration (`Config`).
        optimizer: its optax transformation (`make_optimizer(config)`).
        mode: "expected" or "sampled" (`MODES`); static.
        state: the `State` of step n.
        key: a JAX PRNG key for this step's draws (groups, the dataset's and the rollout's prompt orders);
            unused in expected mode.

    Returns:
        (state, metrics): the `State` of step n + 1, and the read-outs of step n, a dict keyed by
        `STEP_READOUTS` of 0-d floats (NaN once diverged; `true_reward` None without true rewards).

    Raises:
        PgrpoSimError: (while tracing) for a configuration `check_mode` refuses, or expected mode with lag model
            "refresh".
    """
    n, theta = state.step, state.logits
    check_mode(config, mode)
    batched = mode == "sampled" and config.batch_prompts is not None
    if mode == "sampled" and config.lag_model == "refresh":  # one rollout per refresh, reused
        period = jnp.maximum(config.lag, 1)
        refresh = n % period == 0
        batch, cursor = (None, {}) if not batched else _next_batch(config, state, key, refresh)
        pick, sub = _gathered(batch), batch_config(config, batch)
        old = jnp.where(refresh, theta, state.old_logits)

        def draw(_):
            drawn_arms, drawn_rewards = draw_rollout(sub, pick(theta), key)
            return drawn_arms.astype(jnp.int32), drawn_rewards

        # drawn on refresh steps only, where the step counter is not batched (a vmap over seeds or over
        # hyperparameters other than the lag); a batched counter makes the cond a select of both branches
        arms, rewards = jax.lax.cond(refresh, draw, lambda _: (state.rollout_arms, state.rollout_rewards), None)
        order = state.rollout_order
        if config.minibatches > 1:  # a new prompt order at the start of every epoch
            epoch_start = n % period % config.minibatches == 0
            shuffled = jax.random.permutation(jax.random.fold_in(key, 1), sub.n_prompts).astype(jnp.int32)
            order = jnp.where(epoch_start, shuffled, order)
        moved = state._replace(old_logits=old, **cursor)
        return rollout_step(config, optimizer, moved, arms, rewards, order, batch)
    if mode == "expected" and config.lag_model == "refresh":
        raise PgrpoSimError("expected mode with rollout reuse runs by branches: use run() or reuse_branch_step()")
    config, ref = synced(config, state)
    old, history = state.old_logits, state.history
    if config.lag_model == "refresh_fresh":
        old = jnp.where(n % jnp.maximum(config.lag, 1) == 0, theta, old)
        at, behaviour = theta, old
    elif config.lag_model == "stale":
        size = history.shape[0]
        history = history.at[n % size].set(theta)
        at = behaviour = history[(n - config.lag) % size]
    else:
        at = behaviour = theta
    changes = dict(old_logits=old, history=history, ref_logits=ref)
    if mode == "expected" and config.lag_model == "refresh_fresh":
        grad, stats = jax.grad(expected_loss, has_aux=True)(at, behaviour, config)
    elif mode == "expected":  # without refresh lag, samples come from the evaluation point: ratio 1
        grad, stats = on_policy_grad(at, config)
    else:
        batch, cursor = (None, {}) if not batched else _next_batch(config, state, key, jnp.asarray(True))
        pick, sub = _gathered(batch), batch_config(config, batch)
        changes.update(cursor, **({} if batch is None else dict(batch=batch)))
        arms, rewards = draw_rollout(sub, pick(behaviour), key)
        if config.lag_model == "refresh_fresh" or config.dynamic_sampling:
            loss = lambda t: sampled_loss(pick(t), pick(behaviour), arms, rewards, sub)
            grad, stats = jax.grad(loss, has_aux=True)(at)
        else:  # samples drawn at the evaluation point: the written-out gradient
            grad, stats = sampled_on_policy_grad(pick(at), arms, rewards, sub)
            if batch is not None:
                grad = jnp.zeros_like(at).at[batch].add(grad)
    return _apply(config, optimizer, state, grad, stats, **changes)
