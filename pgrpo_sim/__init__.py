"""pgrpo-sim: a JAX-based, differentiable simulator of GRPO training dynamics.

Three levels of model (see the README): the continuous damped oscillator (`theory`), the exact
discrete heavy-ball map (`linear`), and the exact softmax-bandit GRPO environment (`bandit`).
"""

from importlib.metadata import PackageNotFoundError, version

from . import bandit, boundaries, config, diagnostics, fit, grpo, linear, logs, phase, plots, prediction, report, sde, summaries, sweep, theory, tune
from .bandit import (
    BanditRun,
    UpdateStats,
    expected_loss,
    make_optimizer,
    on_policy_grad,
    sampled_loss,
    sampled_on_policy_grad,
    simulate,
)
from .config import BanditConfig, bandit_config, class_symmetric_logits
from .linear import (
    DISCRETE_REGIMES,
    companion_matrix,
    critical_eta,
    discrete_regime,
    discrete_regime_code,
    dominant_root,
    monodromy_matrix,
    spectral_radius,
)
from .fit import (
    LAWS,
    Coupling,
    LawFit,
    LeastSquares,
    StiffnessEstimates,
    coupling_ratio,
    fit_law,
    fit_laws,
    fitted_regime,
    identify_stiffness,
    law_curve,
    least_squares,
    oscillator_curve,
    oscillator_stiffness,
    r_squared,
    reward_stderr,
)
from .logs import TrainingLog, detect_format, from_run, parse_column_map, read_log
from .diagnostics import Diagnosis, Readout, diagnose
from .report import LogAnalysis, analyse_log, write_report
from .prediction import REASONS, Prediction, predict, two_arm_reduction
from .sde import Ensemble, solve_deterministic, solve_ensemble
from .summaries import CurveSummary, summarize_curve
from .sweep import Axis, SweepError, load_sweep, parse_axis, run_sweep
from .phase import PhasePrediction, agreement, predict_grid
from .tune import Outcomes, SearchResult, Sensitivities, grid_search, outcomes, search, sensitivities, with_hyperparameters
from .boundaries import Curve, phase_boundaries, trace_boundary
from .grpo import clipped_surrogate, entropy, group_advantages, kl_divergence, kl_estimate
from .theory import (
    REGIMES,
    Coefficients,
    coefficients,
    critical_law,
    critical_lag,
    damping_ratio,
    natural_frequency,
    regime,
    regime_code,
    saturation_law,
    stationary_variance,
    trajectory,
)

try:
    __version__ = version("pgrpo-sim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
