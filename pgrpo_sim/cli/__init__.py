"""The `pgrpo-sim` command line: one module per command group, the parser and `main` in `app`. Bad input: one line
on stderr, exit code 2, no traceback. The commands import what they run when they run (`pgrpo-sim --help` loads
no JAX program, matplotlib or xarray)."""

from __future__ import annotations

from ..runtime import boot  # noqa: F401  (first: Ctrl-C while the other modules load)

# isort: split
from .app import build_parser as build_parser, main as main
from .simulate import SIMULATE_COLUMNS as SIMULATE_COLUMNS
