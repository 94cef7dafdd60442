"""Spreading a batch over the XLA devices: under the command line one device per CPU core (`runtime`), so a
batch whose leading axis is split across them runs on every core; with one device these are no-ops."""

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
