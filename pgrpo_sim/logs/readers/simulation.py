"""A simulated run as a log: `from_run` turns a `bandit.Run` into a `TrainingLog` (format "simulation"), its
read-outs under the log's canonical names (`RUN_COLUMNS`, from `models.bandit.readouts`; a run may leave any but the
reward out: `simulate(readouts=tuple(RUN_COLUMNS.values()))` computes exactly these), sampled runs averaged
over seeds."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from ...base.errors import PgrpoSimError
from ...models.bandit.readouts import RUN_COLUMNS
from .table import TrainingLog, tidy

if TYPE_CHECKING:  # the bandit (and JAX) are not needed to read logs
    from ...models import bandit


def from_run(run: bandit.Run, *, index: int | None = None) -> TrainingLog:
    """A `TrainingLog` from a `bandit.Run` (step n = θ_n). Sampled runs are averaged over seeds, with
    `reward_std` the spread across seeds and `n_samples` the number of seeds (so the per-step error of the
    mean is reward_std/√seeds); `index` picks a single seed instead. Steps after a divergence are NaN and
    therefore skipped (see `TrainingLog.skipped_steps`).

    Args:
        run: `simulate`'s result; per-step read-outs of shape (steps+1,) (expected mode) or (seeds, steps+1)
            (sampled mode); reward in the run's units (a probability in [0, 1] for 0/1 rewards).
        index: the seed to read, an integer in [0, seeds − 1] (0 for an expected-mode run); None: the mean over
            seeds.

    Returns:
        A `TrainingLog` of format "simulation" (path None), one row per step with a finite reward, its columns
        under `RUN_COLUMNS`' canonical names, plus `reward_std` and `n_samples` for a seed mean.

    Raises:
        PgrpoSimError: `run` is not a `bandit.Run`, or `index` is not an integer seed of the run.
    """
    if not all(hasattr(run, v) for v in RUN_COLUMNS.values()):
        raise PgrpoSimError(f"run must be a ps.bandit.Run (from ps.bandit.simulate), got {type(run).__name__}")
    arrays = {k: np.asarray(getattr(run, v), float) for k, v in RUN_COLUMNS.items() if getattr(run, v) is not None}
    if index is not None:
        seeds = np.atleast_2d(arrays["reward"]).shape[0]
        if not isinstance(index, (int, np.integer)) or not 0 <= index < seeds:  # (base.checks would import JAX)
            raise PgrpoSimError(f"index must be an integer in [0, {seeds - 1}] (a seed of the run), got {index!r}")
        arrays = {k: np.atleast_2d(v)[index] for k, v in arrays.items()}
    elif arrays["reward"].ndim == 2:
        reward = arrays["reward"]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns after every seed diverged
            arrays = {k: np.nanmean(v, 0) if k != "reward" else np.mean(v, 0) for k, v in arrays.items()}
            arrays["reward_std"] = np.std(reward, 0, ddof=1)  # NaN for one seed: no spread to measure
        arrays["n_samples"] = np.full(reward.shape[1], float(reward.shape[0]))
    steps = np.arange(arrays["reward"].size, dtype=float)
    records = [{"step": float(s), **{k: float(v[i]) for k, v in arrays.items()}} for i, s in enumerate(steps)]
    return tidy(records, format="simulation", path=None, columns={k: k for k in arrays})
