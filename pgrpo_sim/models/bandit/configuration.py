"""Bandit configuration: static structure plus hyperparameters as traced pytree leaves.

`Config` is an `equinox.Module`. Fields that set array shapes or code paths (group size, lag
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
from typing import cast, overload

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ...base.checks import Interval, as_float, check_choice, check_range, check_scalar, is_concrete
from ...base.errors import PgrpoSimError
from ..grpo import ADVANTAGES, KL_ESTIMATORS, advantage_code
from ..schedules import LR_SCHEDULES
from ..step_ranges import STEP_RANGES
from .renamed import RENAMED, check_renamed

MODES = ("expected", "sampled")
"""How a run takes its groups: their exact expectation ("expected") or drawn ("sampled") (`models.bandit`)."""
LAG_MODELS = ("none", "refresh", "refresh_fresh", "stale")
"""none: on-policy; refresh: one rollout per refresh reused for every step until the next (TRL num_iterations,
verl ppo_epochs); refresh_fresh: a fresh group from the stale π_old at every step (the infinite-batch limit of
refresh); stale: gradient computed at θ_{n−lag}, applied at step n."""
KL_KINDS = (*KL_ESTIMATORS, "exact")
"""KL estimators of the loss's β term: k1, k2, k3 on the sampled arms (`grpo.kl_estimate`), or the exact KL(π‖π_ref)
over the arms."""
OPTIMIZERS = ("sgd", "nesterov", "adam")
"""optax optimisers on the logits: heavy-ball SGD, Nesterov, Adam (`models.bandit.make_optimizer`)."""
DEFAULT_P_REF = 0.2
"""The class-symmetric start's correct mass where `config` is given no start (p_ref, init_logits, difficulty)."""
MAX_GROUP_SIZE = 4096
"""Largest group G: real GRPO groups hold a few to a few hundred completions, and the enumerations' int32 index
arithmetic overflows from G ≈ 46341 (G² > 2³¹)."""


@overload
def _as_float(x: None) -> None: ...
@overload
def _as_float(x: ArrayLike) -> Array: ...
def _as_float(x: ArrayLike | None) -> Array | None:
    """Leaves become strongly typed float arrays, so Python scalars and arrays share one jit signature (None and
    text stay as they are, for `__check_init__` to refuse by name)."""
    if x is None or isinstance(x, (str, bytes)):
        return cast(Array | None, x)  # None or text: kept, for `__check_init__` to accept or refuse by name
    return as_float(x)


def _integral(x) -> bool:
    """Whether concrete `x` holds numbers (not booleans) that are all whole."""
    arr = np.asarray(x)
    return arr.dtype != bool and np.issubdtype(arr.dtype, np.number) and bool(np.all(arr == np.round(arr)))


@overload
def _as_int(x: None) -> None: ...
@overload
def _as_int(x: ArrayLike) -> Array: ...
def _as_int(x: ArrayLike | None) -> Array | None:
    """Integer leaves become int32 arrays; a value that is not whole is kept, for `__check_init__` to refuse (not
    truncated)."""
    if isinstance(x, jax.Array) and x.dtype == jnp.int32:
        return x
    if not is_concrete(x):
        return jnp.asarray(x, dtype=jnp.int32)
    if x is not None and _integral(x):
        return jax.device_put(np.asarray(x, np.int32))
    return cast(Array | None, x)  # None or not whole: kept, for `__check_init__` to accept or refuse


@overload
def _static_int(x: None) -> None: ...
@overload
def _static_int(x: ArrayLike) -> int: ...
def _static_int(x: ArrayLike | None) -> int | None:
    """Static integers (shapes, code paths) become Python ints, so 8.0 or np.int64(8) serve as 8; anything else is
    kept, for `__check_init__` to refuse."""
    if x is not None and is_concrete(x) and np.ndim(x) == 0 and _integral(x):
        return int(np.asarray(x))
    return cast(int | None, x)  # None or not an integer: kept, for `__check_init__` to accept or refuse


