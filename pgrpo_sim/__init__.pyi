"""The public API of pgrpo-sim, for type checkers and for the lazy re-exports of `__init__.py`
(`lazy_loader.attach_stub` reads this file: each name's module is imported on first use).

The groups (`ps.theory`, `ps.bandit`, `ps.lm`, `ps.analysis`, `ps.logs`, `ps.calibration`, `ps.viz`) hold every
public name, low-level ones included; the names below them are the ones most users call, each also in its group,
but for the few that belong to no group: the error type and the step and seed limits every layer shares, and the
two reports a user runs from Python (`validate`, `analyse_log`)."""

from . import (
    analysis as analysis,
    bandit as bandit,
    calibration as calibration,
    lm as lm,
    logs as logs,
    theory as theory,
    viz as viz,
)
from .analysis.boundaries import (
    Curve as Curve,
    phase_boundaries as phase_boundaries,
    trace_boundary as trace_boundary,
)
from .analysis.outcomes import (
    Outcomes as Outcomes,
    outcomes as outcomes,
)
from .analysis.phase import (
    PhasePrediction as PhasePrediction,
    agreement as agreement,
    predict_cells as predict_cells,
    predict_grid as predict_grid,
)
from .analysis.search import (
    SearchResult as SearchResult,
    grid_search as grid_search,
    search as search,
)
from .analysis.sensitivities import (
    Sensitivities as Sensitivities,
    sensitivities as sensitivities,
)
from .analysis.summaries import (
    CurveSummary as CurveSummary,
    summarize_curve as summarize_curve,
)
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
from .base.checks import (
    MAX_SEED as MAX_SEED,
    MAX_STEPS as MAX_STEPS,
)
from .base.errors import (
    PgrpoSimError as PgrpoSimError,
)
from .base.regimes import (
    DISCRETE_REGIMES as DISCRETE_REGIMES,
    REGIMES as REGIMES,
    Damping as Damping,
    Regime as Regime,
)
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
from .logs.coupling import (
    Coupling as Coupling,
    coupling_ratio as coupling_ratio,
)
from .logs.diagnostics import (
    Diagnosis as Diagnosis,
    Readout as Readout,
    diagnose as diagnose,
)
from .logs.law_regimes import (
    fitted_regime as fitted_regime,
)
from .logs.laws import (
    KNOWN_LAWS as KNOWN_LAWS,
    LAWS as LAWS,
    LawFit as LawFit,
    fit_law as fit_law,
    fit_laws as fit_laws,
    law_curve as law_curve,
    oscillator_curve as oscillator_curve,
    oscillator_stiffness as oscillator_stiffness,
    r_squared as r_squared,
)
from .logs.noise import (
    reward_stderr as reward_stderr,
)
from .logs.readers import (
    TrainingLog as TrainingLog,
    detect_format as detect_format,
    from_run as from_run,
    parse_column_map as parse_column_map,
    read_log as read_log,
)
from .logs.stiffness import (
    StiffnessEstimates as StiffnessEstimates,
    identify_stiffness as identify_stiffness,
)
from .models.bandit import (
    MODES as MODES,
    STEP_READOUTS as STEP_READOUTS,
    UpdateStats as UpdateStats,
    simulate as simulate,
)
from .models.config import (
    KL_KINDS as KL_KINDS,
    LAG_MODELS as LAG_MODELS,
    LEAF_RANGES as LEAF_RANGES,
    LR_SCHEDULES as LR_SCHEDULES,
    MAX_GROUP_SIZE as MAX_GROUP_SIZE,
    OPTIMIZERS as OPTIMIZERS,
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
)
from .reports.validate import (
    validate as validate,
)

__version__: str
