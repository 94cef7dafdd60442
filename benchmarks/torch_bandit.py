"""PyTorch baseline: the expected-mode bandit GRPO update as an ML researcher would write it in PyTorch.

The same update as `numpy_bandit.expected_rewards` (on-policy, "std" group advantages, k3 KL penalty with
coefficient β, heavy-ball SGD v ← μv + g, θ ← θ − ηv), vectorised over a leading configuration axis C with
a Python loop over steps, on the CPU with every core (`torch.set_num_threads`), under `torch.inference_mode`.
PyTorch is a benchmark-only extra (`pip install -e .[bench]`); `available()` says whether it is installed.
"""

from __future__ import annotations

import math
import os

import numpy_bandit


def available() -> bool:
    """Whether PyTorch can be imported here (benchmarks that need it are skipped with a message if not)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torch(dtype: str):
    import torch

    torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    return torch, getattr(torch, dtype)


def expected_rewards(
    learning_rate,
    momentum,
    beta=0.0,
    *,
    n_arms=2,
    n_correct=1,
    p_ref=0.2,
    num_generations=8,
    steps=1000,
    eps=1e-6,
    dtype="float32",
    curves=True,
):
    """Expected mode in PyTorch (see `numpy_bandit.expected_rewards`): the reward curves (C, steps+1) as a
    NumPy array, or with `curves=False` only the final rewards (C,) (no per-step storage)."""
    import numpy as np

    torch, tdtype = _torch(dtype)
    learning_rate, momentum, beta = (
        np.asarray(x, dtype)[:, None] for x in np.broadcast_arrays(learning_rate, momentum, beta)
    )
    r_np, theta0_np = numpy_bandit.start(n_arms, n_correct, p_ref, np.dtype(dtype))
    adv_success, adv_failure = (torch.from_numpy(a) for a in numpy_bandit.std_advantages(num_generations, eps, dtype))
    g = num_generations
    with torch.inference_mode():
        learning_rate, momentum, beta = (torch.from_numpy(x) for x in (learning_rate, momentum, beta))
        r, theta0 = torch.from_numpy(r_np), torch.from_numpy(theta0_np)
        j = torch.arange(g, dtype=tdtype)
        log_choose = torch.tensor([math.log(math.comb(g - 1, i)) for i in range(g)], dtype=tdtype)
        pi_ref = torch.softmax(theta0, -1)
        theta = theta0.repeat(learning_rate.shape[0], 1)
        velocity = torch.zeros_like(theta)
        out = torch.empty((learning_rate.shape[0], steps + 1), dtype=tdtype) if curves else None
        tiny = torch.finfo(tdtype).tiny  # log of a probability that rounded to 0: about −87 (float32), not −∞

        def softmax(z):  # written out: torch.softmax over a last axis of 2 is several times slower
            e = torch.exp(z - z.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)

        for n in range(steps):
            pi = softmax(theta)
            p = pi @ r
            if curves:
                out[:, n] = p
            # binomial pmf of the G − 1 group mates' successes, (C, G), in log space: one exp, no pow
            log_p, log_q = torch.log(p.clamp_min(tiny))[:, None], torch.log((1 - p).clamp_min(tiny))[:, None]
            pmf = torch.exp(log_choose + j * log_p + (g - 1 - j) * log_q)
            mean_adv = r * (pmf @ adv_success)[:, None] + (1 - r) * (pmf @ adv_failure)[:, None]
            w = -mean_adv + beta * (1 - pi_ref / pi)
            grad = pi * (w - torch.sum(pi * w, -1, keepdim=True))
            velocity = momentum * velocity + grad
            theta = theta - learning_rate * velocity
        final = softmax(theta) @ r
        if not curves:
            return final.numpy()
        out[:, steps] = final
        return out.numpy()
