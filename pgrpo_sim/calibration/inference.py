"""Calibrate the population bandit on a real log, and forecast it with a band.

Likelihood: every observable the model predicts and the log has (`model.OBSERVABLES`; reward always) is
Gaussian about the model's batch mean with the batch's sampling variance φ·v_t (`model.Observables`), where the
overdispersion φ ≥ 1 is the fitted reduced χ² (real runs are noisier than a batch of P × G Bernoulli draws, and
the bandit is not an LLM: φ carries both). Weak Gaussian priors on θ (`PRIOR_MEAN`, `PRIOR_SD`) keep the
maximum a posteriori (MAP) finite when the log does not constrain a direction. The MAP is found by
`optimistix.BFGS` from the best `STARTS` points of a grid (`vmap`); the uncertainty is the Laplace
approximation, covariance φ·H⁻¹ at the MAP (H the Hessian of the negative log posterior, by `jax.hessian`), which
for four smooth parameters is accurate enough and costs a few gradients (NUTS would cost thousands of
simulations per calibration; the coverage test checks the bands it gives). A
parameter whose posterior sd exceeds `UNDETERMINED` × its prior sd is reported as undetermined: the log does not
move it much from the prior.

Forecast band: draws of θ from the Laplace posterior, each simulated, plus one batch's sampling noise
(φ_o·v_t, φ_o the observable's own overdispersion) per draw; `band` is the central interval of that predictive
distribution.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ..base.checks import check_choice, check_range, check_seed
from ..base.errors import PgrpoSimError
from ..base.progress import Progress, report
from ..base.sharding import pad_to_devices, shard_batch
from ..logs.readers import TrainingLog, check_log
from ..models import bandit
from .model import (
    AFFINE_PARAMETERS,
    OBSERVABLES,
    PARAMETERS,
    TRL_FORMATS,
    LogReading,
    PopulationModel,
    population_model,
    population_observables,
)
from .run_config import RunConfig, check_run_config

PRIOR_SD = np.array([3.0, 1.5, 4.0, 2.0])
"""Prior sd of θ: μ (logit), log σ, log s (a factor e⁴ ≈ 55 per sd on the step scale), logit c."""
UNDETERMINED = 0.5
"""A parameter is undetermined when its posterior sd exceeds this fraction of its prior sd."""
REWARD_MAPS = ("scale", "affine", "auto")
"""How a log's reward is read (`calibrate`): reward / reward_scale is the success rate, or a + b × it."""
OVERDISPERSION_Z = 3.0
"""An observable keeps its own φ only when it differs from the pooled one by more than this many standard errors."""
MIN_POINTS = 10
"""Fewest rewarded steps a calibration window may have."""
DRAWS = 200
"""Posterior draws behind a band."""
STARTS = 2
"""BFGS runs, from the best points of a 30-point grid of θ (scored by forward runs only)."""
MAX_STEPS = 150
"""BFGS iterations per start."""
STATIONARY_SE = 0.1
"""The MAP counts as a stationary point when the Newton step from it (to the minimum of the posterior's quadratic
model there) is at most this many standard errors in every parameter. Otherwise BFGS stopped at a kink or on a
slope (the clipped surrogate makes the posterior piecewise smooth) and the Laplace standard errors describe that
point, not a mode."""


def prior_mean(run: RunConfig) -> np.ndarray:
    """μ = 0 (p = ½), σ = 1, s such that the bandit's step is 0.3 at the run's learning rate, c = 5 %.

    Args:
        run: the run's configuration (`RunConfig`); its `learning_rate` sets log s.

    Returns:
        The prior mean of θ (`PARAMETERS` order); float64 (4,).
    """
    return np.array([0.0, 0.0, math.log(0.3 / run.learning_rate), math.log(0.05 / 0.95)])


