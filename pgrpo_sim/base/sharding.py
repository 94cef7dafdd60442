"""Spreading work over the XLA devices and the processes of a multi-host run: under the command line one device per
CPU core (`runtime`), so a batch whose leading axis is split across them runs on every core; with one device and one
process these are no-ops. A multi-host run (`jax.distributed`) exchanges host arrays between its
processes with `gather_processes` and `from_first_process`."""

from __future__ import annotations

import jax
import numpy as np


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


def from_first_process(tree):
    """Process 0's `tree` on every process (the others pass arrays of the same shapes and dtypes); one process: its
    own, as NumPy arrays."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    from jax.experimental import multihost_utils

    return jax.tree.map(np.asarray, multihost_utils.broadcast_one_to_all(tree))
