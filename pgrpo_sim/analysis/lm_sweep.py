"""Runs and sweeps of the language-model level (`models.lm`): settings under TRL `GRPOConfig` names, a grid of
them × seeds, each run's summary and verdict, finished points kept in a store so an interrupted sweep resumes.

Settings are `lm.config`'s keyword arguments (`LM_KEYS`: TRL's names, plus the task and model sizes `modulus`,
`operands`, `max_completion_length`, `width`, `layers`, `heads`, the SFT start's `start_accuracy` and `sft_seed`,
and `eval_every`, `eval_size`). A grid point's seeds run in one vmapped program (`lm.simulate`); points that differ
only in traced hyperparameters (learning rate, ε, β, temperature, …) reuse its compilation.

Per run (`summarize_runs`), with the reward curve r_0 … r_{T−1} of the GRPO steps' rollouts (256 completions
each by default, so a single step's reward has a standard error of about 0.03):
- `final_reward`, `final_entropy`, `final_mean_length`: means over the last 10 % of the steps (at least one);
- `final_knowledge`: the chance-corrected reward (`knowledge`: what an LLM, whose chance is 0, would score) over the
  last quarter of the steps;
- `peak_reward`: the maximum of the trailing running mean of the reward over `smoothing_window(T)` steps;
- `final_eval_accuracy`: the last greedy eval accuracy on the held-out prompts;
- `verdict`: `analysis.summaries.verdict` (the rule of what-if) on the trailing running mean with its standard
  errors (`summaries.running_mean_stderr`), or "diverges"; whether
  the run collapsed is judged on its chance-corrected reward (`knowledge`: a constant answer scores 1/m on the level
  and 0 on an LLM) by `summaries.collapsed`, with the binomial standard errors of its smoothed points
  (`knowledge_se`);
- a diverged run has no numbers (NaN) and `diverged_step` ≥ 0.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import jax
import numpy as np
import numpy.typing as npt

from ..base.checks import check_seed, check_seeds, check_steps
from ..base.errors import PgrpoSimError
from ..base.progress import duration_text
from ..base.sharding import gather_processes, share_from_first
from ..base.waiting import deal, interruptible
from ..models import lm
from ..models.lm import READOUTS
from ..models.lm.configuration import UNBOUNDED
from ..models.lm.policy import MLP_RATIO
from .summaries import collapsed, running_mean_stderr, verdict
from .sweep_grid import short_values

LM_KEYS = tuple(inspect.signature(lm.config).parameters)
"""The settings of a language-model run (`lm.config`'s keyword arguments)."""
NULLABLE = (*UNBOUNDED, "kl_reference", "max_steps")
"""Settings that take `none` (ε, ε_high, δ, the gradient clip: off; kl_reference: from β; max_steps: the run's
length)."""
SUMMARY_FIELDS = (
    "final_reward",
    "final_knowledge",
    "peak_reward",
    "final_entropy",
    "final_mean_length",
    "final_eval_accuracy",
    "diverged_step",
    "verdict",
)
"""A run's summary, in `summary.csv`'s column order (after the grid keys and `seed`)."""
SHARE_FIELDS = {"collapse_share": "collapses", "diverge_share": "diverges"}
"""`summary.csv`'s last columns → the verdict whose share of a grid point's seeds each is (`verdict_shares`)."""


def _kind(key: str) -> type:
    default = inspect.signature(lm.config).parameters[key].default
    if key == "kl_reference" or isinstance(default, bool):
        return bool
    if key in UNBOUNDED or isinstance(default, float):
        return float
    return int if key == "max_steps" else type(default)  # its default, None, says nothing of its type


def parse_lm_value(key: str, text: str):
    """A setting's value from its text: a number, `none` (where `NULLABLE`), true/false, or a name.

    Args:
        key: the setting, one of `LM_KEYS`.
        text: its value as text.

    Returns:
        The value, typed as `lm.config`'s default for `key` (int, float, bool or str), or None.

    Raises:
        PgrpoSimError: `key` is unknown, or `text` is not of its type.
    """
    if key not in LM_KEYS:
        raise PgrpoSimError(f"unknown language-model setting {key!r} (known: {', '.join(LM_KEYS)})")
    text = text.strip()
    if text.lower() in ("none", "null") and key in NULLABLE:
        return None
    kind = _kind(key)
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise PgrpoSimError(f"{key} must be true or false, got {text!r}")
        return text.lower() == "true"
    if kind is str:
        return text
    try:
        value = float(text)
    except ValueError:
        none = " or none" if key in NULLABLE else ""
        raise PgrpoSimError(f"{key} must be a number{none}, got {text!r}") from None
    if kind is int:
        if value != round(value):
            raise PgrpoSimError(f"{key} must be an integer, got {text!r}")
        return int(value)
    return value


def parse_settings(items: Sequence[str]) -> dict:
    """`KEY=VALUE` items as settings (`parse_lm_value`); a key given twice is an error.

    Args:
        items: `KEY=VALUE` strings, keys from `LM_KEYS`.

    Returns:
        Setting → typed value (keyword arguments of `lm.config`).

    Raises:
        PgrpoSimError: an item is not KEY=VALUE, a key is repeated or unknown, or a value is mistyped.
    """
    settings = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise PgrpoSimError(f"a setting is KEY=VALUE, got {item!r}")
        if key.strip() in settings:
            raise PgrpoSimError(f"setting {key.strip()!r} given twice")
        settings[key.strip()] = parse_lm_value(key.strip(), text)
    return settings


def parse_grid(items: Sequence[str]) -> dict[str, list]:
    """`KEY=V1,V2,…` items (or `KEY=log:START:STOP:NUM` for a real setting) as grid axes.

    Args:
        items: `KEY=V1,V2,…` or `KEY=log:START:STOP:NUM` strings (START, STOP > 0; NUM an integer ≥ 1: NUM values
            spaced geometrically from START to STOP, rounded by `sweep_grid.short_values`).

    Returns:
        Setting → its values, typed, in order.

    Raises:
        PgrpoSimError: an item is malformed, an axis is repeated, a value is mistyped, or a log axis is not of a
            real setting or has START, STOP ≤ 0 or NUM < 1.
    """
    grid = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not text.strip():
            raise PgrpoSimError(f"a grid axis is KEY=V1,V2,… or KEY=log:START:STOP:NUM, got {item!r}")
        if key in grid:
            raise PgrpoSimError(f"grid axis {key!r} given twice")
        if text.startswith("log:"):
            parts = text.split(":")[1:]
            if key not in LM_KEYS:
                parse_lm_value(key, "")  # the unknown-setting error
            if len(parts) != 3 or _kind(key) is not float:
                raise PgrpoSimError(f"{key}=log:START:STOP:NUM needs a real setting and three numbers, got {text!r}")
            start, stop = (parse_lm_value(key, t) for t in parts[:2])
            try:
                num = int(parts[2])
            except ValueError:
                raise PgrpoSimError(f"{key}=log:START:STOP:NUM needs an integer NUM, got {parts[2]!r}") from None
            if not (isinstance(start, float) and isinstance(stop, float) and start > 0 and stop > 0 and num >= 1):
                raise PgrpoSimError(f"{key}=log:START:STOP:NUM needs START, STOP > 0 and NUM >= 1, got {text!r}")
            grid[key] = short_values(np.geomspace(start, stop, num))
        else:
            grid[key] = [parse_lm_value(key, t) for t in text.split(",")]
    return grid


def grid_points(base: Mapping, grid: Mapping[str, Sequence]) -> list[dict]:
    """Every combination of the grid's values (the last axis varying fastest), each over `base`; each is checked
    by building its `lm.Config` (a bad value: `PgrpoSimError` naming it).

    Args:
        base: settings shared by every point (`lm.config` keyword arguments).
        grid: setting → its values (`parse_grid`); no key of `base`.

    Returns:
        The grid points, each a dict of the grid's settings (without `base`); [{}] for an empty grid.

    Raises:
        PgrpoSimError: a key is both in `base` and a grid axis, or a point's `lm.Config` is invalid.
    """
    overlap = sorted(set(base) & set(grid))
    if overlap:
        raise PgrpoSimError(f"{overlap[0]} is both set and a grid axis: give it once")
    points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    for point in points:
        lm.config(**base, **point)
    return points


def smoothing_window(steps: int) -> int:
    """The running mean's window for a run of `steps` GRPO steps: 10 % of them, at least 1.

    Args:
        steps: the run's GRPO steps; ≥ 0.

    Returns:
        max(1, steps // 10), in GRPO steps.
    """
    return max(1, steps // 10)


def running_mean(curve: np.ndarray, window: int) -> np.ndarray:
    """Trailing running mean along the last axis: point t averages t − window + 1 … t (fewer at the start).

    Args:
        curve: the values; (..., T).
        window: points per mean; integer ≥ 1.

    Returns:
        The running means; float (..., T), the curve's units.
    """
    total = np.cumsum(curve, axis=-1)
    lagged = np.concatenate([np.zeros_like(total[..., :window]), total[..., :-window]], axis=-1)
    counts = np.minimum(np.arange(1, curve.shape[-1] + 1), window)
    return (total - lagged) / counts


def knowledge(reward: npt.ArrayLike, format_ok: npt.ArrayLike, modulus: int) -> np.ndarray:
    """The chance-corrected reward of the level's rollouts: the share of completions that are well-formed and right
    beyond guessing, k = max(r − f/m, 0) / (1 − 1/m), with r the reward, f the well-formed share and m the modulus
    (a well-formed answer guessed at random is right with probability 1/m). An LLM's answer space is so large that
    its chance is 0: a policy that writes one answer for every prompt scores 0 there and 1/m on the level.

    Args:
        reward: r, the share of right completions; in [0, 1]; any shape.
        format_ok: f, the share of well-formed completions; in [0, 1]; broadcast with `reward`.
        modulus: m, the task's modulus; integer ≥ 2.

    Returns:
        k; float, the broadcast shape; in [0, 1] when r ≤ f.
    """
    chance = 1.0 / modulus
    return np.maximum(np.asarray(reward, float) - chance * np.asarray(format_ok, float), 0.0) / (1 - chance)


def knowledge_se(
    reward: npt.ArrayLike, format_ok: npt.ArrayLike, modulus: int, completions: npt.ArrayLike
) -> np.ndarray:
    """The standard error of `knowledge` over `completions` independent completions: per completion X = R − F/m
    (R right, F well-formed; R implies F), Var X = r(1 − r) + f(1 − f)/m² − 2r(1 − f)/m, divided by n (1 − 1/m)².

    Args:
        reward: r, the share of right completions; in [0, 1]; any shape.
        format_ok: f, the share of well-formed completions; in [0, 1]; broadcast with `reward`.
        modulus: m, the task's modulus; integer ≥ 2.
        completions: n, the completions behind each share; > 0; broadcast with `reward`.

    Returns:
        The standard error of k; float, the broadcast shape.
    """
    r, f, m = np.asarray(reward, float), np.asarray(format_ok, float), modulus
    var = np.maximum(r * (1 - r) + f * (1 - f) / m**2 - 2 * r * (1 - f) / m, 0.0)
    return np.sqrt(var / completions) / (1 - 1 / m)


def _pooled_knowledge(reward: np.ndarray, format_ok: np.ndarray, modulus: int, batch: int) -> tuple[float, float]:
    """`knowledge` of the completions of several rollouts (of `batch` completions each) pooled, and its s.e."""
    r, f, n = float(np.mean(reward)), float(np.mean(format_ok)), batch * np.size(reward)
    return float(knowledge(r, f, modulus)), float(knowledge_se(r, f, modulus, n))


def summarize_runs(run: lm.Run, config: lm.Config, starts: np.ndarray | None = None) -> list[dict]:
    """One summary per seed of `run` (read-outs [seeds, steps]) of `config`'s task and batch (module docstring).
    `starts`: a label per seed, equal for seeds that share their SFT start (default: all do, as the seeds of one
    configuration); a collapse is measured from the start's chance-corrected reward pooled over them.

    Args:
        run: the `lm.Run` of `config`, read-outs (seeds, steps) (`params` unused).
        config: its `lm.Config` (the task's modulus and the generation batch).
        starts: a label per seed; (seeds,); None: one shared start.

    Returns:
        One dict per seed, keys `SUMMARY_FIELDS`: final_reward, final_knowledge, peak_reward and
        final_eval_accuracy in [0, 1], final_entropy in nats, final_mean_length in tokens (these six NaN for a
        diverged run), diverged_step (a GRPO step, −1 if never) and verdict (`analysis.summaries.verdict`).
    """
    readouts = {name: np.asarray(value, float) for name, value in run.readouts.items()}
    reward = readouts["reward"]
    seeds, steps = reward.shape
    tail = slice(steps - max(1, steps // 10), steps)
    window, modulus, batch = (
        smoothing_window(steps),
        config.task.modulus,
        config.prompts_per_step * config.num_generations,
    )
    smooth, formats = running_mean(reward, window), running_mean(readouts["format_ok"], window)
    known = knowledge(smooth, formats, modulus)  # of the pooled completions of each window
    known_se = knowledge_se(smooth, formats, modulus, np.minimum(np.arange(1, steps + 1), window) * batch)
    starts = np.zeros(seeds, int) if starts is None else np.asarray(starts)
    pooled = {}  # each start's first rollouts, pooled over the seeds that share it
    for label in np.unique(starts):
        same = (starts == label) & np.isfinite(reward[:, 0])
        pooled[label] = _pooled_knowledge(reward[same, :1], readouts["format_ok"][same, :1], modulus, batch)
    late = slice(steps - max(1, steps // 4), steps)  # a collapse stays down: its last quarter, pooled
    out = []
    for s in range(seeds):
        diverged = bool(np.asarray(run.diverged)[s])
        evals = readouts["eval_accuracy"][s][np.isfinite(readouts["eval_accuracy"][s])]
        final = _pooled_knowledge(reward[s, late], readouts["format_ok"][s, late], modulus, batch)
        lost = not diverged and collapsed(known[s], known_se[s], start=pooled[starts[s]], final=final)
        row = dict(
            final_reward=float(np.mean(reward[s, tail])),
            final_knowledge=final[0],
            peak_reward=float(np.max(smooth[s])),
            final_entropy=float(np.mean(readouts["entropy"][s, tail])),
            final_mean_length=float(np.mean(readouts["completions/mean_length"][s, tail])),
            final_eval_accuracy=float(evals[-1]) if evals.size else math.nan,
            diverged_step=int(np.asarray(run.diverged_step)[s]),
            verdict=verdict(smooth[s], diverged, collapse=lost, stderr=running_mean_stderr(reward[s], window)),
        )
        if diverged:
            row.update({k: math.nan for k in SUMMARY_FIELDS[:6]})
        out.append(row)
    return out


CPU_FLOPS = 2e10
"""Floating-point operations per second the level's runs reach on a CPU (`step_flops`; measured 1.5–4·10¹⁰ on two
busy cores, default settings and variants of batch and epochs): the rate of a sweep's time estimate."""
SIZE_KEYS = frozenset({
    "num_generations", "prompts_per_step", "num_iterations", "steps_per_generation", "beta", "kl_reference",
    "max_completion_length", "operands", "modulus", "width", "layers", "eval_every", "eval_size",
})  # fmt: skip
"""The settings `step_flops` depends on."""
CSV_WIDTH = 12
"""Typical characters of a float32 read-out in a CSV file, with its comma (e.g. 0.20096147,)."""


def step_flops(config: lm.Config) -> float:
    """About how many floating-point operations one GRPO step of one seed takes: 2 per weight of the policy's
    matrices (and its attention) per token pass — the rollout's sampling, π_old's and the reference's
    log-probabilities where the loss needs them, 3 passes (forward and backward) per epoch over the batch, and the
    greedy evaluation every `eval_every` steps. Compilation and the SFT start are not counted.

    Args:
        config: the run's `lm.Config`.

    Returns:
        Floating-point operations per GRPO step and seed.
    """
    shape, length = config.policy, config.policy.max_len
    weights = shape.layers * (4 + 2 * MLP_RATIO) * shape.width**2 + shape.width * shape.vocab
    per_token = 2 * weights + 4 * shape.layers * length * shape.width
    passes = 1 + (config.steps_per_rollout > 1) + bool(config.kl_reference) + 3 * int(config.num_iterations)
    tokens = length * (config.generation_batch * passes + config.task.eval_size / int(config.eval_every))
    return float(tokens * per_token)


def sweep_flops(base: Mapping, grid: Mapping[str, Sequence], *, seeds: int, steps: int) -> float:
    """About how many floating-point operations the runs of a sweep take (`step_flops` of every grid point).

    Args:
        base: settings shared by every point (`lm.config` keyword arguments).
        grid: setting → its values (`parse_grid`); checked already (`grid_points`).
        seeds: runs per point; ≥ 1.
        steps: GRPO steps per run; ≥ 1.

    Returns:
        Floating-point operations of all the runs.
    """
    sized = {k: v for k, v in grid.items() if k in SIZE_KEYS}
    others = math.prod(len(v) for k, v in grid.items() if k not in SIZE_KEYS)
    counts: dict[tuple, int] = {}
    for values in itertools.product(*sized.values()):  # β matters only as zero or not (the reference's pass)
        key = tuple(bool(v) if k == "beta" else v for k, v in zip(sized, values, strict=True))
        counts[key] = counts.get(key, 0) + others
    total = sum(step_flops(lm.config(**base, **dict(zip(sized, key, strict=True)))) * n for key, n in counts.items())
    return total * seeds * steps


def lm_output_bytes(grid: Mapping[str, Sequence], *, seeds: int, steps: int) -> dict[str, int]:
    """About how many bytes a sweep writes: typical widths of its CSV fields (`CSV_WIDTH`), float32 in its kept
    points.

    Args:
        grid: setting → its values (`parse_grid`).
        seeds: runs per point; ≥ 1.
        steps: GRPO steps per run; ≥ 1.

    Returns:
        Bytes by output: {"summary.csv", "curves.csv", "chunks"}, all on disk at once before the chunks are removed.
    """
    points = math.prod(len(v) for v in grid.values())
    keys = sum(np.mean([len(repr(v)) + 1 for v in values]) for values in grid.values())
    fields = len(SUMMARY_FIELDS) + len(SHARE_FIELDS)
    return {
        "summary.csv": int(points * seeds * (keys + 8 + fields * CSV_WIDTH)),
        "curves.csv": int(points * seeds * steps * (18 + len(READOUTS) * CSV_WIDTH)),
        "chunks": int(points * seeds * (steps * len(READOUTS) * 4 + 16)),
    }


def every_setting(base: Mapping, point: Mapping) -> dict:
    """Every `lm.config` setting of `point` over `base`, the defaults filled in: one configuration written two ways
    gives one dict."""
    settings = inspect.signature(lm.config).bind(**base, **point)
    settings.apply_defaults()
    return settings.arguments


class PointStore(Protocol):
    """Where `sweep_rows` keeps each finished grid point, so that a rerun resumes: the library computes, a store
    keeps (`runtime.sweep_store.PointFolder` keeps them in a folder). In a multi-host run only process 0 uses it; a
    store that cannot keep a point raises `PgrpoSimError` (one line; the points kept before stay)."""

    def load(self, name: str) -> Mapping[str, np.ndarray] | None:
        """The arrays kept under `name`, or None when there are none."""
        ...

    def save(self, name: str, arrays: Mapping[str, npt.ArrayLike]) -> None:
        """Keep `arrays` under `name`, whole or not at all."""
        ...


def _point_name(point: Mapping, base: Mapping, steps: int, seeds: int, seed: int) -> str:
    """A finished grid point's name in a `PointStore`: a hash of everything that determines its runs, every setting
    (`every_setting`), steps, seeds and the seed."""
    spec = json.dumps(dict(settings=every_setting(base, point), steps=steps, seeds=seeds, seed=seed), sort_keys=True)
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def sweep_rows(
    base: Mapping,
    grid: Mapping[str, Sequence],
    *,
    seeds: int,
    steps: int,
    seed: int = 0,
    store: PointStore | None = None,
    progress: Callable[[str], object] | None = None,
) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Every grid point (`grid_points`) × `seeds` runs of `steps` GRPO steps (`lm.simulate` with key `seed`), in
    grid order. `store`: where each finished point is kept (and found again on a rerun, so an interrupted
    sweep resumes). The points are dealt over the local devices (`base.waiting.deal`: one thread each, a point one
    program on one device, the same bits on any; on a CPU the command line makes one device per core), so that
    Ctrl-C stops the sweep at once, losing at most the points under way. In a multi-host run (`jax.distributed`)
    the points are spread over the processes, one per device of each process at a time, and exchanged after each
    round (every process must have as many local devices): every process returns the whole sweep, and process 0
    alone reads and keeps points in `store`; a point that fails on one process stops every process after its round.
    Returns (rows: the grid keys,
    `seed` and the `SUMMARY_FIELDS` per point and seed; curves: each read-out as float32[points, seeds, steps]).

    Args:
        base: settings shared by every point (`lm.config` keyword arguments, `parse_settings`).
        grid: setting → its values (`parse_grid`).
        seeds: runs per point; integer in [1, 2²⁰].
        steps: GRPO steps per run; integer in [1, 10⁸].
        seed: the key of every point's runs; integer in [0, 2³² − 1].
        store: the finished points (`PointStore`); None: nothing kept.
        progress: called with one line before each point that is run (with the time left, once a point has run);
            None: silent.

    Returns:
        (rows, curves) as above; rows in grid order, seeds fastest.

    Raises:
        PgrpoSimError: `seeds`, `steps` or `seed` is out of range, or the grid is invalid (`grid_points`).
    """
    check_seeds(seeds)
    check_steps(steps)
    check_seed(seed)
    points = grid_points(base, grid)
    processes, me = jax.process_count(), jax.process_index()
    store = store if me == 0 else None  # process 0 keeps the points
    names = [_point_name(p, base, steps, seeds, seed) for p in points]
    kept = {i: store.load(name) for i, name in enumerate(names)} if store is not None else {}
    loaded = {i: lm.host_run(arrays) for i, arrays in kept.items() if arrays is not None}
    runs = share_from_first(loaded)  # process 0 reads the finished points; every process gets them
    todo = [i for i in range(len(points)) if i not in runs]
    devices = jax.local_devices()
    lanes = len(devices)
    took = []  # seconds of each round this process ran
    for start in range(0, len(todo), processes * lanes):  # one point per device of every process at a time
        batch = todo[start : start + processes * lanes]
        mine = batch[me * lanes : (me + 1) * lanes]
        if progress is not None:  # the time left from the rounds run (the first one compiles: left out)
            rounds = math.ceil((len(todo) - start) / (processes * lanes))
            left = f"; about {duration_text(float(np.mean(took[1:] or took)) * rounds)} left" if took else ""
            for i in mine:
                progress(f"grid point {i + 1}/{len(points)}: {_describe(points[i])} × {seeds} seed(s){left}")
        started = time.monotonic()

        def run_point(k: int, lane: int, mine=mine) -> lm.Run:
            i = mine[k]
            with jax.default_device(devices[lane]):
                run = _run_on_host(lm.config(**base, **points[i]), steps, seeds, seed)
            if store is not None:  # kept before the exchange
                store.save(names[i], lm.run_arrays(run))
            return run

        failure, done = None, []
        try:
            done = deal(run_point, len(mine), lanes)
        except Exception as exc:  # told to the other processes first, so that none waits for this round
            if processes == 1:
                raise
            failure = exc
        took.append(time.monotonic() - started)
        if processes > 1:  # every process's points, on every process; Ctrl-C at once
            packed = dict(_pack([*done, *[None] * (lanes - len(done))], seeds, steps))  # blanks: no point, or failed
            packed["failed"] = np.array([failure is not None] * lanes, np.int8)
            shared = interruptible(lambda packed=packed: gather_processes(packed, tiled=True))
            if failure is not None:
                raise failure
            if shared["failed"].any():
                raise PgrpoSimError(
                    f"process {np.flatnonzero(shared['failed'])[0] // lanes} of the multi-host run stopped at a grid "
                    "point; its own message says why"
                )
            for p, i in enumerate(batch):
                runs[i] = _unpack(shared, p)
                if store is not None and p >= lanes:  # process 0 kept its own
                    store.save(names[i], lm.run_arrays(runs[i]))
        else:  # one process: a failed point has raised
            runs.update(zip(mine, done, strict=True))
    rows, curves = [], {name: [] for name in READOUTS}
    for i, point in enumerate(points):
        for s, summary in enumerate(summarize_runs(runs[i], lm.config(**base, **point))):
            rows.append({**point, "seed": s, **summary})
        for name in READOUTS:
            curves[name].append(np.asarray(runs[i].readouts[name], np.float32))
    return rows, {name: np.stack(values) for name, values in curves.items()}


def _pack(runs: Sequence[lm.Run | None], seeds: int, steps: int) -> dict:
    """Host runs as one pytree of stacked arrays [len(runs), seeds, …] of fixed dtypes, for an exchange between
    processes; None (a process with no point this round) is a blank of NaN read-outs."""
    blank = lm.Run({name: np.full((seeds, steps), np.nan, np.float32) for name in READOUTS}, None,
                   np.zeros(seeds, bool), np.full(seeds, -1, np.int32))  # fmt: skip
    runs = [blank if run is None else run for run in runs]
    return dict(
        readouts={name: np.stack([np.asarray(r.readouts[name], np.float32) for r in runs]) for name in READOUTS},
        diverged=np.stack([np.asarray(r.diverged, np.int8) for r in runs]),
        diverged_step=np.stack([np.asarray(r.diverged_step, np.int32) for r in runs]),
    )


def _unpack(packed: dict, k: int) -> lm.Run:
    """The k-th host run of a `_pack`ed pytree."""
    readouts = {name: values[k] for name, values in packed["readouts"].items()}
    return lm.Run(readouts, None, packed["diverged"][k].astype(bool), packed["diverged_step"][k])


def _run_on_host(config: lm.Config, steps: int, seeds: int, seed: int) -> lm.Run:
    """`lm.simulate`, its read-outs and flags brought to the host (NumPy arrays; no parameters)."""
    run = lm.simulate(config, steps, seeds=seeds, key=seed)
    return lm.Run({k: np.asarray(v) for k, v in run.readouts.items()}, None, *map(np.asarray, run[2:]))


def verdict_shares(rows: Sequence[Mapping], keys: Sequence[str]) -> list[dict[str, float]]:
    """Per row of a sweep (`sweep_rows`), the share of its grid point's seeds whose verdict is each of
    `SHARE_FIELDS`' (the same on every row of the point): verdicts may differ between the seeds of one setting.

    Args:
        rows: the sweep's rows, each with the grid `keys` and `verdict`.
        keys: the grid's settings, which name a row's point.

    Returns:
        One dict per row, `SHARE_FIELDS` → a share in [0, 1].
    """
    seen: dict[tuple, list[str]] = {}
    for row in rows:
        seen.setdefault(tuple(repr(row[k]) for k in keys), []).append(row["verdict"])
    shares = {
        point: {name: verdicts.count(v) / len(verdicts) for name, v in SHARE_FIELDS.items()}
        for point, verdicts in seen.items()
    }
    return [shares[tuple(repr(row[k]) for k in keys)] for row in rows]


def _describe(point: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "the base setting"
