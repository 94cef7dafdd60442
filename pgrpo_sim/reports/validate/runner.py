"""Runs the sections of `pgrpo-sim validate` (`validate`): in jobs over worker processes (`SCHEDULE`), in float64,
their figures drawn and their results and report written by the parent. A section in `DEALT` runs in the parent
instead and deals its independent settings over the same workers."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from ...base.checks import check_range
from ...base.serialise import json_text
from ...runtime.workers import worker_pool
from . import sections
from .common import FULL, QUICK, Resolution
from .report import report_markdown

SCHEDULE = (
    ("lm_collapse",),
    ("rollout_reuse",),
    ("lag_threshold",),
    ("fluctuations",),
    ("saturation_law",),
    ("group_size_invariance", "group_spread"),
    ("mean_field",),
    ("failure_modes",),
    ("stiffness",),
    ("oscillation_onset",),
)
"""The jobs, in the order they start: longest first (measured, quick resolution), so that the last to start are
short and the workers finish together. Section 10 runs after section 1 in one job: it reuses section 1's runs
(`num_generations._base_run`). Sections not listed start after these, one job each."""
DEALT = frozenset({"lm_collapse"})
"""Sections that take a `deal` (`lm_claims.Deal`): with workers, each runs in a thread of the parent, which does its
summaries and fits, and its rounds of settings go to the workers, ahead of the other sections' jobs. Section 11's
settings take most of `validate --quick`'s time, and one worker alone would run them one after another."""


def _host(value):
    """`value` with the JAX arrays in its dicts, lists and tuples as NumPy arrays, keys in their order: what a worker
    hands back (its parent need not run in float64). Not `jax.device_get`: pytree flattening sorts dict keys, and
    results.json and the report keep a section's own order."""
    if isinstance(value, dict):
        return {k: _host(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return type(value)(*map(_host, value))
    if isinstance(value, (list, tuple)):
        return type(value)(map(_host, value))
    return np.asarray(value) if isinstance(value, jax.Array) else value


def _record(drawn: list, name: str, *data) -> None:
    """A section's `plot` in a worker: records the figure's name and data (as NumPy) in `drawn`."""
    drawn.append((name, _host(data)))


def _run_job(keys: tuple[str, ...], res: Resolution, seed: int, figures: bool, deal=None) -> list[tuple]:
    """Run the sections `keys` one after another in this process, in float64: per section (key, results,
    seconds, (figure name, data) or None). The figures are drawn by the caller: a section's `plot(name, *data)`
    is recorded here, and the caller puts the file it draws under the section's "figure". `deal`: given to the
    sections in `DEALT` (None: their own default, everything here)."""
    done = []
    for key in keys:
        drawn = []
        plot = functools.partial(_record, drawn) if figures else None
        dealt = {"deal": deal} if deal is not None and key in DEALT else {}
        with jax.enable_x64(True):
            start = time.perf_counter()
            result = sections.SECTIONS[key][1](res, seed, plot, **dealt)
            seconds = time.perf_counter() - start
        done.append((key, _host(result), seconds, drawn[0] if drawn else None))
    return done


def _in_float64(function: Callable, *args):
    """`function(*args)` in float64, its JAX arrays returned as NumPy: a dealt call in a worker."""
    with jax.enable_x64(True):
        return _host(function(*args))


def _dealer(pool: concurrent.futures.Executor, dealing: threading.Event) -> Callable:
    """The `lm_claims.Deal` of the workers `pool`: submits each call, sets `dealing` once it has."""

    def deal(function: Callable, calls) -> list[Callable]:
        getters = [pool.submit(_in_float64, function, *args).result for args in calls]
        dealing.set()
        return getters

    return deal


def _dealt_job(job: tuple[str, ...], res: Resolution, seed: int, figures: bool, deal, dealing: threading.Event):
    """`_run_job` in a thread of the parent, with `deal`; sets `dealing` when it ends, in case it dealt nothing."""
    try:
        return _run_job(job, res, seed, figures, deal)
    finally:
        dealing.set()


def validate(
    out_dir: str | Path | None = None,
    *,
    quick: bool = False,
    seed: int = 0,
    log: Callable[[str], None] = print,
    resolution: Resolution | None = None,
    workers: int = 1,
) -> dict:
    """Run every section; with `out_dir`, write `report.md`, `results.json` and the figures there.

    Returns the results dictionary (one key per claim, each with its numbers and `verdict`). `resolution`
    overrides the quick/full presets (tests use a tiny one). `workers` > 1 runs the sections in that many spawned
    processes at once, with this process's JAX settings (`runtime.workers.worker_pool`; a script then needs the
    `if __name__ == "__main__":` guard), as the command line does with one per core: most of a section's time is
    tracing and compiling its programs, which threads would take turns at under Python's lock. Each section draws
    from its own fixed keys, so the numbers do not depend on the workers. Interrupted, or when a section fails,
    the workers are stopped and nothing more is written; figures already drawn stay for the caller to remove.

    Args:
        out_dir: folder of `report.md`, `results.json` and the figures (created); None: nothing is written.
        quick: the quick preset (minutes on 2 cores) rather than the full one.
        seed: the seed every section's keys derive from; an integer in [0, MAX_SEED].
        log: called with each section's line as it finishes.
        resolution: the grids, seeds and steps of every section; None: the quick or full preset.
        workers: processes to run the sections in; integer >= 1.

    Returns:
        Claim key → its numbers and `verdict` (`holds`, `text`), in the report's order.

    Raises:
        PgrpoSimError: `workers` or `seed` out of range.
    """
    check_range("workers", workers, 1, integer=True)
    res = resolution or (QUICK if quick else FULL)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        from ...viz.figures import validation_figure

        out.mkdir(parents=True, exist_ok=True)
    jobs = [job for job in SCHEDULE if set(job) <= set(sections.SECTIONS)]
    jobs += [(key,) for key in sections.SECTIONS if not any(key in job for job in jobs)]
    figures = out is not None
    processes = min(workers, len(jobs))
    # the threads of dealt sections outlive the workers: on Ctrl-C or a failure the workers stop first, which fails
    # the calls the threads wait for
    with (
        concurrent.futures.ThreadPoolExecutor() as threads,
        worker_pool(processes) if processes > 1 else contextlib.nullcontext() as pool,
    ):
        if pool is not None:
            pending = {}
            for job in (job for job in jobs if set(job) <= DEALT):
                dealing = threading.Event()
                deal = _dealer(pool, dealing)
                pending[job] = threads.submit(_dealt_job, job, res, seed, figures, deal, dealing).result
                dealing.wait()  # its first round goes to the workers first
            for job in (job for job in jobs if job not in pending):
                pending[job] = pool.submit(_run_job, job, res, seed, figures).result
        else:
            pending = {job: functools.partial(_run_job, job, res, seed, figures) for job in jobs}
        results, seconds = {}, {}
        for key in sections.SECTIONS:  # in section order, as each is done
            if key not in results:
                for done, result, time_s, figure in pending[next(job for job in jobs if key in job)]():
                    if figure is not None:
                        result["figure"] = validation_figure(figure[0], out, *figure[1])
                    results[done], seconds[done] = result, time_s
            log(f"[{seconds[key]:5.1f} s] {sections.SECTIONS[key][0]}: {results[key]['verdict']['text']}")
    results = {key: results[key] for key in sections.SECTIONS}
    if out is not None:
        (out / "results.json").write_text(json_text(results, indent=2))
        (out / "report.md").write_text(report_markdown(results, quick=quick, seed=seed))
    return results
