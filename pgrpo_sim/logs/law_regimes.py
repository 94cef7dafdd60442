"""What a fitted law says of a curve's regime (`read_regime`, `fitted_regime`): the oscillator fit's ζ with its
standard error, read only where the oscillation is resolved by the data (`oscillation_period`) and the fit beats the
simpler laws and a straight line decisively on BIC (`simpler_bics`, `line_bic`, `BIC_DECISIVE`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jax.typing import ArrayLike

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from .laws import LawFit, check_curve

CRITICAL_BAND = 0.1
"""`read_regime` calls a fit "critical" only when ζ ± 2 standard errors lies within 1 ± CRITICAL_BAND."""
BIC_DECISIVE = 10.0
"""A law wins on BIC when its BIC is lower by more than this (Kass & Raftery's "very strong" evidence)."""
MIN_PERIOD_SPACINGS = 3
"""An oscillation's period is resolved by the data when it spans at least this many (median) step spacings, and at
most the fitted span."""


def line_bic(steps: ArrayLike, values: ArrayLike, *, sigma: ArrayLike | None = None) -> float:
    """BIC of the straight line a + b·t fitted by least squares (weights 1/σ, as `fit_law`), on `LawFit.bic`'s
    footing: k = 3 (two coefficients and the noise scale); NaN for an exact fit.

    Args:
        steps: optimiser steps; shape (n,); finite, strictly increasing.
        values: the metric at `steps`; shape (n,); finite.
        sigma: per-step standard error, as `fit_law` (weights 1/σ); scalar, shape (n,) or None (unweighted).

    Returns:
        The BIC (float, dimensionless); NaN for an exact fit.

    Raises:
        PgrpoSimError: `steps` and `values` fail `check_curve`, or `sigma` is not > 0 and finite at every step.
    """
    t, y = np.asarray(steps, float), np.asarray(values, float)
    check_curve(t, y)
    if sigma is not None:
        check_range("sigma", sigma, 0.0, low_open=True)  # 0 would weigh a point infinitely (an SVD failure)
    w = np.ones_like(y) if sigma is None else 1 / np.broadcast_to(np.asarray(sigma, float), y.shape)
    design = np.stack([w, w * (t - t[0])], -1)
    coef = np.linalg.lstsq(design, w * y, rcond=None)[0]
    rss = float(np.sum((design @ coef - w * y) ** 2))
    n = y.size
    return n * np.log(rss / n) + 3 * np.log(n) if rss > 0 else float("nan")


def oscillation_period(fit: LawFit) -> float:
    """Period 2π/(ω_n√(1 − ζ²)) of an oscillator fit, in steps; inf when ζ ≥ 1 (no oscillation).

    Args:
        fit: a `LawFit` of the oscillator law.

    Returns:
        The period (float); optimiser steps; inf when ζ ≥ 1.

    Raises:
        PgrpoSimError: `fit` is not an oscillator fit.
    """
    if fit.law != "oscillator":
        raise PgrpoSimError(f"the period needs an oscillator fit, got {fit.law}")
    zeta, omega = fit["zeta"], fit["omega_n"]
    return 2 * np.pi / (omega * np.sqrt(1 - zeta**2)) if zeta < 1 else float("inf")


class RegimeReading(NamedTuple):
    """`read_regime`'s answer: the regime and, when it is 'undetermined', why (None otherwise).

    Attributes:
        regime: "overdamped", "underdamped", "critical" or "undetermined".
        reason: why the regime is undetermined, one sentence; None otherwise.
    """

    regime: str
    reason: str | None


def read_regime(fit: LawFit, *, steps: ArrayLike, simpler_bic: dict[str, float]) -> RegimeReading:
    """Regime of an oscillator fit to `steps`, with the reason when it is 'undetermined'.

    First from ζ and its standard error: 'overdamped' / 'underdamped' when ζ is more than two standard errors above
    / below 1; 'critical' when the two-standard-error interval lies within 1 ± `CRITICAL_BAND`; else undetermined
    (an interval that holds 1 and much else, a missing standard error, or a transient |e0| within two standard
    errors of 0). Then the oscillator must describe the data decisively better (BIC lower by `BIC_DECISIVE`) than
    the simpler descriptions in `simpler_bic` (by name: 'straight line', and the saturation law, the ζ → ∞ limit):
    every regime than the line, 'underdamped' and 'critical' also than the saturation law (a curve the single
    exponential fits as well reads as overdamped or not at all); and an 'underdamped' period must be resolved:
    `MIN_PERIOD_SPACINGS` median step spacings to the fitted span. A simpler BIC that is NaN (an exact fit of
    the simpler description) cannot be beaten.

    Args:
        fit: the oscillator `LawFit` (of `fit_laws`).
        steps: the fitted steps; shape (n,), n ≥ 2; optimiser steps.
        simpler_bic: BIC of each simpler description by name ("straight line", "saturation law"), as
            `simpler_bics` gives them; dimensionless.

    Returns:
        `RegimeReading`.

    Raises:
        PgrpoSimError: `fit` is not an oscillator fit, or `steps` is not 1-D with at least 2 points.
    """
    if fit.law != "oscillator":
        raise PgrpoSimError(f"the regime needs an oscillator fit, got {fit.law}")
    t = np.asarray(steps, float)
    if t.ndim != 1 or t.size < 2:
        raise PgrpoSimError(f"steps must be the fitted steps (1-d, >= 2), got shape {t.shape}")
    zeta, z_err = fit["zeta"], fit.stderr[1]
    e0, e0_err = fit["e0"], fit.stderr[3]
    if not np.isfinite(z_err):
        why = "the standard error of ζ is undefined (an exact fit or a singular Jacobian)"
        return RegimeReading("undetermined", why)
    if not np.isfinite(e0_err) or abs(e0) <= 2 * e0_err:
        return RegimeReading(
            "undetermined", "the transient e0 is within two standard errors of 0: the data carry no information on ζ"
        )
    lo, hi = zeta - 2 * z_err, zeta + 2 * z_err
    if lo > 1:
        regime = "overdamped"
    elif hi < 1:
        regime = "underdamped"
    elif lo >= 1 - CRITICAL_BAND and hi <= 1 + CRITICAL_BAND:
        regime = "critical"
    else:
        return RegimeReading(
            "undetermined",
            f"ζ ± 2 s.e. = [{lo:.3g}, {hi:.3g}] contains 1 but is wider than 1 ± {CRITICAL_BAND:g}: "
            "the data do not tell the regimes apart",
        )
    against = [name for name in simpler_bic if name != "saturation law" or regime != "overdamped"]
    for name in against:
        gain = simpler_bic[name] - fit.bic  # NaN: the simpler description fits exactly, nothing can beat it
        if not gain > BIC_DECISIVE:
            margin = "exactly" if np.isnan(gain) else f"as well (BIC {name} − oscillator = {gain:.3g}, not above "
            margin += "" if np.isnan(gain) else f"{BIC_DECISIVE:g})"
            return RegimeReading("undetermined", f"the {name} fits the data {margin}")
    if regime == "underdamped":
        period, spacing, span = oscillation_period(fit), float(np.median(np.diff(t))), float(t[-1] - t[0])
        if not MIN_PERIOD_SPACINGS * spacing <= period <= span:
            return RegimeReading(
                "undetermined",
                f"the fitted period {period:.3g} steps is not resolved by the data ({MIN_PERIOD_SPACINGS} step "
                f"spacings = {MIN_PERIOD_SPACINGS * spacing:.3g} to the span {span:.3g})",
            )
    return RegimeReading(regime, None)


def fitted_regime(fit: LawFit, *, steps: ArrayLike, simpler_bic: dict[str, float]) -> str:
    """The regime of `read_regime`, without its reason.

    Args:
        fit: the oscillator `LawFit`, as `read_regime`.
        steps: the fitted steps; shape (n,), n ≥ 2; optimiser steps.
        simpler_bic: BIC of each simpler description by name, as `read_regime`.

    Returns:
        "overdamped", "underdamped", "critical" or "undetermined".

    Raises:
        PgrpoSimError: as `read_regime`.
    """
    return read_regime(fit, steps=steps, simpler_bic=simpler_bic).regime


def simpler_bics(fits: dict[str, LawFit], steps: ArrayLike, values: ArrayLike, *, sigma=None) -> dict[str, float]:
    """`read_regime`'s `simpler_bic` for `fit_laws`' result on these data: the straight line's and the saturation
    law's BIC.

    Args:
        fits: `fit_laws`' result on these data (its "saturation" fit is read).
        steps: the fitted steps; shape (n,); optimiser steps.
        values: the fitted values; shape (n,).
        sigma: the per-step standard error given to `fit_laws`; scalar, shape (n,) or None.

    Returns:
        {"straight line": BIC, "saturation law": BIC}; floats, dimensionless, NaN for an exact fit.

    Raises:
        PgrpoSimError: `steps` and `values` fail `check_curve`.
    """
    return {"straight line": line_bic(steps, values, sigma=sigma), "saturation law": fits["saturation"].bic}