def affine_prior(reward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prior mean and sd of (a, log b) for a reward read as a + b·p, from the logged rewards r themselves (their
    units are the log's): a about min r, b about twice the range of r (a batch's success rate spans about half of
    [0, 1] in a run), both weak — a's sd five ranges, log b's 2 (a factor e² ≈ 7).

    Args:
        reward: the logged rewards of the fit window; (n,), n ≥ 1; the log's units.

    Returns:
        (mean, sd) of (a, log b); each float64 (2,); a in the log's units, log b dimensionless.
    """
    spread = max(float(np.ptp(reward)), 1e-3)
    return np.array([float(np.min(reward)), math.log(2 * spread)]), np.array([5 * spread, 2.0])


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A calibrated model: θ̂ (MAP), its Laplace covariance (φ included), φ, the observables used, the fit window.

    `steps` are the log's steps of the fit window; `first_step` the log's first step (model step 0). The pooled φ
    scales the covariance; `overdispersions` holds each observable's own (its reduced χ², at least 1, where it
    differs from the pooled φ beyond its noise; else the pooled φ), which scales its band's batch noise, so that one
    observable's misfit does not widen another's band. `parameters`
    names θ's entries and `prior_sd` their prior sd: `PARAMETERS`, plus `AFFINE_PARAMETERS` when the log's reward
    is read as an affine map of the success rate (`model` module docstring).

    Attributes:
        model: the `PopulationModel` of the fit window (model steps 0 … its last); `with_model` swaps it.
        theta: θ̂, the MAP; float64 (k,), k = len(parameters), 4 or 6; unconstrained (`PARAMETERS`).
        covariance: the Laplace covariance of θ, φ·H⁻¹; float64 (k, k).
        overdispersion: φ, the pooled reduced χ² of the fit; ≥ 1.
        used: the observables fitted (`model.OBSERVABLES` names), reward first.
        skipped: observable name → why it was not fitted.
        first_step: the log's first rewarded step (model step 0), in the log's steps.
        fit_until: the fit window's last step, in the log's steps.
        n_points: rewarded steps in the fit window.
        log_format: the log's `TrainingLog.format`.
        map_offset: the Newton step from the MAP, in standard errors, largest over the parameters; ≥ 0.
        overdispersions: observable name → its own φ (≥ 1), or the pooled one (`own_overdispersion`).
        parameters: θ's entry names, length k.
        prior_sd: θ's prior sd; (k,), in θ's units.
    """

    model: PopulationModel
    theta: np.ndarray
    covariance: np.ndarray
    overdispersion: float
    used: tuple[str, ...]
    skipped: dict[str, str]
    first_step: float
    fit_until: float
    n_points: int
    log_format: str
    map_offset: float
    overdispersions: dict[str, float] = dataclasses.field(default_factory=dict)
    parameters: tuple[str, ...] = PARAMETERS
    prior_sd: np.ndarray = dataclasses.field(default_factory=lambda: PRIOR_SD)

    def overdispersion_of(self, observable: str) -> float:
        """φ of one observable's own residuals (the batch noise of its band is scaled by it); the pooled
        `overdispersion` where it was not fitted.

        Args:
            observable: a `model.OBSERVABLES` name.

        Returns:
            φ, ≥ 1.
        """
        return self.overdispersions.get(observable, self.overdispersion)

    @property
    def affine(self) -> bool:
        """Whether the log's reward is read as a + b·p (θ's last two entries)."""
        return len(self.parameters) > len(PARAMETERS)

    @property
    def reward_bounds(self) -> tuple[float, float]:
        """The range of the log's reward the model allows, at the MAP: [0, reward_scale], or [a, a + b]."""
        if self.affine:
            return float(self.theta[4]), float(self.theta[4] + np.exp(self.theta[5]))
        return 0.0, float(self.model.run.reward_scale)

    @property
    def stationary(self) -> bool:
        """Whether the MAP is a stationary point: the Newton step from it, in standard errors, is at most
        `STATIONARY_SE` in every parameter."""
        return self.map_offset <= STATIONARY_SE

    @property
    def stderr(self) -> np.ndarray:
        """θ's posterior standard errors, √diag(covariance); float64 (k,)."""
        return np.sqrt(np.diag(self.covariance))

    @property
    def undetermined(self) -> tuple[str, ...]:
        """Names of the parameters whose stderr exceeds `UNDETERMINED` × their prior sd (the log leaves them)."""
        return tuple(
            n
            for n, se, p in zip(self.parameters, self.stderr, self.prior_sd, strict=True)
            if not se <= UNDETERMINED * p
        )

    def with_model(self, model: PopulationModel) -> Calibration:
        """The same θ̂ and covariance on another model (a scenario or a longer horizon).

        Args:
            model: the `PopulationModel` to put in place of `model`.

        Returns:
            A copy of this `Calibration` with that model.
        """
        return dataclasses.replace(self, model=model)

    def as_dict(self) -> dict:
        """JSON-ready summary: parameters (value, stderr, undetermined), their meaning in the run's units."""
        theta, se = self.theta, self.stderr
        params = {
            name: dict(value=float(v), stderr=float(s), undetermined=name in self.undetermined)
            for name, v, s in zip(self.parameters, theta, se, strict=True)
        }
        affine = dict(reward_offset=float(theta[4]), reward_gain=float(np.exp(theta[5]))) if self.affine else {}
        return dict(
            parameters=params,
            derived=dict(
                initial_success_median=float(1 / (1 + math.exp(-theta[0]))),
                difficulty_spread_logit=float(math.exp(theta[1])),
                step_scale=float(math.exp(theta[2])),
                bandit_step=float(math.exp(theta[2]) * self.model.run.learning_rate),
                unsolvable_fraction=float(1 / (1 + math.exp(-theta[3]))),
                **affine,
            ),
            reward_map="affine: reward = reward_offset + reward_gain × success rate" if self.affine else "scale",
            overdispersion=self.overdispersion,
            overdispersion_by_observable=dict(self.overdispersions),
            map_offset_se=self.map_offset,
            stationary=self.stationary,
            observables_used=list(self.used),
            observables_skipped=dict(self.skipped),
            fit_window=dict(first_step=self.first_step, fit_until=self.fit_until, points=self.n_points),
            log_format=self.log_format,
            run_config=self.model.run.as_dict(),
            model=dict(prompts=self.model.prompts, optimizer_steps_per_logged=self.model.optimizer_steps_per_logged),
        )


def model_steps(steps: np.ndarray, first_step: float) -> np.ndarray:
    """The model's step indices of the log's `steps` (≥ `first_step`, model step 0): one per logged step, so the
    steps must lie a whole number of steps apart (`PgrpoSimError` otherwise: fractional steps have no model step).

    Args:
        steps: the log's steps; (n,); ≥ `first_step`.
        first_step: the log's step that is model step 0.

    Returns:
        Model step indices, steps − first_step; int (n,).

    Raises:
        PgrpoSimError: a step is not a whole number of steps after `first_step` (beyond 10⁻⁶).
    """
    offset = np.asarray(steps, float) - first_step
    whole = np.round(offset)
    if np.any(np.abs(offset - whole) > 1e-6):
        bad = np.asarray(steps)[np.abs(offset - whole) > 1e-6][0]
        raise PgrpoSimError(
            f"the log's step {bad:g} is not a whole number of steps after its first step {first_step:g}"
        )
    return whole.astype(int)


def fit_data(log: TrainingLog, run: RunConfig, fit_until: float | None, *, affine: bool = False):
    """The fit window's observables as {name: (model step index, value)} and which were skipped, why. `affine`: the
    reward is read as a + b·p, so its values stay in the log's units (else they are divided by reward_scale and
    must lie in [0, 1]).

    Args:
        log: the training log (`TrainingLog`).
        run: the run's configuration (`RunConfig`); its `reward_scale` divides the rewards unless `affine`.
        fit_until: the window's last step (the log's steps), within the rewarded steps; None: the last one.
        affine: whether the reward is read as a + b·p.

    Returns:
        (first, until, used, skipped): the log's first rewarded step (model step 0) and the window's last step;
        {name: (model step indices int (n,), values (n,))} of the observables in the window, reward first; and
        {name: why it was skipped}.

    Raises:
        PgrpoSimError: the log has no reward, `fit_until` is out of range, the window has fewer than `MIN_POINTS`
            rewarded steps, a step is fractional (`model_steps`), or (not `affine`) rewards / reward_scale leave
            [0, 1].
    """
    if "reward" not in log or log.series("reward")[0].size == 0:
        raise PgrpoSimError("the log has no reward to calibrate on")
    steps = log.series("reward")[0]
    first = float(steps[0])  # the first rewarded step is the start θ_0 (a log may open with an eval-only row)
    check_range("fit_until", fit_until, float(steps[0]), float(steps[-1]))
    until = float(steps[-1]) if fit_until is None else float(fit_until)
    used, skipped = {}, {}
    for name in OBSERVABLES:
        if name not in log:
            skipped[name] = "not in the log"
            continue
        if name == "reward_std" and log.format not in TRL_FORMATS:
            skipped[name] = "this format's reward_std is not TRL's mean within-group std"
            continue
        t, v = log.series(name)
        keep = (t >= first) & (t <= until)  # a value logged before the first reward has no model step
        t, v = t[keep], v[keep]
        if name != "zero_std_frac" and not affine:
            v = v / run.reward_scale
        if t.size:
            used[name] = (model_steps(t, first), v)
    for name in ("entropy", "kl", "clip_frac"):
        if name in log:
            skipped[name] = "an LLM's per-token value has no scale in the bandit"
    if "reward" not in used or used["reward"][0].size < MIN_POINTS:
        n = 0 if "reward" not in used else used["reward"][0].size
        raise PgrpoSimError(
            f"the log has {n} rewarded steps up to step {until:g}; calibration needs at least {MIN_POINTS}"
        )
    r = used["reward"][1]
    if not affine and (np.any(r < -1e-9) or np.any(r > 1 + 1e-9)):
        raise PgrpoSimError(
            f"rewards/reward_scale lie in [{r.min():.3g}, {r.max():.3g}], not [0, 1]: set reward_scale in the "
            "run config to the reward of a fully correct completion"
        )
    return first, until, used, skipped


def _chi2_terms(theta, config: bandit.Config, reading: LogReading, data: dict) -> dict:
    """Per observable: (weighted squared standardised residuals, weighted log variances); weight 0 is padding."""
    obs = population_observables(config, reading, theta)
    out = {}
    for name, (idx, value, weight) in data.items():
        var = jnp.maximum(obs.var(name)[idx], 1e-8)
        out[name] = (weight * (value - obs.mean(name)[idx]) ** 2 / var, weight * jnp.log(var))
    return out


@functools.partial(jax.jit, static_argnames="reading")
def _neg_log_post(theta, config: bandit.Config, reading: LogReading, data: dict, prior: tuple) -> jax.Array:
    """−log posterior of θ (up to a constant); jitted, so `_fit`'s uses (grid, BFGS, optima, Hessian) transform
    one trace of the population run instead of tracing it again each."""
    nll = sum(0.5 * jnp.sum(c + lv) for c, lv in _chi2_terms(theta, config, reading, data).values())
    return nll + 0.5 * jnp.sum(((theta - prior[0]) / prior[1]) ** 2)


@functools.partial(jax.jit, static_argnames="reading")
def _fit(grid, config: bandit.Config, reading: LogReading, data: dict, prior: tuple):
    """Score the grid by forward runs, run BFGS from its best `STARTS` points; (MAP, Hessian and gradient there,
    χ² per observable, whether every grid point diverged). The bandit is traced: runs that differ only in float keys
    (learning rate, β, ε, schedule lengths) share a compilation."""
    objective = lambda theta, args=None: _neg_log_post(theta, config, reading, data, prior)
    scores = jax.vmap(objective)(grid)
    starts = grid[jnp.argsort(jnp.where(jnp.isfinite(scores), scores, jnp.inf))[:STARTS]]
    solver = optx.BFGS(rtol=1e-5, atol=1e-5)
    values = jax.vmap(lambda x0: optx.minimise(objective, solver, x0, max_steps=MAX_STEPS, throw=False).value)(starts)
    losses = jax.vmap(objective)(values)
    theta = values[jnp.argmin(jnp.where(jnp.isfinite(losses), losses, jnp.inf))]
    chi2 = {name: jnp.sum(c) for name, (c, _) in _chi2_terms(theta, config, reading, data).items()}

    def gradient_twice(t):  # jacfwd of the gradient is `jax.hessian`; the aux output is the gradient itself
        g = jax.grad(objective)(t)
        return g, g

    hessian, gradient = jax.jacfwd(gradient_twice, has_aux=True)(theta)
    return theta, hessian, gradient, chi2, jnp.all(~jnp.isfinite(scores))


STEP_BUCKET = 32
"""The fit simulates the model to the next multiple of this many steps past the window's last (at most 31 more):
with the observations padded to a power of two (`_padded`), logs of similar length share a compilation."""


def _padded(idx: np.ndarray, value: np.ndarray) -> tuple:
    """Arrays padded to the next power of two (≥ 64) with weight 0, so logs of similar length share a compilation."""
    size = max(64, 1 << (idx.size - 1).bit_length())
    pad = size - idx.size
    dtype = jnp.result_type(float)
    return (
        jnp.asarray(np.concatenate([idx, np.zeros(pad, int)])),
        jnp.asarray(np.concatenate([value, np.zeros(pad)]), dtype),
        jnp.asarray(np.concatenate([np.ones(idx.size), np.zeros(pad)]), dtype),
    )


def calibrate(
    log: TrainingLog,
    run: RunConfig,
    *,
    fit_until: float | None = None,
    horizon: int | None = None,
    reward_map: str = "scale",
    progress: Progress | None = None,
) -> Calibration:
    """Fit θ to the log's steps ≤ `fit_until` (default: all) by MAP + Laplace (module doc); the fit's start is told
    to `progress`. `reward_map`: "scale" (the reward / reward_scale is the success rate), "affine" (the reward is
    a + b·success rate, a and b fitted with the rest: `model.AFFINE_PARAMETERS`) or "auto" (affine when the
    reward leaves [0, reward_scale]).

    Args:
        log: the training log (`TrainingLog`); steps one unit apart from its first rewarded step.
        run: the run's configuration (`RunConfig`, e.g. from `calibration_inputs`).
        fit_until: the fit window's last step, in the log's steps, within the rewarded steps; None: all.
        horizon: the schedule's length in logged steps when `run.max_steps` is None; integer ≥ 1; None: the log's
            length.
        reward_map: how the reward is read, one of `REWARD_MAPS`.
        progress: told when the fit starts; None: silent.

    Returns:
        The `Calibration` (MAP θ̂, Laplace covariance, φ, fit window).

    Raises:
        PgrpoSimError: `log`, `run`, `horizon` or `reward_map` is invalid, the fit window is unusable (`fit_data`),
            or the model diverged from every start.
    """
    check_log(log)
    check_run_config(run)
    check_range("horizon", horizon, 1, integer=True)
    check_choice("reward_map", reward_map, REWARD_MAPS)
    if reward_map == "auto":
        values = log.series("reward")[1] if "reward" in log else np.zeros(0)
        inside = np.all((values >= -1e-9) & (values <= run.reward_scale * (1 + 1e-9)))
        reward_map = "scale" if inside else "affine"
    affine = reward_map == "affine"
    first, until, data, skipped = fit_data(log, run, fit_until, affine=affine)
    last = int(max(int(idx.max()) for idx, _ in data.values()))
    model = population_model(run, last, log_format=log.format, horizon=horizon or int(log["step"][-1] - first) + 1)
    dtype = jnp.result_type(float)
    mean0, sd0 = prior_mean(run), PRIOR_SD
    names, r = PARAMETERS, data["reward"][1]
    if affine:  # the success rate's start from the rewards' place between the prior's a and a + b
        names, (extra_mean, extra_sd) = PARAMETERS + AFFINE_PARAMETERS, affine_prior(r)
        mean0, sd0 = np.concatenate([mean0, extra_mean]), np.concatenate([sd0, extra_sd])
        r = (r - extra_mean[0]) / np.exp(extra_mean[1])
    head = float(np.clip(np.mean(r[: max(len(r) // 10, 3)]), 0.01, 0.99))
    grid = jnp.asarray(
        [
            [math.log(head / (1 - head)) - 0.5 * sigma, math.log(sigma), mean0[2] + shift, mean0[3] + c, *mean0[4:]]
            for sigma in (0.5, 1.5, 3.0)
            for shift in (-4.0, -2.0, 0.0, 2.0, 4.0)
            for c in (-2.0, 2.0)
        ],
        dtype,
    )
    padded = {name: _padded(idx, value) for name, (idx, value) in data.items()}
    prior = (jnp.asarray(mean0, dtype), jnp.asarray(sd0, dtype))
    fitted = population_model(run, -(-last // STEP_BUCKET) * STEP_BUCKET, log_format=log.format, horizon=model.horizon)
    report(
        progress,
        f"fitting the population bandit to {data['reward'][0].size} rewarded steps (BFGS from {STARTS} of "
        f"{len(grid)} starts; a log's first shape compiles, tens of seconds)",
    )
    theta, hessian, gradient, chi2, failed = _fit(grid, fitted.config(), fitted.reading(), padded, prior)
    theta, hessian, gradient = (np.asarray(x, np.float64) for x in (theta, hessian, gradient))
    if bool(failed) or not np.all(np.isfinite(theta)) or not np.all(np.isfinite(hessian)):
        raise PgrpoSimError("calibration failed: the model diverged from every start")
    n = sum(int(i.size) for i, _ in data.values())
    dof = max(n - len(names), 1) / n  # the parameters' share taken from every observable alike
    phi = max(1.0, sum(float(c) for c in chi2.values()) / (n * dof))
    per_observable = {name: own_overdispersion(float(chi2[name]), data[name][0].size * dof, phi) for name in data}
    hessian = 0.5 * (hessian + hessian.T)
    w, v = np.linalg.eigh(hessian)
    w = np.maximum(w, 1 / np.max(sd0) ** 2)  # no direction is less certain than the prior
    covariance = phi * (v / w) @ v.T
    newton_step = (v / w) @ v.T @ gradient  # to the minimum of the quadratic model at the MAP
    return Calibration(
        model=model,
        theta=theta,
        covariance=covariance,
        overdispersion=phi,
        used=tuple(data),
        skipped=skipped,
        first_step=first,
        fit_until=until,
        n_points=int(data["reward"][0].size),
        log_format=log.format,
        map_offset=float(np.max(np.abs(newton_step) / np.sqrt(np.diag(covariance)))),
        overdispersions=per_observable,
        parameters=names,
        prior_sd=sd0,
    )


def own_overdispersion(chi2: float, dof: float, pooled: float) -> float:
    """An observable's own φ (its reduced χ², at least 1) where it differs from the pooled φ by more than
    `OVERDISPERSION_Z` standard errors (a reduced χ² of ν degrees of freedom scatters by √(2/ν) of its mean);
    else the pooled φ, the better-determined of the two.

    Args:
        chi2: the observable's sum of squared standardised residuals at the MAP; ≥ 0.
        dof: its degrees of freedom ν (its points less its share of the parameters); > 0.
        pooled: the pooled φ; ≥ 1.

    Returns:
        φ of the observable; ≥ 1.
    """
    own = max(1.0, chi2 / dof)
    return own if abs(own - pooled) > OVERDISPERSION_Z * pooled * math.sqrt(2 / dof) else pooled


@dataclasses.dataclass(frozen=True)
class Band:
    """A predictive band at model steps 0…T: `steps` (the log's steps), `mean`, `lo`, `hi` (reward in the log's
    units; NaN throughout when the MAP run `diverged`), and the fraction of posterior draws that diverged.

    Attributes:
        steps: the log's steps of model steps 0 … T, first_step + t; float (T+1,).
        mean: the mean over the posterior draws that did not diverge; (T+1,); the observable's units in the log
            (reward and reward_std: the log's units; zero_std_frac: a share in [0, 1]); NaN when undefined.
        lo: the band's lower edge, the (1 − level)/2 quantile of the predictive draws; (T+1,); as `mean`.
        hi: the band's upper edge, the (1 + level)/2 quantile; (T+1,); as `mean`.
        level: the band's central probability; in (0, 1).
        diverged: whether the MAP run diverged (then mean, lo and hi are NaN).
        diverged_fraction: share of the posterior draws that diverged; in [0, 1].
    """

    steps: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    level: float
    diverged: bool
    diverged_fraction: float


@functools.partial(jax.jit, static_argnames="reading")
def _observables(thetas, config: bandit.Config, reading: LogReading):
    """`population_observables` of each θ; the bandit is traced, so scenarios that change only its float leaves
    (learning rate, β, clip) share one compilation."""
    return jax.vmap(lambda theta: population_observables(config, reading, theta))(thetas)


def check_calibration(calibration, name: str = "calibration") -> None:
    """Raise `PgrpoSimError` unless `calibration` is a `Calibration` (from `calibrate`).

    Args:
        calibration: the object to check.
        name: its name in the error message.

    Raises:
        PgrpoSimError: `calibration` is not a `Calibration`.
    """
    if not isinstance(calibration, Calibration):
        raise PgrpoSimError(f"{name} must be a Calibration (from calibrate), got {type(calibration).__name__}")


def predictive_band(calibration: Calibration, *, level: float = 0.8, seed: int = 0, observable: str = "reward") -> Band:
    """The band of `observable` over the calibration's model (parameter draws + one batch's noise per draw, the
    noise Gaussian, so its draws are clipped to [0, 1], where a batch's reward fraction, zero-std fraction and
    within-group std lie; for an affine reward, to [a, a + b] for the reward and [0, b] for its std).

    Args:
        calibration: a `Calibration`; the band covers its model's steps (`forecast.extend` lengthens it).
        level: the band's central probability; in (0, 1).
        seed: seed of the posterior draws and the batch noise; integer in [0, 2³² − 1].
        observable: the observable, one of `model.OBSERVABLES`.

    Returns:
        The `Band` over model steps 0 … T (T = the model's `steps`), from `DRAWS` posterior draws, in the log's
        units (zero_std_frac: a share).

    Raises:
        PgrpoSimError: `calibration` is not a `Calibration`, or `level`, `seed` or `observable` is out of range.
    """
    check_calibration(calibration)
    check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    check_choice("observable", observable, OBSERVABLES)
    check_seed(seed)
    model, theta = calibration.model, calibration.theta
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(theta, calibration.covariance, size=DRAWS)
    thetas = np.vstack([theta, draws]).astype(jnp.result_type(float))
    obs = _observables(shard_batch(pad_to_devices(thetas)), model.config(), model.reading())
    obs = jax.tree.map(lambda x: np.asarray(x)[: len(thetas)], obs)
    mean, var = np.asarray(obs.mean(observable), float), np.asarray(obs.var(observable), float)
    diverged = np.asarray(obs.diverged) | ~np.all(np.isfinite(mean), axis=1)
    scale = calibration.model.run.reward_scale if observable != "zero_std_frac" and not calibration.affine else 1.0
    ok = ~diverged[1:]
    phi = calibration.overdispersion_of(observable)
    noise = np.sqrt(phi * var[1:][ok]) * rng.standard_normal((int(ok.sum()), mean.shape[1]))
    low, high = np.zeros(len(thetas)), np.ones(len(thetas))  # a batch's value lies in [0, 1] in the bandit's units
    if calibration.affine and observable != "zero_std_frac":  # in the log's: [a, a + b] (a reward), [0, b] (a std)
        gain = np.exp(thetas[:, 5].astype(float))
        low, high = (thetas[:, 4].astype(float), thetas[:, 4] + gain) if observable == "reward" else (low, gain)
    samples = np.clip(mean[1:][ok] + noise, low[1:][ok, None], high[1:][ok, None])
    if samples.shape[0] < 2:
        nan = np.full(mean.shape[1], np.nan)
        lo = hi = center = nan
    else:
        lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
        center = mean[1:][ok].mean(0)
    if diverged[0]:  # a diverged run is reported as diverged, never as numbers
        center = lo = hi = np.full(mean.shape[1], np.nan)
    steps = calibration.first_step + np.arange(mean.shape[1])
    return Band(
        steps=steps,
        mean=center * scale,
        lo=lo * scale,
        hi=hi * scale,
        level=level,
        diverged=bool(diverged[0]),
        diverged_fraction=float(diverged[1:].mean()),
    )
