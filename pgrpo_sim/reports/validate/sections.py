"""The claims `pgrpo-sim validate` tests, in the report's order: `SECTIONS`, key → (title, section function). The
runner and the report read it as `sections.SECTIONS` when they run, so that one replaced table reaches both;
`IF_FAILS`: what each claim's failure means for a user's run, one sentence the report prints under a failed verdict."""

from __future__ import annotations

from collections.abc import Callable

from .delegated import lm_collapse, mean_field, rollout_reuse
from .failures import failure_modes
from .lag import lag_threshold
from .num_generations import group_size_invariance, group_spread
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

IF_FAILS: dict[str, str] = {
    "group_size_invariance": "The group size G changes where a run's reward settles, not only how noisy it is: a run "
    "at one G says little about the same run at another.",
    "fluctuations": "A larger group does not shrink the reward's late-time variance as 1/G: doubling G buys another "
    "noise reduction than the theory's rule says (the measured exponent is above).",
    "oscillation_onset": "The damping ratio ζ = 1 does not mark where a run's reward starts to oscillate: settings the "
    "theory calls overdamped can still oscillate, and the reverse.",
    "lag_threshold": "τ* = (1 − μ)/(ηK) is no safe bound on off-policy lag: a run can turn unstable at a lag the "
    "formula allows; use the exact map's prediction, or try the lag.",
    "saturation_law": "R∞(1 − e^{−t/t0}) is not the shape of a run's reward: fitted to its first steps it misreads the "
    "plateau and the time to reach it; use the second-order laws `fit` reports beside it.",
    "stiffness": "The stiffness K read off a log (the early slope, or an oscillator fit) is off by the amount above, "
    "and every threshold computed from it (τ*, K_ref*, the critical learning rate) is off with it.",
    "failure_modes": "The diagnostics `fit` prints on a log may name the wrong failure, or fire for a healthy run: "
    "treat a flag as a hint to check, not a diagnosis.",
    "rollout_reuse": "K_ref* = (1 − μ)/(η_eff K) does not say how many optimiser steps a rollout can take before the "
    "run turns unstable: do not choose num_iterations × steps_per_generation by it.",
    "mean_field": "One oscillator fitted to a run's mean reward over prompts of spread difficulty does not have the "
    "single prompt's damping: its ζ and the thresholds computed from it can be off for a real prompt set.",
    "group_spread": "A log's within-group spread (reward_std, frac_reward_zero_std) is not what the model expects at "
    "that G: reading the batch's success rate from it can be off.",
    "lm_collapse": "The language-model level does not break where LLM runs break: its collapse calls on a what-if "
    "(learning rate, steps per rollout, clip) are no evidence about a real run.",
}
