"""Process-wide JAX settings for the command line: the persistent compilation cache, one XLA CPU device
per core, and XLA's faster-compiling CPU fusion code generator (and the machine's cores and memory they are
sized by). Only `pgrpo_sim.cli.main` calls `configure_jax`; importing the library changes no global setting.

The compilation cache keeps XLA's compiled programs on disk, so a second run of the same command skips
compilation (seconds per static structure). It lives in `$XDG_CACHE_HOME/pgrpo-sim/jax` (default
`~/.cache/pgrpo-sim/jax`), or where `JAX_COMPILATION_CACHE_DIR` points if that is set; `--no-compile-cache`
or `PGRPO_SIM_NO_COMPILE_CACHE=1` turn it off. Deleting the directory is always safe.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

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
