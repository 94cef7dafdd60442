"""Phase diagrams: the regimes the theory predicts on a sweep's grid, and how often the bandit agrees.

Predictions per grid cell use K and η_eff from the exact bandit (`prediction.fixed_point_stiffness`):
- continuous model: ζ > 1 (over- or critically damped) → monotone, ζ < 1 → oscillatory, C ≤ 0 → unstable
  (it has no period-2 "flip" regime);
- exact discrete map (`linear`, with K): monotone / oscillatory / flip / unstable from its dominant root,
  lag model "none" read as stale lag 0.
Agreement is the fraction of cells whose simulated regime (`summaries`) equals the prediction, over all
cells and over "interior" cells — those none of whose 4 grid neighbours has a different predicted regime.
A cell without an interior fixed point of positive stiffness (e.g. β = 0, where the policy runs to the
boundary) has no prediction (`PhasePrediction.valid` False): it is left out of the agreements and counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ..base.errors import PgrpoSimError
from ..base.regimes import DAMPING_TO_REGIME, Regime
from ..models import bandit
from ..models.bandit.configuration import check_settings
from ..models.bandit.hyperparameters import HYPERPARAMETERS, hyperparameter, set_hyperparameters
from ..models.oscillator import linear, theory
from ..prediction import continuous_lag, discrete_lag, effective_eta, fixed_point_stiffness, two_arm_reduction


class PhasePrediction(NamedTuple):
    """Per-cell predictions over the sweep's grid (arrays shaped like the dataset's regime).

    continuous, discrete: regime codes (`base.regimes.Regime`); damping_ratio ζ; damping_margin:
    C·η_eff = (1−μ) − η_eff·K·τ (negative: unstable); radius: exact discrete spectral radius; complex_root: 1
    where the dominant discrete root is complex; stiffness K; eta_eff; valid: the cell has an interior fixed
    point with K > 0, so the theory predicts a regime there (elsewhere the codes read "unstable" and mean
    nothing).

    Attributes:
        continuous: regime code of the continuous oscillator; int; the grid's shape.
        discrete: regime code of the exact discrete map; int; the grid's shape.
        damping_ratio: ζ; dimensionless; NaN where not `valid`.
        damping_margin: C·η_eff = (1−μ) − η_eff·K·τ; dimensionless; NaN where not `valid`.
        radius: exact discrete spectral radius; per-step multiplier (≥ 1: unstable); NaN where not `valid`.
        complex_root: 1.0 where the dominant discrete root is complex, else 0.0; float.
        stiffness: K at the fixed point; per unit η_eff; NaN without an interior fixed point.
        eta_eff: the oscillator's η, η_eff of the two-arm reduction (η·N/(c(N−c)) for one prompt); per step.
        valid: whether the cell has an interior fixed point with K > 0; bool.
    """

    continuous: np.ndarray
    discrete: np.ndarray
    damping_ratio: np.ndarray
    damping_margin: np.ndarray
    radius: np.ndarray
    complex_root: np.ndarray
    stiffness: np.ndarray
    eta_eff: np.ndarray
    valid: np.ndarray


def predict_grid(dataset) -> PhasePrediction:
    """Predicted regimes at every cell of a sweep dataset (uses the sweep spec stored in its attrs).

    Args:
        dataset: a sweep's `xarray.Dataset`, with its spec (JSON) in `attrs["spec"]` and a `regime` variable
            whose dimensions are hyperparameters.

    Returns:
        `PhasePrediction`, arrays shaped like `dataset["regime"]`.

    Raises:
        PgrpoSimError: as `predict_cells`.
    """
    spec = json.loads(dataset.attrs["spec"])
    return predict_cells(spec["base"], {d: dataset[d].values for d in dataset["regime"].dims})


def predict_cells(base: Mapping, coords: Mapping[str, np.ndarray]) -> PhasePrediction:
    """Predicted regimes at every cell of the grid `coords` (name → values, in dimension order) around the
    `bandit.config` keyword arguments `base`; arrays shaped (len of each axis). Raises `PgrpoSimError` for a
    configuration the theory does not describe (e.g. Adam), before any sweep needs to run.

    Args:
        base: `bandit.config` keyword arguments, the values fixed over the grid.
        coords: hyperparameter name (`HYPERPARAMETERS`) → its 1-D grid values in that hyperparameter's units (η per
            step, lag in optimiser steps), in dimension order; at least one.

    Returns:
        `PhasePrediction`, arrays of shape (len(coords[d]) for each d).

    Raises:
        PgrpoSimError: `base` with an unknown setting or a configuration the theory does not describe, `coords`
            empty or not a mapping, or an unknown hyperparameter name.
    """
    check_settings(base)
    if not isinstance(coords, Mapping) or not coords:
        raise PgrpoSimError(f"coords must map at least one hyperparameter to its values, got {coords!r}")
    for d in coords:
        hyperparameter(d)  # a known name
    dims = list(coords)
    cells = np.stack(np.meshgrid(*[np.asarray(coords[d]) for d in dims], indexing="ij"), -1).reshape(-1, len(dims))
    base = dict(base)
    if "lag" in dims:
        base["max_lag"] = int(np.max(coords["lag"]))
    config = bandit.config(**base)
    fields = {k: [] for k in PhasePrediction._fields}
    for cell in cells:
        values = {d: int(v) if HYPERPARAMETERS[d].integer else float(v) for d, v in zip(dims, cell, strict=True)}
        cfg = set_hyperparameters(config, values)
        reduced = two_arm_reduction(cfg)
        _, found, k = fixed_point_stiffness(reduced)
        eta_eff = float(effective_eta(reduced))
        k = float(k) if bool(found) else np.nan
        osc = (eta_eff, float(cfg.momentum), float(continuous_lag(cfg.lag, cfg.lag_model)), k)
        lag, model = discrete_lag(cfg.lag, cfg.lag_model)
        valid = np.isfinite(k) and k > 0
        code = int(theory.regime_code(*osc)) if valid else Regime.UNSTABLE
        fields["continuous"].append(DAMPING_TO_REGIME[code])
        discrete = int(linear.discrete_regime_code(eta_eff, osc[1], lag, k, model)) if valid else Regime.UNSTABLE
        fields["discrete"].append(discrete)
        fields["damping_ratio"].append(float(theory.damping_ratio(*osc)) if valid else np.nan)
        fields["damping_margin"].append((1 - osc[1]) - eta_eff * k * osc[2] if valid else np.nan)
        root = complex(linear.dominant_root(eta_eff, osc[1], lag, k, model)) if valid else complex(np.nan)
        fields["radius"].append(abs(root))
        fields["complex_root"].append(float(abs(root.imag) > 1e-6 * abs(root)))
        fields["stiffness"].append(k)
        fields["eta_eff"].append(eta_eff)
        fields["valid"].append(bool(valid))
    shape = tuple(np.size(coords[d]) for d in dims)
    return PhasePrediction(**{k: np.asarray(v).reshape(shape) for k, v in fields.items()})


def interior_mask(predicted: np.ndarray) -> np.ndarray:
    """True for cells whose 4 grid neighbours (in every dimension) share their predicted regime.

    Args:
        predicted: regime codes on the grid; any number of dimensions.

    Returns:
        Bool array of `predicted`'s shape.
    """
    inside = np.ones(predicted.shape, bool)
    for axis in range(predicted.ndim):
        diff = np.diff(predicted, axis=axis) != 0
        pad_lo = [(0, 0)] * predicted.ndim
        pad_hi = [(0, 0)] * predicted.ndim
        pad_lo[axis], pad_hi[axis] = (1, 0), (0, 1)
        inside &= ~np.pad(diff, pad_lo) & ~np.pad(diff, pad_hi)
    return inside


def agreement(simulated: np.ndarray, prediction: PhasePrediction) -> dict[str, float]:
    """Fractions of the cells with a prediction (`valid`) where the simulated regime equals each prediction,
    overall and in the interior (NaN when no cell has one); `cells_without_prediction` counts the others.

    Args:
        simulated: simulated regime codes (`summaries`) on the grid; the shape of the prediction's arrays.
        prediction: `PhasePrediction` of the same grid.

    Returns:
        `agreement_continuous`, `agreement_discrete` and their `_interior` forms (fractions in [0, 1], NaN without
        cells), `interior_cells_continuous`, `interior_cells_discrete`, `cells` and `cells_without_prediction`
        (counts).
    """
    valid = np.asarray(prediction.valid, bool)
    out = {}
    for name in ("continuous", "discrete"):
        predicted = np.where(valid, getattr(prediction, name), -1)
        match = simulated == predicted
        inside = interior_mask(predicted) & valid
        out[f"agreement_{name}"] = float(match[valid].mean()) if valid.any() else float("nan")
        out[f"agreement_{name}_interior"] = float(match[inside].mean()) if inside.any() else float("nan")
        out[f"interior_cells_{name}"] = int(inside.sum())
    out["cells"] = int(simulated.size)
    out["cells_without_prediction"] = int((~valid).sum())
    return out