def _static_bool(x: ArrayLike) -> bool:
    """True/False, also from 0/1 and 0-d boolean arrays; anything else is kept, for `__check_init__` to refuse."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if x is not None and not isinstance(x, str) and is_concrete(x) and np.ndim(x) == 0 and np.asarray(x) in (0, 1):
        return bool(x)
    return cast(bool, x)  # not a truth value: kept, for `__check_init__` to refuse


SCALARS = (
    "learning_rate",
    "momentum",
    "beta",
    "epsilon",
    "epsilon_high",
    "ref_sync_alpha",
    "adv_eps",
    "lag",
    "advantage",
)
"""Leaves that hold one number each (per configuration: sweeps vmap over configurations)."""
OPTIONAL_SCALARS = ("dual_clip", "kl_clamp", "max_grad_norm", "ref_sync_steps")
"""Scalar leaves that may be None (off)."""
LEAF_RANGES: Mapping[str, Interval] = MappingProxyType(
    {
        **STEP_RANGES,  # learning_rate and momentum: the ranges the oscillator checks too (`models.step_ranges`)
        "beta": Interval(0.0),
        "epsilon": Interval(0.0, 1.0, low_open=True, high_open=True),
        "epsilon_high": Interval(0.0, None, low_open=True),
        "dual_clip": Interval(1.0, None, low_open=True),
        "kl_clamp": Interval(0.0, None, low_open=True),
        "max_grad_norm": Interval(0.0, None, low_open=True),
        "ref_sync_alpha": Interval(0.0, 1.0),
        "adv_eps": Interval(0.0),
    }
)
"""Allowed range of each real-valued hyperparameter leaf: checked eagerly by `Config.__check_init__`, masked
in-jit by `bandit.valid_hyperparameters`, and read by `hyperparameters.HYPERPARAMETERS`. (The lag's range depends
on the lag model, the advantage code's on `ADVANTAGES`: both are checked where they are set.) Read-only: one
table serves all three, so changing it would change what each accepts."""


class Config(eqx.Module):
    """A softmax-bandit GRPO run (docs/design.md §3). Build it with `config`, not directly.

    D prompts (independent bandits sharing the hyperparameters) of N arms each. Static fields (marked "static"
    below) set array shapes or code paths and are part of the pytree structure, as is whether an optional leaf is
    None (off); every other field is a traced JAX array leaf, so `jax.vmap` sweeps it (a leading axis per leaf
    under a sweep; the shapes below are one configuration's) and a run with other values reuses the compiled
    code. Scalar leaves are 0-d (the real-valued ones in the float dtype of `rewards` when built by
    `config`, the integer ones int32). Ranges are checked eagerly by `__check_init__` (on construction and
    `replace`, for concrete values; `LEAF_RANGES` for the real-valued ones) and masked in jit by
    `bandit.valid_hyperparameters`.

    Attributes:
        rewards: leaf, (D, N) float in [0, 1]: the Bernoulli success probability of each prompt's arms (0/1 for
            binary rewards).
        init_logits: leaf, (D, N) float, finite (nats): θ_0, the start and the KL reference π_ref = softmax(θ_0)
            (reference sync moves the run's copy, `State.ref_logits`, not this field).
        true_rewards: leaf, (D, N) float in [0, 1]: a second reward table, read out as `true_reward` and not
            trained on (reward-hacking studies); None: no such read-out.
        learning_rate: leaf, 0-d float > 0: learning rate η, the optimiser's step size (times the schedule's factor).
        momentum: leaf, 0-d float in [0, 1): heavy-ball μ of "sgd" and "nesterov", Adam's b1.
        beta: leaf, 0-d float >= 0: KL coefficient β.
        epsilon: leaf, 0-d float in (0, 1): ε_low, the ratio π/π_old is clipped below at 1 − ε_low.
        epsilon_high: leaf, 0-d float > 0: ε_high, the ratio is clipped above at 1 + ε_high.
        dual_clip: leaf, 0-d float > 1: dual-clip constant c (the loss of a sample with A < 0 is capped at −c·A);
            None: off.
        kl_clamp: leaf, 0-d float > 0: bound on the k3 estimator (nats); None: off.
        max_grad_norm: leaf, 0-d float > 0: bound on the gradient's global L2 norm; None: off.
        ref_sync_steps: leaf, 0-d int32 >= 1: KL reference sync every S optimiser steps; None: no sync.
        ref_sync_alpha: leaf, 0-d float in [0, 1]: the sync's mixing weight α (π_ref ← α·π + (1 − α)·π_ref on
            the logits).
        features: leaf, (D, F) float, finite: Φ of the shared parameters (θ_d = θ_0,d + φ_d W, W (F, N)); None:
            per-prompt logits.
        lag: leaf, 0-d int32 >= 0, optimiser steps: 0 for "none"; steps per rollout for "refresh" (a multiple of
            `minibatches`); the refresh period of π_old for "refresh_fresh"; the delay τ <= `max_lag` for "stale".
            0 is read as 1 in the refresh models.
        adv_eps: leaf, 0-d float >= 0: advantage denominator epsilon (reward units).
        advantage: leaf, 0-d int32 in [0, 3]: the advantage kind's code (`grpo.advantage_code`: its index in
            `ADVANTAGES`), traced so every kind shares one compilation; `advantage_name` reads it back.
        warmup_steps: leaf, 0-d int32 >= 0: optimiser steps of the learning rate's linear warm-up.
        decay_steps: leaf, 0-d int32 >= 1: the optimiser step at which "linear" and "cosine" reach 0.
        num_generations: static int in [2, `MAX_GROUP_SIZE`]: G, samples per group.
        kl: static, one of `KL_KINDS`: the KL estimator.
        lag_model: static, one of `LAG_MODELS`.
        max_lag: static int >= 0: the stale-lag buffer holds max_lag + 1 logits ("stale" only).
        minibatches: static int >= 1: m, optimiser steps per pass over a rollout; divides the prompts per rollout;
            > 1 only with lag_model "refresh".
        batch_prompts: static int in [1, D]: P, prompts per rollout (sampled mode); None: the whole dataset.
        dynamic_sampling: static bool: DAPO's dropping of groups whose rewards are all equal (sampled mode).
        optimizer: static, one of `OPTIMIZERS`.
        lr_scheduler_type: static, one of `LR_SCHEDULES`.

    Raises:
        PgrpoSimError: on construction or `replace`, for a concrete value out of its range, a static field that is
            not a concrete value of its kind, or fields that disagree (shapes of init_logits, true_rewards and
            features; minibatches; lag for its lag model).
    """

    rewards: Array = eqx.field(converter=_as_float)
    init_logits: Array = eqx.field(converter=_as_float)
    true_rewards: Array | None = eqx.field(converter=_as_float)
    learning_rate: Array = eqx.field(converter=_as_float)
    momentum: Array = eqx.field(converter=_as_float)
    beta: Array = eqx.field(converter=_as_float)
    epsilon: Array = eqx.field(converter=_as_float)
    epsilon_high: Array = eqx.field(converter=_as_float)
    dual_clip: Array | None = eqx.field(converter=_as_float)
    kl_clamp: Array | None = eqx.field(converter=_as_float)
    max_grad_norm: Array | None = eqx.field(converter=_as_float)
    ref_sync_steps: Array | None = eqx.field(converter=_as_int)
    ref_sync_alpha: Array = eqx.field(converter=_as_float)
    features: Array | None = eqx.field(converter=_as_float)
    lag: Array = eqx.field(converter=_as_int)
    adv_eps: Array = eqx.field(converter=_as_float)
    advantage: Array = eqx.field(converter=advantage_code)
    warmup_steps: Array = eqx.field(converter=_as_int)
    decay_steps: Array = eqx.field(converter=_as_int)
    num_generations: int = eqx.field(static=True, converter=_static_int)
    kl: str = eqx.field(static=True)
    lag_model: str = eqx.field(static=True)
    max_lag: int = eqx.field(static=True, converter=_static_int)
    minibatches: int = eqx.field(static=True, converter=_static_int)
    batch_prompts: int | None = eqx.field(static=True, converter=_static_int)
    dynamic_sampling: bool = eqx.field(static=True, converter=_static_bool)
    optimizer: str = eqx.field(static=True)
    lr_scheduler_type: str = eqx.field(static=True)

    def __check_init__(self):
        for name in SCALARS + OPTIONAL_SCALARS + ("warmup_steps", "decay_steps"):
            check_scalar(name, getattr(self, name), optional=name in OPTIONAL_SCALARS)
        for name in ("num_generations", "max_lag", "minibatches", "batch_prompts"):
            check_scalar(name, getattr(self, name), optional=name == "batch_prompts")
            check_range(name, getattr(self, name), integer=True)
            if not isinstance(getattr(self, name), (int, type(None))):  # 2.5: refused above; a traced value here
                raise PgrpoSimError(f"{name} sets array shapes: it must be a concrete integer")
        if not isinstance(self.dynamic_sampling, bool):
            raise PgrpoSimError(f"dynamic_sampling must be True or False, got {self.dynamic_sampling!r}")
        check_choice("kl", self.kl, KL_KINDS)
        check_choice("lag_model", self.lag_model, LAG_MODELS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULES)
        check_range("warmup_steps", self.warmup_steps, 0, integer=True)
        check_range("decay_steps", self.decay_steps, 1, integer=True)
        check_range("num_generations", self.num_generations, 2, MAX_GROUP_SIZE, integer=True)
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
        """Arms per prompt, N (columns of `rewards`)."""
        return self.rewards.shape[1]

    def replace(self, **changes) -> Config:
        """A copy with fields changed (validated when the new values are concrete)."""
        return dataclasses.replace(self, **changes)


def check_config(config, name: str = "config") -> None:
    """Raise `PgrpoSimError` unless `config` is a `Config` (a dict or a number is a common slip).

    Args:
        config: the value to check.
        name: how the message names it (default "config").

    Raises:
        PgrpoSimError: if `config` is not a `Config`.
    """
    if not isinstance(config, Config):
        raise PgrpoSimError(
            f"{name} must be a ps.bandit.Config (build it with ps.bandit.config), got {type(config).__name__}"
        )


def check_settings(settings, name: str = "base") -> None:
    """Raise `PgrpoSimError` unless `settings` is a mapping of `config`'s keyword arguments.

    Args:
        settings: the value to check, a mapping of keyword → value (values are not checked here).
        name: how the message names it (default "base").

    Raises:
        PgrpoSimError: if `settings` is not a mapping or names a keyword `config` does not take.
    """
    if not isinstance(settings, Mapping):
        raise PgrpoSimError(f"{name} must be a mapping of ps.bandit.config settings, got {type(settings).__name__}")
    params = inspect.signature(config).parameters
    known = [name for name, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    unknown = sorted(set(settings) - set(known))
    check_renamed({name: None for name in unknown if name in RENAMED})
    if unknown:
        raise PgrpoSimError(f"unknown ps.bandit.config setting {unknown[0]!r} in {name} (known: {', '.join(known)})")


def class_symmetric_logits(n_arms: int, n_correct: int, p_ref: ArrayLike) -> Array:
    """Logits of the class-symmetric start: the first c arms share log(p_ref/c), the rest log((1−p_ref)/(N−c)).

    Args:
        n_arms: N, arms; integer >= 2.
        n_correct: c, the correct arms (the first ones); integer in [1, N − 1].
        p_ref: correct mass of the start, a probability in (0, 1); a number, or an array (e.g. (D,), one per
            prompt).

    Returns:
        Logits (nats, normalised: softmax sums to 1), shape p_ref.shape + (N,): (N,) for a number, (D, N) for
        D values; float (float32 unless x64).

    Raises:
        PgrpoSimError: if n_arms or n_correct is out of range or not an integer, or a concrete p_ref is outside
            (0, 1).
    """
    check_range("n_arms", n_arms, 2, integer=True)
    check_range("n_correct", n_correct, 1, n_arms - 1, integer=True)
    check_range("p_ref", p_ref, 0.0, 1.0, low_open=True, high_open=True)
    return _symmetric_start(n_arms, n_correct, as_float(p_ref))


@functools.partial(jax.jit, static_argnums=(0, 1))  # one program, not an eager compilation per operation
def _symmetric_start(n_arms: int, n_correct: int, p_ref: Array) -> Array:
    correct = jnp.arange(n_arms) < n_correct
    p_ref = p_ref[..., None]
    return jnp.where(correct, jnp.log(p_ref / n_correct), jnp.log((1 - p_ref) / (n_arms - n_correct)))


def config(
    *,
    n_arms: int = 2,
    n_correct: int = 1,
    p_ref: ArrayLike | None = None,
    rewards: ArrayLike | None = None,
    init_logits: ArrayLike | None = None,
    true_rewards: ArrayLike | None = None,
    n_prompts: int | None = None,
    learning_rate: ArrayLike = 0.1,
    momentum: ArrayLike = 0.0,
    beta: ArrayLike = 0.0,
    num_generations: int = 8,
    advantage: str | ArrayLike = "std",
    kl: str = "k3",
    kl_clamp: ArrayLike | None = None,
    epsilon: ArrayLike = 0.2,
    epsilon_high: ArrayLike | None = None,
    dual_clip: ArrayLike | None = None,
    lag_model: str = "none",
    lag: ArrayLike = 0,
    max_lag: int | None = None,
    optimizer: str = "sgd",
    max_grad_norm: ArrayLike | None = None,
    adv_eps: ArrayLike = 1e-6,
    minibatches: int = 1,
    ref_sync_steps: ArrayLike | None = None,
    ref_sync_alpha: ArrayLike = 0.6,
    difficulty: tuple[float, float] | None = None,
    batch_prompts: int | None = None,
    dynamic_sampling: bool = False,
    features: ArrayLike | None = None,
    lr_scheduler_type: str = "constant",
    warmup_steps: ArrayLike = 0,
    decay_steps: ArrayLike | None = None,
    **renamed: object,
) -> Config:
    """Build and validate a `Config`.

    Rewards and start: either `n_correct` binary-correct arms out of `n_arms` (the first ones), with a
    class-symmetric start of correct mass `p_ref` or the start `init_logits`, or explicit `rewards` with
    `init_logits` (default uniform). A one-row `rewards`, `init_logits` or `true_rewards` (N,) serves every prompt.
    Scalars are single numbers (0-d; traced ones too): sweep them with `jax.vmap` over configurations, not with an
    array in one configuration.

    Rollouts (lag model "refresh", docs/guide/rollouts.md): `lag` optimiser steps per rollout = epochs (TRL
    `num_iterations`, verl `ppo_epochs`) × `minibatches` (TRL `steps_per_generation`; the rollout's prompts are
    split into this many equal parts, one optimiser step each); lag 0 is read as 1 (one step per rollout: on
    policy) in both refresh models, so that a lag axis from 0 serves every lag model.

    Prompt populations (docs/guide/rollouts.md): a dataset of `n_prompts` = D prompts, each a bandit with
    `n_correct` of `n_arms` correct and its own start (`p_ref` per prompt, or `difficulty`); `batch_prompts` = P
    prompts per rollout, drawn without replacement through the dataset's epochs (sampled mode; expected mode
    averages over batches, which is the whole dataset); `features` switches to shared parameters, so an update on
    one prompt moves every prompt whose features overlap.

    Learning-rate schedule (`LR_SCHEDULES`, as Hugging Face's `get_scheduler`): the step is η times a factor that
    rises linearly from 0 over `warmup_steps` optimiser steps, then stays at 1 ("constant_with_warmup"), falls
    linearly ("linear") or along a half cosine ("cosine") to 0 at `decay_steps`. "constant" is no schedule at all.

    Args:
        n_arms: N, arms per prompt; integer >= 2 (default 2). Used when `rewards` is None.
        n_correct: c, arms with reward 1 (the first ones; the others 0); integer in [1, N − 1] (default 1). Used
            when `rewards` is None.
        p_ref: correct mass of the class-symmetric start, a probability in (0, 1): one number, or D of them (one
            per prompt); None: `DEFAULT_P_REF` (0.2) unless `init_logits` or `difficulty` sets the start. Not with
            explicit `rewards` or `init_logits`.
        rewards: Bernoulli success probability of each arm, in [0, 1] (0/1: binary rewards); shape (N,), shared by
            the prompts, or (D, N), one row per prompt (D then sets `n_prompts`); None: from n_arms and n_correct.
        init_logits: the start θ_0, also the KL reference π_ref = softmax(θ_0); finite logits (nats), shape (N,)
            or (D, N); None: the class-symmetric start of p_ref (generated rewards), zeros: uniform (explicit ones).
        true_rewards: a second reward table in [0, 1], read out as `true_reward` and not trained on
            (reward-hacking studies); shape (N,) or (D, N); None: no such read-out (default).
        n_prompts: D, prompts in the dataset; integer >= 1; None: the rows of a (D, N) `rewards`, else 1.
        learning_rate: η, the optimiser's step size on the logits (on W with `features`); > 0 (default 0.1).
        momentum: heavy-ball μ of "sgd" and "nesterov", Adam's b1; in [0, 1) (default 0: plain gradient steps).
        beta: KL coefficient β; >= 0 (default 0: no KL penalty).
        num_generations: G, samples per group; static integer in [2, `MAX_GROUP_SIZE`] (default 8).
        advantage: the advantage kind, a name in `ADVANTAGES` ("std": GRPO, "mean": Dr. GRPO, "rloo", "batch":
            group mean, batch std) or its integer code (`advantage_code`; may be traced) (default "std").
        kl: the KL estimator, one of `KL_KINDS` ("exact": analytic KL(π‖π_ref) over the arms); static (default
            "k3").
        kl_clamp: bound on k3 (nats); > 0; None: no clamp (default). The other estimators ignore it.
        epsilon: ε_low, the ratio π/π_old is clipped below at 1 − ε_low; in (0, 1) (default 0.2).
        epsilon_high: ε_high, clipped above at 1 + ε_high; > 0; None: equal to `epsilon` (default).
        dual_clip: dual-clip constant c > 1, the loss of a sample with A < 0 is capped at −c·A; None: off
            (default).
        lag_model: one of `LAG_MODELS`: "none", "refresh", "refresh_fresh", "stale"; static (default "none").
        lag: optimiser steps, integer >= 0 (default 0): 0 for "none"; steps per rollout for "refresh" (a multiple
            of `minibatches`); the refresh period of π_old for "refresh_fresh"; the delay τ for "stale" (<=
            `max_lag`). May be traced and vmapped.
        max_lag: the stale-lag buffer holds max_lag + 1 logits, so `lag` can be swept up to it; static integer
            >= 0; None: the concrete `lag` (its largest value), 0 for a traced one.
        optimizer: one of `OPTIMIZERS` ("sgd", "nesterov", "adam"); static (default "sgd").
        max_grad_norm: bound on the gradient's global L2 norm; > 0; None: no clipping (default).
        adv_eps: added to the std in "std" and "batch" advantages (reward units); >= 0 (default 1e-6).
        minibatches: m, optimiser steps per pass over a rollout; static integer >= 1 dividing the prompts per
            rollout; > 1 needs lag_model "refresh" (default 1).
        ref_sync_steps: KL reference sync (TRL `sync_ref_model`) every S optimiser steps (n > 0): π_ref ← α·π +
            (1 − α)·π_ref on the logits; integer >= 1; None: never (default).
        ref_sync_alpha: α of the reference sync; in [0, 1] (default 0.6).
        difficulty: (a, b), both > 0: the D prompts' p_ref are the quantiles (d + ½)/D of Beta(a, b)
            (deterministic); not with `p_ref`; None: off (default).
        batch_prompts: P, prompts per rollout (sampled mode); static integer in [1, D]; None: all D (default).
        dynamic_sampling: DAPO: groups whose rewards are all equal get weight 0 in the loss, without re-drawing;
            static bool; sampled mode only (default False).
        features: Φ, shape (D, F), finite: shared parameters, θ_d = θ_0,d + φ_d W with W (F, N) trained from 0
            instead of the per-prompt logits; None: per-prompt logits (default).
        lr_scheduler_type: one of `LR_SCHEDULES`; static (default "constant").
        warmup_steps: optimiser steps of linear warm-up from 0; integer >= 0 (default 0: none).
        decay_steps: the optimiser step at which "linear" and "cosine" reach 0 (the run's total steps); integer
            >= 1 and >= `warmup_steps`; required by those two, unused by the others (None: stored as 1).
        **renamed: none: a former name (`RENAMED`, e.g. `eta`) is refused with its TRL name.

    Returns:
        The validated `Config`: rewards, init_logits and true_rewards of shape (D, N), scalar leaves 0-d, in
        the float dtype of rewards and init_logits (float32 unless x64).

    Raises:
        PgrpoSimError: for a value out of its range (concrete values), a name not among its choices, an array
            where one number is needed, shapes that disagree (n_prompts and the rows of rewards, p_ref's length,
            arms), or arguments that exclude each other (p_ref with difficulty, init_logits or explicit rewards;
            "linear" or "cosine" without decay_steps, or warmup_steps > decay_steps), a former name (`RENAMED`) or
            another unknown keyword, and for every check of `Config`.
    """
    check_renamed(renamed)
    if rewards is not None and np.ndim(rewards) == 2:  # one row of rewards per prompt
        if n_prompts not in (None, np.shape(rewards)[0]):
            raise PgrpoSimError(f"n_prompts ({n_prompts}) must equal the rows of rewards ({np.shape(rewards)[0]})")
        n_prompts = np.shape(rewards)[0]
    n_prompts = 1 if n_prompts is None else n_prompts
    check_range("n_prompts", n_prompts, 1, integer=True)
    if lr_scheduler_type in ("linear", "cosine"):
        if decay_steps is None:
            raise PgrpoSimError(
                f"lr_scheduler_type {lr_scheduler_type!r} decays to 0 at decay_steps: give it (>= 1 steps)"
            )
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
    if p_ref is not None and np.ndim(p_ref) == 1 and np.size(p_ref) != n_prompts:
        raise PgrpoSimError(f"p_ref must have one entry per prompt ({n_prompts}), got {np.size(p_ref)}")
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

    def scalar(x):  # None and text go through, for `Config` to refuse or accept by name
        x = _as_float(x)
        return x.astype(dtype) if isinstance(x, jax.Array) else x

    check_scalar("lag", lag)
    check_range("lag", lag, 0, integer=True)
    if max_lag is None:
        max_lag = int(np.max(lag)) if is_concrete(lag) else 0
    return Config(
        rewards=per_prompt(rewards, "rewards"),
        init_logits=per_prompt(init_logits, "init_logits"),
        true_rewards=None if true_rewards is None else per_prompt(true_rewards, "true_rewards"),
        learning_rate=scalar(learning_rate),
        momentum=scalar(momentum),
        beta=scalar(beta),
        epsilon=scalar(epsilon),
        epsilon_high=scalar(epsilon if epsilon_high is None else epsilon_high),
        dual_clip=scalar(dual_clip),
        kl_clamp=scalar(kl_clamp),
        max_grad_norm=scalar(max_grad_norm),
        lag=lag,
        adv_eps=scalar(adv_eps),
        num_generations=num_generations,
        advantage=advantage,
        kl=kl,
        lag_model=lag_model,
        max_lag=max_lag,
        minibatches=minibatches,
        batch_prompts=batch_prompts,
        dynamic_sampling=dynamic_sampling,
        optimizer=optimizer,
        lr_scheduler_type=lr_scheduler_type,
        warmup_steps=warmup_steps,
        decay_steps=decay_steps,
        ref_sync_steps=ref_sync_steps,
        ref_sync_alpha=scalar(ref_sync_alpha),
        features=None if features is None else as_float(features).astype(dtype),
    )


DEFAULTS: Mapping[str, object] = MappingProxyType(
    {name: p.default for name, p in inspect.signature(config).parameters.items()}
    | {"p_ref": DEFAULT_P_REF, "n_prompts": 1}
)
"""`config`'s defaults by keyword, with the two it computes from other arguments as they are on their own: the
class-symmetric start's p_ref and one prompt (the command line's flags take their defaults from here)."""
