"""`jax.jit` compiler options of the library's programs, chosen by how long they run against how long they compile
(the process-wide XLA flags the command line sets are in `runtime.jax_setup`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

RUN_BOUND_OPTIONS = {"xla_cpu_use_fusion_emitters": True}
"""`jax.jit` compiler options for a program whose run time outweighs its compilation (a sweep's chunks): XLA's
newer CPU fusion emitters, which `CPU_FUSION_FLAG` turns off process-wide, compile it 0.3–0.4 s slower but run
an expected-mode sweep's chunk 1.2–1.5× faster (its summary pass ~3×) and a sampled one about as fast (RESULTS.md,
"XLA CPU fusion emitters"). Other backends ignore the option."""


OPTIMISED_CODEGEN: Mapping[str, int] = MappingProxyType({"xla_backend_optimization_level": 3})
"""`jax.jit` compiler options for programs that run for seconds (the language-model level's runs and SFT, the
oscillator's fit): LLVM's optimisation whatever `XLA_FLAGS` say, so that `validate`'s `UNOPTIMIZED_CODEGEN_FLAG`
does not slow them (its language-model section took 365 s unoptimised, about 150 s optimised; `validate --quick`,
2 cores, 2026-12-06). Pass as `compiler_options=dict(OPTIMISED_CODEGEN)`; other backends ignore it."""
