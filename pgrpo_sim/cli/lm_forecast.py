"""`pgrpo-sim what-if --model …` and `pgrpo-sim forecast --model …`: which level answers on a log, and the
language-model level's answers (`calibration.language_model`).

`--model auto` (the default of both): the language-model level answers a what-if when a scenario changes a key the
bandit cannot follow into a collapse (`LM_KEYS`: learning rate, epochs, mini-batches, clip, β, loss type, G), and a
forecast when its fit window is too short for the bandit's fit or the run sits near a collapse edge
(`calibration.lm_level.near_edge`: 8 or more optimiser steps per rollout, reuse without a clip, or a gradient-norm
spike in the fit window); otherwise the bandit.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from ..base.progress import report
from ..calibration.results import LEVELS
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from .common import wrote

MODELS = ("auto", *LEVELS)
MODEL_HELP = (
    "which level answers: bandit (smooth, cannot collapse), lm (the small language model: can collapse; slower), "
    "auto (lm when a scenario changes learning_rate, num_iterations, steps_per_generation, epsilon, epsilon_high, "
    "beta, loss_type or num_generations; a forecast whose fit window holds fewer than 10 rewards, or whose run has "
    "8 or more optimiser steps per rollout, reuse without a clip, or a gradient-norm spike in the fit window; else "
    "the bandit)"
)
EVAL_SIZE_HELP = "prompts in the eval set, when the log's reward is an eval accuracy (its sampling noise; --model lm)"


def add_level_args(p: argparse.ArgumentParser) -> None:
    """`--model` and `--eval-size` for what-if and forecast."""
    p.add_argument("--model", choices=MODELS, default="auto", help=MODEL_HELP)
    p.add_argument("--eval-size", type=int, default=None, metavar="N", help=EVAL_SIZE_HELP)


def answering_model(
    args: argparse.Namespace, scenarios: Sequence[Mapping] = (), points: int | None = None, edge: str | None = None
) -> str:
    """ "bandit" or "lm": the level that answers (`--model auto`: module docstring); `points` the logged rewards in
    the fit window, `edge` why the run is near a collapse edge (`near_edge`). `--eval-size` is checked, and refused
    for the bandit."""
    from ..base.checks import check_range
    from ..base.errors import PgrpoSimError
    from ..calibration.inference import MIN_POINTS
    from ..calibration.lm_level import LM_KEYS

    model = args.model
    if model == "auto":
        changes_level = any(set(changes) & set(LM_KEYS) for changes in scenarios)
        short = points is not None and points < MIN_POINTS
        model = "lm" if changes_level or short or edge is not None else "bandit"
    if args.eval_size is not None:
        if model != "lm":
            raise PgrpoSimError(f"--eval-size is the language-model level's: it needs --model lm (answering: {model})")
        check_range("eval-size", args.eval_size, 1, integer=True)
    return model


def lm_reason(args: argparse.Namespace, scenarios: Sequence[Mapping] = ()) -> str:
    """Why a what-if is answered by the language-model level: --model lm, or (auto) the keys its scenarios change
    that the bandit cannot follow into a collapse (`LM_KEYS`)."""
    from ..calibration.lm_level import LM_KEYS

    changed = sorted({key for changes in scenarios for key in changes} & set(LM_KEYS))
    if args.model == "auto" and changed:
        return f"a scenario changes {', '.join(changed)}, which the bandit cannot follow into a collapse"
    return "--model lm"


def _calibrate(args: argparse.Namespace, log, run, fit_until, progress, why: str):
    """The level's calibration, told first on `progress` with `why` the level answers and that it takes minutes."""
    from ..calibration import language_model

    report(
        progress,
        f"answered by the language-model level ({why}); its calibration trains a small language model at many "
        "learning rates and takes minutes (--model bandit answers in seconds where it can)",
    )
    return language_model.calibrate(
        log, run, fit_until=fit_until, eval_size=args.eval_size, seed=args.seed, progress=progress
    )


def _calibration_line(cal) -> str:
    mean, sd = cal.lr_scale
    return (
        f"language-model level: start accuracy {cal.start_accuracy:.3f}, start format {cal.start_format:g} "
        f"({cal.format_weights.max():.2f}), ceiling {cal.ceiling[0]:.2f}, lr scale 10^({mean:.2f} ± {sd:.2f})"
        + (f" (undetermined: {cal.undetermined})" if cal.undetermined else "")
        + f", overdispersion {cal.overdispersion:.3g}"
        + (" (poor fit)" if cal.poor_fit else "")
    )


