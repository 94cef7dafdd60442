"""Validation section 3: oscillation starts at ζ = 1. The measured onset along the momentum at fixed η, against the
continuous oscillator's ζ = 1 and the exact discrete map's complex-root onset."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ...models import bandit
from ...models.bandit import simulate
from ...models.oscillator import linear, theory
from ...prediction import predict
from .common import BASE, REWARD, Resolution, verdict


def _bisect(f: Callable[[float], bool], lo: float, hi: float, iters: int = 60) -> float:
    """Smallest x in [lo, hi] with f(x) True, assuming f is False at lo and True at hi (monotone)."""
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if f(mid) else (mid, hi)
    return 0.5 * (lo + hi)


def oscillation_onset(res: Resolution, seed: int, plot: Callable | None) -> dict:
    """Claim: oscillation starts at ζ = 1. Along μ at fixed η, the first μ whose expected curve changes sign
    twice around p*, against ζ = 1 (continuous) and the complex-root onset of the exact discrete map."""
    learning_rate, steps = 0.05, 3000
    config = bandit.config(**BASE, learning_rate=learning_rate)
    pred = predict(config)
    k, eta_eff, p_star = float(pred.stiffness), float(pred.eta_eff), float(pred.p_star)
    mus = np.linspace(0.0, res.onset_max, res.onset_points)
    curves = jax.vmap(lambda m: simulate(config.replace(momentum=m), steps, readouts=REWARD).reward)(jnp.asarray(mus))
    e = np.asarray(curves) - p_star
    significant = np.abs(e) > 1e-9 * np.abs(e[:, :1])  # float64 round-off is ~1e-16
    changes = np.array([np.count_nonzero(np.diff(np.sign(row[s])) != 0) for row, s in zip(e, significant, strict=True)])
    oscillating = changes >= 2
    measured = float(mus[np.argmax(oscillating)]) if oscillating.any() else None  # None: no run oscillates
    continuous = _bisect(lambda m: float(theory.damping_ratio(eta_eff, m, 0.0, k)) < 1, 0.0, 0.999)
    discrete = _bisect(lambda m: abs(complex(linear.dominant_root(eta_eff, m, 0, k)).imag) > 0, 0.0, 0.999)
    step = float(mus[1] - mus[0])
    ok_discrete = measured is not None and abs(measured - discrete) <= step
    ok_continuous = measured is not None and abs(measured - continuous) <= step
    onset = (
        f"measured onset μ = {measured:.3f} (grid step {step:.3f})"
        if measured is not None
        else f"no run on the μ grid (0–{mus[-1]:g}, {mus.size} points) oscillates: no measured onset"
    )
    text = (
        f"{onset}; exact discrete complex-root onset {discrete:.4f} "
        f"({'within' if ok_discrete else 'outside'} one step); continuous ζ = 1 at {continuous:.4f} "
        f"({'within' if ok_continuous else 'outside'} one step)"
    )
    out = {
        "learning_rate": learning_rate,
        "stiffness": k,
        "momenta": mus.tolist(),
        "sign_changes": changes.tolist(),
        "measured_onset": measured,
        **({} if measured is not None else {"measured_onset_missing_reason": "no run on the μ grid oscillates"}),
        "continuous_onset": continuous,
        "discrete_onset": discrete,
        "grid_step": step,
        "verdict": verdict(ok_continuous and ok_discrete, text),
        "table": [
            ["", "onset μ"],
            ["bandit (measured)", "—" if measured is None else f"{measured:.4f}"],
            ["exact discrete map", f"{discrete:.4f}"],
            ["continuous ζ = 1", f"{continuous:.4f}"],
        ],
    }
    if plot:
        out["figure"] = plot("oscillation_onset", mus, changes, measured, continuous, discrete)
    return out
