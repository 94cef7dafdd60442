"""pgrpo-sim: a JAX-based, differentiable simulator of GRPO training dynamics.

Layers (README, "Layout"): `base` → `models` → `prediction` → `analysis`, `logs` → `viz` → `reports` → `cli`.
Every public name is re-exported here; import from `pgrpo_sim`, not from the modules.
"""

from importlib.metadata import PackageNotFoundError, version

from .analysis.boundaries import (
    Curve as Curve,
)
from .analysis.boundaries import (
    phase_boundaries as phase_boundaries,
)
from .analysis.boundaries import (
    trace_boundary as trace_boundary,
)
from .analysis.outcomes import Outcomes as Outcomes
from .analysis.outcomes import outcomes as outcomes
from .analysis.phase import (
    PhasePrediction as PhasePrediction,
)
from .analysis.phase import (
    agreement as agreement,
)
from .analysis.phase import (
    predict_grid as predict_grid,
)
from .analysis.search import SearchResult as SearchResult
from .analysis.search import grid_search as grid_search
from .analysis.search import search as search
from .analysis.sensitivities import Sensitivities as Sensitivities
from .analysis.sensitivities import sensitivities as sensitivities
from .analysis.summaries import (
    CurveSummary as CurveSummary,
)
from .analysis.summaries import (
    summarize_curve as summarize_curve,
)
from .analysis.sweep import (
    Axis as Axis,
)
from .analysis.sweep import (
    SweepError as SweepError,
)
from .analysis.sweep import (
    load_sweep as load_sweep,
)
from .analysis.sweep import (
    parse_axis as parse_axis,
)
from .analysis.sweep import (
    run_sweep as run_sweep,
)
from .base.errors import PgrpoSimError as PgrpoSimError
from .base.regimes import DISCRETE_REGIMES as DISCRETE_REGIMES
from .base.regimes import REGIMES as REGIMES
from .base.regimes import Damping as Damping
from .base.regimes import Regime as Regime
from .logs.diagnostics import (
    Diagnosis as Diagnosis,
)
from .logs.diagnostics import (
    Readout as Readout,
)
from .logs.diagnostics import (
    diagnose as diagnose,
)
from .logs.laws import (
    LAWS as LAWS,
)
from .logs.laws import (
    Coupling as Coupling,
)
from .logs.laws import (
    LawFit as LawFit,
)
from .logs.laws import (
    LeastSquares as LeastSquares,
)
from .logs.laws import (
    StiffnessEstimates as StiffnessEstimates,
)
from .logs.laws import (
    coupling_ratio as coupling_ratio,
)
from .logs.laws import (
    fit_law as fit_law,
)
from .logs.laws import (
    fit_laws as fit_laws,
)
from .logs.laws import (
    fitted_regime as fitted_regime,
)
from .logs.laws import (
    identify_stiffness as identify_stiffness,
)
from .logs.laws import (
    law_curve as law_curve,
)
from .logs.laws import (
    least_squares as least_squares,
)
from .logs.laws import (
    oscillator_curve as oscillator_curve,
)
from .logs.laws import (
    oscillator_stiffness as oscillator_stiffness,
)
from .logs.laws import (
    r_squared as r_squared,
)
from .logs.laws import (
    reward_stderr as reward_stderr,
)
from .logs.readers import (
    TrainingLog as TrainingLog,
)
from .logs.readers import (
    detect_format as detect_format,
)
from .logs.readers import (
    from_run as from_run,
)
from .logs.readers import (
    parse_column_map as parse_column_map,
)
from .logs.readers import (
    read_log as read_log,
)
from .models.bandit import (
    BanditRun as BanditRun,
)
from .models.bandit import (
    BanditState as BanditState,
)
from .models.bandit import (
    UpdateStats as UpdateStats,
)
from .models.bandit import (
    expected_loss as expected_loss,
)
from .models.bandit import (
    initial_state as initial_state,
)
from .models.bandit import (
    make_optimizer as make_optimizer,
)
from .models.bandit import (
    on_policy_grad as on_policy_grad,
)
from .models.bandit import (
    run as run,
)
from .models.bandit import (
    sampled_loss as sampled_loss,
)
from .models.bandit import (
    sampled_on_policy_grad as sampled_on_policy_grad,
)
from .models.bandit import (
    simulate as simulate,
)
from .models.bandit import (
    step as step,
)
from .models.config import (
    BanditConfig as BanditConfig,
)
from .models.config import (
    bandit_config as bandit_config,
)
from .models.config import (
    class_symmetric_logits as class_symmetric_logits,
)
from .models.grpo import (
    clipped_surrogate as clipped_surrogate,
)
from .models.grpo import (
    entropy as entropy,
)
from .models.grpo import (
    group_advantages as group_advantages,
)
from .models.grpo import (
    kl_divergence as kl_divergence,
)
from .models.grpo import (
    kl_estimate as kl_estimate,
)
from .models.hyperparameters import (
    HYPERPARAMETERS as HYPERPARAMETERS,
)
from .models.hyperparameters import (
    Hyperparameter as Hyperparameter,
)
from .models.hyperparameters import (
    reference_mass as reference_mass,
)
from .models.hyperparameters import (
    set_hyperparameters as set_hyperparameters,
)
from .models.hyperparameters import (
    with_hyperparameters as with_hyperparameters,
)
from .models.linear import (
    companion_matrix as companion_matrix,
)
from .models.linear import (
    critical_eta as critical_eta,
)
from .models.linear import (
    discrete_regime as discrete_regime,
)
from .models.linear import (
    discrete_regime_code as discrete_regime_code,
)
from .models.linear import (
    dominant_root as dominant_root,
)
from .models.linear import (
    monodromy_matrix as monodromy_matrix,
)
from .models.linear import (
    spectral_radius as spectral_radius,
)
from .models.sde import (
    Ensemble as Ensemble,
)
from .models.sde import (
    solve_deterministic as solve_deterministic,
)
from .models.sde import (
    solve_ensemble as solve_ensemble,
)
from .models.theory import (
    Coefficients as Coefficients,
)
from .models.theory import (
    coefficients as coefficients,
)
from .models.theory import (
    critical_lag as critical_lag,
)
from .models.theory import (
    critical_law as critical_law,
)
from .models.theory import (
    damping_ratio as damping_ratio,
)
from .models.theory import (
    natural_frequency as natural_frequency,
)
from .models.theory import (
    regime as regime,
)
from .models.theory import (
    regime_code as regime_code,
)
from .models.theory import (
    saturation_law as saturation_law,
)
from .models.theory import (
    stationary_variance as stationary_variance,
)
from .models.theory import (
    trajectory as trajectory,
)
from .prediction import (
    QUANTITIES as QUANTITIES,
)
from .prediction import (
    REASONS as REASONS,
)
from .prediction import (
    Prediction as Prediction,
)
from .prediction import (
    eta_scale as eta_scale,
)
from .prediction import (
    fixed_point as fixed_point,
)
from .prediction import (
    noise_scale as noise_scale,
)
from .prediction import (
    predict as predict,
)
from .prediction import (
    two_arm_reduction as two_arm_reduction,
)
from .reports.log_report import (
    LogAnalysis as LogAnalysis,
)
from .reports.log_report import (
    analyse_log as analyse_log,
)
from .reports.log_report import (
    write_report as write_report,
)

try:
    __version__ = version("pgrpo-sim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
