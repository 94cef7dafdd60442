"""The exact softmax-bandit GRPO environment (docs/design.md §3).

Policy π = softmax(θ) over N arms per prompt, reference π_ref = softmax(θ_0). Each optimiser step
draws a group of G arms from the behaviour policy π_old, rewards them (Bernoulli with the arm's mean;
0/1 rewards are the binary case), forms group-relative advantages, and descends the group-mean
clipped surrogate plus β × a KL estimator, with an optax optimiser on θ.

- mode "expected": the exact expectation over the group. A sample's reward is 1 with probability
  p_old = Σ_a π_old(a) r_a whatever the other samples are, so the other G − 1 samples contribute
  j ~ Binomial(G−1, p_old) successes and the expected loss is Σ_a π_old(a) Σ_{r,j} P(r|a) B(j) ℓ(a, A(r, j)).
  No Monte Carlo.
- mode "sampled": real categorical draws, independent PRNG streams per seed.

Lag models (`LAG_MODELS`): "none" (on-policy); "refresh" (one rollout per refresh of π_old, every `lag` steps,
reused with the importance-weighted clipped surrogate in between, as TRL's num_iterations / verl's ppo_epochs);
"refresh_fresh" (a fresh group from the stale π_old at every step: the infinite-batch limit of "refresh"); "stale"
(samples, advantages and gradient computed at θ_{n−τ}, applied at step n without correction).

By job: `expected` (the exact expectation over the group: binomial expectations, the expected loss and the
on-policy gradient), `sampled` (drawn groups: the draw, the loss and its on-policy gradient), `common` (what both
modes share: `check_mode`, `UpdateStats`, the KL terms), `enumeration` (the distinct rollouts of one prompt),
`reuse` (expected-mode rollout reuse by branches), `optimizer` (optax and the learning-rate schedule), `state` (a
run's state and one step), `simulation` (`run`, `simulate`, `simulate_in_chunks`, the read-outs). Beneath them:
`configuration` (`Config`, `config`, the choice lists and `LEAF_RANGES`), `hyperparameters` (the one hyperparameter
table, `set_hyperparameters`) and `readouts` (the per-step read-out registry).
"""

from .common import UpdateStats as UpdateStats, check_mode as check_mode
from .configuration import DEFAULTS as DEFAULTS, MODES as MODES, Config as Config, config as config
from .enumeration import (
    MAX_OUTCOMES as MAX_OUTCOMES,
    rewards_are_binary as rewards_are_binary,
    rollout_count as rollout_count,
    rollout_outcomes as rollout_outcomes,
)
from .expected import (
    advantage_table as advantage_table,
    binomial_mean as binomial_mean,
    binomial_pmf as binomial_pmf,
    expected_group_std as expected_group_std,
    expected_loss as expected_loss,
    on_policy_grad as on_policy_grad,
)
from .optimizer import learning_rate_factor as learning_rate_factor, make_optimizer as make_optimizer
from .reuse import collapse_branches as collapse_branches, reuse_branch_step as reuse_branch_step
from .sampled import (
    draw_rollout as draw_rollout,
    sampled_loss as sampled_loss,
    sampled_on_policy_grad as sampled_on_policy_grad,
)
from .simulation import (
    CHUNK_WORK as CHUNK_WORK,
    STEP_READOUTS as STEP_READOUTS,
    Run as Run,
    run as run,
    run_loop as run_loop,
    simulate as simulate,
    simulate_in_chunks as simulate_in_chunks,
    valid_hyperparameters as valid_hyperparameters,
)
from .state import (
    State as State,
    batch_config as batch_config,
    initial_state as initial_state,
    minibatch_weights as minibatch_weights,
    rollout_step as rollout_step,
    step as step,
)
