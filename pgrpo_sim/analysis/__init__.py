"""`ps.analysis`: analyses built on the models and the bridge: sweeps and their summaries, phase predictions,
boundaries, sensitivities, differentiable outcomes and hyperparameter search (docs/guide/sweeps.md,
docs/guide/gradients.md).

The names are listed once, as `X as X` imports in `__init__.pyi`, and re-exported lazily (`lazy_loader`): a command
that needs one module (a sweep's grid) does not import the others.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
