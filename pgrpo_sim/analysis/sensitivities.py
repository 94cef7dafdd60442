"""Exact sensitivities of the oscillator of a bandit configuration to its hyperparameters.

Works on the exact two-arm reduction of a class-symmetric, binary-reward, single-prompt configuration
(`prediction.two_arm_reduction`; SGD or Nesterov), whose oscillator uses η_eff = η·N/(c(N−c)) as its η.
Derivatives are exact: p* comes from `prediction.fixed_point` (implicit differentiation by optimistix) and
everything else is differentiated by `jax.jacfwd` through the closed forms.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..base.errors import PgrpoSimError
from ..models import bandit
from ..models.bandit.hyperparameters import DIFFERENTIABLE, reference_mass
from ..prediction import QUANTITIES, continuous_lag, eta_scale, oscillator, substitute, two_arm_reduction

PARAMETERS = (*DIFFERENTIABLE, "lag")
"""Columns of `sensitivities` ("lag" is the continuous lag τ of the oscillator)."""


def check_differentiable(names: str | Sequence[str], *, lag: bool = False) -> tuple[str, ...]:
    """`names` (one name or several) as a tuple; refuses names that are not differentiated hyperparameters,
    pointing integer ones to an outer grid (`lag`: "lag" is allowed, the oscillator's continuous τ).

    Args:
        names: a hyperparameter name, or several; each in `DIFFERENTIABLE` (or "lag" when `lag`).
        lag: allow "lag", the oscillator's continuous τ.

    Returns:
        The names, as a tuple in the order given.

    Raises:
        PgrpoSimError: a name that is integer-valued (lag without `lag`, num_generations) or not a differentiated
            hyperparameter.
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    for name in names:
        if name == "lag" and lag:
            continue
        if name in ("lag", "num_generations"):
            flag = "lags" if name == "lag" else "group_sizes"
            raise PgrpoSimError(
                f"{name} is an integer hyperparameter and is not differentiated; search it as an outer grid "
                f"instead ({flag}=[...], pgrpo-sim tune --{flag.replace('_', '-')} ...)"
            )
        if name not in DIFFERENTIABLE:
            raise PgrpoSimError(f"unknown hyperparameter {name!r}; continuous ones are {', '.join(DIFFERENTIABLE)}")
    return names


class Sensitivities(NamedTuple):
    """A named table of partial derivatives at one configuration.

    Attributes:
        point: parameter → its value (η per step, in config units; lag: the continuous τ of the oscillator in
            optimiser steps, τ for stale lag, (K_ref − 1)/2 for refresh, 0 for none; μ, β, p_ref and clip
            dimensionless), in the order asked for.
        values: quantity (`QUANTITIES`) → its value, as `prediction.oscillator` (p* a probability, K per unit
            η_eff, ζ dimensionless, ω_n per step, τ* in optimiser steps, stationary variance in reward²).
        partials: quantity → parameter → ∂quantity/∂parameter; units of the quantity per unit of the parameter.
    """

    point: dict[str, float]
    values: dict[str, float]
    partials: dict[str, dict[str, float]]

    def table(self) -> str:
        """The table as aligned text: one row per quantity, one column per parameter."""
        cols = list(self.point)
        head = f"{'':<20}{'value':>13}" + "".join(f"{'d/d' + c:>13}" for c in cols)
        rows = [head] + [
            f"{q:<20}{self.values[q]:>13.5g}" + "".join(f"{self.partials[q][c] + 0.0:>13.5g}" for c in cols)
            for q in self.values
        ]
        return "\n".join(rows)


@functools.partial(jax.jit, static_argnames=("scale",))
def _sensitivity_kernel(cfg2, point, scale):
    def f(p):
        p = dict(p)
        tau = p.pop("lag")
        return oscillator(substitute(cfg2, p, scale), tau)

    return f(point), jax.jacfwd(f)(point)


def sensitivities(config: bandit.Config, wrt: Sequence[str] = PARAMETERS) -> Sensitivities:
    """Exact partial derivatives (`jax.jacfwd`) of p*, K, D, ζ, ω_n, τ* and the stationary variance D/(2GCK)
    with respect to η, μ, β, p_ref, clip and the continuous lag τ, at `config` (see `Sensitivities`).

    p* and K do not depend on η, μ or τ (the fixed point of the on-policy drive), nor on clip (the ratio is 1
    on-policy), so those entries are exactly 0: the table says so rather than leaving them out.

    Args:
        config: the bandit configuration (reducible to two arms: `prediction.two_arm_reduction`).
        wrt: the parameters to differentiate with respect to, among `PARAMETERS`.

    Returns:
        `Sensitivities` (NaN values without an interior fixed point).

    Raises:
        PgrpoSimError: a name in `wrt` that is not in `PARAMETERS`, or a `config` without an exact two-arm
            reduction (e.g. Adam).
    """
    wrt = check_differentiable(wrt, lag=True)
    cfg2, scale = two_arm_reduction(config), eta_scale(config)
    dtype = cfg2.learning_rate.dtype
    current = dict(
        learning_rate=config.learning_rate,
        momentum=config.momentum,
        beta=config.beta,
        p_ref=reference_mass(config),
        epsilon=config.epsilon,
    )
    point = {name: jnp.asarray(current[name], dtype) for name in wrt if name != "lag"}
    point["lag"] = jnp.asarray(continuous_lag(config.lag, config.lag_model), dtype)
    values, jac = _sensitivity_kernel(cfg2, point, scale)
    return Sensitivities(
        point={name: float(point[name]) for name in wrt},
        values={q: float(values[q]) for q in QUANTITIES},
        partials={q: {name: float(jac[q][name]) for name in wrt} for q in QUANTITIES},
    )
