"""The public names of `pgrpo_sim.calibration` (re-exported lazily by `__init__.py`)."""

from .forecast import (
    MAX_HORIZON as MAX_HORIZON,
    GoodnessOfFit as GoodnessOfFit,
    draws_note as draws_note,
    forecast as forecast,
    goodness_of_fit as goodness_of_fit,
    horizon_limit as horizon_limit,
    verdict as verdict,
    what_if as what_if,
)
from .inference import (
    Band as Band,
    Calibration as Calibration,
    calibrate as calibrate,
    predictive_band as predictive_band,
)
from .inputs import (
    calibration_inputs as calibration_inputs,
    fit_window_end as fit_window_end,
)
from .model import (
    PARAMETERS as PARAMETERS,
    Observables as Observables,
    PopulationModel as PopulationModel,
    population_model as population_model,
    synthetic_log as synthetic_log,
)
from .results import (
    LEVELS as LEVELS,
    Forecast as Forecast,
    Scenario as Scenario,
    WhatIf as WhatIf,
)
from .run_config import (
    KEYS as KEYS,
    RunConfig as RunConfig,
    log_settings as log_settings,
    parse_scenario as parse_scenario,
    resolve_run_config as resolve_run_config,
)
from .run_config_files import (
    read_run_config as read_run_config,
)
from .scoring import (
    RELIABILITY_EDGES as RELIABILITY_EDGES,
    ReliabilityBin as ReliabilityBin,
    brier_score as brier_score,
    brier_skill as brier_skill,
    reliability as reliability,
)
