"""Real training logs: readers, closed-form law fits and failure-mode diagnostics."""
