"""Argument validation shared by every public function.

Two behaviours, as documented on each public function:
- eagerly (concrete inputs, outside `jit`/`vmap`/`grad`), a bad value raises `ValueError` naming the
  parameter and its allowed range;
- under a JAX transformation the values are tracers and cannot be inspected, so the check is skipped
  and the function instead masks its result with NaN wherever an input is out of range
  (see `in_range`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .errors import PgrpoSimError

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""The largest float32 (3.4e38): the bandit's hyperparameters are float32 unless x64 is on, so a real-valued
setting that becomes one is refused beyond it where it is read, not later as a float32 infinity."""


def is_concrete(*values: Any) -> bool:
    """True when no leaf of `values` is a JAX tracer (so it can be read on the host)."""
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(values))


def _number(x: float) -> str:
    """A bound or a refused value as text: whole numbers in full (a limit of 2**20 is 1048576, not 1.04858e+06, and
    a refused 1048577 is not printed as 1.04858e+06 beside it), others as `:g`."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def describe_range(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """Human-readable interval, e.g. '> 0', 'in [0, 1)', '>= 2', 'in [1, 100000000]'."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{_number(low)}, {_number(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {_number(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {_number(high)}"
    return "finite"


def in_range(value, low=None, high=None, low_open=False, high_open=False, allow_inf=False, xp=jnp):
    """Elementwise mask: `value` is finite (or +inf if `allow_inf`) and inside the interval.

    `xp=numpy` keeps the check on the host (it must not be staged into a trace that is running).
    """
    value = xp.asarray(value)
    ok = xp.isfinite(value) | (allow_inf & (value == xp.inf))
    if low is not None:
        ok &= (value > low) if low_open else (value >= low)
    if high is not None:
        ok &= (value < high) if high_open else (value <= high)
    return ok


def check_range(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
    allow_inf: bool = False,
) -> None:
    """Raise `ValueError` if concrete `value` is non-finite or outside the interval; no-op on tracers."""
    if value is None or not is_concrete(value):
        return
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise PgrpoSimError(f"{name} must be a number, got {value!r}")
    bad_finite = ~np.isfinite(arr) & ~(allow_inf & (arr == np.inf))
    if bad_finite.any():
        # a finite number beyond float32's range arrives here as ±inf (from `as_float`): say where the range ends
        span = f" (|x| <= {np.finfo(arr.dtype).max:.3g} in {arr.dtype})" if arr.dtype == np.float32 else ""
        raise PgrpoSimError(f"{name} must be finite{span}, got {_show(arr[bad_finite])}")
    span = describe_range(low, high, low_open, high_open)
    ok = in_range(arr, low, high, low_open, high_open, allow_inf, xp=np)
    if not ok.all():
        raise PgrpoSimError(f"{name} must be {span}, got {_show(arr[~ok])}")
    if integer and (np.asarray(arr) != np.round(arr)).any():
        raise PgrpoSimError(f"{name} must be an integer, got {_show(arr[arr != np.round(arr)])}")


class Interval(NamedTuple):
    """An allowed range of a number: `low`/`high` (None: unbounded), each end open or closed. One table of them
    serves the eager check (`check`) and the in-jit mask (`holds`), so the two cannot drift apart."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def check(self, name: str, value: Any, *, integer: bool = False) -> None:
        """`check_range(name, value, ...)` over this interval."""
        check_range(name, value, self.low, self.high, low_open=self.low_open, high_open=self.high_open, integer=integer)

    def holds(self, value: Any, xp=jnp):
        """`in_range(value, ...)` over this interval: an elementwise mask, on tracers too."""
        return in_range(value, *self, xp=xp)

    def describe(self) -> str:
        """`describe_range` of this interval, e.g. 'in [0, 1)'."""
        return describe_range(*self)


def check_scalar(name: str, value: Any, *, optional: bool = False) -> None:
    """Raise `PgrpoSimError` unless `value` is one number (None too if `optional`): refuses None, text and, when
    concrete, arrays of more than one value (sweep a setting with `vmap` or a sweep, not by an array in one
    configuration). The range is `check_range`'s."""
    if value is None:
        if not optional:
            raise PgrpoSimError(f"{name} must be a number, got None")
        return
    if isinstance(value, (str, bytes)):
        raise PgrpoSimError(f"{name} must be a number, got {value!r}")
    if is_concrete(value) and np.ndim(value) != 0:
        raise PgrpoSimError(
            f"{name} must be a single number, got shape {np.shape(value)} (to sweep it, vmap over configurations or "
            "use run_sweep)"
        )


def _shape(value: Any) -> tuple[int, ...]:
    """The shape `value` has as an array, also for a list that holds tracers (without reading them)."""
    if hasattr(value, "shape"):
        return tuple(value.shape)
    return np.shape(value) if is_concrete(value) else jnp.shape(jnp.asarray(value))


def check_shapes(**values: Any) -> None:
    """Raise `PgrpoSimError` naming the parameters unless the shapes of the given values (None skipped) broadcast
    together; shapes are static, so this also works on tracers."""
    shapes = {name: _shape(value) for name, value in values.items() if value is not None}
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise PgrpoSimError(f"{', '.join(shapes)} must have shapes that broadcast together, got {listed}") from None


