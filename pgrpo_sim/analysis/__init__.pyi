"""The public names of `pgrpo_sim.analysis` (re-exported lazily by `__init__.py`)."""

from .boundaries import Curve as Curve, phase_boundaries as phase_boundaries, trace_boundary as trace_boundary
from .outcomes import Outcomes as Outcomes, outcomes as outcomes
from .phase import (
    PhasePrediction as PhasePrediction,
    agreement as agreement,
    predict_cells as predict_cells,
    predict_grid as predict_grid,
)
from .search import (
    DEFAULT_BOUNDS as DEFAULT_BOUNDS,
    OBJECTIVES as OBJECTIVES,
    SearchResult as SearchResult,
    SearchSettings as SearchSettings,
    grid_search as grid_search,
    search as search,
)
from .sensitivities import Sensitivities as Sensitivities, sensitivities as sensitivities
from .summaries import (
    VERDICTS as VERDICTS,
    CurveSummary as CurveSummary,
    collapsed as collapsed,
    summarize_curve as summarize_curve,
    summarize_curves as summarize_curves,
)
from .sweep import (
    STATIC_AXES as STATIC_AXES,
    TRACED_AXES as TRACED_AXES,
    Axis as Axis,
    OtherSweepError as OtherSweepError,
    SweepError as SweepError,
    SweepResult as SweepResult,
    SweepSettings as SweepSettings,
    SweepStore as SweepStore,
    check_sweep as check_sweep,
    compute_sweep as compute_sweep,
    grid_axes as grid_axes,
    load_sweep as load_sweep,
    output_bytes as output_bytes,
    parse_axis as parse_axis,
    run_sweep as run_sweep,
)
