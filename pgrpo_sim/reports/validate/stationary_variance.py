"""Validation section 2: the stationary variance of the sampled bandit scales as 1/G, and `predict`'s D/(2GCK)
gives its size."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import numpy as np

from ...models import bandit
from ...models.bandit import simulate
from ...prediction import predict
from .common import BASE, REWARD, VERDICT_Z, Resolution, verdict


def fluctuations(res: Resolution, seed: int, plot: Callable | None) -> dict:
    """Claim: the stationary variance scales as 1/G. Late-time Var(p) across seeds vs G at small step."""
    learning_rate, batches = 0.05, 10
    rows = []
    for g in res.fluct_group_sizes:
        config = bandit.config(**BASE | dict(num_generations=g), learning_rate=learning_rate)
        pred = predict(config)
        steps = int(25 / float(pred.eta_eff * pred.stiffness))
        p = np.asarray(
            simulate(
                config, steps, mode="sampled", seeds=res.seeds_fluct, key=jax.random.key(seed + g), readouts=REWARD
            ).reward
        )
        late = p[:, steps // 3 :]
        per_batch = [b.var(0).mean() for b in np.array_split(late, batches)]
        rows.append(
            (
                g,
                float(np.mean(per_batch)),
                float(np.std(per_batch) / math.sqrt(batches)),
                float(pred.stationary_variance),
            )
        )
    g, var, se, pred_var = (np.array(c) for c in zip(*rows, strict=True))
    w = 1 / (se / var) ** 2  # weights on log Var: 1/(relative SE)²
    A = np.stack([np.ones_like(g), np.log(g)], 1)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    intercept, slope = cov @ A.T @ (w * np.log(var))
    slope_se = math.sqrt(cov[1, 1])
    pred_slope = float(np.polyfit(np.log(g), np.log(pred_var), 1)[0])
    ratios = var / pred_var
    ratio_z = (var - pred_var) / se  # predicted minus measured, in standard errors of the measured variance
    slope_z = (slope + 1) / slope_se
    scaling = abs(slope_z) <= VERDICT_Z
    text = (
        f"Var(p) ∝ G^({slope:.3f} ± {slope_se:.3f}): {abs(slope_z):.1f} s.e. from −1 "
        f"({'within' if scaling else 'beyond'} {VERDICT_Z:g} s.e.); predict's D/(2GCK) has slope {pred_slope:.3f} "
        f"(D itself depends on G) and is within {100 * np.max(np.abs(ratios - 1)):.0f} % of the measured variance "
        f"({np.max(np.abs(ratio_z)):.1f} s.e. at most)"
    )
    out = {
        "learning_rate": learning_rate,
        "group_sizes": g.tolist(),
        "variance": var.tolist(),
        "variance_stderr": se.tolist(),
        "predicted_variance": pred_var.tolist(),
        "slope": float(slope),
        "slope_stderr": slope_se,
        "slope_z": float(slope_z),
        "predicted_slope": pred_slope,
        "predicted_z": ratio_z.tolist(),
        "z": VERDICT_Z,
        "verdict": verdict(scaling, text),
        "table": [["G", "Var(p) measured", "± s.e.", "predicted D/(2GCK)", "ratio", "difference / s.e."]]
        + [
            [int(a), f"{b:.3e}", f"{c:.1e}", f"{d:.3e}", f"{b / d:.3f}", f"{z:+.1f}"]
            for (a, b, c, d), z in zip(rows, ratio_z, strict=True)
        ],
    }
    if plot:
        fitted = np.exp(intercept) * g**slope
        inverse = var[0] * (g / g[0]) ** -1.0
        out["figure"] = plot("fluctuations", g, var, se, pred_var, fitted, inverse, slope)
    return out
