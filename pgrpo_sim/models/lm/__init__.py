"""The language-model level: a small causal transformer trained by GRPO on a synthetic verifiable task
(`task`), started from a supervised (SFT) policy (`pretrain`)."""

from ..grpo import (
    LOSS_TYPES as LOSS_TYPES,
    SCALE_REWARDS as SCALE_REWARDS,
)
from .configuration import (
    DEFAULT_LEARNING_RATE as DEFAULT_LEARNING_RATE,
    Config as Config,
    config as config,
)
from .loss import (
    IMPORTANCE_SAMPLING_LEVELS as IMPORTANCE_SAMPLING_LEVELS,
    LossStats as LossStats,
    grpo_loss as grpo_loss,
    loss_type_code as loss_type_code,
)
from .policy import (
    Policy as Policy,
    PolicyShape as PolicyShape,
    completion_logps as completion_logps,
    init_policy as init_policy,
    sample as sample,
    task_policy_shape as task_policy_shape,
    token_logits as token_logits,
)
from .pretrain import (
    SFTStart as SFTStart,
    StartNotReached as StartNotReached,
    demonstrations as demonstrations,
    eval_accuracy as eval_accuracy,
    pretrained_policy as pretrained_policy,
    pretrained_start as pretrained_start,
)
from .task import (
    ANS_CLOSE as ANS_CLOSE,
    ANS_OPEN as ANS_OPEN,
    DIGIT0 as DIGIT0,
    EOS as EOS,
    PAD as PAD,
    QUERY as QUERY,
    TaskSpec as TaskSpec,
    eval_prompts as eval_prompts,
    format_ok as format_ok,
    is_held_out as is_held_out,
    response_mask as response_mask,
    solutions as solutions,
    task_prompts as task_prompts,
    task_reward as task_reward,
)
from .train import (
    READOUTS as READOUTS,
    Run as Run,
    host_run as host_run,
    make_optimizer as make_optimizer,
    make_run as make_run,
    reward_spread as reward_spread,
    run_arrays as run_arrays,
    simulate as simulate,
    simulate_each as simulate_each,
)
