"""Waiting for compiled work so that Ctrl-C is seen: `interruptible` runs it in a thread while the caller polls, and
`deal` runs several pieces of it over a few threads (one per device) the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_POLL_S = 0.1
"""How often `interruptible` looks whether its work is done (seconds)."""


def interruptible(work: Callable[[], T]) -> T:
    """`work()` run in a daemon thread while the calling thread waits for it: Ctrl-C raises `KeyboardInterrupt` in
    the caller within `WAIT_POLL_S`, where a compiled call (an XLA compilation, a run of minutes, a wait for its
    results) holds Python's signal handling off until it returns. The thread runs with the caller's JAX settings of
    `with` blocks (`jax.enable_x64(True)`, …: JAX keeps them per thread); where JAX's internals do not let them be
    read, `work()` runs in the caller. Interrupted, the work is abandoned: it runs on in the background (the command
    line exits at once). For work that writes nothing the caller relies on.

    Args:
        work: the function to call, without arguments.

    Returns:
        What `work()` returns.

    Raises:
        BaseException: what `work()` raises; `KeyboardInterrupt` on Ctrl-C meanwhile.
    """
    import threading

    settings = _thread_settings()
    if settings is None:
        return work()
    done, box = threading.Event(), {}

    def target() -> None:
        try:
            for state, value in settings:
                state.set_local(value)
            box["value"] = work()
        except BaseException as exc:  # raised in the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="pgrpo-sim-work", daemon=True).start()
    while not done.wait(WAIT_POLL_S):
        pass
    if "error" in box:
        raise box["error"]
    return box["value"]


def deal(work: Callable[[int, int], T], jobs: int, lanes: int) -> list[T]:
    """`work(job, lane)` for each job 0 … `jobs` − 1, over `lanes` daemon threads (lane 0 … `lanes` − 1) that each
    take the next job when they finish one, while the calling thread waits as in `interruptible` (each thread with
    the caller's JAX settings of `with` blocks). For compiled work on several devices: a thread per device, whose
    runs go on while the others' do, and a job's result does not depend on the lane that ran it when each lane
    places the same program on its own device. Once a job fails, no lane starts another; interrupted (Ctrl-C), the
    running jobs are abandoned and none is started.

    Args:
        work: called as `work(job, lane)`; returns the job's result.
        jobs: how many jobs; integer ≥ 0.
        lanes: threads; integer ≥ 1 (more than `jobs` are not started).

    Returns:
        The results in job order.

    Raises:
        BaseException: the error of the first job (in job order) that failed; `KeyboardInterrupt` on Ctrl-C.
    """
    import threading

    settings = _thread_settings() or []
    lock, done = threading.Lock(), threading.Event()
    state = dict(next=0, running=min(lanes, jobs), stop=False)
    results: dict[int, T] = {}
    errors: dict[int, BaseException] = {}

    def lane(index: int) -> None:
        for setting, value in settings:
            setting.set_local(value)
        while True:
            with lock:
                if state["stop"] or state["next"] >= jobs:
                    state["running"] -= 1
                    if state["running"] == 0:
                        done.set()
                    return
                job, state["next"] = state["next"], state["next"] + 1
            try:
                results[job] = work(job, index)
            except BaseException as exc:  # raised in the caller
                with lock:
                    errors[job], state["stop"] = exc, True

    if jobs == 0:
        return []
    for index in range(state["running"]):
        threading.Thread(target=lane, args=(index,), name=f"pgrpo-sim-lane-{index}", daemon=True).start()
    try:
        while not done.wait(WAIT_POLL_S):
            pass
    except BaseException:
        state["stop"] = True  # the lanes take no further job
        raise
    if errors:
        raise errors[min(errors)]
    return [results[job] for job in range(jobs)]


def _thread_settings() -> list | None:
    """This thread's JAX settings of `with` blocks, as (setting, value) pairs for another thread to take (its own
    values where none is set); [] without JAX; None where JAX's internals (0.10) are not as expected."""
    import sys

    if "jax" not in sys.modules:
        return []
    try:
        from jax._src import config

        states = [s for s in config.config._value_holders.values() if hasattr(s, "get_local")]
        return [(s, s.get_local()) for s in states if hasattr(s, "set_local")]  # pyright: ignore[reportAttributeAccessIssue]  # hasattr above
    except Exception:  # another JAX: no thread, rather than other settings
        return None