def check_normal(name: str, value: Any, dtype, where: str = "") -> None:
    """Raise `PgrpoSimError` unless every element of concrete `value`, as `dtype`, is zero or a finite normal number:
    beyond the largest one a computation overflows to ±inf, below the smallest (subnormal numbers, or a non-zero
    number that underflows to 0) it keeps few or no significant digits. The message names `name`, `where` (the
    inputs it came from, if any) and the range. No-op on tracers."""
    if not is_concrete(value):
        return
    info = np.finfo(dtype)
    with np.errstate(all="ignore"):
        given = np.asarray(value, dtype=float)
        cast = given.astype(dtype)
        bad = ~np.isfinite(cast) | ((given != 0) & (np.abs(cast) < info.tiny))
    if bad.any():
        raise PgrpoSimError(
            f"{name} = {_show(given[bad])}{where} is outside the range the computation supports ({np.dtype(dtype)}: 0 "
            f"or {info.tiny:.3g} <= |x| <= {info.max:.3g}; beyond it values overflow or lose their digits)"
        )


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise `ValueError` unless `value` is one of `choices`."""
    if value not in choices:
        raise PgrpoSimError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


MAX_STEPS = 10**8
"""Longest run, in steps: at ~10⁷ steps/s a single run of this length takes seconds to minutes, and step counters
are int32 (2³¹ − 1 ≈ 2·10⁹ overflowed with a traceback)."""
MAX_SEED = 2**32 - 1
"""Largest PRNG seed: JAX's keys take 32 bits (without x64, larger seeds wrap around onto smaller ones)."""


MAX_SEEDS = 2**20
"""Most independent seeds of one sampled run: 10⁶ seeds put a seed-mean within 0.1 % of one seed's spread, and
10¹¹ seeds aborted inside XLA while splitting the keys."""


def check_seeds(seeds: Any) -> None:
    """Raise `PgrpoSimError` unless `seeds` is an integer in [1, `MAX_SEEDS`]."""
    check_range("seeds", seeds, 1, MAX_SEEDS, integer=True)


def check_steps(steps: Any) -> None:
    """Raise `PgrpoSimError` unless `steps` is an integer in [1, `MAX_STEPS`]."""
    check_range("steps", steps, 1, MAX_STEPS, integer=True)


def check_seed(seed: Any) -> None:
    """Raise `PgrpoSimError` unless `seed` is an integer in [0, `MAX_SEED`]."""
    if isinstance(seed, int) and not isinstance(seed, bool) and not 0 <= seed <= MAX_SEED:  # also beyond int64
        raise PgrpoSimError(f"seed must be in [0, {MAX_SEED}] (32 bits), got {seed}")
    check_range("seed", seed, 0, integer=True)
    if seed is not None and is_concrete(seed) and np.any(np.asarray(seed) > MAX_SEED):
        raise PgrpoSimError(f"seed must be in [0, {MAX_SEED}] (32 bits), got {seed}")


def as_key(key: Any) -> jax.Array:
    """A JAX PRNG key from `key`: a key (typed, or raw uint32 data) as it is, an int as the seed of
    `jax.random.key` (checked by `check_seed`); anything else raises `PgrpoSimError`."""
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):  # NumPy has no key dtype
        return key
    integer = isinstance(key, (int, np.integer, jax.Array, np.ndarray)) and not isinstance(key, (bool, np.bool_))
    if integer and np.ndim(key) == 0 and is_concrete(key) and np.issubdtype(np.asarray(key).dtype, np.integer):
        check_seed(int(key))
        return jax.random.key(int(key))
    if isinstance(key, (jax.Array, np.ndarray)):  # raw uint32 key data (or a traced seed), for JAX to judge
        return key  # pyright: ignore[reportReturnType]  # NumPy key data: JAX's random functions take it as a key
    raise PgrpoSimError(f"key must be a JAX PRNG key (jax.random.key(seed)) or an int seed, got {type(key).__name__}")


def as_float(x) -> jax.Array:
    """A float JAX array: float arrays keep their precision; lists, ints and Python scalars become the
    default float dtype (float32, or float64 under x64), strongly typed so one jit signature serves all.
    Host values are converted on the host and transferred (`jnp.asarray` of them compiles a program per shape)."""
    if isinstance(x, jax.Array):
        return jnp.asarray(x) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.asarray(x, dtype=float)
    if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating):
        return jax.device_put(x)  # pyright: ignore[reportReturnType]  # a jax.Array: device_put is untyped
    if not is_concrete(x):
        return jnp.asarray(x, dtype=float)
    with np.errstate(over="ignore"):  # beyond float32's range: ±inf, which the range checks then refuse
        return jax.device_put(np.asarray(x, dtype=jax.dtypes.canonicalize_dtype(float)))  # pyright: ignore[reportReturnType]


def nan_unless(ok, value):
    """`value` where `ok`, NaN elsewhere (the in-jit form of a failed check)."""
    value = jnp.asarray(value)
    return jnp.where(ok, value, jnp.asarray(math.nan, dtype=jnp.result_type(value, float)))


def _show(bad: np.ndarray) -> str:
    flat = bad.ravel()
    return _number(flat[0]) if flat.size == 1 else f"{_number(flat[0])} (and {flat.size - 1} more)"
