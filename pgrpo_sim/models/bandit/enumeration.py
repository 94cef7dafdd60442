"""The distinct rollouts of one prompt, which expected-mode rollout reuse enumerates (docs/design.md §3, "Off-policy
lag: three models"): multisets of G samples over the (arm, reward) outcomes, or of arms alone when every reward is 0
or 1 (`rewards_are_binary`); their number (`rollout_count`) is bounded by `MAX_OUTCOMES`."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ...base.checks import is_concrete
from ...base.errors import PgrpoSimError
from .configuration import Config, check_config

MAX_OUTCOMES = 4096
"""Largest number of distinct rollouts that expected mode enumerates for rollout reuse."""


def rewards_are_binary(config: Config, binary_rewards: bool | None = None) -> bool:
    """Whether expected-mode rollout reuse may enumerate multisets of arms alone: every reward exactly 0 or 1.

    None detects it from concrete rewards (False while they are traced); True asserts it, checked against
    concrete rewards (`PgrpoSimError` if one is not 0 or 1); False enumerates every (arm, reward) multiset.

    Args:
        config: the configuration (`Config`); its rewards (D, N), concrete or traced.
        binary_rewards: None: detect; True: assert; False: not binary, whatever the rewards (default None).

    Returns:
        A Python bool: True if every reward is 0 or 1 (detected or asserted), False otherwise.

    Raises:
        PgrpoSimError: if `config` is not a `Config`, or `binary_rewards` is True and a concrete reward is
            not 0 or 1.
    """
    check_config(config)
    if not is_concrete(config.rewards):
        return bool(binary_rewards)
    rewards = np.asarray(config.rewards)
    binary = bool(np.all((rewards == 0) | (rewards == 1)))
    if binary_rewards and not binary:
        raise PgrpoSimError("binary_rewards=True needs every reward to be 0 or 1")
    return binary if binary_rewards is None else bool(binary_rewards)


def rollout_count(config: Config, binary_rewards: bool) -> int:
    """The number of distinct rollouts of one prompt that expected-mode reuse enumerates (`rollout_outcomes`),
    C(G + k − 1, k − 1) with k = N kinds of sample for binary rewards, else 2N; `PgrpoSimError` for several
    prompts or more than `MAX_OUTCOMES`.

    Args:
        config: the configuration (`Config`): group size G, N arms, one prompt.
        binary_rewards: count multisets of arms alone (k = N; `rewards_are_binary`), else of (arm, reward)
            outcomes (k = 2N). Not checked against the rewards.

    Returns:
        The number of distinct rollouts O, a Python int in [1, `MAX_OUTCOMES`], e.g. 9 (binary) or 165 for N = 2,
        G = 8.

    Raises:
        PgrpoSimError: if `config` is not a `Config`, has more than one prompt, or O > `MAX_OUTCOMES`.
    """
    check_config(config)
    g, n = config.num_generations, config.n_arms
    kinds = n if binary_rewards else 2 * n
    count = math.comb(g + kinds - 1, kinds - 1)
    if config.n_prompts != 1:
        raise PgrpoSimError(
            f"expected mode with rollout reuse enumerates the rollouts of one prompt; got {config.n_prompts} "
            f"prompts ({count}^{config.n_prompts} joint outcomes): use mode 'sampled'"
        )
    if count > MAX_OUTCOMES:
        raise PgrpoSimError(
            f"expected mode with rollout reuse would enumerate {count} rollouts (N = {n} arms, G = {g}), more "
            f"than {MAX_OUTCOMES}: use mode 'sampled'"
        )
    return count


def rollout_outcomes(config: Config, *, binary_rewards: bool = False) -> tuple[Array, Array, Array]:
    """Every distinct rollout of one prompt: multisets of G samples over the 2N outcomes (arm a, reward 0/1).

    O = C(G + 2N − 1, 2N − 1), e.g. 165 for N = 2, G = 8. With `binary_rewards` (every arm's reward is exactly 0
    or 1, so an arm's reward is known) only the multisets of arms can occur: O = C(G + N − 1, N − 1), e.g. 9 for
    N = 2, G = 8. Samples are sorted within the group (the GRPO loss does not depend on the order).

    Args:
        config: the configuration (`Config`) of one prompt: group size G, rewards (1, N).
        binary_rewards: enumerate multisets of arms alone, each arm's reward its (0/1) reward; checked against
            concrete rewards (traced ones cannot be checked). Keyword only (default False).

    Returns:
        (arms, rewards, counts): arms (O, G) int32 in [0, N); rewards (O, G), 0/1 in the rewards' float dtype;
        counts (O, 2N), the float number of samples in each category 2a + r (each row sums to G).

    Raises:
        PgrpoSimError: for several prompts or more than `MAX_OUTCOMES` outcomes (use sampled mode), and for
            `binary_rewards` with concrete rewards that are not 0 or 1.
    """
    binary_rewards = rewards_are_binary(config, binary_rewards) if binary_rewards else False
    rollout_count(config, binary_rewards)
    g, n = config.num_generations, config.n_arms
    kinds = n if binary_rewards else 2 * n
    table = np.asarray(list(itertools.combinations_with_replacement(range(kinds), g)), np.int32)
    dtype = config.rewards.dtype
    if binary_rewards:
        arms = jnp.asarray(table)
        rewards = config.rewards[0][arms].astype(dtype)
        categories = 2 * arms + rewards.astype(jnp.int32)
        counts = jnp.sum(jax.nn.one_hot(categories, 2 * n, dtype=dtype), axis=1)
        return arms, rewards, counts
    counts = np.stack([np.bincount(row, minlength=2 * n) for row in table])
    return jnp.asarray(table // 2), jnp.asarray(table % 2, dtype), jnp.asarray(counts, dtype)
