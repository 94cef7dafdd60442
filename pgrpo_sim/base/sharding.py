"""Spreading work over the XLA devices and the processes of a multi-host run: under the command line one device per
CPU core (`runtime`), so a batch whose leading axis is split across them runs on every core; with one device and one
process these are no-ops. A multi-host run (`jax.distributed`) exchanges host arrays between its
processes with `gather_processes`, `share_from_first` and `agree`."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import TypeVar

import jax
import numpy as np

from .errors import PgrpoSimError

T = TypeVar("T")


def pad_to_devices(x: np.ndarray) -> np.ndarray:
    """`x` with its leading axis padded to a multiple of the device count by repeating its last row (callers drop
    the padding's results)."""
    x = np.asarray(x)
    pad = -x.shape[0] % jax.device_count()
    return np.concatenate([x, np.repeat(x[-1:], pad, axis=0)]) if pad else x


def shard_batch(x) -> jax.Array:
    """`x` placed with its leading axis across all devices in contiguous blocks, so jitted code on it is
    partitioned the same way; left on one device when the axis is not a multiple of the device count (pad it
    first, `pad_to_devices`, where padding cannot change the results)."""
    if jax.device_count() == 1 or np.shape(x)[0] % jax.device_count():
        return jax.numpy.asarray(x)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
    return jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch")))


def gather_processes(tree, *, tiled: bool = False):
    """Every process's `tree` (a pytree of host or device arrays of the same shapes and dtypes on every process), on
    every process.

    Args:
        tree: this process's arrays.
        tiled: concatenate the processes' arrays along their leading axis instead of stacking them on a new one.

    Returns:
        The pytree of NumPy arrays: each leaf [processes, …] (tiled: [processes × n, …]); one process: its own.
    """
    if jax.process_count() == 1:
        return jax.tree.map(lambda x: np.asarray(x) if tiled else np.asarray(x)[None], tree)
    from jax.experimental import multihost_utils

    return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=tiled))


def _from_first_process(tree):
    """Process 0's arrays (the others pass arrays of the same shapes and dtypes) on every process."""
    from jax.experimental import multihost_utils

    return jax.tree.map(np.asarray, multihost_utils.broadcast_one_to_all(tree))


def share_from_first(value):
    """Process 0's `value` (any picklable object: the others pass anything) on every process of a multi-host run;
    with one process, `value` itself."""
    if jax.process_count() == 1:
        return value
    first = jax.process_index() == 0
    data = np.frombuffer(pickle.dumps(value), np.uint8) if first else np.zeros(0, np.uint8)
    size = int(_from_first_process(np.array(data.size, np.int32)))
    return pickle.loads(_from_first_process(data if first else np.zeros(size, np.uint8)).tobytes())


def agree(check: Callable[[], T]) -> T:
    """`check()` on this process; in a multi-host run every process learns whether it raised anywhere, so that a
    refusal on one process (process 0's --out, one host's free disk) ends every process with one line instead of
    leaving the others waiting in the next exchange.

    Returns:
        What `check` returned.

    Raises:
        PgrpoSimError: `check`'s own on the process where it raised; on the others, one naming that process.
    """
    try:
        result = check()
    except PgrpoSimError as exc:
        _raise_if_refused(exc)
        raise
    _raise_if_refused(None)
    return result


def _raise_if_refused(error: PgrpoSimError | None) -> None:
    """In a multi-host run, tell every process whether `error` happened on any; raise there where it did not."""
    if jax.process_count() == 1:
        return
    failed = np.flatnonzero(gather_processes(np.array([error is not None], np.int8), tiled=True))
    if error is None and failed.size:
        raise PgrpoSimError(f"process {failed[0]} of the multi-host run refused; its own message says why")
