"""The one bridge from bandit to oscillator: the two-arm reduction, the fixed point, stiffness, noise, the
exact Floquet radius and the continuous lag of a bandit configuration (docs/design.md §3–§4).

Convention. From a class-symmetric start (c correct arms of N, binary rewards, one prompt) the expected
N-arm dynamics are exactly those of x = logit(p) with effective step η_eff = η·N/(c(N−c)) (docs/design.md §3):
x_{n+1} − x_n = η_eff·X(x_n) for SGD, X the expected logit drive per unit η_eff. All oscillator quantities
use η_eff as "η":
- p* = σ(x*), X(x*) = 0, the stable (X decreasing) root: bracketed on a grid of logit(p) in ±30, then
  solved by `optimistix.Bisection` with implicit differentiation (`optimistix.ImplicitAdjoint`), so p*, K
  and everything built on them have exact derivatives with respect to every float leaf of the configuration;
- K = −dX/dx at x* (= −(1/η_eff)·∂Δe/∂e with e = p − p*; dimensionless per unit η_eff);
- D = G·Var(Δp/η_eff) at p* in sampled mode, exact over k ~ Binomial(G, p*) successes (to first order in
  η_eff, which makes it exact for N > 2 arms as well) — the diffusion of the oscillator;
- the lag of the continuous model is τ for "stale", the mean staleness (K_ref − 1)/2 for "refresh", 0
  for "none" (`continuous_lag`); the exact discrete map reads "none" as stale lag 0 (`discrete_lag`). The
  critical lag is reported on the configuration's own `lag` axis (`config_lag`): τ* for "stale" (and "none"),
  2τ* + 1 optimiser steps per rollout for "refresh";
- `spectral_radius` is exact for the full nonlinear expected update: the per-step Floquet multiplier
  of largest modulus of the one-cycle map (refresh period, stale-buffer rotation, or one step) at the
  fixed point, from `jax.jacfwd` — for any lag model, SGD or Nesterov.

By job: `reduction` (the two-arm reduction, fixed point, K, D), `lags` (the lag each model reads), `floquet` (the
exact radius), `oscillator` (a configuration's oscillator and `predict`). Every public name is re-exported here.
"""

from .floquet import floquet_radius as floquet_radius
from .lags import config_lag as config_lag, continuous_lag as continuous_lag, discrete_lag as discrete_lag
from .oscillator import (
    QUANTITIES as QUANTITIES,
    REASONS as REASONS,
    Prediction as Prediction,
    oscillator as oscillator,
    predict as predict,
)
from .reduction import (
    constant_fixed_point as constant_fixed_point,
    effective_eta as effective_eta,
    eta_scale as eta_scale,
    expected_drive as expected_drive,
    fixed_point as fixed_point,
    fixed_point_stiffness as fixed_point_stiffness,
    noise_scale as noise_scale,
    stiffness as stiffness,
    substitute as substitute,
    two_arm_logits as two_arm_logits,
    two_arm_reduction as two_arm_reduction,
)
