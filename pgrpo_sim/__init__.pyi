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
    phase_boundaries as phase_boundaries,
)
from .analysis.outcomes import (
    outcomes as outcomes,
)
from .analysis.search import (
    search as search,
)
from .analysis.sensitivities import (
    sensitivities as sensitivities,
)
from .analysis.summaries import (
    summarize_curve as summarize_curve,
)
from .analysis.sweep import (
    run_sweep as run_sweep,
)
from .base.checks import (
    MAX_SEED as MAX_SEED,
    MAX_STEPS as MAX_STEPS,
)
from .base.errors import (
    PgrpoSimError as PgrpoSimError,
)
from .calibration import (
    calibrate as calibrate,
    forecast as forecast,
    what_if as what_if,
)
from .logs.diagnostics import (
    diagnose as diagnose,
)
from .logs.laws import (
    fit_laws as fit_laws,
)
from .logs.readers import (
    from_run as from_run,
    read_log as read_log,
)
from .models.bandit import (
    simulate as simulate,
)
from .models.oscillator.linear import (
    spectral_radius as spectral_radius,
)
from .models.oscillator.sde import (
    solve_deterministic as solve_deterministic,
    solve_ensemble as solve_ensemble,
)
from .models.oscillator.theory import (
    critical_lag as critical_lag,
    damping_ratio as damping_ratio,
    natural_frequency as natural_frequency,
    regime as regime,
    stationary_variance as stationary_variance,
    trajectory as trajectory,
)
from .prediction import (
    predict as predict,
)
from .reports.log_report import (
    LogAnalysis as LogAnalysis,
    analyse_log as analyse_log,
)
from .reports.validate import (
    validate as validate,
)
from .runtime.sweep_store import (
    ChunkStore as ChunkStore,
)

__version__: str
