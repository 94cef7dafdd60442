"""Bandit configuration: static structure plus hyperparameters as traced pytree leaves.

`BanditConfig` is an `equinox.Module`. Fields that set array shapes or code paths (group size, lag
model, buffer length, KL estimator, optimiser) are static; everything else (η, μ, β, clip ranges, lag,
rewards, initial logits, and the advantage kind as its int32 `advantage_code`) is a JAX array leaf, so
`jax.vmap` sweeps it and a second `simulate` call with other values does not recompile.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Mapping
from types import MappingProxyType

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ..base.checks import Interval, as_float, check_choice, check_range, check_scalar, is_concrete
from ..base.errors import PgrpoSimError
from .grpo import ADVANTAGES, advantage_code

MODES = ("expected", "sampled")
"""How a run takes its groups: their exact expectation ("expected") or drawn ("sampled") (`models.bandit`)."""
LAG_MODELS = ("none", "refresh", "refresh_fresh", "stale")
"""none: on-policy; refresh: one rollout per refresh reused for every step until the next (TRL num_iterations,
verl ppo_epochs); refresh_fresh: a fresh group from the stale π_old at every step (the infinite-batch limit of
refresh); stale: gradient computed at θ_{n−lag}, applied at step n."""
KL_KINDS = ("k1", "k2", "k3", "exact")
OPTIMIZERS = ("sgd", "nesterov", "adam")
LR_SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")
"""Learning-rate schedules under Hugging Face's `SchedulerType` names (TRL `lr_scheduler_type`): linear warm-up
over `warmup_steps`, then constant, linear decay to 0 or cosine decay to 0 at `decay_steps`."""
DEFAULT_P_REF = 0.2
"""The class-symmetric start's correct mass where `bandit_config` is given no start (p_ref, init_logits, difficulty)."""
MAX_GROUP_SIZE = 4096
"""Largest group G: real GRPO groups hold a few to a few hundred completions, and the enumerations' int32 index
arithmetic overflows from G ≈ 46341 (G² > 2³¹)."""


def _as_float(x):
    """Leaves become strongly typed float arrays, so Python scalars and arrays share one jit signature (None and
    text stay as they are, for `__check_init__` to refuse by name)."""
    return x if x is None or isinstance(x, (str, bytes)) else as_float(x)


def _integral(x) -> bool:
    """Whether concrete `x` holds numbers (not booleans) that are all whole."""
    arr = np.asarray(x)
    return arr.dtype != bool and np.issubdtype(arr.dtype, np.number) and bool(np.all(arr == np.round(arr)))


def _as_int(x):
    """Integer leaves become int32 arrays; a value that is not whole is kept, for `__check_init__` to refuse (not
    truncated)."""
    if isinstance(x, jax.Array) and x.dtype == jnp.int32:
        return x
    if not is_concrete(x):
        return jnp.asarray(x, dtype=jnp.int32)
    return jax.device_put(np.asarray(x, np.int32)) if x is not None and _integral(x) else x


def _static_int(x):
    """Static integers (shapes, code paths) become Python ints, so 8.0 or np.int64(8) serve as 8; anything else is
    kept, for `__check_init__` to refuse."""
    return int(x) if x is not None and is_concrete(x) and np.ndim(x) == 0 and _integral(x) else x


