"""The answers of a calibrated level, one set of types on both levels (issue 48, "one model interface"):
`ps.bandit.forecast` and `ps.lm.forecast` return a `Forecast`, `ps.bandit.what_if` and `ps.lm.what_if` a `WhatIf`
holding the calibrated run and each scenario as a `Scenario`.

Each result gives the numbers a caller reads as fields, under the same names on both levels — the verdict, the
final reward, the collapse probability, the reward `Band` in the log's units — and `record`, the JSON-ready dict the
command line writes (forecast.json, whatif.json; keys in docs/guide/calibration.md), where each level adds its own
detail (the bandit's held-out baselines, the language model's runs one by one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line reads LEVELS without importing JAX
    from .inference import Band

LEVELS = ("bandit", "lm")
"""The levels that answer: the population bandit (`ps.bandit`) and the language model (`ps.lm`)."""


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One what-if answer: the calibrated run with `changes` to its run config ({} for the calibrated run itself).

    Attributes:
        changes: run-config key → the scenario's value; {} for the calibrated run.
        verdict: the verdict of the scenario's runs (`analysis.summaries.VERDICTS`).
        final_reward: the mean reward at the last step, in the log's units; None when undefined (every run, or
            the bandit's MAP run, diverged).
        collapse_probability: the share of the level's runs that collapse or diverge, in [0, 1]; None on the
            bandit, which cannot collapse (docs/design.md §6: its diverged draws are in `band.diverged_fraction`).
        collapse_probability_stderr: its binomial standard error; None on the bandit.
        band: the reward band at the log's steps, in the log's units.
        record: the scenario's entry in whatif.json (with `changes` as "set" for a scenario).
    """

    changes: Mapping[str, object]
    verdict: str
    final_reward: float | None
    collapse_probability: float | None
    collapse_probability_stderr: float | None
    band: Band
    record: dict

    @property
    def label(self) -> str:
        """The scenario as a user names it: "calibrated run", or its changes as `key=value, …`."""
        return ", ".join(f"{k}={v}" for k, v in self.changes.items()) or "calibrated run"


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """The calibrated run and its scenarios (`what_if` on either level).

    Attributes:
        model: the level that answered, one of `LEVELS`.
        baseline: the calibrated run itself.
        scenarios: one `Scenario` per scenario asked, in order.
        level: the bands' central probability; in (0, 1).
        record: whatif.json's content: {"model", "band": `level`, "baseline": `baseline.record`, "scenarios": each
            scenario's record}.
    """

    model: str
    baseline: Scenario
    scenarios: tuple[Scenario, ...]
    level: float
    record: dict

    @property
    def answers(self) -> tuple[Scenario, ...]:
        """The calibrated run, then each scenario."""
        return (self.baseline, *self.scenarios)


@dataclasses.dataclass(frozen=True)
class Forecast:
    """The calibrated run forecast to a logged step (`forecast` on either level).

    Attributes:
        model: the level that answered, one of `LEVELS`.
        band: the reward band from the log's first step to `until`, in the log's units.
        fit_until: the last logged step of the calibration's fit window.
        until: the last logged step forecast.
        verdict: the verdict of the forecast run to `until`; None on the bandit (its forecast is a band: its
            `what_if` gives verdicts).
        collapse_probability: the share of the level's runs that collapse or diverge by `until` (the run's own
            foresight), in [0, 1]; None on the bandit (`Scenario.collapse_probability`).
        collapse_probability_stderr: its binomial standard error; None on the bandit.
        heldout: the band's score on the logged rewards in (`fit_until`, `until`] ({"n", "mae", "coverage"}, the
            bandit's with its baselines' MAE); None without such steps.
        record: forecast.json's content.
    """

    model: str
    band: Band
    fit_until: float
    until: float
    verdict: str | None
    collapse_probability: float | None
    collapse_probability_stderr: float | None
    heldout: dict | None
    record: dict
