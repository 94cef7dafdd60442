"""A log's success rate when its reward is not one: TRL logs often sum several reward functions (format, length,
correctness), so `reward` leaves [0, 1] while one column still counts right answers.

`success_rate_log` takes, in order, a column named like a success rate (`accuracy`, `acc`, `success_rate`, or a
reward function whose name says correct/accuracy/success, as `rewards/<name>/mean` or `rewards/<name>`) whose values
divided by a scale lie in [0, 1]: the scale is the run config's `reward_scale` when it bounds the column, else the
smallest of `SCALES` that does (TRL's GSM8K example rewards a right answer with 2.0). A log with no such column
keeps its reward, and the note says that the bandit reads it as an affine map a + b·p of the success rate, fitted
with the rest (`calibrate(reward_map="auto")`; the language-model level cannot, and says so).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..logs.readers import TrainingLog
from .run_config import RunConfig

SUCCESS_NAME = re.compile(
    r"^(?:(?:train|eval)/)?(?:accuracy|acc|success_rate|rewards/[^/]*(?:correct|accura|success)[^/]*(?:/mean)?)$",
    re.IGNORECASE,
)
"""Column names read as a success rate (or a correctness reward): `accuracy`, `rewards/correctness_reward_func`…"""
SCALES = (1.0, 2.0, 5.0, 10.0)
"""Scales tried for a correctness reward, smallest first: the reward of a right answer."""
TOLERANCE = 1e-9


def _in_unit(values: np.ndarray, scale: float) -> bool:
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.all(finite >= -TOLERANCE) and np.all(finite / scale <= 1 + TOLERANCE))


def success_rate_log(log: TrainingLog, run: RunConfig) -> tuple[TrainingLog, RunConfig, str | None]:
    """`log` and `run` unchanged when reward / reward_scale lies in [0, 1]; else the log with its success-rate
    column as `reward` and the run with that column's scale, and a note saying which (module docstring); a log with
    no such column unchanged, with a note saying its reward is read as an affine map."""
    if "reward" not in log or _in_unit(log.series("reward")[1], run.reward_scale):
        return log, run, None
    for name, values in log.other.items():
        if not SUCCESS_NAME.match(name):
            continue
        scales = ((run.reward_scale,) if run.reward_scale != 1.0 else ()) + SCALES
        scale = next((s for s in scales if _in_unit(values, s)), None)
        if scale is None:
            continue
        data = dict(log.data, reward=np.asarray(values, float))
        sources = dict(log.sources, reward=name)
        other = {k: v for k, v in log.other.items() if k != name} | {log.sources.get("reward", "reward"): log["reward"]}
        note = (
            f"the log's reward ({log.sources.get('reward', 'reward')}) leaves [0, 1]: calibrated on its success-rate "
            f"column {name}" + ("" if scale == 1.0 else f" divided by {scale:g} (reward_scale)")
        )
        changed = dataclasses.replace(log, data=data, sources=sources, other=other)
        return changed, run.replace(reward_scale=scale).with_notes(note), note
    values = log.series("reward")[1]
    note = (
        f"the log's reward lies in [{values.min():.3g}, {values.max():.3g}], not [0, 1], and no success-rate column "
        "(accuracy, rewards/<correctness>…) was found: the bandit reads it as a + b × the success rate, a and b "
        "fitted (columns={'reward': SOURCE} picks a column instead)"
    )
    return log, run.with_notes(note), note
