"""`ForecastCallback`: a TRL (transformers) trainer callback that forecasts the run while it trains and logs the
collapse probability beside the reward (issue 49; docs/guide/watch.md). Needs transformers (`pip install
'pgrpo-sim[trl]'`).

Every `every` logged reward steps the callback forecasts the run's end from its log so far
(`calibration.watch.watch_forecast`, minutes of CPU) in one worker process, at most one forecast at a time, so that
no training step waits for it (`live.LiveForecasts`, `live.ForecastWorker`). A forecast finished by a
step's end or a log call is added to the next log call's record (`live.METRICS`: `pgrpo/collapse_probability`,
its standard error, `pgrpo/forecast_final_reward` with its band, `pgrpo/alert`). The alert is `pgrpo-sim watch`'s:
the collapse probability at or above `alert` in consecutive forecasts; it is logged as a warning, and with
`stop_on_alert` the training stops.

Callbacks passed to the trainer (`callbacks=[…]`, `add_callback`) run after its reporting integrations (`report_to`:
W&B, TensorBoard…), which have then sent the record: the metrics reach `trainer.state.log_history` (and
trainer_state.json), the console and later callbacks only. `ForecastCallback.attach(trainer)` puts the callback
ahead of them, so that W&B and TensorBoard show the metrics too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

try:
    # An optional extra ([trl]): CI's type check runs without it.
    from transformers import DefaultFlowCallback, TrainerCallback  # pyright: ignore[reportMissingImports]
except ImportError:
    raise ImportError("pgrpo_sim.integrations.trl needs transformers: pip install 'pgrpo-sim[trl]'") from None

from ..base.errors import PgrpoSimError
from .live import ForecastSettings, ForecastWorker, LiveForecasts, forecast_history, forecast_metrics

logger = logging.getLogger(__name__)


class ForecastCallback(TrainerCallback):
    """Forecasts of a TRL run while it trains (module docstring), on the main process of a run (the others do
    nothing). The forecast's run config is the trainer's arguments (a `GRPOConfig` dump; its max_steps the
    trainer's); the training script needs the `if __name__ == "__main__":` guard (the worker is a spawned process,
    which imports the script). At the end of training a forecast still running is ended and a waiting one dropped:
    the run's end is in its log, and the script does not wait minutes for a forecast it could no longer log.

    Args:
        every: logged reward steps between two forecasts; integer ≥ 1.
        alert: the collapse probability that alarms in consecutive forecasts (`calibration.watch.alerting`);
            in (0, 1].
        stop_on_alert: whether the alert stops the training (`control.should_training_stop`); one process only.
        until: the last logged step (the trainer's global step) to forecast to; integer ≥ 1; None: the trainer's
            max_steps.
        seed: seed of the forecasts' runs; integer in [0, 2³² − 1].
        band: the central probability of the forecast final reward's band; in (0, 1).
        forecast: `watch_forecast` (None), or a module-level function taking its arguments (a stand-in: it is
            pickled into the worker).

    Raises:
        PgrpoSimError: an argument out of its range (`live.ForecastSettings`), or a `forecast` that cannot be
            pickled.
    """

    def __init__(
        self,
        every: int = 10,
        alert: float = 0.5,
        stop_on_alert: bool = False,
        until: int | None = None,
        seed: int = 0,
        *,
        band: float = 0.8,
        forecast: Callable | None = None,
    ):
        self.settings = ForecastSettings(every, alert, stop_on_alert, until, seed, band, forecast)
        self._live: LiveForecasts | None = None  # while a training runs
        self._forecasts: list[dict] = []
        self._worker: ForecastWorker | None = None
        self._job: dict = {}  # watch_forecast's keyword arguments
        self._config: dict | None = None
        self._seen = 0  # records of state.log_history taken so far
        self._pending: dict[str, float] = {}  # metrics of finished forecasts, for the next log call

    @property
    def forecasts(self) -> list[dict]:
        """The finished forecasts of the current (or last) training, oldest first (`watch_forecast` entries)."""
        return self._forecasts

    def attach(self, trainer) -> ForecastCallback:
        """Add this callback to `trainer` ahead of its reporting integrations (`report_to`: W&B, TensorBoard…), so that
        they receive its metrics in the record of the step they are logged at (moved there if it was added already).

        Args:
            trainer: a transformers `Trainer` (a TRL `GRPOTrainer`).

        Returns:
            This callback.
        """
        callbacks = trainer.callback_handler.callbacks
        if any(cb is self for cb in callbacks):
            callbacks.remove(self)
        first = next((i + 1 for i, cb in enumerate(callbacks) if isinstance(cb, DefaultFlowCallback)), 0)
        callbacks.insert(first, self)
        return self

    def on_train_begin(self, args, state, control, **kwargs):
        """Start the worker, with the trainer's arguments as the run config."""
        if self.settings.stop_on_alert and args.world_size > 1:  # every process raises
            raise PgrpoSimError(
                f"stop_on_alert needs a run of one process (this one has {args.world_size}): only the main process "
                "forecasts, and the others would not stop"
            )
        if not state.is_world_process_zero:
            return
        self._close()
        config = json.loads(json.dumps(args.to_dict(), default=str))
        if not isinstance(config.get("max_steps"), int) or config["max_steps"] <= 0:  # trained by epochs
            config["max_steps"] = state.max_steps
        self._config = config
        settings = self.settings
        until = settings.until if settings.until is not None else state.max_steps
        self._job = dict(until=until, level=settings.band, seed=settings.seed)
        self._worker = ForecastWorker()
        self._live = LiveForecasts(self._submit, settings.every, settings.alert, say=logger.info, warn=logger.warning)
        self._forecasts = self._live.forecasts
        self._seen, self._pending = 0, {}
        self._take(state)  # a run resumed from a checkpoint: its records so far

    def _submit(self, records: list[dict]):
        assert self._worker is not None
        return self._worker.submit(forecast_history, self.settings.forecast, records, self._config, **self._job)

    def _take(self, state) -> None:
        assert self._live is not None
        history = state.log_history
        self._live.add(history[self._seen :])
        self._seen = len(history)

    def _collect(self, state, control) -> None:
        """Collect finished forecasts (without waiting): their metrics wait for the next log call; the alert is
        logged, and stops the training with `stop_on_alert`."""
        assert self._live is not None
        stop = self.settings.stop_on_alert
        for entry, alerted in self._live.collect():
            self._pending.update(forecast_metrics(entry, alerted))
            if alerted:
                logger.warning(
                    f"pgrpo-sim alert at step {state.global_step}: collapse probability "
                    f"{entry['collapse_probability']:.2f} ± {entry['collapse_probability_stderr']:.2f} (forecast from "
                    f"step {entry['step']:g} to step {entry['until']:g}), at or above {self.settings.alert:g} in "
                    "consecutive forecasts" + ("; stopping the training (stop_on_alert)" if stop else "")
                )
                if stop:
                    control.should_training_stop = True

    def on_step_end(self, args, state, control, **kwargs):
        """Collect finished forecasts (an alert stops the training at this step's end)."""
        if self._live is not None:
            self._collect(state, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Collect finished forecasts and add their metrics to this log call's record; take its record and start or
        queue a forecast when `every` more reward steps have been logged."""
        if self._live is None:
            return
        self._collect(state, control)
        if self._pending and logs is not None:
            logs.update(self._pending)
            history = state.log_history
            if history and history[-1].get("step") == state.global_step:  # the record this call logs
                history[-1].update(self._pending)
            self._pending = {}
        self._take(state)

    def on_train_end(self, args, state, control, **kwargs):
        """Stop the worker at once (a running forecast is ended: class docstring)."""
        self._close()

    def _close(self) -> None:
        self._live = None  # later log calls (an evaluation after training) find no forecast
        if self._worker is not None:
            self._worker.close()
            self._worker = None
