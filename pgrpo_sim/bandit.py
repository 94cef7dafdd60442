"""`ps.bandit`: the exact softmax-bandit GRPO environment and its bridge to the oscillator.

Configuration (`config`, `Config` and their tables), runs (`simulate`, `Run`, the read-out registry), the GRPO
pieces as verl and TRL compute them (advantages, clipped surrogate, KL estimators), the hyperparameter table,
`predict` (the two-arm reduction, fixed point, K, D and the lag the oscillator sees), and the low-level API of one
run (`run`, `run_loop`, `step`, rollout reuse's branches) for callers who vmap or scan it themselves
(docs/guide/models.md, docs/guide/rollouts.md, docs/guide/oscillator.md), and the level's calibration on a real
log (`calibrate`, `forecast`, `what_if`, also in `ps.calibration`): the verbs `ps.lm` has, under the same names.
A grid of runs: `sweep` in memory, or `ps.run_sweep(…, store=ChunkStore(DIR))`, kept in a folder as it runs so that a
rerun resumes (docs/guide/sweeps.md).
"""

from .analysis.sweep import sweep as sweep
from .calibration import (
    Calibration as Calibration,
    Forecast as Forecast,
    Scenario as Scenario,
    WhatIf as WhatIf,
    calibrate as calibrate,
    forecast as forecast,
    what_if as what_if,
)
from .models.bandit import (
    MAX_OUTCOMES as MAX_OUTCOMES,
    Run as Run,
    State as State,
    UpdateStats as UpdateStats,
    check_mode as check_mode,
    collapse_branches as collapse_branches,
    draw_rollout as draw_rollout,
    expected_loss as expected_loss,
    initial_state as initial_state,
    make_optimizer as make_optimizer,
    minibatch_weights as minibatch_weights,
    on_policy_grad as on_policy_grad,
    reuse_branch_step as reuse_branch_step,
    rewards_are_binary as rewards_are_binary,
    rollout_count as rollout_count,
    rollout_outcomes as rollout_outcomes,
    rollout_step as rollout_step,
    run as run,
    run_loop as run_loop,
    sampled_loss as sampled_loss,
    sampled_on_policy_grad as sampled_on_policy_grad,
    simulate as simulate,
    simulate_in_chunks as simulate_in_chunks,
    step as step,
    valid_hyperparameters as valid_hyperparameters,
)
from .models.bandit.configuration import (
    DEFAULT_P_REF as DEFAULT_P_REF,
    DEFAULTS as DEFAULTS,
    KL_KINDS as KL_KINDS,
    LAG_MODELS as LAG_MODELS,
    LEAF_RANGES as LEAF_RANGES,
    LR_SCHEDULES as LR_SCHEDULES,
    MAX_GROUP_SIZE as MAX_GROUP_SIZE,
    MODES as MODES,
    OPTIMIZERS as OPTIMIZERS,
    Config as Config,
    class_symmetric_logits as class_symmetric_logits,
    config as config,
)
from .models.bandit.hyperparameters import (
    HYPERPARAMETERS as HYPERPARAMETERS,
    Hyperparameter as Hyperparameter,
    reference_mass as reference_mass,
    set_hyperparameters as set_hyperparameters,
    with_hyperparameters as with_hyperparameters,
)
from .models.bandit.readouts import (
    READOUTS as READOUTS,
    STEP_READOUTS as STEP_READOUTS,
    StepReadout as StepReadout,
)
from .models.grpo import (
    ADVANTAGES as ADVANTAGES,
    KL_ESTIMATORS as KL_ESTIMATORS,
    Surrogate as Surrogate,
    advantage_code as advantage_code,
    clipped_surrogate as clipped_surrogate,
    entropy as entropy,
    group_advantages as group_advantages,
    kl_divergence as kl_divergence,
    kl_estimate as kl_estimate,
)
from .prediction import (
    QUANTITIES as QUANTITIES,
    REASONS as REASONS,
    Prediction as Prediction,
    config_lag as config_lag,
    continuous_lag as continuous_lag,
    eta_scale as eta_scale,
    fixed_point as fixed_point,
    noise_scale as noise_scale,
    predict as predict,
    two_arm_reduction as two_arm_reduction,
)
from .runtime.sweep_store import ChunkStore as ChunkStore

__all__ = sorted(name for name in dir() if not name.startswith("_"))
