"""Tests run in float64 (x64 enabled here only, never by the library); float32 checks pass float32 arrays.
The command line's compilation cache is off (`PGRPO_SIM_NO_COMPILE_CACHE`, inherited by the CLI subprocesses
the tests start): tests never write into the user's cache directory."""

import os

import jax
import pytest

os.environ["PGRPO_SIM_NO_COMPILE_CACHE"] = "1"
jax.config.update("jax_enable_x64", True)


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
