"""Phase diagrams: the regimes the theory predicts on a sweep's grid, and how often the bandit agrees.

Predictions per grid cell use K and η_eff from the exact bandit (`prediction.stiffness_at_fixed_point`):
- continuous model: ζ > 1 (over- or critically damped) → monotone, ζ < 1 → oscillatory, C ≤ 0 → unstable
  (it has no period-2 "flip" regime);
- exact discrete map (`linear`, with K): monotone / oscillatory / flip / unstable from its dominant root,
  lag model "none" read as stale lag 0.
Agreement is the fraction of cells whose simulated regime (`summaries`) equals the prediction, over all
cells and over "interior" cells — those none of whose 4 grid neighbours has a different predicted regime.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import linear, theory
from .config import bandit_config
from .prediction import continuous_lag, stiffness_at_fixed_point, two_arm_reduction
from .sweep import TRACED_AXES, _point_config

CONTINUOUS_TO_DISCRETE = np.array([0, 0, 1, 3])  # overdamped, critical → monotone; underdamped → oscillatory
"""Maps `theory.REGIMES` codes onto `linear.DISCRETE_REGIMES` codes."""


class PhasePrediction(NamedTuple):
    """Per-cell predictions over the sweep's grid (arrays shaped like the dataset's regime).

    continuous, discrete: regime codes (`linear.DISCRETE_REGIMES`); damping_ratio ζ; damping_margin:
    C·η_eff = (1−μ) − η_eff·K·τ (negative: unstable); radius: exact discrete spectral radius; complex_root: 1 where the dominant
    discrete root is complex; stiffness K; eta_eff."""

    continuous: np.ndarray
    discrete: np.ndarray
    damping_ratio: np.ndarray
    damping_margin: np.ndarray
    radius: np.ndarray
    complex_root: np.ndarray
    stiffness: np.ndarray
    eta_eff: np.ndarray


def predict_grid(dataset) -> PhasePrediction:
    """Predicted regimes at every cell of a sweep dataset (uses the sweep spec stored in its attrs)."""
    spec = json.loads(dataset.attrs["spec"])
    dims = list(dataset["regime"].dims)
    cells = np.stack(np.meshgrid(*[dataset[d].values for d in dims], indexing="ij"), -1).reshape(-1, len(dims))
    base = dict(spec["base"])
    if "lag" in dims:
        base["max_lag"] = int(dataset["lag"].values.max())
    fields = {k: [] for k in PhasePrediction._fields}
    for cell in cells:
        values = dict(zip(dims, cell))
        fixed = dict(base) | {k: int(v) if k in ("lag", "group_size") else float(v) for k, v in values.items() if k not in TRACED_AXES}
        fixed.setdefault("lag", int(values.get("lag", base.get("lag", 0))))
        config = bandit_config(**fixed)
        traced = {k: jnp.asarray(v, jnp.int32 if k == "lag" else config.rewards.dtype) for k, v in values.items() if k in TRACED_AXES}
        clip_both = "clip_high" not in values and "clip_high" not in base
        cfg = _point_config(config, traced, fixed.get("n_correct", 1), clip_both)
        cfg2 = two_arm_reduction(cfg)
        _, found, _, k = _stiffness_jit(cfg2)
        eta_eff = 2 * float(cfg2.eta)
        k = float(k) if bool(found) else np.nan
        osc = (eta_eff, float(cfg.momentum), float(continuous_lag(cfg)), k)
        lag, model = int(cfg.lag), "refresh" if cfg.lag_model == "refresh" else "stale"
        lag = lag if cfg.lag_model != "none" else 0
        valid = np.isfinite(k) and k > 0
        code = int(theory.regime_code(*osc)) if valid else 3
        fields["continuous"].append(CONTINUOUS_TO_DISCRETE[code])
        fields["discrete"].append(int(linear.discrete_regime_code(eta_eff, osc[1], lag, k, model)) if valid else 3)
        fields["damping_ratio"].append(float(theory.damping_ratio(*osc)) if valid else np.nan)
        fields["damping_margin"].append((1 - osc[1]) - eta_eff * k * osc[2] if valid else np.nan)
        root = complex(linear.dominant_root(eta_eff, osc[1], lag, k, model)) if valid else complex(np.nan)
        fields["radius"].append(abs(root))
        fields["complex_root"].append(float(abs(root.imag) > 1e-6 * abs(root)))
        fields["stiffness"].append(k)
        fields["eta_eff"].append(eta_eff)
    shape = dataset["regime"].shape
    return PhasePrediction(**{k: np.asarray(v).reshape(shape) for k, v in fields.items()})


_stiffness_jit = jax.jit(stiffness_at_fixed_point)


def interior_mask(predicted: np.ndarray) -> np.ndarray:
    """True for cells whose 4 grid neighbours (in every dimension) share their predicted regime."""
    inside = np.ones(predicted.shape, bool)
    for axis in range(predicted.ndim):
        diff = np.diff(predicted, axis=axis) != 0
        pad_lo = [(0, 0)] * predicted.ndim
        pad_hi = [(0, 0)] * predicted.ndim
        pad_lo[axis], pad_hi[axis] = (1, 0), (0, 1)
        inside &= ~np.pad(diff, pad_lo) & ~np.pad(diff, pad_hi)
    return inside


def agreement(simulated: np.ndarray, prediction: PhasePrediction) -> dict[str, float]:
    """Fractions of cells where the simulated regime equals each prediction, overall and in the interior."""
    out = {}
    for name in ("continuous", "discrete"):
        predicted = getattr(prediction, name)
        match = simulated == predicted
        inside = interior_mask(predicted)
        out[f"agreement_{name}"] = float(match.mean())
        out[f"agreement_{name}_interior"] = float(match[inside].mean()) if inside.any() else float("nan")
        out[f"interior_cells_{name}"] = int(inside.sum())
    out["cells"] = int(simulated.size)
    return out
