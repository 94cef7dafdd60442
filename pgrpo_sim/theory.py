"""`ps.theory`: the closed forms of GRPO training dynamics (Predictable GRPO, arXiv 2606.30789).

The continuous damped oscillator (mass, damping, stiffness, ζ, ω_n, τ*, stationary variance, closed-form e(t)), the
exact discrete heavy-ball map (companion and monodromy matrices, spectral radius, critical η), their regimes, and the
reduced SDE solved with diffrax. Every function broadcasts and works under `jit`, `vmap` and `grad`
(docs/guide/models.md).
"""

from .base.regimes import (
    DISCRETE_REGIMES as DISCRETE_REGIMES,
    INVALID as INVALID,
    REGIMES as REGIMES,
    Damping as Damping,
    Regime as Regime,
)
from .models.oscillator.linear import (
    DISCRETE_LAG_MODELS as DISCRETE_LAG_MODELS,
    MAX_LAG as MAX_LAG,
    companion_matrix as companion_matrix,
    critical_eta as critical_eta,
    discrete_regime as discrete_regime,
    discrete_regime_code as discrete_regime_code,
    dominant_root as dominant_root,
    monodromy_matrix as monodromy_matrix,
    spectral_radius as spectral_radius,
)
from .models.oscillator.sde import (
    BROWNIAN as BROWNIAN,
    SOLVERS as SOLVERS,
    Ensemble as Ensemble,
    euler_step_limit as euler_step_limit,
    solve_deterministic as solve_deterministic,
    solve_ensemble as solve_ensemble,
)
from .models.oscillator.theory import (
    Coefficients as Coefficients,
    coefficients as coefficients,
    critical_lag as critical_lag,
    critical_law as critical_law,
    damping_ratio as damping_ratio,
    natural_frequency as natural_frequency,
    regime as regime,
    regime_code as regime_code,
    saturation_law as saturation_law,
    stationary_variance as stationary_variance,
    trajectory as trajectory,
)

__all__ = sorted(name for name in dir() if not name.startswith("_"))
