"""Four failure-mode read-outs of a GRPO run, from a real log (`TrainingLog`) or a simulation (`bandit.Run`).

Each read-out is a time series with a threshold and a flag; a flag fires when its condition holds on
`PERSIST` consecutive points (its `first_step` is the first of them), except a non-finite value, which
fires at once. Series are smoothed by a trailing (causal) moving average, or median, of w points (default
`laws.smoothing_window(n)`, about n/25), so that a flag's onset barely depends on later data (only the noise
scale and the reward range are whole-run quantities); "baseline" is the mean (median for gradient norm and
policy KL) of the first w points. Thresholds are fixed, not tuned per run: the module constants below.

- reward hacking: coupling ρ(t) = Δeval/Δtrain (`coupling.coupling_ratio`, window: the larger of w train steps
  and 8 eval intervals) between the eval (or true) reward and the trained reward. Fires where the trained
  reward rises (slope > 2 standard errors and by ≥ 2 % of its range over the window) while
  ρ + 2·se(ρ) < `HACKING_FRACTION` × the best coupling seen so far (or < 0 if ρ was never positive): the
  eval reward stopped following the trained one. Needs an eval or true reward with ≥ 5 points.
- advantage degeneracy: the smoothed fraction of groups whose rewards are all equal (zero advantage, no
  gradient). Fires at ≥ `DEGENERACY_LEVEL`: at least half the groups carry no learning signal.
- policy concentration: smoothed entropy over its baseline. Fires at ≤ `CONCENTRATION_LEVEL`: the policy
  lost three quarters of its entropy. Needs an entropy with a positive baseline.
- dynamical instability: a score, the largest of these indicators each divided by its threshold (fires at
  ≥ 1): moving median of the gradient norm over its baseline median (`BLOWUP_FACTOR`), same for the
  per-update policy KL; moving median of the max IS ratio minus 1 (`RATIO_DRIFT`); smoothed clip fraction
  (`CLIP_LEVEL`); and the number of reversals of the reward (`REVERSALS`) averaged over w/4 points,
  counting a reversal when it moves against its direction by more than a quarter of its range so far and
  more than `REVERSAL_NOISE` noise standard errors of that average (on white noise of 250–1000 points this
  never reached 3 reversals in 300 trials per length; at 6 standard errors it did in ~1 %). A non-finite
  reward (NaN or ±inf: `TrainingLog.blowup_steps`; text such as "n/a" is missing data) or an infinite gradient
  norm fires at once. The KL to the reference is not used:
  it grows in every run that learns.

Limits, stated: a run that leaves a vanishing-gradient start (a degenerate one, once it takes off) can show a
tenfold gradient-norm rise that reads as a blow-up, after the degeneracy flag; the reversal count cannot
tell a limit cycle from an oscillation that decays slower than ζ ≈ 0.15 (successive swings shrinking by less
than a factor 0.63); real-log noise is estimated from second differences, which assumes independent
per-step noise.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..base.checks import check_range
from ..base.errors import PgrpoSimError
from .coupling import coupling_ratio
from .laws import smooth, smoothing_window
from .readers import TrainingLog, from_run

if TYPE_CHECKING:  # a run is converted by `from_run`, which reads it by name: no need to load the bandit (optax)
    from ..models import bandit

PERSIST = 3
"""Consecutive points a condition must hold for to fire."""
HACKING_FRACTION = 0.1
"""Hacking: coupling below this fraction of its best value so far."""
DEGENERACY_LEVEL = 0.5
"""Degeneracy: smoothed zero-std group fraction at or above this."""
CONCENTRATION_LEVEL = 0.25
"""Concentration: smoothed entropy at or below this fraction of its baseline."""
BLOWUP_FACTOR = 10.0
"""Instability: moving-median gradient norm (or policy KL) at this multiple of its baseline."""
RATIO_DRIFT = 1.0
"""Instability: moving-median max IS ratio at 1 + this (the policy doubled an action's probability)."""
CLIP_LEVEL = 0.2
"""Instability: smoothed clip fraction at or above this."""
REVERSALS = 3
"""Instability: this many reversals of the smoothed reward (a sustained oscillation)."""
REVERSAL_NOISE = 8.0
"""Instability: a reversal must exceed this many noise standard errors of the averaged reward."""
FAILURE_MODES = ("hacking", "degeneracy", "concentration", "instability")
"""The failure modes `diagnose` reads from a log, in report order."""

PROVOKED = {
    # the proxy pays 1 for a "hack" arm that is wrong, 0.8 for the truly correct arm: both gain at first, then
    # mass moves from the correct arm to the hack arm and the true reward falls while the proxy keeps rising
    "hacking": dict(
        rewards=[0.8, 1.0, 0, 0, 0, 0],
        true_rewards=[1.0, 0, 0, 0, 0, 0],
        learning_rate=0.1,
        beta=0.1,
        num_generations=8,
    ),
    # p_ref = 0.01 with G = 4: 96 % of groups are all-wrong and carry no gradient
    "degeneracy": dict(n_arms=10, n_correct=1, p_ref=0.01, learning_rate=0.1, beta=0.1, num_generations=4),
    # β = 0: nothing holds the policy near the reference; one arm takes all the mass
    "concentration": dict(n_arms=10, n_correct=1, p_ref=0.1, learning_rate=0.1, beta=0.0, num_generations=16),
    # τ = 4 beyond the critical lag τ* = 2.13 (predict: C = −0.40, Floquet radius 1.05): a large limit cycle
    "instability": dict(
        n_arms=10, n_correct=1, p_ref=0.1, learning_rate=2.0, beta=0.5, lag_model="stale", lag=4, num_generations=16
    ),
}
"""`bandit.config` arguments of one bandit run that provokes each failure mode (600 steps)."""


@dataclasses.dataclass(frozen=True)
class Readout:
    """One failure-mode read-out: `value` (NaN where undefined) and `threshold` per `steps`; `flag` and its
    `first_step` (None if it never fires); `available` False when the log lacks the metrics (`detail` says
    which); `rule` states the firing condition; `detail` also names the indicator that fired.

    Attributes:
        name: the read-out, one of `FAILURE_MODES`.
        steps: where the series is defined; shape (S,); optimiser steps (hacking: the eval steps; degeneracy and
            concentration: the steps with a finite metric; instability, or an unavailable read-out: every row).
        value: the read-out; shape (S,); dimensionless (hacking: ρ, eval-reward change per train-reward change;
            degeneracy: a fraction in [0, 1]; concentration: entropy over its baseline; instability: the score).
        threshold: the level `value` is compared with; shape (S,); the unit of `value`.
        flag: whether the read-out fired.
        first_step: the step at which it fired; optimiser steps; None if it never fired.
        available: False when the log lacks the metrics the read-out needs.
        rule: the firing condition, one line.
        detail: what is missing, the source column read, or the indicator that fired.
    """

    name: str
    steps: np.ndarray
    value: np.ndarray
    threshold: np.ndarray
    flag: bool
    first_step: float | None
    available: bool
    rule: str
    detail: str

    def as_dict(self) -> dict:
        """JSON-ready flag, onset, availability and rule (not the series)."""
        keys = ("flag", "first_step", "available", "rule", "detail")
        return {k: getattr(self, k) for k in keys}


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The four read-outs of one run.

    Attributes:
        hacking: the reward-hacking `Readout` (`reward_hacking`).
        degeneracy: the advantage-degeneracy `Readout` (`advantage_degeneracy`).
        concentration: the policy-concentration `Readout` (`policy_concentration`).
        instability: the dynamical-instability `Readout` (`dynamical_instability`).
    """

    hacking: Readout
    degeneracy: Readout
    concentration: Readout
    instability: Readout

    @property
    def readouts(self) -> tuple[Readout, ...]:
        """The four read-outs, in `FAILURE_MODES` order."""
        return tuple(getattr(self, name) for name in FAILURE_MODES)

    def flags(self) -> dict[str, bool]:
        """Read-out name → whether it fired."""
        return {r.name: r.flag for r in self.readouts}

    def first(self) -> str | None:
        """Name of the read-out that fires first (None if none fires; the earlier-listed one on a tie)."""
        fired = {r.name: r.first_step for r in self.readouts if r.first_step is not None}  # set exactly when it fires
        return min(fired, key=fired.__getitem__) if fired else None

    def as_dict(self) -> dict:
        """JSON-ready: the first read-out to fire (`first`) and each read-out's `Readout.as_dict`."""
        return dict(first=self.first(), **{r.name: r.as_dict() for r in self.readouts})


def diagnose(source: TrainingLog | bandit.Run, *, window: int | None = None) -> Diagnosis:
    """All four read-outs of a `TrainingLog` or a `bandit.Run` (converted by `logs.from_run`), smoothing over
    `window` points (default `laws.smoothing_window` of the number of rows).

    Args:
        source: a `TrainingLog`, or a `bandit.Run` (expected or sampled; a sampled run is averaged over seeds).
        window: smoothing window; points (rows of the log); integer ≥ 1; None: `laws.smoothing_window(rows)`.

    Returns:
        `Diagnosis`.

    Raises:
        PgrpoSimError: `window` is not an integer ≥ 1, or `source` is neither a `TrainingLog` nor a `bandit.Run`
            (e.g. a path).
    """
    check_range("window", window, 1, integer=True)
    if isinstance(source, (str, Path)) or source is None:
        raise PgrpoSimError(
            "source must be a TrainingLog or a ps.bandit.Run (read a file with read_log(path)), got "
            f"{type(source).__name__}"
        )
    log = source if isinstance(source, TrainingLog) else from_run(source)
    w = int(window) if window is not None else smoothing_window(len(log))
    readouts = (reward_hacking, advantage_degeneracy, policy_concentration, dynamical_instability)
    return Diagnosis(*(readout(log, w) for readout in readouts))


def reward_hacking(log: TrainingLog, window: int) -> Readout:
    """Coupling ρ(t) between the eval (or true) reward and the trained reward; see the module docstring.

    Args:
        log: the run, with `reward` and `true_reward` or `eval_reward` (≥ 5 finite points), else unavailable.
        window: smoothing window; points (rows of the log); integer ≥ 1 (`diagnose` checks it and sets the default).

    Returns:
        The "hacking" `Readout`, per eval step.
    """
    rule = f"train reward rising and ρ + 2se < {HACKING_FRACTION:g} × best ρ so far (0 if never positive)"
    name = "true_reward" if "true_reward" in log else "eval_reward"
    if name not in log:
        return _unavailable("hacking", log, rule, "needs eval_reward or true_reward")
    ts, train = log.series("reward")
    es, ev = log.series(name)
    if es.size < 5:
        return _unavailable("hacking", log, rule, f"{name} has fewer than 5 points (a slope needs them)")
    dt_train = np.median(np.diff(ts)) if ts.size > 1 else 1.0
    dt_eval = np.median(np.diff(es))
    c = coupling_ratio(ts, train, es, ev, window=max(window * dt_train, 8 * dt_eval))
    rising = (c.train_slope > 2 * c.train_slope_stderr) & (c.train_slope * c.window >= 0.02 * np.ptp(train))
    best = np.maximum.accumulate(np.where(rising & np.isfinite(c.ratio), c.ratio, -np.inf))
    threshold = HACKING_FRACTION * np.maximum(best, 0.0)
    fired = rising & (c.ratio + 2 * c.stderr < threshold)
    return _readout("hacking", c.steps, c.ratio, threshold, fired, rule, f"coupling of {log.sources.get(name, name)}")


def advantage_degeneracy(log: TrainingLog, window: int) -> Readout:
    """Smoothed fraction of zero-std (all-equal reward) groups; see the module docstring.

    Args:
        log: the run, with `zero_std_frac`, else unavailable.
        window: smoothing window; points (rows of the log); integer ≥ 1 (`diagnose` checks it and sets the default).

    Returns:
        The "degeneracy" `Readout`, per step with a finite `zero_std_frac`.
    """
    rule = f"smoothed zero-std group fraction >= {DEGENERACY_LEVEL:g}"
    if "zero_std_frac" not in log:
        return _unavailable("degeneracy", log, rule, "needs zero_std_frac")
    steps, z = log.series("zero_std_frac")
    value = smooth(z, window, trailing=True)
    threshold = np.full(steps.size, DEGENERACY_LEVEL)
    return _readout("degeneracy", steps, value, threshold, value >= threshold, rule, log.sources["zero_std_frac"])


def policy_concentration(log: TrainingLog, window: int) -> Readout:
    """Smoothed entropy relative to its baseline; see the module docstring.

    Args:
        log: the run, with `entropy` whose baseline is positive, else unavailable.
        window: smoothing window; points (rows of the log); integer ≥ 1 (`diagnose` checks it and sets the default).

    Returns:
        The "concentration" `Readout`, per step with a finite `entropy`.
    """
    rule = f"smoothed entropy <= {CONCENTRATION_LEVEL:g} × its baseline"
    if "entropy" not in log:
        return _unavailable("concentration", log, rule, "needs entropy")
    steps, h = log.series("entropy")
    baseline = np.mean(h[:window]) if h.size else 0.0
    if not baseline > 0:
        return _unavailable("concentration", log, rule, "entropy baseline is not positive (not measured?)")
    value = smooth(h, window, trailing=True) / baseline
    threshold = np.full(steps.size, CONCENTRATION_LEVEL)
    return _readout("concentration", steps, value, threshold, value <= threshold, rule, log.sources["entropy"])


def dynamical_instability(log: TrainingLog, window: int) -> Readout:
    """Instability score: the largest indicator over its threshold; see the module docstring.

    Args:
        log: the run; uses `reward` and whichever of `grad_norm`, `policy_kl`, `ratio_max`, `clip_frac` it has.
        window: smoothing window; points (rows of the log); integer ≥ 1 (`diagnose` checks it and sets the default).

    Returns:
        The "instability" `Readout`, per row of the log (threshold 1).
    """
    rule = (
        f"max of grad-norm/baseline÷{BLOWUP_FACTOR:g}, policy-KL/baseline÷{BLOWUP_FACTOR:g}, "
        f"(IS ratio−1)÷{RATIO_DRIFT:g}, clip frac÷{CLIP_LEVEL:g}, reward reversals÷{REVERSALS} >= 1"
    )
    steps = log["step"]
    indicators: dict[str, np.ndarray] = {}
    for name in ("grad_norm", "policy_kl"):
        if name in log:
            median = _trailing_median(log[name], window)
            baseline = np.nanmedian(log[name][:window])
            if baseline > 0:
                indicators[f"{name} blow-up"] = median / baseline / BLOWUP_FACTOR
    if "ratio_max" in log:
        indicators["IS-ratio drift"] = (_trailing_median(log["ratio_max"], window) - 1) / RATIO_DRIFT
    if "clip_frac" in log:
        indicators["clip fraction"] = _smooth_nan(log["clip_frac"], window) / CLIP_LEVEL
    reward = log["reward"]
    ok = np.isfinite(reward)
    reversals = np.full(steps.size, np.nan)
    reversals[ok] = _reversals(reward[ok], max(1, window // 4))
    indicators["reward reversals"] = reversals / REVERSALS
    stacked = np.vstack(list(indicators.values()))
    with np.errstate(invalid="ignore"):
        score = np.nanmax(np.where(np.isnan(stacked), -np.inf, stacked), axis=0)
    score[~np.isfinite(score) & (score < 0)] = np.nan
    now = np.where(np.isinf(log["grad_norm"]))[0] if "grad_norm" in log else np.zeros(0, int)
    skipped = log.blowup_steps  # a NaN or infinite reward, not a text cell ("n/a"): that is missing data
    fired = score >= 1
    out = _readout("instability", steps, score, np.ones(steps.size), fired, rule, "")
    immediate = [float(steps[now[0]])] if now.size else []
    immediate += [float(skipped[0])] if skipped.size else []
    if immediate and (out.first_step is None or min(immediate) < out.first_step):
        why = "non-finite reward or infinite gradient norm"
        return dataclasses.replace(out, flag=True, first_step=min(immediate), detail=why)
    if out.first_step is not None:  # it fired
        i = int(np.searchsorted(steps, out.first_step))
        best = max(indicators, key=lambda k: np.nan_to_num(indicators[k][i : i + PERSIST].min(), nan=-np.inf))
        return dataclasses.replace(out, detail=best)
    return dataclasses.replace(out, detail="indicators: " + ", ".join(indicators))


# ---------------------------------------------------------------------------------------------- helpers


def _readout(name, steps, value, threshold, fired, rule, detail) -> Readout:
    fired = np.asarray(fired, bool)
    held = fired[:0]
    if fired.size >= PERSIST:
        held = np.convolve(fired.astype(int), np.ones(PERSIST, int), "valid") == PERSIST
    first = float(steps[np.argmax(held)]) if held.any() else None
    return Readout(name, steps, value, threshold, first is not None, first, True, rule, detail)


def _unavailable(name, log, rule, why) -> Readout:
    nan = np.full(len(log), np.nan)
    return Readout(name, log["step"], nan, nan, False, None, False, rule, why)


def _smooth_nan(values, window):
    """Trailing moving average of the finite values (NaN gaps stay NaN)."""
    v = np.asarray(values, float)
    out = np.full(v.size, np.nan)
    ok = np.isfinite(v)
    out[ok] = smooth(v[ok], window, trailing=True)
    return out


def _trailing_median(values, window):
    """Median of the finite values among the `window` points ending at each point (fewer at the start)."""
    v = np.asarray(values, float)
    out = np.full(v.size, np.nan)
    for i in range(v.size):
        chunk = v[max(0, i - window + 1) : i + 1]
        if np.isfinite(chunk).any():
            out[i] = np.nanmedian(chunk)
    return out


def _reversals(reward: np.ndarray, window: int) -> np.ndarray:
    """Running count of reversals (zigzag) of the reward's trailing average over `window` points: a move
    against the current direction by more than max(¼ of the range so far, `REVERSAL_NOISE` noise standard
    errors σ/√window). Noise from second differences, σ² = mean((Δ²r)²)/6 for independent per-step noise."""
    s = smooth(reward, window, trailing=True)
    sigma = np.sqrt(np.mean(np.diff(reward, 2) ** 2) / 6) if reward.size > 2 else 0.0
    floor = REVERSAL_NOISE * sigma / np.sqrt(window)
    count = np.zeros(s.size)
    direction, extreme, lo, hi, n = 0, s[0], s[0], s[0], 0
    for i, x in enumerate(s):
        lo, hi = min(lo, x), max(hi, x)
        step = max(0.25 * (hi - lo), floor)
        if (direction >= 0 and x > extreme) or (direction <= 0 and x < extreme):
            extreme = x
        if direction == 0 and abs(x - s[0]) > step:
            direction, extreme = (1 if x > s[0] else -1), x
        elif direction != 0 and direction * (extreme - x) > step:
            direction, extreme, n = -direction, x, n + 1
        count[i] = n
    return count
