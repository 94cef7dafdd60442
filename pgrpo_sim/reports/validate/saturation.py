"""Validation section 5: the saturation law R(t) = R∞(1 − e^{−t/t0}) is the overdamped limit, and momentum adds a
slow start that the second-order laws capture (a comparison of laws by BIC, `BIC_DECISIVE`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...logs.law_regimes import BIC_DECISIVE
from ...logs.laws import fit_laws
from ...models import bandit
from ...models.bandit import simulate
from ...prediction import predict
from .common import BASE, REWARD, Resolution, verdict


def saturation_law(res: Resolution, seed: int, plot: Callable | None) -> dict:
    """Claim: R(t) = R∞(1 − e^{−t/t0}) is the overdamped limit, and momentum adds a slow start that favours the
    critically damped law. R² and BIC of the three laws on overdamped bandit curves with and without momentum."""
    cases, curves = [], {}
    for learning_rate, mu in ((0.05, 0.0), (0.01, 0.8)):
        config = bandit.config(**BASE, learning_rate=learning_rate, momentum=mu)
        pred = predict(config)
        # six relaxation times of the overdamped heavy ball, (1 − μ)/(η_eff K) each (momentum speeds it up)
        steps = int(6 * (1 - mu) / float(pred.eta_eff * pred.stiffness))
        p = np.asarray(simulate(config, steps, readouts=REWARD).reward)
        fits = fit_laws(np.arange(steps + 1.0), p)
        best = min(fits, key=lambda law: fits[law].bic)
        label = f"η={learning_rate}, μ={mu}"
        zoom = max(20, steps // 8)  # the start, where a slow start shows
        curves[label] = (p, {law: f.curve(np.arange(steps + 1.0)) for law, f in fits.items()}, zoom)
        cases.append(
            dict(
                learning_rate=learning_rate,
                momentum=mu,
                damping_ratio=float(pred.damping_ratio),
                steps=steps,
                lowest_bic=best,
                **{f"r2_{law}": f.r2 for law, f in fits.items()},
                **{f"bic_{law}": f.bic for law, f in fits.items()},
            )
        )
    for c in cases:  # how far the single exponential's BIC sits above the best second-order law's
        c["bic_gap_saturation"] = c["bic_saturation"] - min(c["bic_critical"], c["bic_oscillator"])
    plain, inertial = cases
    limit = plain["bic_gap_saturation"] <= BIC_DECISIVE  # no second-order law decisively better at μ = 0
    slow_start = inertial["bic_gap_saturation"] > BIC_DECISIVE  # a second-order law decisively better at μ = 0.8

    def reading(c):
        gap = c["bic_gap_saturation"]
        return (
            f"saturation R² {c['r2_saturation']:.4f} vs critical {c['r2_critical']:.4f}, oscillator "
            f"{c['r2_oscillator']:.4f}; the saturation law's BIC is {abs(gap):.0f} "
            f"{'above' if gap > 0 else 'below'} the best second-order law's"
        )

    text = (
        f"BIC differences over {BIC_DECISIVE:g} are decisive. μ = 0 (ζ = {plain['damping_ratio']:.2f}): "
        f"{reading(plain)}, so the single exponential {'is not' if not limit else 'is'} the μ = 0 law of the bandit "
        f"(lowest BIC: {plain['lowest_bic']}); μ = 0.8 (ζ = {inertial['damping_ratio']:.2f}): {reading(inertial)}"
        f" — {'a slow start the second-order laws capture' if slow_start else 'no decisive slow start'} "
        f"(lowest BIC: {inertial['lowest_bic']})"
    )
    out = {
        "cases": cases,
        "verdict": verdict(limit and slow_start, text),
        "table": [
            ["η", "μ", "ζ", "R² saturation", "R² critical", "R² oscillator", "BIC saturation − best", "lowest BIC"]
        ]
        + [
            [
                c["learning_rate"],
                c["momentum"],
                f"{c['damping_ratio']:.2f}",
                f"{c['r2_saturation']:.5f}",
                f"{c['r2_critical']:.5f}",
                f"{c['r2_oscillator']:.5f}",
                f"{c['bic_gap_saturation']:+.0f}",
                c["lowest_bic"],
            ]
            for c in cases
        ],
    }
    if plot:
        out["figure"] = plot("saturation_law", curves)
    return out
