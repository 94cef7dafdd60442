"""The public names of `pgrpo_sim.integrations` (re-exported lazily by `__init__.py`)."""

from .live import (
    ALERT_METRIC as ALERT_METRIC,
    METRICS as METRICS,
    PREFIX as PREFIX,
    ForecastSettings as ForecastSettings,
    ForecastWorker as ForecastWorker,
    LiveForecasts as LiveForecasts,
    forecast_history as forecast_history,
    forecast_metrics as forecast_metrics,
)
from .trl import ForecastCallback as ForecastCallback
