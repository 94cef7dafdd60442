"""The public names of `pgrpo_sim.viz` (re-exported lazily by `__init__.py`)."""

from .figures import (
    PALETTE as PALETTE,
    VALIDATION_FIGURES as VALIDATION_FIGURES,
    make_validation_figure as make_validation_figure,
    plot_convergence as plot_convergence,
    plot_ensemble as plot_ensemble,
    plot_phase_diagram as plot_phase_diagram,
    plot_reward_curve as plot_reward_curve,
    reward_curve_figure as reward_curve_figure,
    validation_figure as validation_figure,
)
from .log_figures import plot_diagnostics as plot_diagnostics, plot_fits as plot_fits
