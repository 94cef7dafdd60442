"""Tests run in float64 (x64 enabled here only, never by the library); float32 checks pass float32 arrays.
The command line's compilation cache is off (`PGRPO_SIM_NO_COMPILE_CACHE`, inherited by the CLI subprocesses
the tests start): tests never write into the user's cache directory. Nor the language-model level's SFT starts: they
go to a folder of this test session's (`PGRPO_SIM_CACHE`, shared by the xdist workers of one run, so a start is
trained once per run).

A test run that inherits Ctrl-C ignored (a background job of a script without job control, `(pytest &)`) takes it
back here: the commands the tests start would keep the ignore (`runtime.boot`, as they should for a user's `nohup`), and
the interrupt tests need their SIGINT delivered.

Every test process starts JAX's backend here, with the command line's default XLA flags (`fast_cpu_compilation`):
otherwise the first test to call `main()` in-process would fix the flags (and the device count) of every later test
in that process, and numbers would depend on the order the tests ran in."""

import os
import signal
import tempfile

import jax
import pytest

from pgrpo_sim.runtime.jax_setup import fast_cpu_compilation

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
def two_processes(tmp_path):
    """Run a command line (or another `program` that takes the same three flags) as a two-process run on this host
    (`--coordinator localhost:PORT --num-processes 2 --process-id I`); returns per process (exit code, stdout lines
    without gloo's own "[Gloo] …" connection lines, stderr)."""
    import socket
    import subprocess
    import sys

    def run(argv: list[str], program: tuple[str, ...] = ("-m", "pgrpo_sim.cli")) -> list[tuple[int, list[str], str]]:
        with socket.socket() as free:
            free.bind(("localhost", 0))
            port = free.getsockname()[1]
        multi = [sys.executable, *program, *argv, "--coordinator", f"localhost:{port}"]
        logs = [(tmp_path / f"process{i}.out", tmp_path / f"process{i}.err") for i in range(2)]
        procs = []
        try:  # each process's output to files: a full pipe would stall both processes
            for i, (out, err) in enumerate(logs):
                with out.open("w") as stdout, err.open("w") as stderr:
                    argv_i = [*multi, "--num-processes", "2", "--process-id", str(i)]
                    procs.append(subprocess.Popen(argv_i, stdout=stdout, stderr=stderr, text=True))
            codes = [proc.wait(timeout=600) for proc in procs]
        finally:
            for proc in procs:
                proc.kill()  # no-op for a process that ended
        said = [[line for line in out.read_text().splitlines() if not line.startswith("[Gloo]")] for out, _ in logs]
        return [(code, lines, err.read_text()) for code, lines, (_, err) in zip(codes, said, logs, strict=True)]

    return run
