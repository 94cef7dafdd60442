"""pgrpo-sim: a JAX-based, differentiable simulator of GRPO training dynamics.

Layers (README, "Layout"): `base` → `models` → `prediction` → `analysis`, `logs` → `calibration` → `viz` →
`reports` → `cli`.
Every public name is re-exported here; import from `pgrpo_sim`, not from the modules. The re-exports are
lazy (PEP 562): `import pgrpo_sim` loads nothing heavy, and a name's module (with JAX, diffrax, xarray…)
is imported on first use, so a command line that needs one layer does not pay for the others.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

_EXPORTS = {
    ".analysis.boundaries": ("Curve", "phase_boundaries", "trace_boundary"),
    ".analysis.outcomes": ("Outcomes", "outcomes"),
    ".analysis.phase": ("PhasePrediction", "agreement", "predict_cells", "predict_grid"),
    ".analysis.search": ("SearchResult", "grid_search", "search"),
    ".analysis.sensitivities": ("Sensitivities", "sensitivities"),
    ".analysis.summaries": ("CurveSummary", "summarize_curve"),
    ".analysis.sweep": (
        "Axis",
        "SweepError",
        "SweepResult",
        "check_sweep",
        "compute_sweep",
        "grid_axes",
        "load_sweep",
        "parse_axis",
        "run_sweep",
    ),
    ".base.errors": ("PgrpoSimError",),
    ".calibration": (
        "Band",
        "Calibration",
        "PopulationModel",
        "RunConfig",
        "calibrate",
        "forecast",
        "log_settings",
        "parse_scenario",
        "predictive_band",
        "read_run_config",
        "resolve_run_config",
        "synthetic_log",
        "what_if",
    ),
    ".base.outputs": ("MARK", "check_output_dir", "claim_output_dir", "read_mark"),
    ".base.regimes": ("DISCRETE_REGIMES", "REGIMES", "Damping", "Regime"),
    ".logs.diagnostics": ("Diagnosis", "Readout", "diagnose"),
    ".logs.laws": (
        "KNOWN_LAWS",
        "LAWS",
        "Coupling",
        "LawFit",
        "LeastSquares",
        "StiffnessEstimates",
        "coupling_ratio",
        "fit_law",
        "fit_laws",
        "fitted_regime",
        "identify_stiffness",
        "law_curve",
        "least_squares",
        "oscillator_curve",
        "oscillator_stiffness",
        "r_squared",
        "reward_stderr",
    ),
    ".logs.readers": ("TrainingLog", "detect_format", "from_run", "parse_column_map", "read_log"),
    ".models.bandit": (
        "BanditRun",
        "BanditState",
        "STEP_READOUTS",
        "UpdateStats",
        "check_mode",
        "collapse_branches",
        "draw_rollout",
        "expected_loss",
        "initial_state",
        "make_optimizer",
        "minibatch_weights",
        "on_policy_grad",
        "rewards_are_binary",
        "reuse_branch_step",
        "rollout_count",
        "rollout_outcomes",
        "rollout_step",
        "run",
        "sampled_loss",
        "sampled_on_policy_grad",
        "simulate",
        "step",
    ),
    ".models.config": ("BanditConfig", "bandit_config", "class_symmetric_logits"),
    ".models.grpo": (
        "ADVANTAGES",
        "advantage_code",
        "clipped_surrogate",
        "entropy",
        "group_advantages",
        "kl_divergence",
        "kl_estimate",
    ),
    ".models.hyperparameters": (
        "HYPERPARAMETERS",
        "Hyperparameter",
        "reference_mass",
        "set_hyperparameters",
        "with_hyperparameters",
    ),
    ".models.linear": (
        "companion_matrix",
        "critical_eta",
        "discrete_regime",
        "discrete_regime_code",
        "dominant_root",
        "monodromy_matrix",
        "spectral_radius",
    ),
    ".models.sde": ("Ensemble", "euler_step_limit", "solve_deterministic", "solve_ensemble"),
    ".models.theory": (
        "Coefficients",
        "coefficients",
        "critical_lag",
        "critical_law",
        "damping_ratio",
        "natural_frequency",
        "regime",
        "regime_code",
        "saturation_law",
        "stationary_variance",
        "trajectory",
    ),
    ".prediction": (
        "QUANTITIES",
        "REASONS",
        "Prediction",
        "eta_scale",
        "fixed_point",
        "noise_scale",
        "predict",
        "two_arm_reduction",
    ),
    ".reports.log_report": (
        "LogAnalysis",
        "analyse_log",
        "check_analysis",
        "rows_without_value",
        "write_analysis",
        "write_report",
    ),
}
"""Module (relative to this package) of every re-exported public name."""
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


try:
    __version__ = version("pgrpo-sim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
