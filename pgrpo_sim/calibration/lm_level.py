"""The language-model level as a calibration runs it: `Level` (its learning-rate grid, start formats, ceilings,
seeds and sizes) and the run-config keys it takes from a real run (`LEVEL_KEYS`), mapped onto the level's
`lm.config` settings (`level_settings`, `level_config`). `language_model` calibrates it on a log, `lm_scenarios`
answers what-ifs and forecasts on it (docs/lm.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from ..logs.monitors import grad_norm_spike
from ..models import lm
from .run_config import CS336_LOSS_TYPES, NO_CLIP_LOSSES, RunConfig

LM_KEYS = (
    "learning_rate",
    "num_iterations",
    "steps_per_generation",
    "epsilon",
    "epsilon_high",
    "beta",
    "loss_type",
    "num_generations",
)
"""Run-config keys whose change a what-if that chooses its level answers on the language-model level (the bandit
cannot collapse)."""
LEVEL_KEYS = (*LM_KEYS, "scale_rewards", "max_grad_norm", "lr_scheduler_type", "warmup_ratio", "max_steps")
"""Run-config keys the level takes from the run; a scenario may change only these."""


MAX_LEVEL_PROMPTS = 32
"""Most prompts per GRPO step the level takes from a run (`Level.prompts_for`): a cost bound (a level step's time
grows with its batch). A run with more is simulated with a noisier batch than its own, so its reuse edge comes
earlier on the level than in reality: a false alarm rather than a missed collapse."""

CALIBRATION_MODULUS = 50
"""The task's modulus m when the level answers for a log: its chance floor (a well-formed guess is right 1/m of the
time) must sit below the starts real runs begin from (0.02-0.05 on MATH). At the default m = 10 a guess scores 0.1:
a run that collapses to one answer gains over such a start, and the start's chance-corrected reward (≈ 0.01) cannot
be told from the 0 a collapsed run ends at, so no collapse was called (docs/anchor-study.md). At m = 50 a start of
0.03 keeps ≈ 0.027 of chance-corrected reward, which a fall to 0 resolves."""


@dataclasses.dataclass(frozen=True)
class Level:
    """How the level is run for a log.

    Attributes:
        prompts_per_step: the level's prompts per GRPO step; integer ≥ 1, or None: the real run's own, at most
            `MAX_LEVEL_PROMPTS` (`prompts_for`). A rollout's prompts set the sampling noise of each optimiser step
            (and its mini-batches' size), and reuse overfits that noise: on the level at its calibrated rate for the
            shared e1_tb256 run, 4 epochs per rollout fall from a peak of 0.50 to 0.18 at 16 prompts and from 0.66
            to 0.50 at the run's 32 (6 seeds each; docs/lm.md), so a batch of the level's own size moved its reuse
            edge, not the run's.
        lr_grid: the level learning rates tried first (AdamW); at least two, each > 0, increasing.
        start_formats: the starts' shares of well-formed demonstrations tried (those at least the start accuracy,
            `formats`); each in (0, 1].
        ceilings: the ceilings c tried, each grid point's likelihood profiled over them (the log's reward = c × the
            level's); shares in (0, 1].
        seeds: runs per grid point in the calibration; integer ≥ 2.
        refine: cells each coarse cell next to the posterior's best rate is split into, in log10 rate: that rate's
            neighbours in `lr_grid` are joined by `refine` − 1 further rates on each side, run at the start formats
            the coarse posterior gives a share of at least `REFINE_SHARE`; integer ≥ 1 (1: the coarse grid alone).
            The coarse cells are half a decade wide: a rate drawn uniformly in one spans a factor 1.8 either way,
            wider than the log says, and a reuse or learning-rate edge inside that cell was called with probability
            ≈ ½ whatever the log (docs/anchor-study.md).
        draws: runs per scenario (`scenario`), one per posterior draw; integer ≥ 1 (12: a collapse probability
            resolves steps of 1/12 < 0.1).
        sizes: further `lm.config` settings (task and model sizes, `sft_seed`); default the modulus
            `CALIBRATION_MODULUS`.
        fit_on_policy: the calibration's grid runs the run's on-policy twin (`fitted_run`: one optimiser step per
            rollout over the same prompts), and the scenarios run the run itself. An LLM's climb per rollout does
            not depend on its reuse (the MATH sweep's 4-epoch run climbs 0.87× and 1.07× as fast as its 1-epoch
            run at GRPO steps 3 and 7), the level's does (2.4-3.1×; docs/design.md §7a): fitted with its reuse,
            the level takes a lower rate to match a reuse run's climb, at which that reuse no longer breaks it.

    Raises:
        PgrpoSimError: `prompts_per_step`, `seeds`, `refine` or `draws` out of its range, fewer than two, a
            non-positive or an unordered learning rate in `lr_grid`, or `start_formats` empty or holding a share
            outside (0, 1].
    """

    prompts_per_step: int | None = None
    lr_grid: tuple[float, ...] = tuple(float(x) for x in np.geomspace(3e-5, 1e-2, 6))
    start_formats: tuple[float, ...] = (0.9, 0.3, 0.1)
    ceilings: tuple[float, ...] = tuple(float(x) for x in np.linspace(0.3, 1.0, 15))
    seeds: int = 3
    refine: int = 4
    draws: int = 12
    sizes: Mapping[str, object] = dataclasses.field(default_factory=lambda: {"modulus": CALIBRATION_MODULUS})
    fit_on_policy: bool = True

    def __post_init__(self):
        if self.prompts_per_step is not None:
            check_range("prompts_per_step", self.prompts_per_step, 1, integer=True)
        check_range("seeds", self.seeds, 2, integer=True)
        check_range("refine", self.refine, 1, integer=True)
        check_range("draws", self.draws, 1, integer=True)
        if len(self.lr_grid) < 2 or any(not (x > 0) for x in self.lr_grid) or any(np.diff(self.lr_grid) <= 0):
            raise PgrpoSimError(
                f"lr_grid must hold at least two positive learning rates in increasing order, got {self.lr_grid}"
            )
        if not self.start_formats or any(not (0 < f <= 1) for f in self.start_formats):
            raise PgrpoSimError(f"start_formats must hold shares in (0, 1], got {self.start_formats}")
        if not self.ceilings or any(not (0 < c <= 1) for c in self.ceilings):
            raise PgrpoSimError(f"ceilings must hold shares in (0, 1], got {self.ceilings}")

    def formats(self, start_accuracy: float) -> tuple[float, ...]:
        """The start formats a start of this accuracy can have (at least the accuracy; 1 when none is)."""
        return tuple(f for f in self.start_formats if f >= start_accuracy) or (1.0,)

    def fitted_run(self, run: RunConfig) -> RunConfig:
        """The run the calibration's grid simulates: with `fit_on_policy`, `run` at one optimiser step per rollout
        (num_iterations = steps_per_generation = 1; its prompts, schedule and the rest its own), else `run`."""
        if not self.fit_on_policy or run.steps_per_rollout == 1:
            return run
        return dataclasses.replace(run, num_iterations=1, steps_per_generation=1)

    def prompts_for(self, run: RunConfig) -> int:
        """The level's prompts per GRPO step for `run`: `prompts_per_step`, or the run's own capped at
        `MAX_LEVEL_PROMPTS` and rounded down to a multiple of its `steps_per_generation` (each mini-batch takes an
        equal share; at least one prompt each)."""
        if self.prompts_per_step is not None:
            return self.prompts_per_step
        prompts, share = min(run.prompts_per_step, MAX_LEVEL_PROMPTS), run.steps_per_generation
        return max(share, prompts - prompts % share)

    def refined_rates(self, best: int) -> tuple[float, ...]:
        """The rates the refinement adds around `lr_grid[best]` (`refine`), sorted: `refine` − 1 per side, evenly
        spaced in log10 up to each neighbour (none past the grid's ends)."""
        grid = np.log10(self.lr_grid)
        added = [
            grid[best] + k / self.refine * (grid[side] - grid[best])
            for side in (best - 1, best + 1) if 0 <= side < grid.size
            for k in range(1, self.refine)
        ]  # fmt: skip
        return tuple(float(x) for x in np.sort(10.0 ** np.asarray(added)))


REFINE_SHARE = 0.01
"""Least coarse-posterior share of a start format for the refinement to run it (`Level.refine`): the other formats
keep their coarse points, holding under 1 % of the posterior together per format."""

EDGE_STEPS_PER_ROLLOUT = 8
"""Optimiser steps per rollout from which a run is near the reuse edge (`near_edge`): the shared MATH sweep collapses
at 16 and the level degrades from 4 and collapses from 8 at its best rate (docs/lm.md)."""


def near_edge(run: RunConfig, log=None, fit_until: float | None = None) -> str | None:
    """Why a run sits near a collapse edge the bandit cannot follow, so that `forecast --model auto` answers on the
    language-model level; None when nothing says so. The rule: `EDGE_STEPS_PER_ROLLOUT` or more optimiser steps per
    rollout; reuse (more than one optimiser step per rollout) without a clip; or, in the log up to `fit_until`, a
    gradient-norm spike (`logs.monitors.grad_norm_spike`: a Z-score of 4 over the run so far).

    Args:
        run: the real run's config.
        log: the training log (its `grad_norm`, where it has one); None: settings only.
        fit_until: the fit window's last logged step; None: the log's last.

    Returns:
        One clause saying why, or None.
    """
    if run.steps_per_rollout >= EDGE_STEPS_PER_ROLLOUT:
        return f"{run.steps_per_rollout} optimiser steps per rollout (the edge nears from {EDGE_STEPS_PER_ROLLOUT})"
    if run.steps_per_rollout > 1 and (run.loss_type in NO_CLIP_LOSSES or run.epsilon is None):
        return "rollouts reused without a clip"
    if log is not None and "grad_norm" in log:
        until = float(np.max(log["step"])) if fit_until is None else float(fit_until)
        spike = grad_norm_spike(log, until)
        if spike.available and spike.collapse:
            return f"a gradient-norm spike in the fit window ({spike.detail})"
    return None


def level_config(*args, **kwargs) -> lm.Config:
    """The level's validated `lm.Config`: `lm.config(**level_settings(...))`, for the same arguments.

    Args:
        *args: `level_settings`' positional arguments.
        **kwargs: its keyword arguments.

    Returns:
        The validated `lm.Config`.

    Raises:
        PgrpoSimError: a setting the level cannot take, e.g. mini-batches that do not divide its batch.
    """
    return lm.config(**level_settings(*args, **kwargs))


def level_settings(
    run: RunConfig,
    level_lr: float,
    start_accuracy: float,
    level: Level,
    schedule_steps: int,
    start_format: float = 0.9,
) -> dict:
    """`lm.config`'s keyword arguments for `run` at level learning rate `level_lr` from a start of `start_accuracy`
    and `start_format`, not yet validated (`level_config` validates them).

    Args:
        run: the real run's config; the level takes its `LEVEL_KEYS` settings except the learning rate (CS336 loss
            names as `CS336_LOSS_TYPES`, no clip for the no-clip losses).
        level_lr: the level's peak AdamW learning rate; > 0.
        start_accuracy: the SFT start's target accuracy; in (0, 0.95], ≤ `start_format`.
        level: how the level is run: its prompts per GRPO step and `sizes`.
        schedule_steps: the run's schedule length in the level's GRPO steps (the run's `max_steps`, or the log's
            length, mapped by `Calibration.schedule_steps`): the level's `max_steps` is its optimiser steps
            (× `run.steps_per_rollout`) and its warm-up `run.warmup_ratio` of them, as TRL lays the schedule over
            the whole run whatever the simulated window; integer ≥ 1.
        start_format: the start's share of well-formed demonstrations; in (0, 1].

    Returns:
        Setting → value: `lm.config`'s keyword arguments (`warmup_steps` and `max_steps` in optimiser steps),
        `level.sizes` included.
    """
    check_range("schedule_steps", schedule_steps, 1, integer=True)
    optimiser_steps = int(schedule_steps) * run.steps_per_rollout
    no_clip = run.loss_type in NO_CLIP_LOSSES or run.epsilon is None
    settings = dict(
        learning_rate=level_lr,
        num_generations=run.num_generations,
        prompts_per_step=level.prompts_for(run),
        num_iterations=run.num_iterations,
        steps_per_generation=run.steps_per_generation,
        loss_type=CS336_LOSS_TYPES.get(run.loss_type, run.loss_type),
        scale_rewards=run.scale_rewards,
        epsilon=None if no_clip else run.epsilon,
        epsilon_high=None if no_clip else run.epsilon_high,
        beta=run.beta,
        max_grad_norm=run.max_grad_norm,
        lr_scheduler_type=run.lr_scheduler_type,
        warmup_steps=run.warmup_steps(optimiser_steps),  # ⌈ratio × steps⌉, as transformers
        max_steps=optimiser_steps,
        start_accuracy=start_accuracy,
        start_format=start_format,
        **level.sizes,
    )
    return settings
