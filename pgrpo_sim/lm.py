"""`ps.lm`: the language-model level, a small causal transformer trained by GRPO on a synthetic verifiable task.

The level itself (`config`, `simulate`, the task, the policy, the SFT start, TRL's GRPO loss), its runs' summaries
and sweeps (the chance-corrected reward `knowledge`, `summarize_runs`, `sweep`), and its calibration on a real log
with what-if scenarios and forecasts (`calibrate`, `what_if`, `forecast`; `watch_forecast`, `alerting` and
`Forecasts` for a run still being written) (docs/lm.md, docs/guide/watch.md). The same verbs as `ps.bandit`'s,
without the group's name: `ps.lm.simulate`, `ps.lm.Config`, `ps.lm.calibrate`.
"""

from .analysis.lm_dataset import sweep as sweep
from .analysis.lm_sweep import (
    SUMMARY_FIELDS as SUMMARY_FIELDS,
    grid_points as grid_points,
    knowledge as knowledge,
    knowledge_se as knowledge_se,
    parse_grid as parse_grid,
    parse_settings as parse_settings,
    summarize_runs as summarize_runs,
)
from .calibration.language_model import Calibration as Calibration, calibrate as calibrate
from .calibration.lm_level import LEVEL_KEYS as LEVEL_KEYS, Level as Level
from .calibration.lm_scenarios import (
    forecast as forecast,
    scenario as scenario,
    what_if as what_if,
)
from .calibration.results import Forecast as Forecast, Scenario as Scenario, WhatIf as WhatIf
from .calibration.watch import Forecasts as Forecasts, alerting as alerting, watch_forecast as watch_forecast
from .models.lm import (
    DEFAULT_LEARNING_RATE as DEFAULT_LEARNING_RATE,
    LOSS_TYPES as LOSS_TYPES,
    READOUTS as READOUTS,
    SCALE_REWARDS as SCALE_REWARDS,
    Config as Config,
    LossStats as LossStats,
    Policy as Policy,
    PolicyShape as PolicyShape,
    Run as Run,
    SFTStart as SFTStart,
    StartNotReached as StartNotReached,
    TaskSpec as TaskSpec,
    completion_logps as completion_logps,
    config as config,
    demonstrations as demonstrations,
    eval_accuracy as eval_accuracy,
    eval_prompts as eval_prompts,
    format_ok as format_ok,
    grpo_loss as grpo_loss,
    init_policy as init_policy,
    make_run as make_run,
    pretrained_policy as pretrained_policy,
    pretrained_start as pretrained_start,
    response_mask as response_mask,
    reward_spread as reward_spread,
    sample as sample,
    simulate as simulate,
    simulate_each as simulate_each,
    solutions as solutions,
    task_policy_shape as task_policy_shape,
    task_prompts as task_prompts,
    task_reward as task_reward,
    token_logits as token_logits,
)

__all__ = sorted(name for name in dir() if not name.startswith("_"))
