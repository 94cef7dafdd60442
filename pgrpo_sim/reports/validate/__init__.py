"""`pgrpo-sim validate`: each claim of the damped-oscillator theory of GRPO next to the exact bandit.

Every section returns its numbers, a table, a figure and a verdict computed from the numbers
(`{"holds": bool, "text": str}`), never written by hand. A verdict's tolerance comes from the uncertainty of
what it compares — `VERDICT_Z` standard errors for measured differences, the grid step for a threshold found
on a grid, `BIC_DECISIVE` for a comparison of laws — and its text names what was compared. Runs in float64
with fixed PRNG keys, so a rerun with the same seed gives identical numbers. `quick=True` lowers the
resolution, not the content.
Base setting unless a section says otherwise: two arms, p_ref = 0.2, β = 0.5 (k3), G = 8, std advantages,
on-policy heavy-ball SGD; η_eff = η·N/(c(N−c)) = 2η is the oscillator's learning rate (see `prediction`).

One module per claim (sections 1 and 10 share their runs, `num_generations`; 8, 9 and 11 are computed in
`reports.rollout_claims` and `reports.lm_claims`, `delegated`), what they share (`common`), their table
(`sections`), the runner (`runner`: `validate`) and the report (`report`).
"""

from ...logs.law_regimes import BIC_DECISIVE as BIC_DECISIVE
from .common import (
    BASE as BASE,
    FULL as FULL,
    QUICK as QUICK,
    REWARD as REWARD,
    VERDICT_Z as VERDICT_Z,
    Resolution as Resolution,
)
from .delegated import lm_collapse as lm_collapse, mean_field as mean_field, rollout_reuse as rollout_reuse
from .failures import failure_modes as failure_modes
from .lag import lag_threshold as lag_threshold
from .num_generations import (
    GROUP_READOUTS as GROUP_READOUTS,
    GROUP_STEPS as GROUP_STEPS,
    group_size_invariance as group_size_invariance,
    group_spread as group_spread,
)
from .onset import oscillation_onset as oscillation_onset
from .report import report_markdown as report_markdown
from .runner import SCHEDULE as SCHEDULE, validate as validate
from .saturation import saturation_law as saturation_law
from .sections import SECTIONS as SECTIONS
from .stationary_variance import fluctuations as fluctuations
from .stiffness_estimates import stiffness as stiffness
