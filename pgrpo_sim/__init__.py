"""pgrpo-sim: a JAX-based, differentiable simulator of GRPO training dynamics.

Layers (docs/development.md, "Layout"): `base` → `models` → `prediction` → `analysis`, `logs` → `calibration` → `viz` →
`runtime` → `reports` → `cli`.
The public API is `import pgrpo_sim as ps`: the names most users call (`ps.simulate`, `ps.predict`, `ps.read_log`,
`ps.calibrate`, `ps.validate`, …) and the groups that hold every public name (`ps.theory`, `ps.bandit`, `ps.lm`,
`ps.analysis`, `ps.logs`, `ps.calibration`, `ps.viz`; docs/api.md); the modules behind them are the implementation.
The names are listed once, as `X as X` imports in `__init__.pyi`, which type checkers read; at run time
`lazy_loader` (scientific-python SPEC 1) reads the same file and re-exports them lazily: `import pgrpo_sim` loads
nothing heavy, and a name's module (with JAX, diffrax, xarray…) is imported on first use, so a command line that
needs one layer does not pay for the others.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)

try:
    __version__ = version("pgrpo-sim")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
