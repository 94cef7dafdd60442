"""Worker processes with this process's JAX settings (`worker_pool`), for commands that compile several programs at
once (`validate`, `watch`)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os

SHARED_SETTINGS = (
    "jax_num_cpu_devices",
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
)
"""The JAX settings a worker process takes from its parent (`worker_pool`): the device count, on which the
sharding of a sweep and so its last digits depend, and the compilation cache. XLA_FLAGS travel in the environment."""


def shared_settings() -> dict:
    """This process's values of `SHARED_SETTINGS`."""
    import jax

    return {name: getattr(jax.config, name) for name in SHARED_SETTINGS}


ORPHAN_POLL_S = 1.0
"""How often a worker checks that its parent lives (seconds)."""


def _exit_when_orphaned(parent: int) -> None:
    """Exit this process once its parent is gone (killed with SIGKILL, it cannot stop its workers: they would wait
    on its queue forever, holding their memory); the new parent is init or a subreaper."""
    import time

    while os.getppid() == parent:
        time.sleep(ORPHAN_POLL_S)
    os._exit(1)


def _start_worker(settings: dict) -> None:
    """A worker's start: its parent's JAX settings, no reaction to Ctrl-C (its parent stops it), and an exit of its
    own if the parent dies."""
    import signal
    import threading

    import jax

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    for name, value in settings.items():
        jax.config.update(name, value)


@contextlib.contextmanager
def worker_pool(processes: int):
    """A `concurrent.futures.ProcessPoolExecutor` of `processes` fresh (spawned) Python processes with this process's
    JAX settings (`SHARED_SETTINGS`, XLA_FLAGS), for work that is mostly tracing and compiling JAX programs, which
    threads would take turns at under Python's lock. A worker that dies fails its futures (`BrokenProcessPool`)
    rather than hanging them. The workers ignore Ctrl-C: when the `with` block raises (Ctrl-C, a failed job), the
    pending jobs are cancelled and the running ones stopped at once. Scripts that use it need the
    `if __name__ == "__main__":` guard of `multiprocessing`'s spawn start method."""
    settings = shared_settings()
    before = set(multiprocessing.active_children())
    pool = concurrent.futures.ProcessPoolExecutor(
        processes, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=(settings,)
    )
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        # until none is left: the pool may start a worker while the others are being stopped (CI once kept one)
        while workers := set(multiprocessing.active_children()) - before:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.join()
        pool.shutdown()  # joins the pool's manager thread, which has seen its workers die
        raise
    pool.shutdown()
