"""Tests run in float64 (x64 enabled here only, never by the library); float32 checks pass float32 arrays."""

import jax

jax.config.update("jax_enable_x64", True)
