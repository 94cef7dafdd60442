"""The public API of pgrpo-sim, for type checkers and for the lazy re-exports of `__init__.py`
(`lazy_loader.attach_stub` reads this file: each name's module is imported on first use)."""

from .analysis.boundaries import Curve as Curve, phase_boundaries as phase_boundaries, trace_boundary as trace_boundary
from .analysis.outcomes import Outcomes as Outcomes, outcomes as outcomes
from .analysis.phase import (
    PhasePrediction as PhasePrediction,
    agreement as agreement,
    predict_cells as predict_cells,
    predict_grid as predict_grid,
)
from .analysis.search import SearchResult as SearchResult, grid_search as grid_search, search as search
from .analysis.sensitivities import Sensitivities as Sensitivities, sensitivities as sensitivities
from .analysis.summaries import CurveSummary as CurveSummary, summarize_curve as summarize_curve
from .analysis.sweep import (
    Axis as Axis,
    SweepError as SweepError,
    SweepResult as SweepResult,
    check_sweep as check_sweep,
    compute_sweep as compute_sweep,
    grid_axes as grid_axes,
    load_sweep as load_sweep,
    parse_axis as parse_axis,
    run_sweep as run_sweep,
)
from .base.checks import MAX_SEED as MAX_SEED, MAX_STEPS as MAX_STEPS, Interval as Interval
from .base.errors import PgrpoSimError as PgrpoSimError
from .base.regimes import DISCRETE_REGIMES as DISCRETE_REGIMES, REGIMES as REGIMES, Damping as Damping, Regime as Regime
from .calibration import (
    MAX_HORIZON as MAX_HORIZON,
    Band as Band,
    Calibration as Calibration,
    PopulationModel as PopulationModel,
    RunConfig as RunConfig,
    calibrate as calibrate,
    forecast as forecast,
    horizon_limit as horizon_limit,
    log_settings as log_settings,
    parse_scenario as parse_scenario,
    population_model as population_model,
    predictive_band as predictive_band,
    read_run_config as read_run_config,
    resolve_run_config as resolve_run_config,
    synthetic_log as synthetic_log,
    what_if as what_if,
)
from .logs.coupling import Coupling as Coupling, coupling_ratio as coupling_ratio
from .logs.diagnostics import Diagnosis as Diagnosis, Readout as Readout, diagnose as diagnose
from .logs.laws import (
    KNOWN_LAWS as KNOWN_LAWS,
    LAWS as LAWS,
    LawFit as LawFit,
    fit_law as fit_law,
    fit_laws as fit_laws,
    fitted_regime as fitted_regime,
    law_curve as law_curve,
    oscillator_curve as oscillator_curve,
    oscillator_stiffness as oscillator_stiffness,
    r_squared as r_squared,
    reward_stderr as reward_stderr,
)
from .logs.least_squares import LeastSquares as LeastSquares, least_squares as least_squares
from .logs.readers import (
    TrainingLog as TrainingLog,
    detect_format as detect_format,
    from_run as from_run,
    parse_column_map as parse_column_map,
    read_log as read_log,
)
from .logs.stiffness import StiffnessEstimates as StiffnessEstimates, identify_stiffness as identify_stiffness
from .models.bandit import (
    MAX_OUTCOMES as MAX_OUTCOMES,
    MODES as MODES,
    STEP_READOUTS as STEP_READOUTS,
    BanditRun as BanditRun,
    BanditState as BanditState,
    UpdateStats as UpdateStats,
    check_mode as check_mode,
    collapse_branches as collapse_branches,
    draw_rollout as draw_rollout,
    expected_loss as expected_loss,
    initial_state as initial_state,
    make_optimizer as make_optimizer,
    minibatch_weights as minibatch_weights,
    on_policy_grad as on_policy_grad,
    reuse_branch_step as reuse_branch_step,
    rewards_are_binary as rewards_are_binary,
    rollout_count as rollout_count,
    rollout_outcomes as rollout_outcomes,
    rollout_step as rollout_step,
    run as run,
    sampled_loss as sampled_loss,
    sampled_on_policy_grad as sampled_on_policy_grad,
    simulate as simulate,
    step as step,
    valid_hyperparameters as valid_hyperparameters,
)
from .models.config import (
    KL_KINDS as KL_KINDS,
    LAG_MODELS as LAG_MODELS,
    LEAF_RANGES as LEAF_RANGES,
    LR_SCHEDULES as LR_SCHEDULES,
    MAX_GROUP_SIZE as MAX_GROUP_SIZE,
    OPTIMIZERS as OPTIMIZERS,
    BanditConfig as BanditConfig,
    bandit_config as bandit_config,
    class_symmetric_logits as class_symmetric_logits,
)
from .models.grpo import (
    ADVANTAGES as ADVANTAGES,
    Surrogate as Surrogate,
    advantage_code as advantage_code,
    clipped_surrogate as clipped_surrogate,
    entropy as entropy,
    group_advantages as group_advantages,
    kl_divergence as kl_divergence,
    kl_estimate as kl_estimate,
)
from .models.hyperparameters import (
    HYPERPARAMETERS as HYPERPARAMETERS,
    Hyperparameter as Hyperparameter,
    reference_mass as reference_mass,
    set_hyperparameters as set_hyperparameters,
    with_hyperparameters as with_hyperparameters,
)
from .models.linear import (
    companion_matrix as companion_matrix,
    critical_eta as critical_eta,
    discrete_regime as discrete_regime,
    discrete_regime_code as discrete_regime_code,
    dominant_root as dominant_root,
    monodromy_matrix as monodromy_matrix,
    spectral_radius as spectral_radius,
)
from .models.sde import (
    Ensemble as Ensemble,
    euler_step_limit as euler_step_limit,
    solve_deterministic as solve_deterministic,
    solve_ensemble as solve_ensemble,
)
from .models.theory import (
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
from .prediction import (
    QUANTITIES as QUANTITIES,
    REASONS as REASONS,
    Prediction as Prediction,
    config_lag as config_lag,
    continuous_lag as continuous_lag,
    eta_scale as eta_scale,
    fixed_point as fixed_point,
    noise_scale as noise_scale,
    predict as predict,
    two_arm_reduction as two_arm_reduction,
)
from .reports.log_report import (
    LogAnalysis as LogAnalysis,
    analyse_log as analyse_log,
    check_analysis as check_analysis,
    rows_without_value as rows_without_value,
    write_analysis as write_analysis,
    write_report as write_report,
)

__version__: str
