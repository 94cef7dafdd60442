"""Process-wide JAX settings for the command line: the persistent compilation cache, one XLA CPU device
per core, and XLA's faster-compiling CPU fusion code generator. Only `pgrpo_sim.cli.main` calls
`configure_jax`; importing the library changes no global setting.

The compilation cache keeps XLA's compiled programs on disk, so a second run of the same command skips
compilation (seconds per static structure). It lives in `$XDG_CACHE_HOME/pgrpo-sim/jax` (default
`~/.cache/pgrpo-sim/jax`), or where `JAX_COMPILATION_CACHE_DIR` points if that is set; `--no-compile-cache`
or `PGRPO_SIM_NO_COMPILE_CACHE=1` turn it off. Deleting the directory is always safe.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

T = TypeVar("T")

NO_CACHE_ENV = "PGRPO_SIM_NO_COMPILE_CACHE"
"""Environment variable: 1 (or true/yes/on) turns the compilation cache off, like `--no-compile-cache`."""
MIN_COMPILE_SECONDS = 0.2
"""Programs that compile faster than this (seconds) are not cached: reading them back would save little."""


def cache_disabled_by_env(environ: dict | None = None) -> bool:
    """Whether `PGRPO_SIM_NO_COMPILE_CACHE` asks for no compilation cache (1, true, yes, on; any case)."""
    value = (os.environ if environ is None else environ).get(NO_CACHE_ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def default_cache_dir(environ: dict | None = None) -> Path:
    """Per-user cache directory: `$JAX_COMPILATION_CACHE_DIR` if set, else `$XDG_CACHE_HOME/pgrpo-sim/jax`,
    else `~/.cache/pgrpo-sim/jax`."""
    env = os.environ if environ is None else environ
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(env["JAX_COMPILATION_CACHE_DIR"]).expanduser()
    root = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(root).expanduser() / "pgrpo-sim" / "jax"


def enable_compile_cache(path: str | os.PathLike | None = None) -> Path | None:
    """Turn on JAX's persistent compilation cache in `path` (default `default_cache_dir()`); returns the
    directory, or None if it cannot be created (then nothing changes: a read-only home only costs speed)."""
    import jax

    directory = Path(path) if path is not None else default_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory


def cpu_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def use_all_cpu_cores() -> bool:
    """One XLA CPU device per core, so that sweeps shard their configurations over every core. Only before
    JAX's backend starts (the devices are fixed at its first operation) and only if the user chose no device
    count (`XLA_FLAGS=--xla_force_host_platform_device_count=…` or `JAX_NUM_CPU_DEVICES`). Returns whether it
    did."""
    chosen = "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
    if chosen or os.environ.get("JAX_NUM_CPU_DEVICES"):
        return False
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", cpu_cores())
    except RuntimeError:  # JAX raises this once its backends are running
        return False
    return True


CPU_FUSION_FLAG = "--xla_cpu_use_fusion_emitters=false"
"""XLA flag for the CPU backend's older fusion code generator: the bandit's programs compile faster; expected mode
and whole sampled sweeps run as fast or faster, a lone sampled `simulate` of 64 seeds slower (benchmarks/RESULTS.md,
"XLA CPU fusion emitters"). Commands wait mostly for compilation, so the command line uses it."""


RUN_BOUND_OPTIONS = {"xla_cpu_use_fusion_emitters": True}
"""`jax.jit` compiler options for a program whose run time outweighs its compilation (a sweep's chunks): XLA's
newer CPU fusion emitters, which `CPU_FUSION_FLAG` turns off process-wide, compile it 0.3–0.4 s slower but run
an expected-mode sweep's chunk 1.2–1.5× faster (its summary pass ~3×) and a sampled one about as fast (RESULTS.md,
"XLA CPU fusion emitters"). Other backends ignore the option."""


SERIAL_CODEGEN_FLAG = "--xla_cpu_parallel_codegen_split_count=1"
"""XLA flag: compile each CPU program's machine code on one thread. For commands that compile several programs at
once, one per core (`validate`): XLA's own split of each compilation over threads then only adds contention
(`validate --quick` on 2 cores: 40 s and 62 s of CPU with it, 44 s and 68 s without)."""


UNOPTIMIZED_CODEGEN_FLAG = "--xla_backend_optimization_level=0"
"""XLA flag: generate CPU machine code without LLVM's optimisation passes. For commands that compile many programs
which then run for milliseconds (`validate`): `validate --quick` on 2 cores took 73 and 75 s with it, 86 and 91 s
without (user CPU 108–111 s against 141–147 s, a slow machine, 2026-12-01), its numbers equal to the last few
digits (optimiser stopping points move by ~1e-9 relative). Long runs would run slower, so no other command sets
it; a sweep's chunks in such a command are compiled with it too."""


OPTIMISED_CODEGEN: Mapping[str, int] = MappingProxyType({"xla_backend_optimization_level": 3})
"""`jax.jit` compiler options for programs that run for seconds (the language-model level's runs and SFT, the
oscillator's fit): LLVM's optimisation whatever `XLA_FLAGS` say, so that `validate`'s `UNOPTIMIZED_CODEGEN_FLAG`
does not slow them (its language-model section took 365 s unoptimised, about 150 s optimised; `validate --quick`,
2 cores, 2026-12-06). Pass as `compiler_options=dict(OPTIMISED_CODEGEN)`; other backends ignore it."""


