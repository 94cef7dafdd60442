"""A bandit configuration's oscillator (`oscillator`: p*, K, D, ζ, ω_n, τ*, the stationary variance and the exact
radius) and `predict`, its checked and jitted entry point with the regimes and the reasons a quantity is undefined."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from ..base.regimes import REGIMES, Damping
from ..models import bandit
from ..models.bandit import (
    check_mode,
)
from ..models.bandit.configuration import check_config
from ..models.oscillator import linear, theory
from .floquet import floquet_radius
from .lags import config_lag, continuous_lag
from .reduction import (
    effective_eta,
    fixed_point,
    noise_scale,
    stiffness,
    two_arm_reduction,
)

REASONS = (
    "stable",
    "no interior fixed point",
    "damping C <= 0 (lag at or beyond the critical lag)",
    "exact discrete map unstable (spectral radius >= 1)",
    "spectral radius undetermined: no fixed point of the rollout-averaged cycle was found (the run may cycle, "
    "e.g. held by the clip: outside the linear model)",
    "spectral radius undetermined at this precision: within rounding of 1 (|r - 1| <= 4 eps, a small learning "
    "rate); enable float64 (jax_enable_x64), as the command line does",
)
"""Names of `Prediction.reason` codes: index = code."""
QUANTITIES = (
    "p_star",
    "stiffness",
    "noise",
    "damping_ratio",
    "natural_frequency",
    "critical_lag",
    "stationary_variance",
)
"""The oscillator quantities of `oscillator` (and rows of `sensitivities`)."""


class Prediction(NamedTuple):
    """The oscillator of a bandit configuration (see the module docstring for conventions).

    `regime` is a `base.regimes.Damping` code (names in `REGIMES`), `reason` a code into `REASONS`; `stable` is
    True when an interior fixed point exists, C > 0 and the exact spectral radius is below 1. Quantities that do
    not exist (no interior fixed point; the stationary variance of a configuration not `stable`) are NaN and
    flagged by `stable`/`reason`, never to be read as numbers. `critical_lag` is on the axis of the
    configuration's `lag` (`config_lag`), `lag_eff` the continuous model's τ.

    Every field is 0-d for one configuration (with leading axes under `vmap`); floats are the configuration's dtype.
    The fields that need the fixed point (p*, K, D, M, C, ζ, ω_n, the critical lag) are NaN without one.

    Attributes:
        p_star: fixed point p* of the correct mass; probability in (0, 1).
        unique: bool; the fixed point was found and the drive X changes sign once on the grid of logit(p).
        stiffness: K = −X'(x*), per unit η_eff.
        noise: diffusion D = G·Var(Δp/η_eff) at p* (probability² per unit η_eff²).
        eta_eff: η_eff, the oscillator's learning rate, per optimiser step (`effective_eta` of the reduction).
        lag_eff: the continuous model's lag τ, in optimiser steps (`continuous_lag`).
        mass: M (steps²).
        damping: C (steps); <= 0 means the continuous model is unstable.
        damping_ratio: ζ, dimensionless.
        natural_frequency: ω_n, radians per optimiser step.
        regime: int32 `Damping` code; UNSTABLE without a fixed point, `INVALID` (−1) where ζ is undefined.
        critical_lag: the critical lag on the axis of the configuration's `lag`: τ* optimiser steps ("stale",
            "none"), 2τ* + 1 optimiser steps per rollout ("refresh", "refresh_fresh").
        stationary_variance: Var(p) of sampled training at p* (probability²); NaN unless `stable`.
        spectral_radius: per-step spectral radius of the exact expected map (`floquet_radius`); < 1 is stable; NaN
            without a fixed point (for "refresh": of the rollout-averaged cycle).
        stable: bool; `reason` == 0.
        reason: int32 code into `REASONS` (0: stable).
    """

    p_star: Array
    unique: Array
    stiffness: Array
    noise: Array
    eta_eff: Array
    lag_eff: Array
    mass: Array
    damping: Array
    damping_ratio: Array
    natural_frequency: Array
    regime: Array
    critical_lag: Array
    stationary_variance: Array
    spectral_radius: Array
    stable: Array
    reason: Array

    def as_dict(self) -> dict:
        """Plain Python values (names for `regime` and `reason`, None for NaN) for printing or JSON.

        Returns:
            A dict of every field name to a Python float, int or bool, or None for NaN; "regime" is a name of
                `REGIMES`, or "undefined" where there is no interior fixed point to oscillate about (the reward
                runs to a boundary, e.g. 1 at β = 0: not an instability), "reason" a sentence of `REASONS`. For one
                configuration (0-d fields) only: a batched `Prediction` raises numpy's ValueError.
        """
        out = {}
        for name, value in self._asdict().items():
            v = np.asarray(value).item()
            out[name] = None if isinstance(v, float) and np.isnan(v) else v
        no_fixed_point = out["reason"] == REASONS.index("no interior fixed point")
        out["regime"] = REGIMES[out["regime"]] if out["regime"] >= 0 and not no_fixed_point else "undefined"
        out["reason"] = REASONS[out["reason"]]
        return out


def oscillator(config2: bandit.Config, tau, fixed: tuple[Array, Array] | None = None) -> dict[str, Array]:
    """`QUANTITIES` of a 2-arm configuration with continuous lag τ = `tau`, NaN without an interior p*
    (`critical_lag` is τ*, in the continuous lag's units: `predict` reports it on the configuration's axis);
    differentiable in every float leaf. `fixed`: (x*, found) when p* is known not to move (skips the search).

    Args:
        config2: a 2-arm configuration (`two_arm_reduction`'s; `bandit.Config`).
        tau: continuous lag τ (optimiser steps, `continuous_lag`); a 0-d float; may be traced.
        fixed: (x*, found) from `constant_fixed_point` or `fixed_point`; None: search for it.

    Returns:
        A dict of the `QUANTITIES` names to 0-d floats: p_star (probability), stiffness (per unit η_eff),
            noise (probability² per unit η_eff²), damping_ratio, natural_frequency (radians per step), critical_lag
            τ* (steps) and stationary_variance (probability²; +inf where C <= 0).
    """
    x, found = fixed if fixed is not None else fixed_point(config2)[:2]
    k = stiffness(config2, x)
    eta_eff = effective_eta(config2)
    osc = (eta_eff, config2.momentum, tau, k)
    noise = noise_scale(config2, x)
    out = dict(
        p_star=jax.nn.sigmoid(x),
        stiffness=k,
        noise=noise,
        damping_ratio=theory.damping_ratio(*osc),
        natural_frequency=theory.natural_frequency(*osc),
        critical_lag=theory.critical_lag(eta_eff, config2.momentum, k),
        stationary_variance=theory.stationary_variance(
            *osc, noise, jnp.asarray(config2.num_generations, eta_eff.dtype)
        ),
    )
    return {name: jnp.where(found, v, jnp.nan) for name, v in out.items()}


@jax.jit
def _predict(config2: bandit.Config) -> Prediction:
    eta_eff = effective_eta(config2)
    x, found, unique = fixed_point(config2)
    lag_eff = continuous_lag(config2.lag, config2.lag_model).astype(eta_eff.dtype)
    q = oscillator(config2, lag_eff, (x, found))
    osc = (eta_eff, config2.momentum, lag_eff, q["stiffness"])
    coef = theory.coefficients(*osc)
    radius = floquet_radius(config2, x)
    # the exact map's verdict (NaN: no fixed point of the averaged cycle, no proof of stability) before the
    # continuous model's C <= 0
    # the multipliers are 1 + O(η) in floating point: a radius within a few ulps of 1 is rounding, not a verdict
    rounding = jnp.abs(radius - 1) <= 4 * jnp.finfo(radius.dtype).eps
    reason = jnp.where(coef.damping <= 0, 2, jnp.where(rounding, 5, jnp.where(radius >= 1, 3, 0)))
    reason = jnp.where(~found, 1, jnp.where(jnp.isnan(radius), 4, reason))
    return Prediction(
        p_star=q["p_star"],
        unique=found & unique,
        stiffness=q["stiffness"],
        noise=q["noise"],
        eta_eff=eta_eff,
        lag_eff=lag_eff,
        mass=jnp.where(found, coef.mass, jnp.nan),
        damping=jnp.where(found, coef.damping, jnp.nan),
        damping_ratio=q["damping_ratio"],
        natural_frequency=q["natural_frequency"],
        regime=jnp.where(found, theory.regime_code(*osc), Damping.UNSTABLE),
        critical_lag=config_lag(q["critical_lag"], config2.lag_model),
        stationary_variance=jnp.where(reason == 0, q["stationary_variance"], jnp.nan),  # no stationary state
        spectral_radius=jnp.where(found, radius, jnp.nan),
        stable=reason == 0,
        reason=reason,
    )


def predict(config: bandit.Config) -> Prediction:
    """Fixed point p*, stiffness K, noise D, the oscillator (M, C, ζ, ω_n, regime, τ*, stationary variance)
    and the exact per-step spectral radius of a class-symmetric, binary-reward, single-prompt bandit
    configuration (SGD or Nesterov); vmappable over its hyperparameter leaves. See the module docstring.

    Args:
        config: the configuration (`bandit.Config`): binary rewards, a class-symmetric start, SGD or Nesterov, a
            constant learning rate; several prompts with one class structure reduce to their mean field
            (`two_arm_reduction`). Hyperparameter leaves may be traced; rewards must be concrete.

    Returns:
        `Prediction`, fields 0-d (leading axes under `vmap`).

    Raises:
        PgrpoSimError: for a learning-rate schedule other than "constant", a configuration `two_arm_reduction`
            refuses, one that expected mode has no exact form for (dynamic sampling, "batch" advantages, too many
            distinct rollouts to enumerate for "refresh"), or a stale max_lag above `linear.MAX_LAG`.
    """
    check_config(config)
    if config.lr_scheduler_type != "constant":  # its optimiser state counts steps: the map changes from step to step
        raise PgrpoSimError(
            f"predict needs a constant learning rate (lr_scheduler_type 'constant'), got {config.lr_scheduler_type!r}: "
            "its spectral radius is that of the map at one η; predict the run at its peak η, or simulate it"
        )
    reduced = two_arm_reduction(config)
    check_mode(reduced, "expected")  # the reduction's: a population or N arms reduce to one 2-arm prompt
    if config.lag_model == "stale":  # the Floquet map carries the lag buffer: its Jacobian grows as max_lag²
        check_range("max_lag (the stale lag buffer; lag unless given)", config.max_lag, 0, linear.MAX_LAG, integer=True)
    return _predict(reduced)
