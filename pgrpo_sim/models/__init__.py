"""The levels of model, one room per kind: `oscillator` (the continuous oscillator `theory`, its reduced SDE `sde`
and the exact discrete map `linear`), `bandit` (the exact softmax bandit, with its `configuration`, `readouts` and
`hyperparameters`) and `lm` (the small language model). Beside the rooms, what the levels share: `grpo` (the GRPO
pieces), `schedules` (the learning-rate schedules) and `step_ranges` (the ranges of η and μ). See docs/design.md."""
