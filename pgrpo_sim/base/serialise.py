"""Numbers for JSON and tables: a quantity that does not exist (NaN, ±∞) as null (`finite_or_none`, `json_text`)."""

from __future__ import annotations

import json
import math

import numpy as np


def finite_or_none(value) -> float | None:
    """`value` as a float, or None when it is None, NaN or ±∞ (a number that does not exist, for JSON and tables)."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def json_text(data, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """`data` as strict JSON: NaN and ±∞ (a quantity that does not exist, e.g. the stationary variance of an
    unstable oscillator) become null; NumPy (and JAX) scalars and arrays become numbers and lists. `TypeError`
    for other objects."""

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if hasattr(value, "__array__") and not isinstance(value, np.generic):  # NumPy or JAX arrays
            value = np.asarray(value)
            return clean(value.tolist()) if value.ndim else clean(value.item())
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if isinstance(value, np.generic):
            value = value.item()
        return None if isinstance(value, float) and not math.isfinite(value) else value

    return json.dumps(clean(data), indent=indent, sort_keys=sort_keys, allow_nan=False)
