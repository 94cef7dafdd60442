"""`ps.integrations`: pgrpo-sim inside a training script — a trainer callback that forecasts the run while it trains
and logs the collapse probability beside the reward (docs/guide/watch.md). `ForecastCallback` is TRL's (transformers';
`pip install 'pgrpo-sim[trl]'`); the rest is trainer-independent.

The names are listed once, as `X as X` imports in `__init__.pyi`, and re-exported lazily (`lazy_loader`): importing
this package imports no trainer, torch or JAX.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
