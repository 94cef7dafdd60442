"""Validation sections 8, 9 and 11, computed in modules of their own: rollout reuse and one oscillator for a prompt
population (`reports.rollout_claims`), and the language-model level's collapses (`reports.lm_claims`). Here: each
one as a section (`Resolution`, seed, plot), and its claim as the report states it."""

from __future__ import annotations

from collections.abc import Callable

from .. import lm_claims, rollout_claims
from .common import Resolution


def rollout_reuse(res: Resolution, seed: int, plot: Callable | None) -> dict:
    """Claim: reusing a rollout for K_ref optimiser steps is stable while K·η_eff·K_ref < 1 − μ (the paper's
    threshold), against the measured onset with reuse and with fresh samples and the exact Floquet onset
    (`rollout_claims.rollout_reuse`)."""
    return rollout_claims.rollout_reuse(res.rollouts, plot)


def mean_field(res: Resolution, seed: int, plot: Callable | None) -> dict:
    """Claim: one oscillator describes the mean reward of a prompt population, as its difficulty spread grows,
    with per-prompt and with shared parameters (`rollout_claims.mean_field`)."""
    return rollout_claims.mean_field(res.rollouts, plot)


def lm_collapse(res: Resolution, seed: int, plot: Callable | None, deal: lm_claims.Deal = lm_claims.run_here) -> dict:
    """Claim: the language-model level fails where LLM GRPO runs fail — a learning rate a few times the best, many
    optimiser steps per rollout, no clip with reuse — and the bandit cannot (`lm_claims.lm_collapse`).

    `deal`: how its rounds of settings are run (`lm_claims.Deal`)."""
    return lm_claims.lm_collapse(res.lm, seed, plot, deal)