def _add_flag(flag: str, env: MutableMapping[str, str]) -> bool:
    """Append `flag` to `XLA_FLAGS` unless the user set that option; returns whether it did."""
    flags = env.get("XLA_FLAGS", "")
    if flag.lstrip("-").split("=")[0] in flags:
        return False
    env["XLA_FLAGS"] = f"{flags} {flag}".strip()
    return True


def fast_cpu_compilation(environ: MutableMapping[str, str] | None = None, *, compile_bound: bool = False) -> bool:
    """Add `CPU_FUSION_FLAG` (and with `compile_bound`, for commands that compile many short-running programs, one
    per core at once: `SERIAL_CODEGEN_FLAG` and `UNOPTIMIZED_CODEGEN_FLAG`) to `XLA_FLAGS`, never over a choice the
    user made there; returns whether it added the fusion flag. XLA reads its flags when JAX's backend starts, so
    this acts only before JAX's first operation."""
    env = os.environ if environ is None else environ
    if compile_bound:
        _add_flag(SERIAL_CODEGEN_FLAG, env)
        _add_flag(UNOPTIMIZED_CODEGEN_FLAG, env)
    return _add_flag(CPU_FUSION_FLAG, env)


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say: `os.sysconf` is POSIX)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def configure_jax(*, compile_cache: bool = True, compile_bound: bool = False) -> Path | None:
    """The command line's JAX settings: `fast_cpu_compilation` (`compile_bound`: the command compiles many
    short-running programs, one per core at once), all CPU cores (`use_all_cpu_cores`) and, unless `compile_cache`
    is False or `PGRPO_SIM_NO_COMPILE_CACHE` is set, the persistent compilation cache. Returns its directory (None:
    no cache). Call it before JAX's first operation."""
    fast_cpu_compilation(compile_bound=compile_bound)
    use_all_cpu_cores()
    if not compile_cache or cache_disabled_by_env():
        return None
    return enable_compile_cache()


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


REDELIVER_S = 0.05
"""Delay (seconds) before an interrupt that could not be raised where it arrived is raised again."""
HANDLED_SIGNALS = ("SIGINT", "SIGTERM")
"""The signals `interrupt_handling` turns into `KeyboardInterrupt` (names: resolved in the `signal` module)."""


class _Interrupts:
    """What `interrupt_handling` has seen: a Ctrl-C (`requested`), and how deep in `deferred_interrupts` it is."""

    requested = False
    deferred = 0


def interrupt_requested() -> bool:
    """Whether Ctrl-C (SIGINT) arrived since `interrupt_handling` began, raised or not."""
    return _Interrupts.requested


@contextlib.contextmanager
def deferred_interrupts():
    """Within the block, Ctrl-C is only recorded (`interrupt_requested`): for steps that must not stop half-way
    (outputs moved into place, temporaries removed)."""
    _Interrupts.deferred += 1
    try:
        yield
    finally:
        _Interrupts.deferred -= 1


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


def _inside_callback(frame) -> bool:
    """Whether Python runs a garbage-collection callback (JAX's `_xla_gc_callback`) or a finaliser in `frame`'s
    stack: an exception raised there is printed as "Exception ignored in …" and dropped, the program goes on."""
    import gc

    codes = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _raise_again_later() -> None:
    """Send SIGINT to this process again after `REDELIVER_S`, if `interrupt_handling` still handles it."""
    import signal
    import threading

    def again() -> None:
        if signal.getsignal(signal.SIGINT) is _on_interrupt:
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(REDELIVER_S, again)
    timer.daemon = True
    timer.start()


def _on_interrupt(signum, frame) -> None:
    _Interrupts.requested = True
    if _Interrupts.deferred:
        return
    if _inside_callback(frame):
        _raise_again_later()
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupt_handling():
    """Within the block (main thread only), Ctrl-C (and SIGTERM, as `kill` sends it: the same clean-up, so no
    temporary is left behind) raises `KeyboardInterrupt` in the main thread, except where it would be dropped:
    inside a garbage-collection callback or finaliser it is raised again `REDELIVER_S` later, and a
    `KeyboardInterrupt` that such code dropped anyway (printed as "Exception ignored in …") is not printed but
    raised again the same way. Within `deferred_interrupts` it is only recorded. Either way `interrupt_requested`
    says that it came, so that a command that reaches its end after a dropped interrupt still stops (and moves no
    outputs into place: `outputs.staged_outputs`)."""
    import signal
    import sys

    _Interrupts.requested = False
    previous_hook = sys.unraisablehook

    def unraisable(info) -> None:
        if not issubclass(info.exc_type, KeyboardInterrupt):
            previous_hook(info)
            return
        _Interrupts.requested = True
        if not _Interrupts.deferred:
            _raise_again_later()

    # a signal ignored by the parent (Ctrl-C under `nohup`, in a background job) stays ignored
    previous = {getattr(signal, name): signal.getsignal(getattr(signal, name)) for name in HANDLED_SIGNALS}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, _on_interrupt)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        sys.unraisablehook = previous_hook
        _Interrupts.requested = False  # outside the block, outputs are committed as if none came
