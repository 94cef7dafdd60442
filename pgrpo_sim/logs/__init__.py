"""`ps.logs`: real training logs: readers of eight formats into one `TrainingLog`, closed-form law fits, the
stiffness K read off a curve, the train/eval coupling and failure-mode diagnostics (docs/guide/logs.md).

The names are listed once, as `X as X` imports in `__init__.pyi`, and re-exported lazily (`lazy_loader`): reading a
log does not import JAX.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
