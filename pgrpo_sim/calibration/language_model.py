"""The language-model level (`models.lm`) calibrated on a training log: the level that can collapse where the bandit
only plateaus. Its settings are `lm_level`'s; the what-if scenarios and forecasts answered on it, `lm_scenarios`'.

What a log tells the level (`calibrate`):
- `start_accuracy`: the log's first reward (the policy before GRPO), the SFT start's target;
- `start_format`: the share of well-formed demonstrations behind that start (`models.lm.pretrain`), one of
  `Level.start_formats`: a base model at 3 % that knows the answers but not the format jumps within a few steps,
  one that knows neither climbs slowly, and the curve tells which;
- `lr_scale`: the factor from the real run's learning rate to the level's (a 1.5B-parameter model at 3e-5 and a
  ~100k-parameter transformer at ~1e-3 take steps of like effect). Its posterior lies on a grid of level rates
  (`Level.lr_grid`, refined around its best rate by `Level.refine`; a rate stands for its cell, halfway to its
  neighbours in log10, and the prior is flat in log10 rate, so a point weighs its likelihood × its cell's width):
  each rate and start format is run for `Level.seeds` seeds and its mean reward curve is compared with the log's
  at the logged steps, the variance per point being the level's across-seed variance plus
  the log's own sampling variance p(1 − p)/n (n: the rollout batch, or the eval set's size for an eval-only log),
  with the log-likelihood tempered by the overdispersion φ = max(1, χ²_min/points) (quasi-likelihood); flat prior
  over the start formats. Its value and standard error are the marginal posterior mean and s.d. of
  log10(lr_scale); "undetermined" when the s.d. exceeds
  `UNDETERMINED_DECADES` or the best rate is an end of the grid (the log's rate lies beyond the level's range).
- `ceiling` c: the log's reward is c × the level's (a share 1 − c of real prompts that no completion solves gives
  zero advantage and only scales the reward), profiled per grid point over `Level.ceilings`; scenarios' curves
  are in the log's units (× their draw's c); a collapse verdict does not depend on c.
Everything else — G, epochs, mini-batches, clip, β, loss aggregation, `scale_rewards`, the gradient clip, the
schedule — is the run config's, on the level's own task and sizes, with the run's prompts per step up to a cap
(`Level.prompts_for`).

Reading the log: one logged step is one GRPO step, or one optimiser step for TRL's formats (as `population_model`
reads it), so a logged step maps to the GRPO step whose rollout it reports. The level's observable is its rollouts'
mean reward (sampled at the run's temperature, 1), also when the log's reward is a greedy eval accuracy (said in the
notes). A scenario's runs (`lm_scenarios.scenario`) draw `Level.draws` (start format, level rate) pairs from the
posterior, each with its own seed; `collapse_probability` is the share of them whose verdict
(`analysis.summaries.verdict`, per run) is "collapses" or "diverges", with its binomial standard error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from ..base.checks import check_range, check_seed
from ..base.errors import PgrpoSimError
from ..base.files import save_atomically
from ..base.progress import report
from ..base.waiting import deal
from ..logs.readers import TrainingLog
from ..models import lm
from ..models.lm.pretrain import MAX_START_ACCURACY, StartNotReached, cache_dir
from .lm_level import REFINE_SHARE, Level, level_settings
from .model import TRL_FORMATS
from .run_config import RunConfig, check_run_config

MIN_START_ACCURACY = 0.02
"""Lowest SFT start accuracy the level is trained to (a log starting at 0 still needs a few rewarded completions)."""
UNDETERMINED_DECADES = 0.5
"""Posterior s.d. of log10(lr_scale) above which the scale is "undetermined"."""
POOR_FIT = 4.0
"""Overdispersion φ above which the fit is called poor: the level's mean curve misses the log by more than two of its
noise's standard deviations on average (the level's start or shape does not follow the log)."""
VARIANCE_FLOOR = 1e-4
"""Variance added to every point (a reward's last digits): no point gets infinite weight."""


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The level fitted to a log (module docstring). n below is the fit window's rewarded logged steps.

    Attributes:
        run: the real run's config.
        level: how the level was run.
        first_step: the log's first rewarded step, in logged steps (the fit window's start).
        fit_until: the fit window's last logged step (included), in logged steps.
        last_step: the log's last rewarded step, in logged steps (the schedule's end when the run config has no
            `max_steps`).
        logged_steps: the fit window's rewarded logged steps; float [n].
        index: the GRPO step whose rollout each logged step reports (`grpo_index`); int [n].
        reward: the log's rewards in the fit window / the run's `reward_scale`; float [n], in [0, 1].
        observed_n: completions behind each logged reward, the n of its sampling variance p(1 − p)/n: the run's
            prompts per step × num_generations, or the eval set's size; integer ≥ 1.
        eval_only: whether the log's reward is an eval accuracy (its source's name starts with eval, val or test).
        start_accuracy: the SFT start's target: the log's first reward, clipped to [`MIN_START_ACCURACY`,
            `MAX_START_ACCURACY`]; in [0, 1].
        formats: the start formats tried, `level.formats(start_accuracy)`; shares in (0, 1].
        rates: the level rates tried, `level.lr_grid` and its refinement (`Level.refine`); increasing, each > 0.
        weights: the posterior over (`formats` × `rates`); float [formats, rates], summing to 1 (0 where a pair was
            not run: a format the refinement left out).
        ceilings: each grid point's profiled best ceiling c (one of `level.ceilings`); float [formats, rates].
        ceiling_weights: the posterior over the ceilings `level.ceilings` (the joint posterior's marginal); float
            [len(level.ceilings)], summing to 1.
        overdispersion: φ = max(1, χ²_min/n), the likelihood's temper; ≥ 1.
        curves: the level's rollout reward of each grid run per GRPO step, 0 … index[-1]; float [formats, rates,
            level.seeds, index[-1] + 1], in [0, 1] (the level's units, before the ceiling), NaN where a run diverged
            or was not run.
        per_logged: optimiser steps per logged step: 1 for TRL's formats, else the run's `steps_per_rollout` (one
            logged step per GRPO step).
        notes: what the fit assumed or could not follow the run in, one sentence each.
    """

    run: RunConfig
    level: Level
    first_step: float
    fit_until: float
    last_step: float
    logged_steps: np.ndarray
    index: np.ndarray
    reward: np.ndarray
    observed_n: int
    eval_only: bool
    start_accuracy: float
    formats: tuple[float, ...]
    rates: tuple[float, ...]
    weights: np.ndarray
    ceilings: np.ndarray
    ceiling_weights: np.ndarray
    overdispersion: float
    curves: np.ndarray
    per_logged: int
    notes: tuple[str, ...] = ()

    @property
    def log_scales(self) -> np.ndarray:
        """log10(level rate / run rate) at each grid point."""
        return np.log10(np.asarray(self.rates) / self.run.learning_rate)

    @property
    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Each rate's cell in log10(lr_scale), (lower, upper) edges: halfway to its neighbours, as wide outward at
        the grid's ends as inward."""
        return rate_cells(self.log_scales)

    @property
    def rate_weights(self) -> np.ndarray:
        """The marginal posterior over the level rates."""
        return self.weights.sum(axis=0)

    @property
    def format_weights(self) -> np.ndarray:
        """The marginal posterior over the start formats."""
        return self.weights.sum(axis=1)

    @property
    def start_format(self) -> float:
        """The most probable start format."""
        return self.formats[int(np.argmax(self.format_weights))]

    @property
    def lr_scale(self) -> tuple[float, float]:
        """Posterior mean and s.d. of log10(lr_scale), the posterior being uniform within each rate's cell."""
        lower, upper = self.cells
        w, centre = self.rate_weights, (lower + upper) / 2
        mean = float(np.sum(w * centre))
        return mean, float(np.sqrt(np.sum(w * ((centre - mean) ** 2 + (upper - lower) ** 2 / 12))))

    @property
    def ceiling(self) -> tuple[float, float]:
        """Posterior mean and s.d. of the ceiling c, from its marginal posterior; the s.d. is at least a cell's
        (the ceilings' spacing/√12)."""
        c = np.asarray(self.level.ceilings, float)
        mean = float(np.sum(self.ceiling_weights * c))
        sd = float(np.sqrt(np.sum(self.ceiling_weights * (c - mean) ** 2)))
        cell = float(np.ptp(c)) / max(c.size - 1, 1)
        return mean, max(sd, cell / np.sqrt(12))

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`n` (start format, level learning rate, ceiling) triples for the run's own rate: grid points drawn by
        their weights, each rate spread uniformly over its cell (in log10), each with its point's ceiling."""
        picks = rng.choice(self.weights.size, size=n, p=self.weights.ravel())
        format_index, rate_index = np.unravel_index(picks, self.weights.shape)
        lower, upper = self.cells
        log_scale = rng.uniform(lower[rate_index], upper[rate_index])
        rates = self.run.learning_rate * 10**log_scale
        return np.asarray(self.formats)[format_index], rates, self.ceilings.ravel()[picks]

    @property
    def undetermined(self) -> str | None:
        """Why the scale is undetermined, or None."""
        best = int(np.argmax(self.rate_weights))
        if best in (0, len(self.rate_weights) - 1):
            side = "lowest" if best == 0 else "highest"
            return f"the best level rate is the grid's {side} ({self.rates[best]:.3g})"
        if self.lr_scale[1] > UNDETERMINED_DECADES:
            return f"posterior s.d. {self.lr_scale[1]:.2f} decades > {UNDETERMINED_DECADES}"
        return None

    @property
    def poor_fit(self) -> bool:
        """Whether φ > `POOR_FIT`."""
        return self.overdispersion > POOR_FIT

    def logged_step(self, index: np.ndarray) -> np.ndarray:
        """The logged step of each GRPO step's rollout (the inverse of `grpo_index`)."""
        return self.first_step + np.asarray(index, float) * self.run.steps_per_rollout / self.per_logged

    def grpo_steps(self, until: float) -> int:
        """GRPO steps to run so that the logged step `until` is reached."""
        return int(self.grpo_index(np.array([until]))[0]) + 1

    def schedule_steps(self, run: RunConfig | None = None) -> int:
        """The learning-rate schedule's length in the level's GRPO steps: `run.max_steps` logged steps (`run`: a
        scenario's config; None: the calibrated run's), or the log's length without one, as TRL lays the schedule
        over the whole run whatever the fit window. Logged steps map to GRPO steps as the simulated window's do (the
        calibrated run's steps per rollout), so a scenario with more steps per rollout decays over the same window."""
        run = self.run if run is None else run
        length = self.last_step - self.first_step + 1 if run.max_steps is None else run.max_steps
        per_grpo = self.run.steps_per_rollout / self.per_logged  # logged steps per GRPO step
        return max(1, math.ceil(length / per_grpo - 1e-9))

    def grpo_index(self, logged: np.ndarray) -> np.ndarray:
        """The GRPO step whose rollout each logged step reports."""
        offset = np.round(np.asarray(logged, float) - self.first_step).astype(int)
        return offset * self.per_logged // self.run.steps_per_rollout

    def as_dict(self) -> dict:
        """calibration.json's content."""
        mean, sd = self.lr_scale
        se = float(np.sqrt(self.start_accuracy * (1 - self.start_accuracy) / self.observed_n))
        return dict(
            model="lm",
            parameters=dict(
                log10_lr_scale=dict(value=mean, stderr=sd, undetermined=self.undetermined is not None),
                start_accuracy=dict(value=self.start_accuracy, stderr=se, undetermined=False),
            ),
            start_format=dict(
                value=self.start_format, formats=list(self.formats), weights=self.format_weights.tolist()
            ),
            ceiling=dict(value=self.ceiling[0], stderr=self.ceiling[1]),
            lr_scale=10**mean,
            undetermined_reason=self.undetermined,
            posterior=dict(
                start_formats=list(self.formats),
                level_learning_rates=list(self.rates),
                weights=self.weights.tolist(),
            ),
            overdispersion=self.overdispersion,
            poor_fit=self.poor_fit,
            fit_window=dict(first_step=self.first_step, fit_until=self.fit_until, points=int(self.reward.size)),
            observable="eval accuracy" if self.eval_only else "training reward",
            observed_n=self.observed_n,
            level=dict(
                prompts_per_step=self.level.prompts_for(self.run),
                seeds=self.level.seeds,
                refine=self.level.refine,
                draws=self.level.draws,
                sizes=dict(self.level.sizes),
            ),
            run_config=self.run.as_dict(),
            notes=list(self.notes),
        )


def _log_reward(log: TrainingLog, run: RunConfig, fit_until: float | None):
    if "reward" not in log or log.series("reward")[0].size == 0:
        raise PgrpoSimError("the log has no reward to calibrate on")
    steps, values = log.series("reward")
    values = np.asarray(values, float) / run.reward_scale
    last = float(steps[-1])
    if np.any(values < -1e-9) or np.any(values > 1 + 1e-9):
        raise PgrpoSimError(
            f"rewards/reward_scale lie in [{values.min():.3g}, {values.max():.3g}], not [0, 1]: set reward_scale in "
            "the run config to the reward of a fully correct completion, read a success-rate column with "
            "columns={'reward': SOURCE}, or use the bandit level (it reads such a reward as an affine map of the "
            "success rate)"
        )
    until = float(steps[-1]) if fit_until is None else float(fit_until)
    check_range("fit_until", until, float(steps[0]), float(steps[-1]))
    keep = steps <= until
    if np.sum(keep) < 2:  # the first sets the start; the rates are weighed by the rest
        raise PgrpoSimError(f"the log has {int(np.sum(keep))} rewarded step up to step {until:g}; the level needs 2")
    return np.asarray(steps, float)[keep], values[keep], until, last


def calibrate(
    log: TrainingLog,
    run: RunConfig,
    *,
    fit_until: float | None = None,
    eval_size: int | None = None,
    level: Level | None = None,
    seed: int = 0,
    progress: Callable[[str], object] | None = None,
) -> Calibration:
    """Fit the level's start accuracy and learning-rate scale to `log`'s reward up to `fit_until` (module
    docstring).

    Args:
        log: the training log; its reward / `run.reward_scale` must lie in [0, 1], with at least two rewarded steps
            up to `fit_until`.
        run: the real run's config.
        fit_until: the fit window's last logged step, in [the first rewarded step, the last]; None: the last.
        eval_size: the eval set's size when the log's reward is an eval accuracy (its sampling noise); integer ≥ 1;
            None: a rollout batch's size (the run's prompts per step × num_generations).
        level: how the level is run; None: `Level()`.
        seed: seed of the grid's runs; integer in [0, 2³² − 1].
        progress: told each start format's grid runs as they start (`base.progress`); None: silent.

    Returns:
        The `Calibration`: its posterior over (start format, level learning rate) and the ceilings, and the grid's
        reward curves (`curves`, float [formats, rates, seeds, GRPO steps]).

    Raises:
        PgrpoSimError: the run config or a setting out of its range, the log without two rewarded steps in the fit
            window or with rewards / `reward_scale` outside [0, 1], or a start accuracy the level's SFT start does
            not reach.
    """
    check_run_config(run)
    check_seed(seed)
    level = Level() if level is None else level
    steps, reward, until, last = _log_reward(log, run, fit_until)
    source = log.sources.get("reward", "reward")
    eval_only = source.lower().startswith(("eval", "val", "test"))
    notes = []
    if eval_size is not None:
        check_range("eval_size", eval_size, 1, integer=True)
        observed_n = int(eval_size)
    else:
        observed_n = run.prompts_per_step * run.num_generations
        if eval_only:
            notes.append(f"the eval set's size was not given: its noise taken as a rollout batch's ({observed_n})")
    if eval_only:
        notes.append(f"the log's reward is {source}, compared with the level's sampled rollout reward")
    if run.loss_type == "reinforce_with_baseline" and run.steps_per_rollout > 1:
        notes.append("reinforce_with_baseline with reuse: the level keeps the ratio (its gradient differs)")
    if level.fitted_run(run) is not run:
        notes.append(
            f"the level's rate was fitted at one optimiser step per rollout, not the run's {run.steps_per_rollout}: "
            "an LLM's climb does not depend on its reuse, the level's does (docs/design.md §7a)"
        )
    if run.optimizer != "adamw":
        notes.append(f"optimizer {run.optimizer}: the level uses AdamW")
    per_logged = 1 if log.format in TRL_FORMATS else run.steps_per_rollout
    start = float(np.clip(reward[0], MIN_START_ACCURACY, MAX_START_ACCURACY))
    cal = Calibration(
        run=run,
        level=level,
        first_step=float(steps[0]),
        fit_until=until,
        last_step=last,
        logged_steps=steps,
        index=np.zeros(0, int),
        reward=reward,
        observed_n=observed_n,
        eval_only=eval_only,
        start_accuracy=start,
        formats=level.formats(start),
        rates=(),
        weights=np.zeros((0, 0)),
        ceilings=np.zeros((0, 0)),
        ceiling_weights=np.zeros(0),
        overdispersion=1.0,
        curves=np.zeros(0),
        per_logged=per_logged,
        notes=tuple(notes),
    )
    index = cal.grpo_index(steps)
    horizon = int(index[-1]) + 1
    coarse = _grid_curves(cal, level.lr_grid, range(len(cal.formats)), horizon, seed, progress)
    ran = np.ones(coarse.shape[:2], bool)
    cal = _posterior(dataclasses.replace(cal, rates=tuple(level.lr_grid), index=index), coarse, ran)
    if level.refine == 1:
        return cal
    added = level.refined_rates(int(np.argmax(cal.rate_weights)))
    which = [i for i, share in enumerate(cal.format_weights) if share >= REFINE_SHARE]
    fine = np.full((len(cal.formats), len(added), level.seeds, horizon), np.nan)
    fine[which] = _grid_curves(cal, added, which, horizon, seed, progress)
    fine_ran = np.zeros(fine.shape[:2], bool)
    fine_ran[which] = True
    rates = np.concatenate([level.lr_grid, added])
    order = np.argsort(rates)
    curves = np.concatenate([coarse, fine], axis=1)[:, order]
    ran = np.concatenate([ran, fine_ran], axis=1)[:, order]
    return _posterior(dataclasses.replace(cal, rates=tuple(float(r) for r in rates[order])), curves, ran)


def _grid_curves(cal: Calibration, rates, which, horizon: int, seed: int, progress) -> np.ndarray:
    """The level's reward curves at the start formats `cal.formats[i]` for i in `which` × `rates` × seeds, over GRPO
    steps 0 … horizon − 1, one job per start format (`cached_runs_each`); float [len(which), len(rates), seeds,
    horizon]."""
    level = cal.level
    fitted = level.fitted_run(cal.run)  # the run the grid simulates (its on-policy twin for a reuse run)
    schedule = cal.schedule_steps()
    formats = ", ".join(f"{cal.formats[i]:g}" for i in which)
    report(
        progress,
        f"running the level from start format{'s' if len(which) > 1 else ''} {formats} at {len(rates)} learning "
        f"rates × {level.seeds} seeds",
    )
    jobs = [
        LevelJob([
            level_settings(fitted, lr, cal.start_accuracy, level, schedule, cal.formats[i])
            for lr in rates for _ in range(level.seeds)
        ], horizon, seed)
        for i in which
    ]  # fmt: skip
    try:
        runs = cached_runs_each(jobs)
    except StartNotReached as exc:
        raise PgrpoSimError(
            f"the log starts at reward {cal.reward[0]:.3g}, and the language-model level's SFT start does not "
            f"reach that accuracy (it levels off at {exc.reached:.2f}): the level cannot answer for this log; use "
            "the bandit level"
        ) from exc
    curves = np.stack([np.asarray(run.readouts["reward"], float) for run in runs])
    return curves.reshape(len(jobs), len(rates), level.seeds, horizon)


def _posterior(cal: Calibration, curves: np.ndarray, ran: np.ndarray) -> Calibration:
    """`cal` with `curves` (float [formats, rates, seeds, steps]) and the posterior over the (format, rate) points
    that were run (`ran`, bool [formats, rates]), each weighed by its cell's width (a flat prior in log10 rate)."""
    lower, upper = rate_cells(np.log10(cal.rates))
    prior = np.broadcast_to(upper - lower, ran.shape)[ran]
    read = curves[ran][..., cal.index]
    weights, phi, best, ceiling_weights = grid_posterior(read, cal.reward, cal.observed_n, cal.level.ceilings, prior)
    full, ceilings = np.zeros(ran.shape), np.ones(ran.shape)
    full[ran], ceilings[ran] = weights, best
    return dataclasses.replace(
        cal, weights=full, ceilings=ceilings, ceiling_weights=ceiling_weights, overdispersion=phi, curves=curves
    )


def rate_cells(log_rates) -> tuple[np.ndarray, np.ndarray]:
    """The cells of increasing points in log10 rate: halfway to each neighbour, as wide outward at the ends as
    inward; ((lower, upper) edges, float [n] each). Two or more points."""
    x = np.asarray(log_rates, float)
    mid = (x[1:] + x[:-1]) / 2
    return np.concatenate([[2 * x[0] - mid[0]], mid]), np.concatenate([mid, [2 * x[-1] - mid[-1]]])


def grid_posterior(
    curves: np.ndarray, observed: np.ndarray, observed_n: int, ceilings=(1.0,), prior=None
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Posterior weights over grid points (prior ∝ `prior`), the overdispersion φ and each point's best ceiling, from
    the level's curves read at the log's steps and the log's values (module docstring). Each point's likelihood is
    profiled over the `ceilings` c (the log's reward = c × the level's; c < 1: a share 1 − c of the real prompts is
    never solved, so it gives no advantage and only scales the reward). A diverged run's NaNs count as reward 0.

    Args:
        curves: the level's reward per grid point and seed at the log's n steps; float [points, seeds, n], seeds ≥ 2,
            in [0, 1].
        observed: the log's values at those steps (reward / `reward_scale`); float [n], in [0, 1].
        observed_n: completions behind each logged value, the n of its sampling variance p(1 − p)/n; > 0.
        ceilings: the ceilings c tried; each in (0, 1].
        prior: each point's prior weight (its cell's width), float [points], > 0; None: flat.

    Returns:
        (weights, φ, best ceilings, ceiling weights): the posterior over the grid points, float [points] summing to
        1; the overdispersion φ = max(1, χ²_min/n) ≥ 1; each point's profiled best c, float [points]; and the
        posterior over the ceilings (the joint tempered likelihood summed over the points), float [len(ceilings)]
        summing to 1.
    """
    curves = np.nan_to_num(np.asarray(curves, float), nan=0.0)
    seeds = curves.shape[1]
    c = np.asarray(ceilings, float)[:, None, None]  # [ceilings, points, n]
    mean, var = c * curves.mean(axis=1), c**2 * curves.var(axis=1, ddof=1)
    sigma2 = var * (1 + 1 / seeds) + mean * (1 - mean) / observed_n + VARIANCE_FLOOR
    chi2 = np.sum((observed - mean) ** 2 / sigma2, axis=-1)  # [ceilings, points]
    nll = 0.5 * (chi2 + np.sum(np.log(sigma2), axis=-1))
    best = np.argmin(nll, axis=0)
    points = np.arange(curves.shape[0])
    phi = max(1.0, float(np.min(chi2[best, points])) / observed.size)
    prior = np.ones(points.size) if prior is None else np.asarray(prior, float)
    log_lik = -nll[best, points] / phi
    weights = prior * np.exp(log_lik - np.max(log_lik))
    joint = (prior * np.exp(-(nll - np.min(nll)) / phi)).sum(axis=1)  # [ceilings]
    return weights / np.sum(weights), phi, c[best, 0, 0], joint / np.sum(joint)


class LevelJob(NamedTuple):
    """One compiled call of the level: `lm.simulate_each` over `settings` for `steps` GRPO steps from `seed`.

    Attributes:
        settings: one dict of `lm.config`'s keyword arguments per run; one static structure, at least one.
        steps: GRPO steps per run; integer ≥ 1.
        seed: the runs' seed (`lm.simulate_each`'s `key`); integer in [0, 2³² − 1].
    """

    settings: list[dict]
    steps: int
    seed: int


def cached_runs_each(jobs: Sequence[LevelJob]) -> list[lm.Run]:
    """The runs of each job, kept in the SFT starts' cache folder (`models.lm.pretrain.cache_dir`) under a hash of
    the job and the level's source code: a second calibration on a log of the same shape skips the grid, and a
    what-if asked again skips its scenarios' runs. The jobs not in the cache are dealt over the local devices
    (`base.waiting.deal`: one thread per device, each taking the next job as it finishes one; on a CPU the command
    line makes one device per core): each job is one program on one device, so its runs are the same bits whatever
    the device or the other jobs. Ctrl-C stops the wait at once.

    Args:
        jobs: the `LevelJob`s.

    Returns:
        One `lm.Run` per job, in order, on the host (NumPy arrays, `params` None): every read-out float32
        [len(settings), steps], NaN from a run's divergence on, `diverged` and `diverged_step` [len(settings)].

    Raises:
        PgrpoSimError: as `lm.config` and `lm.simulate_each` (an invalid setting, steps or seed; every job is checked
            before any run), or `StartNotReached` (an SFT start; the starts are made, dealt the same way, before any
            run).
    """
    code = _code()
    paths = [_cache_path(job, code) for job in jobs]
    cached = [_cached(job, path) for job, path in zip(jobs, paths, strict=True)]
    runs = {i: run for i, run in enumerate(cached) if run is not None}
    todo = [i for i in range(len(jobs)) if i not in runs]
    configs = {i: [lm.config(**s) for s in jobs[i].settings] for i in todo}
    devices = jax.local_devices()
    # each SFT start made (trained, or read) once, dealt like the runs, before two jobs' lanes could race to make it
    starts = list(dict.fromkeys(
        (c.task, c.policy, c.start_accuracy, c.sft_seed, c.start_format) for c in (configs[i][0] for i in todo)
    ))  # fmt: skip

    def make_start(k: int, lane: int) -> None:
        with jax.default_device(devices[lane]):
            lm.pretrained_policy(*starts[k])

    deal(make_start, len(starts), len(devices))

    def work(k: int, lane: int) -> lm.Run:
        job = jobs[todo[k]]
        with jax.default_device(devices[lane]):
            run = lm.host_run(lm.run_arrays(lm.simulate_each(configs[todo[k]], job.steps, key=job.seed)))
        save_atomically(paths[todo[k]], lambda handle: np.savez(handle, **lm.run_arrays(run)))  # pyright: ignore[reportArgumentType]  # numpy stub: **arrays as allow_pickle
        return run

    runs.update(zip(todo, deal(work, len(todo), len(devices)), strict=True))
    return [runs[i] for i in range(len(jobs))]


def _cache_path(job: LevelJob, code: str) -> Path:
    """Where the job's runs are kept: a hash of the job and `code` (`_code`)."""
    spec = dict(settings=job.settings, steps=job.steps, seed=job.seed, code=code)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_dir() / f"level-{digest}.npz"


def _cached(job: LevelJob, path: Path) -> lm.Run | None:
    """The job's runs from the cache file `path`; None when absent or unreadable (another code's file)."""
    try:
        with np.load(path) as saved:
            run = lm.host_run(saved)
        if np.shape(run.readouts["reward"]) == (len(job.settings), job.steps):
            return run
    except (OSError, ValueError, KeyError):
        pass
    return None


def _code() -> str:
    """A digest of the level's source (`models/lm/`, `models/grpo.py`): cached runs of older code are not reused."""
    root = Path(__file__).resolve().parent.parent / "models"
    digest = hashlib.sha256()
    for path in [*sorted((root / "lm").glob("*.py")), root / "grpo.py"]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
