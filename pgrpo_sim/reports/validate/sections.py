"""The claims `pgrpo-sim validate` tests, in the report's order: `SECTIONS`, key → (title, section function). The
runner and the report read it as `sections.SECTIONS` when they run, so that one replaced table reaches both."""

from __future__ import annotations

from collections.abc import Callable

from .delegated import lm_collapse, mean_field, rollout_reuse
from .failures import failure_modes
from .group_size import group_size_invariance, group_spread
from .lag import lag_threshold
from .onset import oscillation_onset
from .saturation import saturation_law
from .stationary_variance import fluctuations
from .stiffness_estimates import stiffness

SECTIONS: dict[str, tuple[str, Callable]] = {
    "group_size_invariance": ("1. Group-size invariance", group_size_invariance),
    "fluctuations": ("2. 1/G fluctuations", fluctuations),
    "oscillation_onset": ("3. Overdamped → oscillatory transition", oscillation_onset),
    "lag_threshold": ("4. Stability threshold in the lag", lag_threshold),
    "saturation_law": ("5. Saturation law and the slow start", saturation_law),
    "stiffness": ("6. Stiffness is measurable", stiffness),
    "failure_modes": ("7. Failure modes are separable", failure_modes),
    "rollout_reuse": ("8. Rollout reuse: the critical number of epochs", rollout_reuse),
    "mean_field": ("9. One oscillator for a prompt population", mean_field),
    "group_spread": ("10. Residual group-size dependence of the within-group spread", group_spread),
    "lm_collapse": ("11. The language-model level breaks where LLM runs break", lm_collapse),
}
