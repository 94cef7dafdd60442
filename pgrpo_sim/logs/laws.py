"""The closed-form laws fitted to reward curves (the stiffness K: `stiffness`; the train/eval coupling: `coupling`).

`fit_law` / `fit_laws` fit the saturation law R0 + (R∞ − R0)(1 − e^{−t/t0}), the critically damped law and the
free oscillator (p*, ζ, ω_n, e(0), ė(0)) to any curve — a simulation or a real log, noisy, unevenly spaced —
with standard errors, R² raw and smoothed, AIC/BIC and a reduced χ² against the per-step noise
(`reward_stderr`, or the short-lag residual variance).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from ..base.checks import as_float, check_choice, check_range
from ..base.compile_options import OPTIMISED_CODEGEN
from ..base.errors import PgrpoSimError
from ..base.progress import Progress, report
from ..base.serialise import finite_or_none
from ..models.oscillator import theory
from ..models.step_ranges import STEP_RANGES
from .least_squares import least_squares
from .noise import (  # re-exported: the noise of a curve was read here first
    reward_stderr as reward_stderr,
    short_lag_variance as short_lag_variance,
    smooth as smooth,
    smoothing_window as smoothing_window,
)


def r_squared(data: ArrayLike, model: ArrayLike) -> float:
    """Coefficient of determination 1 − Σ(data − model)²/Σ(data − mean)².

    Args:
        data: observed values; any shape with at least 2 elements; any unit.
        model: model values at the same points; the shape and unit of `data`.

    Returns:
        R² (float, dimensionless, ≤ 1); −inf or NaN for constant `data`.

    Raises:
        PgrpoSimError: `data` and `model` differ in shape or hold fewer than 2 points.
    """
    data, model = np.asarray(data, float), np.asarray(model, float)
    if data.shape != model.shape or data.size < 2:
        raise PgrpoSimError(f"data and model must be equal shapes of >= 2 points, got {data.shape} and {model.shape}")
    return float(1 - np.sum((data - model) ** 2) / np.sum((data - data.mean()) ** 2))


# ----------------------------------------------------------------------------------------------------------
# Closed-form laws fitted to reward curves (real logs or simulations), with noise-aware goodness of fit.

LAWS = ("saturation", "critical", "oscillator")
"""The closed-form laws of the theory (`fit_laws` fits them all), simplest first."""
KNOWN_LAWS = (*LAWS, "sigmoid")
"""Every law `fit_law` knows: the theory's, and ScaleRL's sigmoidal compute–performance law (Khatri et al. 2025,
arXiv 2510.13786) R(C) = R0 + (A − R0)/(1 + (C_mid/C)^B) with compute C = t + 1 steps (a forecast baseline)."""

LAW_PARAMS = {
    "saturation": ("r_inf", "r0", "t0"),
    "critical": ("r_inf", "r0", "omega"),
    "oscillator": ("p_star", "zeta", "omega_n", "e0", "v0"),
    "sigmoid": ("r_inf", "r0", "c_mid", "b"),
}
"""Parameter names of each law (units: reward for r_inf, r0, p_star, e0; steps for t0; per step for omega,
omega_n; reward per step for v0; zeta and the sigmoid's exponent b dimensionless; c_mid in steps)."""


def oscillator_curve(
    t: ArrayLike, p_star: ArrayLike, zeta: ArrayLike, omega_n: ArrayLike, e0: ArrayLike, v0: ArrayLike
) -> Array:
    """p(t) = p* + e(t), e the free damped oscillator ë + 2ζω_n ė + ω_n² e = 0 with e(0) = e0, ė(0) = v0
    (t in steps, ω_n per step, any ζ > 0).

    Evaluated with `theory.trajectory` in the rescaled time s = ζω_n·t, where the oscillator with η = 1,
    μ = 0, τ = 0 and K = 1/(2ζ²) has exactly damping rate 1 and natural frequency 1/ζ.

    Args:
        t: times since the start; optimiser steps; any shape that broadcasts with the other arguments.
        p_star: plateau p*; reward units.
        zeta: damping ratio ζ; dimensionless, > 0.
        omega_n: natural frequency ω_n; per step, > 0.
        e0: initial deviation e(0) = p(0) − p*; reward units.
        v0: initial velocity ė(0); reward per step.

    Returns:
        p(t); the broadcast shape of the arguments; reward units.

    Raises:
        PgrpoSimError: a concrete ζ or ω_n that is not finite and > 0, or shapes that do not broadcast.
    """
    check_range("zeta", zeta, 0.0, low_open=True)
    check_range("omega_n", omega_n, 0.0, low_open=True)
    t, p_star, zeta, omega_n, e0, v0 = (as_float(x) for x in (t, p_star, zeta, omega_n, e0, v0))
    rate = zeta * omega_n
    return p_star + theory.trajectory(t * rate, e0, v0 / rate, 1.0, 0.0, 0.0, 1 / (2 * zeta**2))


def oscillator_stiffness(
    omega_n: ArrayLike, learning_rate: ArrayLike, momentum: ArrayLike = 0.0, lag: ArrayLike = 0.0
) -> Array:
    """K from a fitted natural frequency: ω_n² = K/M with M = ((1+μ)+Kητ²)/(2η) gives
    K = ω_n²(1+μ)/(η(2 − ω_n²τ²)); NaN when ω_n τ ≥ √2 (no positive K has that frequency).

    Args:
        omega_n: fitted natural frequency ω_n; per step, ≥ 0; any shape that broadcasts with the others.
        learning_rate: learning rate η (η_eff for a bandit); per step, > 0.
        momentum: heavy-ball momentum μ; in [0, 1).
        lag: continuous off-policy lag τ; optimiser steps, ≥ 0.

    Returns:
        The stiffness K (per unit η, as in `models.oscillator.theory`); the broadcast shape of the arguments.

    Raises:
        PgrpoSimError: a concrete argument that is non-finite or outside its range.
    """
    check_range("omega_n", omega_n, 0.0)
    STEP_RANGES["learning_rate"].check("learning_rate", learning_rate)
    STEP_RANGES["momentum"].check("momentum", momentum)
    check_range("lag", lag, 0.0)
    omega_n, learning_rate, momentum, lag = (as_float(x) for x in (omega_n, learning_rate, momentum, lag))
    denom = learning_rate * (2 - omega_n**2 * lag**2)
    return jnp.where(denom > 0, omega_n**2 * (1 + momentum) / jnp.where(denom > 0, denom, 1.0), jnp.nan)


def law_curve(law: str, t: ArrayLike, params: ArrayLike) -> Array:
    """The law's curve at times t (steps since the first fitted step) for parameters in `LAW_PARAMS` order.

    Args:
        law: one of `KNOWN_LAWS`.
        t: times since the first fitted step; optimiser steps; any shape.
        params: the law's p parameters in `LAW_PARAMS[law]` order (units there); shape (p,) or (p, ...) with the
            trailing shape broadcasting with `t`.

    Returns:
        The curve; the broadcast shape of `t` and `params[0]`; the unit of the fitted values (reward).

    Raises:
        PgrpoSimError: an unknown `law`, `params` without p entries on its first axis, or concrete parameters
            outside the law's range (t0, ω, ζ, ω_n > 0).
    """
    check_choice("law", law, KNOWN_LAWS)
    p = as_float(params)
    if p.ndim < 1 or p.shape[0] != len(LAW_PARAMS[law]):
        raise PgrpoSimError(
            f"params of law {law} are {len(LAW_PARAMS[law])} numbers ({', '.join(LAW_PARAMS[law])}), got {p.shape}"
        )
    if law == "sigmoid":
        return p[1] + (p[0] - p[1]) / (1 + (p[2] / (as_float(t) + 1)) ** p[3])
    if law == "saturation":
        return p[1] + theory.saturation_law(t, p[0] - p[1], p[2])
    if law == "critical":
        return theory.critical_law(t, p[0], p[1], p[2])
    return oscillator_curve(t, *p)


def _to_params(law: str, x: Array, omega_max: Array) -> Array:
    """Fit coordinates → parameters: t0, ω, ζ are fitted as logs (positive); the oscillator's ω_n as
    ω_max·sigmoid(u) with ω_max = π/(2Δt_min): periods of at least 4 sampling intervals, so that sampled
    oscillations cannot alias and noise cannot be fitted as a period-2 flip."""
    if law == "oscillator":
        return x.at[1].set(jnp.exp(x[1])).at[2].set(omega_max * jax.nn.sigmoid(x[2]))
    if law == "sigmoid":
        return x.at[2].set(jnp.exp(x[2])).at[3].set(jnp.exp(x[3]))
    return x.at[2].set(jnp.exp(x[2]))


def _starts(law: str, t: Array, y: Array, w: Array, omega_max: Array) -> Array:
    """Starting points (fit coordinates) on a grid of time scales from 0.5 % to twice the span of the data, and
    ζ ∈ {0.2, 0.6, 1.5, 4}; amplitudes from the mean of the first and last 10 % of the points."""
    real = w > 0
    n = jnp.sum(real)
    rank = jnp.cumsum(real)
    m = jnp.maximum(n // 10, 1)
    head = jnp.sum(jnp.where(real & (rank <= m), y, 0)) / m
    tail = jnp.sum(jnp.where(real & (rank > n - m), y, 0)) / m
    span = jnp.max(jnp.where(real, t, 0.0))
    scales = jnp.maximum(span, 1.0) * jnp.geomspace(0.005, 2.0, 8, dtype=t.dtype)
    if law == "sigmoid":  # c_mid on the time-scale grid, exponent b ∈ {0.7, 2}
        b, c = (a.ravel() for a in jnp.meshgrid(jnp.asarray([0.7, 2.0], t.dtype), scales))
        ones = jnp.ones_like(c)
        return jnp.stack([tail * ones, head * ones, jnp.log(c), jnp.log(b)], -1)
    if law != "oscillator":
        ones = jnp.ones_like(scales)
        rate = jnp.log(scales) if law == "saturation" else -jnp.log(scales)
        return jnp.stack([tail * ones, head * ones, rate], -1)
    z, s = (a.ravel() for a in jnp.meshgrid(jnp.asarray([0.2, 0.6, 1.5, 4.0], t.dtype), scales))
    # ζ ≥ 1: the slow rate ≈ ω_n/(2ζ) is 1/scale; ζ < 1: the envelope rate ζω_n is 1/scale
    omega = jnp.minimum(jnp.where(z >= 1, 2 * z / s, 1 / (z * s)), 0.9 * omega_max)
    ones = jnp.ones_like(z)
    u = jax.scipy.special.logit(omega / omega_max)
    return jnp.stack([tail * ones, jnp.log(z), u, (head - tail) * ones, 0 * ones], -1)


def _fit_padded(law: str, t: Array, y: Array, w: Array, omega_max: Array) -> tuple[Array, Array, Array, Array]:
    """Weighted LM fit from every start in `_starts`; the least-cost fit wins. Points with w = 0 are padding.
    Returns the parameters, their standard errors (s² over the padded length; delta method through the
    coordinate change), the weighted RSS and the fitted curve.

    The starts are solved one after another (`lax.map`), not vmapped: a vmapped LM loop steps every start until
    the slowest has converged and traces and compiles its loop twice over (oscillator law, 32 starts, 512 points:
    trace 3.1 → 1.1 s, XLA compile 4.1 → 1.9 s, run 1.2 → 0.28 s)."""

    def residuals(x):
        return w * (law_curve(law, t, _to_params(law, x, omega_max)) - y)

    fits = jax.lax.map(lambda x0: least_squares(residuals, x0), _starts(law, t, y, w, omega_max))
    best = jnp.argmin(jnp.where(jnp.isfinite(fits.cost), fits.cost, jnp.inf))
    x = fits.params[best]
    params = _to_params(law, x, omega_max)
    scale = jnp.abs(jnp.diag(jax.jacfwd(_to_params, argnums=1)(law, x, omega_max)))
    return params, scale * fits.stderr[best], fits.rss[best], law_curve(law, t, params)


_fit_jit = jax.jit(_fit_padded, static_argnames="law")
_fit_jit_optimised = jax.jit(_fit_padded, static_argnames="law", compiler_options=dict(OPTIMISED_CODEGEN))
OPTIMISED_LAWS = ("oscillator",)
"""Laws whose fit is compiled with LLVM's optimisation whatever `XLA_FLAGS` say: under `validate`'s unoptimised
codegen (`runtime.jax_setup.UNOPTIMIZED_CODEGEN_FLAG`) the oscillator's fit ran 3× longer (1.0 s against 0.32 s),
while the other laws' fits are compile-bound and gain from the flag."""
_law_curve_jit = jax.jit(law_curve, static_argnames="law")


def _padded_size(n: int) -> int:
    """Length that n points are padded to: the next power of two, at least 512, so that fits and curves of
    most logs share one compilation per law."""
    return max(512, 1 << (n - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class LawFit:
    """A law fitted to (steps, values) by weighted least squares (`fit_law`).

    `params`/`stderr` follow `LAW_PARAMS[law]` (time from the first fitted step `origin`); standard errors from
    the Jacobian scaled by the residual variance (so they hold whether or not the weights are absolute).
    `r2`: R² on the raw series; `r2_smoothed`: R² of the smoothed model against the smoothed data, both by the
    same centred moving average of `smooth_window` points; `aic`/`bic` for Gaussian errors of unknown scale
    on the (weighted) residuals, k = parameters + 1; `reduced_chi2`: Σ((y − f)/σ)²/(n − p) with σ the given
    per-step error (`noise_source` "stderr") or the short-lag residual estimate ("residuals"); None if neither.
    An exact fit (RSS 0, e.g. constant data) has NaN standard errors and AIC/BIC: nothing measures them.

    Attributes:
        law: the law fitted, one of `KNOWN_LAWS`.
        params: fitted parameters in `LAW_PARAMS[law]` order; shape (p,); units as `LAW_PARAMS`.
        stderr: their standard errors; shape (p,); the same units; NaN for an exact fit.
        origin: the first fitted step, the law's time 0; optimiser steps.
        n: number of fitted points.
        r2: R² on the raw series; dimensionless.
        r2_smoothed: R² of the smoothed model against the smoothed data; dimensionless.
        smooth_window: points of the centred moving average behind `r2_smoothed`; odd.
        aic: Akaike information criterion; dimensionless; NaN for an exact fit.
        bic: Bayesian information criterion; dimensionless; NaN for an exact fit.
        reduced_chi2: Σ((y − f)/σ)²/(n − p); dimensionless, ≈ 1 for a fit within the noise; None without a noise
            estimate.
        noise_source: σ's source, "stderr" (the given per-step error) or "residuals" (short-lag estimate); None
            when `reduced_chi2` is None.
    """

    law: str
    params: np.ndarray
    stderr: np.ndarray
    origin: float
    n: int
    r2: float
    r2_smoothed: float
    smooth_window: int
    aic: float
    bic: float
    reduced_chi2: float | None
    noise_source: str | None

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names, `LAW_PARAMS[law]`."""
        return LAW_PARAMS[self.law]

    def __getitem__(self, name: str) -> float:
        return float(self.params[self.names.index(name)])

    def curve(self, steps: ArrayLike) -> np.ndarray:
        """The fitted law at the given steps (same units as the fitted values).

        Args:
            steps: optimiser steps on the fitted log's axis (not shifted by `origin`); any shape.

        Returns:
            The law's values; the shape of `steps`; the unit of the fitted values.
        """
        t = np.atleast_1d(np.asarray(steps, float)) - self.origin
        padded = np.concatenate([t, np.zeros(_padded_size(t.size) - t.size)])
        curve = _law_curve_jit(self.law, as_float(padded), as_float(self.params))
        return np.asarray(curve)[: t.size].reshape(np.shape(steps))

    def as_dict(self) -> dict:
        """JSON-ready: params by name as {value, stderr} (None for non-finite), goodness of fit."""
        values = zip(self.names, self.params, self.stderr, strict=True)
        return dict(
            params={k: dict(value=finite_or_none(v), stderr=finite_or_none(s)) for k, v, s in values},
            origin=self.origin,
            n=self.n,
            r2=finite_or_none(self.r2),
            r2_smoothed=finite_or_none(self.r2_smoothed),
            smooth_window=self.smooth_window,
            aic=finite_or_none(self.aic),
            bic=finite_or_none(self.bic),
            reduced_chi2=finite_or_none(self.reduced_chi2),
            noise_source=self.noise_source,
        )


MAX_ABS_VALUE = 1e150
"""Largest |value| a fit takes: squares of the values and residuals are summed in float64 (whose largest number is
1.8e308), so values beyond ±1e150 would overflow them."""


def check_curve(steps: ArrayLike, values: ArrayLike) -> None:
    """Raise `PgrpoSimError` unless steps and values are finite, steps strictly increasing and every |value| at
    most `MAX_ABS_VALUE`.

    Args:
        steps: optimiser steps; shape (n,).
        values: the metric at `steps`; shape (n,); any unit.

    Raises:
        PgrpoSimError: a non-finite step or value, steps that do not strictly increase, or a |value| above
            `MAX_ABS_VALUE`.
    """
    t, y = np.asarray(steps, float), np.asarray(values, float)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(y))):
        raise PgrpoSimError("steps and values must be finite")
    if np.any(np.diff(t) <= 0):
        raise PgrpoSimError("steps must be strictly increasing")
    if y.size and np.max(np.abs(y)) > MAX_ABS_VALUE:
        raise PgrpoSimError(
            f"values must lie within ±{MAX_ABS_VALUE:g} (their squares are summed in float64), got "
            f"{y[np.argmax(np.abs(y))]:.3g}"
        )


def fit_law(
    law: str, steps: ArrayLike, values: ArrayLike, *, sigma: ArrayLike | None = None, smooth_window: int | None = None
) -> LawFit:
    """Fit one of `KNOWN_LAWS` to a reward curve by Levenberg–Marquardt (`least_squares`) from a grid of starts.

    The data are padded with zero weight to the next power of two (≥ 512), so curves of similar length share one
    compilation per law. Always computed in float64, whatever `jax_enable_x64` says: the standard errors need it.

    Args:
        law: one of `KNOWN_LAWS`.
        steps: optimiser steps; shape (n,) with n > p + 1 for the law's p parameters; finite, strictly
            increasing, any spacing.
        values: the metric at `steps` (reward units for a reward); shape (n,); finite, |value| ≤ `MAX_ABS_VALUE`.
        sigma: per-step standard error (e.g. `reward_stderr`), used as weights 1/σ and for the reduced χ²;
            scalar or shape (n,); the unit of `values`; finite, > 0. None: unweighted, χ² against the short-lag
            residual variance.
        smooth_window: points of the centred moving average for `LawFit.r2_smoothed`; odd integer ≥ 1; None:
            `smoothing_window(n)`.

    Returns:
        `LawFit`, its time measured from `origin` = steps[0].

    Raises:
        PgrpoSimError: an unknown `law`; `steps` and `values` not 1-D of equal length, too few of them, or failing
            `check_curve`; a `sigma` that is not finite and > 0; a `smooth_window` that is not an odd integer ≥ 1.
    """
    check_choice("law", law, KNOWN_LAWS)
    t, y = np.asarray(steps, float), np.asarray(values, float)
    n, p = y.size, len(LAW_PARAMS[law])
    if t.shape != y.shape or t.ndim != 1:
        raise PgrpoSimError(f"steps and values must be 1-d of equal length, got {t.shape} and {y.shape}")
    if n <= p + 1:
        raise PgrpoSimError(f"{law} fit needs more than {p + 1} points ({p} parameters), got {n}")
    check_curve(t, y)
    s = None if sigma is None else np.broadcast_to(np.asarray(sigma, float), y.shape)
    if s is not None and not np.all(np.isfinite(s) & (s > 0)):
        raise PgrpoSimError("sigma must be finite and > 0")
    check_range("smooth_window", smooth_window, 1, integer=True)
    window = smoothing_window(n) if smooth_window is None else int(smooth_window)
    if window % 2 == 0:
        raise PgrpoSimError(f"smooth_window must be odd (a centred moving average), got {window}")
    size = _padded_size(n)
    pad = size - n
    t_rel = t - t[0]
    w = np.ones(n) if s is None else 1 / s
    arrays = [np.concatenate([a, np.full(pad, fill)]) for a, fill in ((t_rel, t_rel[-1]), (y, y[-1]), (w, 0.0))]
    omega_max = np.pi / (2 * np.min(np.diff(t)))
    with jax.enable_x64(True):  # JᵀJ of these fits reaches condition 1e11: float32 would zero its weak directions
        params, stderr, rss, curve = (_fit_jit_optimised if law in OPTIMISED_LAWS else _fit_jit)(
            law, *(jnp.asarray(a, jnp.float64) for a in arrays), jnp.float64(omega_max)
        )
    params, rss, f = np.asarray(params, float), float(rss), np.asarray(curve, float)[:n]
    stderr = np.asarray(stderr, float) * np.sqrt((size - p) / (n - p))  # least_squares divided by the padded length
    if not rss > 0:  # an exact fit (constant data): the residuals carry no scale, the errors are undefined, not 0
        stderr = np.full_like(stderr, np.nan)
    if s is not None:
        chi2, source = rss / (n - p), "stderr"
    else:
        var = short_lag_variance(y - f)
        chi2, source = (rss / (n - p) / var, "residuals") if var > 0 else (None, None)
    k = p + 1
    with np.errstate(divide="ignore", invalid="ignore"):  # a constant curve: R² undefined, RSS 0 (NaN / −inf)
        return LawFit(
            law=law,
            params=params,
            stderr=stderr,
            origin=float(t[0]),
            n=n,
            r2=r_squared(y, f),
            r2_smoothed=r_squared(smooth(y, window), smooth(f, window)),
            smooth_window=window,
            aic=n * np.log(rss / n) + 2 * k if rss > 0 else np.nan,
            bic=n * np.log(rss / n) + k * np.log(n) if rss > 0 else np.nan,
            reduced_chi2=chi2,
            noise_source=source,
        )


def fit_laws(
    steps: ArrayLike, values: ArrayLike, *, sigma: ArrayLike | None = None, progress: Progress | None = None
) -> dict[str, LawFit]:
    """`fit_law` for every law in `LAWS`, same data and weights (so AIC/BIC compare); each law's start is told to
    `progress`.

    Args:
        steps: optimiser steps, as `fit_law`; shape (n,), n ≥ 7 (the oscillator has 5 parameters).
        values: the metric at `steps`, as `fit_law`; shape (n,).
        sigma: per-step standard error, as `fit_law`; scalar, shape (n,) or None.
        progress: callable told each law's start (a stage string); None: silent.

    Returns:
        Law name → `LawFit`, for every law of `LAWS` in order.

    Raises:
        PgrpoSimError: as `fit_law`.
    """
    fits = {}
    for i, law in enumerate(LAWS):
        report(progress, f"fitting the {law} law ({i + 1}/{len(LAWS)})")
        fits[law] = fit_law(law, steps, values, sigma=sigma)
    return fits