def lm_what_if_command(
    args: argparse.Namespace, log, run, fit_until, scenarios, claim, why: str = "--model lm"
) -> None:
    """what-if answered by the language-model level; `claim(staged, outputs)` the folder to write in; `why`: the
    reason it answers (`lm_reason`), told before its calibration starts."""
    from ..calibration import lm_scenarios
    from ..calibration.forecast import check_scenario
    from ..reports.calibration_report import WHATIF_OUTPUTS
    from ..reports.lm_report import write_lm_whatif

    for changes in scenarios:  # every scenario checked before the calibration starts
        lm_scenarios.check_scenario(check_scenario(run, {}), changes)
    progress = stage_lines("what-if", enabled=not args.quiet)
    cal = _calibrate(args, log, run, fit_until, progress, why)
    steps = log.series("reward")[0]
    until = float(steps[-1]) if args.steps is None else float(steps[0]) + args.steps - 1
    result = lm_scenarios.what_if(cal, scenarios, until=until, level=args.band, seed=args.seed, progress=progress)
    with staged_outputs() as staged:
        write_lm_whatif(log, cal, result, claim(staged, WHATIF_OUTPUTS))
    for answer in result.answers:  # the numbers of whatif.json and the report: reward / reward_scale
        final = "—" if answer.record["final_reward"] is None else f"{answer.record['final_reward']:.3f}"
        print(
            f"{answer.label}: {answer.verdict}, collapse probability {answer.collapse_probability:.2f} ± "
            f"{answer.collapse_probability_stderr:.2f} of {answer.record['runs']} runs, final reward {final}"
        )
    print(_calibration_line(cal))
    print(wrote(args.out, WHATIF_OUTPUTS))


def forecast_end(log, run, fit_until: float) -> float:
    """The last logged step a forecast reaches by default: the run's end — the step `max_steps` itself when the run
    config gives one beyond the log (a log's steps count optimiser or GRPO steps, whether it starts at 0, 1 or its
    first logging step: `calibration.watch.run_end`, as `watch` forecasts), else the log's last rewarded step —
    within the horizon a fit window of that length may be forecast to (`calibration.forecast.horizon_limit`)."""
    from ..calibration.forecast import horizon_limit
    from ..calibration.watch import run_end

    steps = log.series("reward")[0]
    end = float(steps[-1])
    end = end if run.max_steps is None else max(end, run_end(run.max_steps))
    return min(end, max(float(steps[-1]), horizon_limit(float(steps[0]), fit_until)))


def lm_forecast_command(args: argparse.Namespace, log, run, fit_until, claim, why: str = "--model lm") -> None:
    """forecast answered by the language-model level; `why`: the reason it answers, told before its calibration
    starts and printed after."""
    from ..calibration import lm_scenarios
    from ..reports.calibration_report import FORECAST_OUTPUTS
    from ..reports.lm_report import write_lm_forecast

    progress = stage_lines("forecast", enabled=not args.quiet)
    cal = _calibrate(args, log, run, fit_until, progress, why)
    until = forecast_end(log, run, cal.fit_until) if args.until is None else float(args.until)
    result = lm_scenarios.forecast(log, cal, until=until, level=args.band, seed=args.seed)
    with staged_outputs() as staged:
        write_lm_forecast(log, cal, result, claim(staged, FORECAST_OUTPUTS))
    held = result.record["heldout"]  # as forecast.json: reward / reward_scale
    score = (
        "no held-out steps to score"
        if held is None
        else f"held-out MAE {held['mae']:.4f} over {held['n']} steps, coverage {held['coverage']:.2f}"
    )
    print(
        f"forecast to step {until:g} from a fit up to step {cal.fit_until:g}: {result.verdict}, collapse "
        f"probability {result.collapse_probability:.2f} ± {result.collapse_probability_stderr:.2f} of "
        f"{result.record['forecast']['runs']} runs; {score}; {_calibration_line(cal)}"
    )
    if why != "--model lm":
        print(f"answered by the language-model level: {why}")
    print(wrote(args.out, FORECAST_OUTPUTS))
