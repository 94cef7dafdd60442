"""The bandit's per-step read-outs, named once (docs/design.md §3, "Measured each step").

Each `StepReadout` says what it measures and in which unit, which part of a step computes it, and where it is written:
a column of `pgrpo-sim simulate`'s table and a canonical column of the log `logs.from_run` makes of a run. The
result types (`models.bandit.UpdateStats`, `models.bandit.Run`), the table's columns and the log's columns
(`logs.RUN_COLUMNS`) are derived from `READOUTS`, so a new read-out is one line here (and its computation).
Pure Python: reading logs needs no JAX.
"""

from __future__ import annotations

from typing import NamedTuple

SOURCES = ("policy", "gradient", "update")
"""Where a read-out comes from: the policy θ_n itself, the loss gradient of update n, or the rollout and surrogate
of update n (what TRL logs of a step; the fields of `UpdateStats`)."""


class StepReadout(NamedTuple):
    """One per-step read-out of a bandit run.

    Attributes:
        name: the field of `Run` (and of `UpdateStats` for an "update" read-out).
        source: one of `SOURCES`.
        meaning: what it measures, with its unit.
        in_table: a column of `pgrpo-sim simulate`'s table (averaged over seeds).
        log_column: the canonical log column `logs.from_run` writes it to; None: not written.
    """

    name: str
    source: str
    meaning: str
    in_table: bool = True
    log_column: str | None = None


READOUTS = (
    StepReadout("reward", "policy", "expected success probability p = Σ_a π_a r_a, mean over prompts; in [0, 1]", True,
            "reward"),
    StepReadout("true_reward", "policy", "the same for the true reward vector; None if the config has none", False,
            "true_reward"),
    StepReadout("entropy", "policy", "policy entropy, mean over prompts; nats", True, "entropy"),
    StepReadout("kl_ref", "policy", "KL(π‖π_ref), mean over prompts; nats", True, "kl"),
    StepReadout("grad_norm", "gradient", "global L2 norm of the loss gradient with respect to the parameters", True,
            "grad_norm"),
    StepReadout("ratio_max", "update", "largest importance ratio π/π_old (expected mode: over arms)", True,
                "ratio_max"),
    StepReadout("ratio_mean", "update", "mean importance ratio π/π_old (expected mode: π_old-weighted)", False),
    StepReadout("clip_frac", "update", "fraction of samples whose ratio is clipped; in [0, 1]", True, "clip_frac"),
    StepReadout("zero_adv_frac", "update", "fraction of groups whose rewards are all equal (TRL: frac_reward_zero_std)",
            True, "zero_std_frac"),
    StepReadout("adv_var", "update", "mean squared advantage", False, "adv_var"),
    StepReadout("batch_reward", "update", "mean sampled reward of the rollout's groups (TRL: reward)"),
    StepReadout("group_reward_std", "update", "mean within-group unbiased reward std (TRL: reward_std)"),
    StepReadout("clip_low_frac", "update", "fraction of samples with A < 0 clipped below 1 − ε_low (TRL: "
            "clip_ratio/low_mean)"),
    StepReadout("clip_high_frac", "update", "fraction of samples with A > 0 clipped above 1 + ε_high (TRL: "
            "clip_ratio/high_mean)"),
    StepReadout("kl", "update", "mean KL estimator on the samples, or the exact KL (TRL: kl); nats"),
    StepReadout("prompt_spread", "policy", "std over the dataset's prompts of their success probabilities (0 for one)"),
)  # fmt: skip
"""Every per-step read-out, in `Run`'s field order."""

STEP_READOUTS = tuple(r.name for r in READOUTS)
"""The per-step read-outs' names (reward … prompt_spread): `Run`'s first fields, what `simulate(readouts=…)`
takes."""

UPDATE_READOUTS = tuple(r.name for r in READOUTS if r.source == "update")
"""The read-outs of one update's rollout and surrogate: the fields of `UpdateStats`."""

TABLE_READOUTS = tuple(r.name for r in READOUTS if r.in_table)
"""The read-outs in `pgrpo-sim simulate`'s table, in its column order."""

RUN_COLUMNS = {r.log_column: r.name for r in READOUTS if r.log_column is not None}
"""Log column → the `Run` read-out `logs.from_run` takes it from."""


def attributes(names: tuple[str, ...]) -> str:
    """An `Attributes:` docstring section for the read-outs `names` (for the result types derived from them)."""
    meaning = {r.name: r.meaning for r in READOUTS}
    return "\n".join(["Attributes:", *(f"    {name}: {meaning[name]}." for name in names)])
