"""`ps.viz`: matplotlib figures of results computed elsewhere; nothing here computes a result. Using one of its
names imports matplotlib (the rest of pgrpo_sim does not).

The names are listed once, as `X as X` imports in `__init__.pyi`, and re-exported lazily (`lazy_loader`).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
