"""`ps.calibration`: calibrate the population bandit on a real training log, forecast the run, and answer what-if
scenarios (docs/guide/calibration.md).

Layers: `run_config` (TRL GRPOConfig names → the bandit) → `model` (the population bandit's observables) →
`inference` (`calibrate`: MAP + Laplace, predictive bands) → `forecast` (held-out scores, baselines, what-if verdicts).

The names are listed once, as `X as X` imports in `__init__.pyi`, and re-exported lazily (`lazy_loader`).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
