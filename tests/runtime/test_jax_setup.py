"""The command line's JAX settings: where the compilation cache goes, and the ways to turn it off."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from pgrpo_sim.runtime.jax_setup import (
    CPU_FUSION_FLAG,
    NO_CACHE_ENV,
    SERIAL_CODEGEN_FLAG,
    UNOPTIMIZED_CODEGEN_FLAG,
    cache_disabled_by_env,
    configure_jax,
    default_cache_dir,
    fast_cpu_compilation,
)


@pytest.mark.parametrize("value, off", [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)])
def test_environment_variable_turns_the_cache_off(value, off):
    assert cache_disabled_by_env({NO_CACHE_ENV: value}) is off
    assert cache_disabled_by_env({}) is False


def test_cache_directory_is_per_user():
    assert default_cache_dir({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/pgrpo-sim/jax")
    assert default_cache_dir({"JAX_COMPILATION_CACHE_DIR": "/y", "XDG_CACHE_HOME": "/x"}) == Path("/y")
    assert default_cache_dir({}) == Path("~/.cache/pgrpo-sim/jax").expanduser()


def test_configure_changes_nothing_when_the_cache_is_off(monkeypatch):
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    before = jax.config.jax_compilation_cache_dir
    assert configure_jax(compile_cache=True) is None  # JAX is already imported: its devices stay as they are
    assert configure_jax(compile_cache=False) is None
    assert jax.config.jax_compilation_cache_dir == before


def test_fusion_flag_never_over_the_users():
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    assert fast_cpu_compilation(env) is True
    assert env["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {CPU_FUSION_FLAG}"
    mine = {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=true"}
    assert fast_cpu_compilation(mine) is False and mine["XLA_FLAGS"] == "--xla_cpu_use_fusion_emitters=true"
    bound = {}
    assert fast_cpu_compilation(bound, compile_bound=True) is True
    assert bound["XLA_FLAGS"] == f"{SERIAL_CODEGEN_FLAG} {UNOPTIMIZED_CODEGEN_FLAG} {CPU_FUSION_FLAG}"
    split = {"XLA_FLAGS": "--xla_cpu_parallel_codegen_split_count=4 --xla_backend_optimization_level=3"}
    assert fast_cpu_compilation(split, compile_bound=True) is True
    assert split["XLA_FLAGS"] == (
        f"--xla_cpu_parallel_codegen_split_count=4 --xla_backend_optimization_level=3 {CPU_FUSION_FLAG}"
    )


def test_only_validate_is_compile_bound():
    """`validate` compiles many programs that run for milliseconds; the other commands keep optimised code."""
    from pgrpo_sim.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["validate", "--quick", "--out", "v"]).compile_bound is True
    for argv in (
        ["simulate", "--out", "r.csv"],
        ["sweep", "--grid", "learning_rate=0.1", "--out", "s"],
        ["phase-diagram", "--out", "p"],
    ):
        assert getattr(parser.parse_args(argv), "compile_bound", False) is False


@pytest.mark.slow
def test_cli_process_uses_every_core_and_the_flag():
    """`pgrpo-sim` sets both before JAX's backend starts, although importing the CLI imports JAX: a fresh
    process runs a command, then reports its devices, its cores and its XLA flags."""
    code = (
        "import os, sys, jax; from pgrpo_sim import cli; from pgrpo_sim.runtime.jax_setup import cpu_cores; "
        "cli.main(['theory', '--eta', '0.1', '--stiffness', '0.2']); "
        "print(jax.device_count(), cpu_cores(), os.environ['XLA_FLAGS'])"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
    devices, cores, flags = out.stdout.splitlines()[-1].split(maxsplit=2)
    assert devices == cores and flags == CPU_FUSION_FLAG


def _sweep(tmp_path: Path, name: str, *flags: str, **env: str) -> Path:
    """Run a small sweep in a fresh process with the cache home in tmp_path/name; returns that cache home."""
    home = tmp_path / name
    environ = {k: v for k, v in os.environ.items() if k not in (NO_CACHE_ENV, "JAX_COMPILATION_CACHE_DIR")}
    environ.update(XDG_CACHE_HOME=str(home), **env)
    argv = [sys.executable, "-m", "pgrpo_sim.cli", *flags, "sweep", "--grid", "learning_rate=0.1,0.2", "--steps", "50"]
    proc = subprocess.run([*argv, "--quiet", "--out", str(tmp_path / f"{name}-out")], env=environ, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return home


@pytest.mark.slow  # three CLI processes with compilation: ~12 s
def test_cli_fills_the_cache_unless_told_not_to(tmp_path):
    on = _sweep(tmp_path, "on")
    assert any((on / "pgrpo-sim" / "jax").iterdir())  # the sweep's compiled chunk at least
    assert not _sweep(tmp_path, "flag", "--no-compile-cache").exists()
    assert not _sweep(tmp_path, "env", **{NO_CACHE_ENV: "1"}).exists()
