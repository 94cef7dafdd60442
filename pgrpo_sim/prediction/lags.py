"""The off-policy lag as each model reads it: the continuous oscillator's τ (`continuous_lag`), the exact map's
(`discrete_lag`) and a critical lag back on the configuration's own lag axis (`config_lag`)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import Array

from ..base.checks import check_choice, check_range
from ..models.bandit.configuration import LAG_MODELS


def continuous_lag(lag, lag_model: str) -> Array:
    """Lag τ of the continuous model from a (real or integer) lag: τ ("stale"), the mean staleness
    (K_ref − 1)/2 ("refresh"), 0 ("none").

    Args:
        lag: the configuration's lag (τ for "stale", refresh period K_ref for the refresh models), in optimiser
            steps; any shape; may be traced.
        lag_model: one of `LAG_MODELS` ("refresh_fresh" as "refresh").

    Returns:
        τ (optimiser steps, >= 0 for lags >= 0), float, of the shape of `lag`.

    Raises:
        PgrpoSimError: if `lag_model` is unknown.
    """
    check_choice("lag_model", lag_model, LAG_MODELS)
    lag = jnp.asarray(lag, jnp.result_type(lag, float))
    staleness = (jnp.maximum(lag, 1) - 1) / 2
    return {"none": 0 * lag, "stale": lag, "refresh": staleness, "refresh_fresh": staleness}[lag_model]


def config_lag(tau, lag_model: str) -> Array:
    """The configuration's `lag` whose continuous lag (`continuous_lag`) is τ = `tau`: τ ("stale", and "none",
    which has no lag of its own), 2τ + 1 optimiser steps per rollout ("refresh", "refresh_fresh").

    Args:
        tau: continuous lag τ (optimiser steps); any shape; may be traced.
        lag_model: one of `LAG_MODELS`.

    Returns:
        The lag on the configuration's axis (optimiser steps), float, of the shape of `tau`.

    Raises:
        PgrpoSimError: if `lag_model` is unknown.
    """
    check_choice("lag_model", lag_model, LAG_MODELS)
    tau = jnp.asarray(tau, jnp.result_type(tau, float))
    return 2 * tau + 1 if lag_model in ("refresh", "refresh_fresh") else tau


def discrete_lag(lag, lag_model: str) -> tuple[int, str]:
    """(integer lag, model) of the exact discrete map (`linear`) for a concrete lag: "none" is stale lag 0; both
    refresh models (rollout reuse and fresh samples) share the frozen-force map, their common linearisation.

    Args:
        lag: the configuration's lag (optimiser steps); a concrete integer scalar >= 0.
        lag_model: one of `LAG_MODELS`.

    Returns:
        (lag, model) for `linear`: a Python int and "stale" or "refresh".

    Raises:
        PgrpoSimError: if `lag_model` is unknown or `lag` is not a whole number >= 0.
    """
    check_choice("lag_model", lag_model, LAG_MODELS)
    check_range("lag", lag, 0, integer=True)
    if lag_model == "none":
        return 0, "stale"
    return int(np.asarray(lag)), "stale" if lag_model == "stale" else "refresh"
