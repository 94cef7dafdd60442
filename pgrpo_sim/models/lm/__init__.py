"""The language-model level: a small causal transformer trained by GRPO on a synthetic verifiable task
(`task`), started from a supervised (SFT) policy (`pretrain`)."""

from .policy import (
    Policy as Policy,
    PolicyShape as PolicyShape,
    completion_logps as completion_logps,
    init_policy as init_policy,
    sample as sample,
    task_policy_shape as task_policy_shape,
    token_logits as token_logits,
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
