"""Validation section 7: the four failure modes are separable. The log diagnostics that `fit` reports, on provoked
bandit runs (`logs.diagnostics.PROVOKED`) and a healthy one."""

from __future__ import annotations

from collections.abc import Callable

from ...logs.diagnostics import FAILURE_MODES, PROVOKED, diagnose
from ...logs.readers import RUN_COLUMNS
from ...models import bandit
from ...models.bandit import simulate
from .common import BASE, Resolution, verdict


def failure_modes(res: Resolution, seed: int, plot: Callable | None) -> dict:
    """Claim: the four failure modes are separable. The four read-outs of the log diagnostics that `fit` reports
    on four provoked bandit runs (`diagnostics.PROVOKED`) and on a healthy one: which flag fires, and which first."""
    runs = {**PROVOKED, "healthy": BASE | dict(learning_rate=0.1)}
    cases = {}
    for name, kwargs in runs.items():
        d = diagnose(simulate(bandit.config(**kwargs), 600, readouts=tuple(RUN_COLUMNS.values())))
        steps = {r.name: r.first_step for r in d.readouts}
        cases[name] = dict(first=d.first(), flags=d.flags(), first_steps=steps)
    separated = all(cases[m]["first"] == m for m in PROVOKED) and cases["healthy"]["first"] is None
    text = "; ".join(f"{name} run → first flag {c['first'] or 'none'}" for name, c in cases.items())
    figure = None
    if plot:
        first_steps = [[c["first_steps"][r] for r in FAILURE_MODES] for c in cases.values()]
        figure = plot(
            "failure_modes", list(cases), list(FAILURE_MODES), first_steps, [c["first"] for c in cases.values()]
        )
    for c in cases.values():
        for mode, first_step in list(c["first_steps"].items()):
            if first_step is None:
                c["first_steps"][f"{mode}_missing_reason"] = "the flag never fired in 600 steps"
        if c["first"] is None:
            c["first_missing_reason"] = "no flag fired in 600 steps"
    step = lambda v: "—" if v is None else f"{v:g}"
    out = {
        "cases": cases,
        "verdict": verdict(separated, text),
        "table": [["provoked run", *FAILURE_MODES, "first"]]
        + [[name, *[step(c["first_steps"][r]) for r in FAILURE_MODES], c["first"] or "—"] for name, c in cases.items()],
    }
    if figure:
        out["figure"] = figure
    return out
