"""matplotlib figures of results computed elsewhere; nothing here computes a result. Importing it imports
matplotlib (the rest of pgrpo_sim does not)."""

from .figures import (
    PALETTE as PALETTE,
)
from .figures import (
    plot_convergence as plot_convergence,
)
from .figures import (
    plot_ensemble as plot_ensemble,
)
from .figures import (
    plot_phase_diagram as plot_phase_diagram,
)
from .figures import (
    plot_reward_curve as plot_reward_curve,
)
from .figures import (
    validation_figure as validation_figure,
)
from .log_figures import plot_diagnostics as plot_diagnostics
from .log_figures import plot_fits as plot_fits
