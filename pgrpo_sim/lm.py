"""`ps.lm`: the language-model level, a small causal transformer trained by GRPO on a synthetic verifiable task.

The level itself (`lm_config`, `lm_simulate`, the task, the policy, the SFT start, TRL's GRPO loss), its runs'
summaries and sweeps (the chance-corrected reward `knowledge`, `summarize_lm_runs`, `run_lm_sweep`), and its
calibration on a real log with what-if scenarios and forecasts (`calibrate_lm`, `lm_what_if`, `lm_forecast`)
(docs/lm.md).
"""

from .analysis.lm_sweep import (
    SUMMARY_FIELDS as SUMMARY_FIELDS,
    grid_points as grid_points,
    knowledge as knowledge,
    knowledge_se as knowledge_se,
    parse_lm_grid as parse_lm_grid,
    parse_settings as parse_settings,
    run_lm_sweep as run_lm_sweep,
    summarize_lm_runs as summarize_lm_runs,
)
from .calibration.language_model import LMCalibration as LMCalibration, calibrate_lm as calibrate_lm
from .calibration.lm_level import LEVEL_KEYS as LEVEL_KEYS, LMLevel as LMLevel
from .calibration.lm_scenarios import (
    lm_band as lm_band,
    lm_forecast as lm_forecast,
    lm_scenario as lm_scenario,
    lm_what_if as lm_what_if,
)
from .models.lm import (
    DEFAULT_LEARNING_RATE as DEFAULT_LEARNING_RATE,
    LOSS_TYPES as LOSS_TYPES,
    READOUTS as READOUTS,
    SCALE_REWARDS as SCALE_REWARDS,
    LMConfig as LMConfig,
    LMRun as LMRun,
    LossStats as LossStats,
    Policy as Policy,
    PolicyShape as PolicyShape,
    SFTStart as SFTStart,
    StartNotReached as StartNotReached,
    TaskSpec as TaskSpec,
    completion_logps as completion_logps,
    demonstrations as demonstrations,
    eval_accuracy as eval_accuracy,
    eval_prompts as eval_prompts,
    format_ok as format_ok,
    grpo_loss as grpo_loss,
    init_policy as init_policy,
    lm_config as lm_config,
    lm_simulate as lm_simulate,
    lm_simulate_each as lm_simulate_each,
    make_lm_run as make_lm_run,
    pretrained_policy as pretrained_policy,
    pretrained_start as pretrained_start,
    response_mask as response_mask,
    reward_spread as reward_spread,
    sample as sample,
    solutions as solutions,
    task_policy_shape as task_policy_shape,
    task_prompts as task_prompts,
    task_reward as task_reward,
    token_logits as token_logits,
)

__all__ = sorted(name for name in dir() if not name.startswith("_"))
