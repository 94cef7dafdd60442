"""Tests run in float64 (x64 enabled here only, never by the library); float32 checks pass float32 arrays.
The command line's compilation cache is off (`PGRPO_SIM_NO_COMPILE_CACHE`, inherited by the CLI subprocesses
the tests start): tests never write into the user's cache directory. Nor the language-model level's SFT starts: they
go to a folder of this test session's (`PGRPO_SIM_CACHE`, shared by the xdist workers of one run, so a start is
trained once per run).

Every test process starts JAX's backend here, with the command line's default XLA flags (`fast_cpu_compilation`):
otherwise the first test to call `main()` in-process would fix the flags (and the device count) of every later test
in that process, and numbers would depend on the order the tests ran in."""

import os
import tempfile

import jax
import pytest

from pgrpo_sim.base.runtime import fast_cpu_compilation

os.environ["PGRPO_SIM_NO_COMPILE_CACHE"] = "1"
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
os.environ["PGRPO_SIM_CACHE"] = os.path.join(tempfile.gettempdir(), f"pgrpo-sim-test-cache-{_RUN}")
jax.config.update("jax_enable_x64", True)
fast_cpu_compilation()
jax.devices()  # the backend starts now, with these flags and one CPU device


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop JAX's compiled programs after each test module: a worker runs hundreds of modules, whose executables
    would otherwise all be held to its end (the CI's one-process slow session crashed twice inside XLA compilation,
    at about two thirds of the suite; held programs are the suspect)."""
    yield
    jax.clear_caches()


@pytest.fixture(autouse=True)
def _process_xla_flags():
    """XLA_FLAGS as this process's JAX backend started with them, restored after every test: `main()` run in-process
    adds the command line's flags to the environment (they act only before JAX starts), and worker processes that a
    later test spawns (`worker_pool`) would inherit them, compiling with other flags than this process did."""
    before = os.environ.get("XLA_FLAGS")
    yield
    if before is None:
        os.environ.pop("XLA_FLAGS", None)
    else:
        os.environ["XLA_FLAGS"] = before


@pytest.fixture
def backend_compiles():
    """The names of the functions XLA compiles while the test runs, one entry per backend compilation
    (`jax.monitoring`'s compile events)."""
    names = []

    def record(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            names.append(kwargs.get("fun_name", ""))

    jax.monitoring.register_event_duration_secs_listener(record)
    yield names
    jax.monitoring.unregister_event_duration_listener(record)


@pytest.fixture
def alone_and_as_two(tmp_path):
    """Run a command line once alone (into tmp_path/one) and as a two-process run on this host (`--coordinator
    localhost:PORT --num-processes 2`, into tmp_path/two); returns each process's stdout lines, gloo's own
    "[Gloo] …" connection lines left out. Both runs must succeed."""
    import socket
    import subprocess
    import sys

    cli = [sys.executable, "-m", "pgrpo_sim.cli"]

    def run(argv: list[str]) -> list[list[str]]:
        alone = subprocess.run([*cli, *argv, "--out", str(tmp_path / "one")], capture_output=True, text=True)
        assert alone.returncode == 0, alone.stderr
        with socket.socket() as free:
            free.bind(("localhost", 0))
            port = free.getsockname()[1]
        multi = [*cli, *argv, "--out", str(tmp_path / "two"), "--coordinator", f"localhost:{port}"]
        procs = [subprocess.Popen([*multi, "--num-processes", "2", "--process-id", str(i)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(2)]  # fmt: skip
        outputs = [proc.communicate(timeout=600) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in outputs]
        return [[line for line in out.splitlines() if not line.startswith("[Gloo]")] for out, _ in outputs]

    return run
