"""Tests run in float64 (x64 enabled here only, never by the library); float32 checks pass float32 arrays.
The command line's compilation cache is off (`PGRPO_SIM_NO_COMPILE_CACHE`, inherited by the CLI subprocesses
the tests start): tests never write into the user's cache directory."""

import os

import jax

os.environ["PGRPO_SIM_NO_COMPILE_CACHE"] = "1"
jax.config.update("jax_enable_x64", True)