def _static_bool(x):
    """True/False, also from 0/1 and 0-d boolean arrays; anything else is kept, for `__check_init__` to refuse."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if x is not None and not isinstance(x, str) and is_concrete(x) and np.ndim(x) == 0 and np.asarray(x) in (0, 1):
        return bool(x)
    return x


SCALARS = ("eta", "momentum", "beta", "clip_low", "clip_high", "ref_sync_alpha", "adv_eps", "lag", "advantage")
"""Leaves that hold one number each (per configuration: sweeps vmap over configurations)."""
OPTIONAL_SCALARS = ("dual_clip", "kl_clamp", "grad_clip", "ref_sync_steps")
"""Scalar leaves that may be None (off)."""
LEAF_RANGES: Mapping[str, Interval] = MappingProxyType(
    {
        "eta": Interval(0.0, None, low_open=True),
        "momentum": Interval(0.0, 1.0, high_open=True),
        "beta": Interval(0.0),
        "clip_low": Interval(0.0, 1.0, low_open=True, high_open=True),
        "clip_high": Interval(0.0, None, low_open=True),
        "dual_clip": Interval(1.0, None, low_open=True),
        "kl_clamp": Interval(0.0, None, low_open=True),
        "grad_clip": Interval(0.0, None, low_open=True),
        "ref_sync_alpha": Interval(0.0, 1.0),
        "adv_eps": Interval(0.0),
    }
)
"""Allowed range of each real-valued hyperparameter leaf: checked eagerly by `BanditConfig.__check_init__`, masked
in-jit by `bandit.valid_hyperparameters`, and read by `hyperparameters.HYPERPARAMETERS`. (The lag's range depends
on the lag model, the advantage code's on `ADVANTAGES`: both are checked where they are set.) Read-only: one
table serves all three, so changing it would change what each accepts."""


class BanditConfig(eqx.Module):
    """A softmax-bandit GRPO run (docs/design.md §3). Build it with `bandit_config`, not directly.

    Arrays have a leading prompt axis P (independent bandits sharing the hyperparameters).
    `rewards[p, a]` is the Bernoulli success probability of arm a (0/1 for binary rewards);
    `init_logits` is θ_0, which is also the reference policy. Scalars: `eta` learning rate,
    `momentum` heavy-ball μ (Adam's b1), `beta` KL coefficient, `clip_low`/`clip_high` PPO clip
    ranges, `dual_clip`, `kl_clamp` (k3 bound) and `grad_clip` (global-norm bound) — each None when
    off, which is static structure — `lag` (τ for "stale", refresh period K_ref for "refresh") and
    `adv_eps` (advantage denominator epsilon). `advantage` is the kind's code (`grpo.advantage_code`: its index
    in `ADVANTAGES`), a traced leaf, so every kind shares one compilation; `advantage_name` reads it back.
    """

    rewards: Array = eqx.field(converter=_as_float)
    init_logits: Array = eqx.field(converter=_as_float)
    true_rewards: Array | None = eqx.field(converter=_as_float)
    eta: Array = eqx.field(converter=_as_float)
    momentum: Array = eqx.field(converter=_as_float)
    beta: Array = eqx.field(converter=_as_float)
    clip_low: Array = eqx.field(converter=_as_float)
    clip_high: Array = eqx.field(converter=_as_float)
    dual_clip: Array | None = eqx.field(converter=_as_float)
    kl_clamp: Array | None = eqx.field(converter=_as_float)
    grad_clip: Array | None = eqx.field(converter=_as_float)
    ref_sync_steps: Array | None = eqx.field(converter=_as_int)
    ref_sync_alpha: Array = eqx.field(converter=_as_float)
    features: Array | None = eqx.field(converter=_as_float)
    lag: Array = eqx.field(converter=_as_int)
    adv_eps: Array = eqx.field(converter=_as_float)
    advantage: Array = eqx.field(converter=advantage_code)
    warmup_steps: Array = eqx.field(converter=_as_int)
    decay_steps: Array = eqx.field(converter=_as_int)
    group_size: int = eqx.field(static=True, converter=_static_int)
    kl: str = eqx.field(static=True)
    lag_model: str = eqx.field(static=True)
    max_lag: int = eqx.field(static=True, converter=_static_int)
    minibatches: int = eqx.field(static=True, converter=_static_int)
    batch_prompts: int | None = eqx.field(static=True, converter=_static_int)
    dynamic_sampling: bool = eqx.field(static=True, converter=_static_bool)
    optimizer: str = eqx.field(static=True)
    lr_schedule: str = eqx.field(static=True)

    def __check_init__(self):
        for name in SCALARS + OPTIONAL_SCALARS + ("warmup_steps", "decay_steps"):
            check_scalar(name, getattr(self, name), optional=name in OPTIONAL_SCALARS)
        for name in ("group_size", "max_lag", "minibatches", "batch_prompts"):
            check_scalar(name, getattr(self, name), optional=name == "batch_prompts")
            check_range(name, getattr(self, name), integer=True)
            if not isinstance(getattr(self, name), (int, type(None))):  # 2.5: refused above; a traced value here
                raise PgrpoSimError(f"{name} sets array shapes: it must be a concrete integer")
        if not isinstance(self.dynamic_sampling, bool):
            raise PgrpoSimError(f"dynamic_sampling must be True or False, got {self.dynamic_sampling!r}")
        check_choice("kl", self.kl, KL_KINDS)
        check_choice("lag_model", self.lag_model, LAG_MODELS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        check_range("warmup_steps", self.warmup_steps, 0, integer=True)
        check_range("decay_steps", self.decay_steps, 1, integer=True)
        check_range("group_size", self.group_size, 2, MAX_GROUP_SIZE, integer=True)
        check_range("max_lag", self.max_lag, 0, integer=True)
        check_range("batch_prompts", self.batch_prompts, 1, self.rewards.shape[0], integer=True)
        per_rollout = self.prompts_per_rollout
        check_range("minibatches", self.minibatches, 1, per_rollout, integer=True)
        if per_rollout % self.minibatches:
            raise PgrpoSimError(
                f"minibatches must divide the prompts per rollout ({per_rollout}), got {self.minibatches}"
            )
        if self.minibatches > 1 and self.lag_model != "refresh":
            raise PgrpoSimError("minibatches > 1 needs lag_model 'refresh' (mini-batches of one reused rollout)")
        if self.rewards.ndim != 2 or self.rewards.shape[-1] < 2:
            raise PgrpoSimError(f"rewards must have shape (prompts, arms) with arms >= 2, got {self.rewards.shape}")
        if self.init_logits.shape != self.rewards.shape:
            raise PgrpoSimError(
                f"init_logits shape {self.init_logits.shape} must equal rewards shape {self.rewards.shape}"
            )
        check_range("rewards", self.rewards, 0.0, 1.0)
        check_range("true_rewards", self.true_rewards, 0.0, 1.0)
        check_range("init_logits", self.init_logits)
        for name, interval in LEAF_RANGES.items():
            interval.check(name, getattr(self, name))
        check_range("lag", self.lag, 0, self.max_lag if self.lag_model == "stale" else None, integer=True)
        if self.lag_model == "refresh" and is_concrete(self.lag) and np.any(np.asarray(self.lag) % self.minibatches):
            raise PgrpoSimError(
                f"lag (optimiser steps per rollout = epochs × minibatches) must be a multiple of minibatches "
                f"({self.minibatches}), got {np.asarray(self.lag)}"
            )
        check_range("ref_sync_steps", self.ref_sync_steps, 1, integer=True)
        if self.features is not None:
            if self.features.ndim != 2 or self.features.shape[0] != self.rewards.shape[0]:
                raise PgrpoSimError(
                    f"features must have shape (prompts, F) = ({self.rewards.shape[0]}, F), got {self.features.shape}"
                )
            check_range("features", self.features)
        if self.lag_model == "none" and is_concrete(self.lag) and np.any(np.asarray(self.lag) != 0):
            raise PgrpoSimError("lag must be 0 when lag_model is 'none' (use lag_model 'refresh' or 'stale')")

    @property
    def n_prompts(self) -> int:
        """Prompts in the dataset (rows of `rewards`)."""
        return self.rewards.shape[0]

    @property
    def prompts_per_rollout(self) -> int:
        """Prompts in one rollout: `batch_prompts`, or the whole dataset."""
        return self.n_prompts if self.batch_prompts is None else self.batch_prompts

    @property
    def advantage_name(self) -> str:
        """The advantage kind's name (needs a concrete, unbatched `advantage`)."""
        return ADVANTAGES[int(self.advantage)]

    @property
    def n_arms(self) -> int:
        return self.rewards.shape[1]

    def replace(self, **changes) -> BanditConfig:
        """A copy with fields changed (validated when the new values are concrete)."""
        return dataclasses.replace(self, **changes)


def check_config(config, name: str = "config") -> None:
    """Raise `PgrpoSimError` unless `config` is a `BanditConfig` (a dict or a number is a common slip)."""
    if not isinstance(config, BanditConfig):
        raise PgrpoSimError(f"{name} must be a BanditConfig (build it with bandit_config), got {type(config).__name__}")


def check_settings(settings, name: str = "base") -> None:
    """Raise `PgrpoSimError` unless `settings` is a mapping of `bandit_config`'s keyword arguments."""
    if not isinstance(settings, Mapping):
        raise PgrpoSimError(f"{name} must be a mapping of bandit_config settings, got {type(settings).__name__}")
    known = inspect.signature(bandit_config).parameters
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise PgrpoSimError(f"unknown bandit_config setting {unknown[0]!r} in {name} (known: {', '.join(known)})")


def class_symmetric_logits(n_arms: int, n_correct: int, p_ref: ArrayLike) -> Array:
    """Logits of the class-symmetric start: the first c arms share log(p_ref/c), the rest log((1−p_ref)/(N−c))."""
    check_range("n_arms", n_arms, 2, integer=True)
    check_range("n_correct", n_correct, 1, n_arms - 1, integer=True)
    check_range("p_ref", p_ref, 0.0, 1.0, low_open=True, high_open=True)
    return _symmetric_start(n_arms, n_correct, as_float(p_ref))


@functools.partial(jax.jit, static_argnums=(0, 1))  # one program, not an eager compilation per operation
def _symmetric_start(n_arms: int, n_correct: int, p_ref: Array) -> Array:
    correct = jnp.arange(n_arms) < n_correct
    p_ref = p_ref[..., None]
    return jnp.where(correct, jnp.log(p_ref / n_correct), jnp.log((1 - p_ref) / (n_arms - n_correct)))


def bandit_config(
    *,
    n_arms: int = 2,
    n_correct: int = 1,
    p_ref: ArrayLike | None = None,
    rewards: ArrayLike | None = None,
    init_logits: ArrayLike | None = None,
    true_rewards: ArrayLike | None = None,
    n_prompts: int | None = None,
    eta: ArrayLike = 0.1,
    momentum: ArrayLike = 0.0,
    beta: ArrayLike = 0.0,
    group_size: int = 8,
    advantage: str | ArrayLike = "std",
    kl: str = "k3",
    kl_clamp: ArrayLike | None = None,
    clip: ArrayLike = 0.2,
    clip_high: ArrayLike | None = None,
    dual_clip: ArrayLike | None = None,
    lag_model: str = "none",
    lag: ArrayLike = 0,
    max_lag: int | None = None,
    optimizer: str = "sgd",
    grad_clip: ArrayLike | None = None,
    adv_eps: ArrayLike = 1e-6,
    minibatches: int = 1,
    ref_sync_steps: ArrayLike | None = None,
    ref_sync_alpha: ArrayLike = 0.6,
    difficulty: tuple[float, float] | None = None,
    batch_prompts: int | None = None,
    dynamic_sampling: bool = False,
    features: ArrayLike | None = None,
    lr_schedule: str = "constant",
    warmup_steps: ArrayLike = 0,
    decay_steps: ArrayLike | None = None,
) -> BanditConfig:
    """Build and validate a `BanditConfig`.

    Rewards: either `n_correct` binary-correct arms out of `n_arms` (the first ones), with a class-symmetric start
    of correct mass `p_ref` (default `DEFAULT_P_REF`, 0.2) or the start `init_logits`, or an explicit `rewards`
    vector of Bernoulli means in [0, 1] (shape (N,), or (P, N): one row per prompt, P = `n_prompts`) with
    `init_logits` (default uniform).
    `clip` is ε_low, `clip_high` ε_high (default = ε_low); `None` disables dual clip, KL clamp and
    gradient clipping. `max_lag` (static, default = `lag`) sizes the stale-lag buffer so that `lag`
    itself can be swept with `vmap`.

    Rollouts (lag model "refresh", docs/guide/rollouts.md): `lag` optimiser steps per rollout = epochs (TRL
    `num_iterations`, verl `ppo_epochs`) × `minibatches` (TRL `steps_per_generation`; the rollout's prompts are
    split into this many equal parts, one optimiser step each); lag 0 is read as 1 (one step per rollout: on
    policy), in both refresh models, so that a lag axis from 0 serves every lag model. KL reference sync (TRL
    `sync_ref_model`): every `ref_sync_steps` steps π_ref ← α·π + (1 − α)·π_ref on the logits, α =
    `ref_sync_alpha` (None: never).

    Prompt populations (docs/guide/rollouts.md): a dataset of `n_prompts` = D prompts, each a bandit with
    `n_correct` of `n_arms` correct and its own start: `p_ref` may be a list of D initial success probabilities,
    or `difficulty=(a, b)` sets them to the D quantiles (d + ½)/D of Beta(a, b). `batch_prompts` = P prompts
    per rollout, drawn without replacement through the dataset's epochs (sampled mode; expected mode averages
    over batches, which is the whole dataset); `dynamic_sampling` drops groups whose rewards are all equal
    from the loss (DAPO, without re-drawing; sampled mode). `features` Φ (D, F) switches to shared parameters:
    a linear-softmax policy θ_d = θ_0,d + φ_d W with W (F, N) trained (from 0) instead of the per-prompt logits,
    so an update on one prompt moves every prompt whose features overlap.

    Learning-rate schedule (`LR_SCHEDULES`, as Hugging Face's `get_scheduler`): the step is η times a factor that
    rises linearly from 0 over `warmup_steps` optimiser steps, then stays at 1 ("constant_with_warmup"), falls
    linearly ("linear") or along a half cosine ("cosine") to 0 at `decay_steps` (the run's total optimiser
    steps; required by those two, and at least `warmup_steps`). "constant" is no schedule at all.
    """
    if rewards is not None and np.ndim(rewards) == 2:  # one row of rewards per prompt
        if n_prompts not in (None, np.shape(rewards)[0]):
            raise PgrpoSimError(f"n_prompts ({n_prompts}) must equal the rows of rewards ({np.shape(rewards)[0]})")
        n_prompts = np.shape(rewards)[0]
    n_prompts = 1 if n_prompts is None else n_prompts
    check_range("n_prompts", n_prompts, 1, integer=True)
    if lr_schedule in ("linear", "cosine"):
        if decay_steps is None:
            raise PgrpoSimError(f"lr_schedule {lr_schedule!r} decays to 0 at decay_steps: give it (>= 1 steps)")
        if is_concrete([warmup_steps, decay_steps]) and np.any(np.asarray(warmup_steps) > np.asarray(decay_steps)):
            raise PgrpoSimError(f"warmup_steps must be <= decay_steps ({decay_steps}), got {warmup_steps}")
    decay_steps = 1 if decay_steps is None else decay_steps
    if difficulty is not None:
        if p_ref is not None:
            raise PgrpoSimError("give either p_ref (a list of per-prompt success probabilities) or difficulty")
        if np.shape(difficulty) != (2,):
            raise PgrpoSimError(f"difficulty must be a pair (a, b) of Beta parameters, got {difficulty!r}")
        a, b = difficulty
        check_range("difficulty a", a, 0.0, low_open=True)
        check_range("difficulty b", b, 0.0, low_open=True)
        from scipy.stats import beta as beta_distribution

        p_ref = beta_distribution.ppf((np.arange(n_prompts) + 0.5) / n_prompts, a, b)
    if p_ref is not None and np.ndim(p_ref) == 1:
        if len(p_ref) != n_prompts:
            raise PgrpoSimError(f"p_ref must have one entry per prompt ({n_prompts}), got {len(p_ref)}")
    if rewards is None:
        check_range("n_arms", n_arms, 2, integer=True)
        check_range("n_correct", n_correct, 1, n_arms - 1, integer=True)
        rewards = (np.arange(n_arms) < n_correct).astype(float)
        if init_logits is None:
            init_logits = class_symmetric_logits(n_arms, n_correct, DEFAULT_P_REF if p_ref is None else p_ref)
        elif p_ref is not None:
            raise PgrpoSimError("give either p_ref (or difficulty), which builds the start, or init_logits")
    elif p_ref is not None:
        raise PgrpoSimError(
            "p_ref builds a class-symmetric start from n_correct; with explicit rewards give init_logits"
        )
    rewards = as_float(rewards)
    if rewards.ndim not in (1, 2):
        raise PgrpoSimError(f"rewards must have shape (arms,) or (prompts, arms), got {rewards.shape}")
    if init_logits is None:
        init_logits = jnp.zeros(rewards.shape[-1])
    shape = (n_prompts, rewards.shape[-1]) if rewards.ndim == 1 else rewards.shape
    init_logits = as_float(init_logits)
    dtype = jnp.result_type(rewards, init_logits)

    def per_prompt(x, name):
        x = as_float(x).astype(dtype)
        if x.shape[-1] != shape[-1]:
            raise PgrpoSimError(f"{name} must have {shape[-1]} arms, got shape {x.shape}")
        if x.shape == shape or not is_concrete(x):
            return jnp.broadcast_to(x, shape)
        return jax.device_put(np.broadcast_to(np.asarray(x), shape))  # on the host: eagerly, broadcasting compiles

    def scalar(x):  # None and text go through, for `BanditConfig` to refuse or accept by name
        x = _as_float(x)
        return x.astype(dtype) if isinstance(x, jax.Array) else x

    check_scalar("lag", lag)
    check_range("lag", lag, 0, integer=True)
    if max_lag is None:
        max_lag = int(np.max(lag)) if is_concrete(lag) else 0
    return BanditConfig(
        rewards=per_prompt(rewards, "rewards"),
        init_logits=per_prompt(init_logits, "init_logits"),
        true_rewards=None if true_rewards is None else per_prompt(true_rewards, "true_rewards"),
        eta=scalar(eta),
        momentum=scalar(momentum),
        beta=scalar(beta),
        clip_low=scalar(clip),
        clip_high=scalar(clip if clip_high is None else clip_high),
        dual_clip=scalar(dual_clip),
        kl_clamp=scalar(kl_clamp),
        grad_clip=scalar(grad_clip),
        lag=lag,
        adv_eps=scalar(adv_eps),
        group_size=group_size,
        advantage=advantage,
        kl=kl,
        lag_model=lag_model,
        max_lag=max_lag,
        minibatches=minibatches,
        batch_prompts=batch_prompts,
        dynamic_sampling=dynamic_sampling,
        optimizer=optimizer,
        lr_schedule=lr_schedule,
        warmup_steps=warmup_steps,
        decay_steps=decay_steps,
        ref_sync_steps=ref_sync_steps,
        ref_sync_alpha=scalar(ref_sync_alpha),
        features=None if features is None else as_float(features).astype(dtype),
    )


BANDIT_DEFAULTS: Mapping[str, object] = MappingProxyType(
    {name: p.default for name, p in inspect.signature(bandit_config).parameters.items()}
    | {"p_ref": DEFAULT_P_REF, "n_prompts": 1}
)
"""`bandit_config`'s defaults by keyword, with the two it computes from other arguments as they are on their own: the
class-symmetric start's p_ref and one prompt (the command line's flags take their defaults from here)."""
