"""Analyses built on the models and the bridge: sweeps and their summaries, phase predictions, boundaries,
sensitivities, differentiable outcomes and hyperparameter search."""
