"""What the sections of `pgrpo-sim validate` share: the resolution presets (quick and full), the read-out most
sections' runs compute, and (from `reports.claims`) the base setting, the tolerance of a difference and a verdict's
form."""

from __future__ import annotations

import dataclasses

from .. import lm_claims, rollout_claims
from ..claims import BASE as BASE, VERDICT_Z as VERDICT_Z, verdict as verdict


@dataclasses.dataclass(frozen=True)
class Resolution:
    """How finely each section samples (quick vs full)."""

    group_sizes: tuple = (2, 4, 8, 16)
    seeds_curves: int = 256
    fluct_group_sizes: tuple = (4, 8, 16, 32)
    seeds_fluct: int = 1000
    onset_points: int = 60
    onset_max: float = 0.95
    lag_pairs: tuple = ((0.2, 0.0), (0.1, 0.5), (0.05, 0.9), (0.1, 0.8))
    refresh_pairs: tuple = ((1.0, 0.0), (0.5, 0.5), (0.2, 0.9), (2.0, 0.0))
    max_lag: int = 30
    lag_steps: int = 3000
    rollouts: rollout_claims.RolloutResolution = rollout_claims.FULL
    lm: lm_claims.LMResolution = lm_claims.FULL


QUICK = Resolution(
    seeds_curves=64,
    fluct_group_sizes=(4, 8, 16),
    seeds_fluct=300,
    onset_points=24,
    lag_pairs=((0.2, 0.0), (0.1, 0.5), (0.05, 0.9)),
    refresh_pairs=((1.0, 0.0), (0.2, 0.9)),
    lag_steps=1500,
    rollouts=rollout_claims.QUICK,
    lm=lm_claims.QUICK,
)
FULL = Resolution()


REWARD = ("reward",)
"""The read-out most sections need: their `simulate` runs compute only it (they compile in about half the time)."""
