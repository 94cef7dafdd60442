"""The process around the library, for the command line and the trainer callbacks: its first moments (`boot`),
JAX's process-wide settings and compilation cache (`jax_setup`), worker processes (`workers`), Ctrl-C
(`interrupts`), output folders replaced only when complete (`outputs`), tables on disk (`tables`), a sweep's files
(`sweep_store`) and progress lines (`stage_lines`). The library below never imports it: it takes a store object and
a progress callback instead."""
