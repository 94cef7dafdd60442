"""The public names of `pgrpo_sim.logs` (re-exported lazily by `__init__.py`)."""

from .coupling import Coupling as Coupling, coupling_ratio as coupling_ratio
from .diagnostics import Diagnosis as Diagnosis, Readout as Readout, diagnose as diagnose
from .follow import follow_log as follow_log
from .law_regimes import RegimeReading as RegimeReading, fitted_regime as fitted_regime, read_regime as read_regime
from .laws import (
    KNOWN_LAWS as KNOWN_LAWS,
    LAW_PARAMS as LAW_PARAMS,
    LAWS as LAWS,
    LawFit as LawFit,
    fit_law as fit_law,
    fit_laws as fit_laws,
    law_curve as law_curve,
    oscillator_curve as oscillator_curve,
    oscillator_stiffness as oscillator_stiffness,
    r_squared as r_squared,
)
from .least_squares import LeastSquares as LeastSquares, least_squares as least_squares
from .monitors import (
    MONITORS as MONITORS,
    MonitorCall as MonitorCall,
    monitor_calls as monitor_calls,
)
from .noise import reward_stderr as reward_stderr, smooth as smooth
from .readers import (
    CANONICAL as CANONICAL,
    FORMATS as FORMATS,
    RUN_COLUMNS as RUN_COLUMNS,
    TrainingLog as TrainingLog,
    detect_format as detect_format,
    from_run as from_run,
    parse_column_map as parse_column_map,
    read_log as read_log,
)
from .stiffness import StiffnessEstimates as StiffnessEstimates, identify_stiffness as identify_stiffness
