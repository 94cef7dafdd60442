"""Real training logs: readers, closed-form law fits, the stiffness K read off a curve, the train/eval coupling
and failure-mode diagnostics."""
