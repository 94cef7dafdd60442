"""`pgrpo-sim calibrate`, `forecast` and `what-if`: a real log's run configuration (file, log, TRL defaults), the
bandit's calibration on it and its answers; `--model lm` hands forecast and what-if to `lm_scenarios.forecast`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from ..base.checks import check_range, check_seed
from ..logs.readers import FORMATS
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from .common import (
    FORMAT_HELP,
    RUN_HELP,
    UsageError,
    add_output_args,
    claim,
    cli_wording,
    finite_float,
    integer,
    wrote,
)
from .fit import read_log_flags
from .lm_forecast import add_level_args, answering_model, lm_reason
from .outputs import check_output_dir, command_settings


def _calibration_inputs(args: argparse.Namespace, command: str):
    """Read the log and run config, check every flag and --out (creating nothing), and return (log, run,
    fit_until)."""
    from ..calibration.forecast import horizon_limit
    from ..calibration.inputs import calibration_inputs, fit_window_end

    log = read_log_flags(args)
    chose_reward = any(item.partition("=")[0].strip() == "reward" for item in args.column)  # the user's choice stands
    log, run, loaded = calibration_inputs(log, args.run_config, success_rate=not chose_reward)
    run = dataclasses.replace(run, notes=tuple(cli_wording(note) for note in run.notes))  # in the reports too
    if "reward" not in log or log.series("reward")[0].size == 0:
        raise UsageError(f"{command}: {args.log} has no reward to calibrate on")
    rewarded, need = log.series("reward")[0].size, min_log_steps()
    if rewarded < need:
        raise UsageError(
            f"{command}: {args.log} has {rewarded} rewarded steps; calibrate, forecast and what-if need at least "
            f"{need}, as fit does"
        )
    fit_until, fraction = getattr(args, "fit_until", None), getattr(args, "fit_fraction", None)
    if fit_until is not None and fraction is not None:
        raise UsageError(f"{command}: give --fit-until or --fit-fraction, not both")
    fit_until = fit_window_end(log, fit_until, fraction)
    steps = log.series("reward")[0]
    window_end = float(steps[-1]) if fit_until is None else fit_until
    limit = horizon_limit(float(steps[0]), window_end)
    until = getattr(args, "until", None)
    if until is not None:  # a logged step, from the fit window's end on
        check_range("until", until, window_end, limit, integer=True)
    if getattr(args, "steps", None) is not None:  # what-if: N logged steps from the first, itself included
        check_range("steps", args.steps, 2, limit - float(steps[0]) + 1, integer=True)
    check_range("band", args.band, 0.0, 1.0, low_open=True, high_open=True)
    check_seed(args.seed)
    check_output_dir(args.out, command, overwrite=args.overwrite, settings=command_settings(args))
    if loaded and loaded.not_used:  # after every check: bad input stays one line
        print(
            f"pgrpo-sim: note: --run-config {args.run_config}: {len(loaded.not_used)} keys not used (no counterpart "
            f"in the bandit: {', '.join(loaded.not_used[:3])}, …), all listed in the report",
            file=sys.stderr,
        )
    return log, run, fit_until


def min_log_steps() -> int:
    """The fewest rewarded steps a log needs for calibrate, forecast and what-if: as many as `fit` needs (the most
    parameters of a closed-form law, plus 2: `reports.log_report.check_analysis`), whichever level answers."""
    from ..logs.laws import LAW_PARAMS

    return max(len(p) for p in LAW_PARAMS.values()) + 2


def _run_notes(run, run_config: str | None) -> list[str]:
    """The clauses a calibration's summary line adds about its run configuration: the settings assumed (TRL's
    defaults), a warning where the log contradicts one (`RunConfig.assumed`, `kl_warning`) and how a reward that
    is no success rate was read (`success_rate_log`); `run_config` the file given (--run-config), or None."""
    notes = (cli_wording(run.assumed(run_config)), *run.notes)
    return [note for note in notes if note.startswith(("assumed:", "warning:", "the log's reward"))]


def _not_stationary(cal) -> str:
    """The command line's warning for a calibration whose MAP is not a stationary point (docs/guide/calibration.md,
    "Outputs")."""
    return f"not a stationary point ({cal.map_offset:.2g} s.e. off): ± unreliable"


def _refuse_unfitted(args: argparse.Namespace, command: str, fit_check) -> None:
    """Refuse (exit 2, one line naming the check and its numbers) a forecast or what-if from a calibration that
    fails its goodness-of-fit check, unless --force."""
    if not fit_check.passed and not args.force:
        raise UsageError(
            f"{command}: the calibration {fit_check.describe()}; no {command} from it (--force gives one, marked "
            "'calibration failed')"
        )


def _cmd_calibrate(args: argparse.Namespace) -> None:
    from ..calibration.inference import calibrate
    from ..reports.calibration_report import CALIBRATE_OUTPUTS, calibration_band, write_calibration

    log, run, fit_until = _calibration_inputs(args, "calibrate")
    progress = stage_lines("calibrate", enabled=not args.quiet)
    cal = calibrate(log, run, fit_until=fit_until, reward_map="auto", progress=progress)
    band, fit_check = calibration_band(log, cal, level=args.band, seed=args.seed, progress=progress)
    out = Path(args.out)
    with staged_outputs() as staged:
        stage = claim(args, staged, "calibrate", CALIBRATE_OUTPUTS)
        data = write_calibration(log, cal, band, fit_check, stage)
    undetermined = [k for k, v in data["parameters"].items() if v["undetermined"]]
    print(
        ("" if fit_check.passed else f"CALIBRATION FAILED: it {fit_check.describe()}; ")
        + f"calibrated on {cal.n_points} steps of {args.log}: "
        + ", ".join(f"{k} {v['value']:.3g} ± {v['stderr']:.2g}" for k, v in data["parameters"].items())
        + f"; overdispersion {cal.overdispersion:.3g}"
        + (f"; undetermined: {', '.join(undetermined)}" if undetermined else "")
        + ("" if cal.stationary else f"; {_not_stationary(cal)}")
        + "".join(f"; {note}" for note in _run_notes(run, args.run_config))
        + f"; {wrote(out, CALIBRATE_OUTPUTS)}"
    )


def _cmd_forecast(args: argparse.Namespace) -> None:
    from ..calibration.forecast import draws_note, forecast, goodness_of_fit
    from ..calibration.inference import calibrate
    from ..reports.calibration_report import FAILED, FORECAST_OUTPUTS, write_forecast

    log, run, fit_until = _calibration_inputs(args, "forecast")
    steps = log.series("reward")[0]
    points = int(np.sum(steps <= (steps[-1] if fit_until is None else fit_until)))
    from ..calibration.inference import MIN_POINTS
    from ..calibration.lm_level import near_edge

    edge = near_edge(run, log, fit_until) if args.model == "auto" else None
    if answering_model(args, points=points, edge=edge) == "lm":
        from .lm_forecast import lm_forecast_command

        why = "--model lm"
        if args.model == "auto":
            short = f"the fit window holds {points} logged rewards, fewer than the bandit's fit needs ({MIN_POINTS})"
            why = short if points < MIN_POINTS else f"the run is near a collapse edge: {edge}"
        claim_out = lambda staged, outputs: claim(args, staged, "forecast", outputs)
        return lm_forecast_command(args, log, run, fit_until, claim_out, why=why)
    progress = stage_lines("forecast", enabled=not args.quiet)
    cal = calibrate(log, run, fit_until=fit_until, horizon=_horizon(args, log), reward_map="auto", progress=progress)
    result = forecast(log, cal, until=args.until, level=args.band, seed=args.seed, progress=progress)
    fit_check = goodness_of_fit(log, cal, result.band)
    _refuse_unfitted(args, "forecast", fit_check)
    out = Path(args.out)
    with staged_outputs() as staged:
        write_forecast(log, cal, result, fit_check, claim(args, staged, "forecast", FORECAST_OUTPUTS))
    held = result.heldout
    if held is None:
        score = "no held-out steps to score"
    elif held["mae"] is None:
        score = f"diverged, no score on {held['n']} held-out steps"
    else:
        persistence = held["baselines"]["persistence"]
        score = (
            f"held-out MAE {held['mae']:.4f} over {held['n']} steps, coverage {held['coverage']:.2f} of a "
            f"{args.band:.0%} band (persistence MAE {persistence:.4f}"
            + (
                ", lower: the fit does no better than repeating the last logged reward here)"
                if held["mae"] > persistence
                else ")"
            )
        )
    notes = [draws_note(result.band)] + ([] if cal.stationary else [_not_stationary(cal)])
    notes += _run_notes(run, args.run_config)
    print(
        ("" if fit_check.passed else f"{FAILED.upper()}: ")
        + f"forecast to step {result.until:g} from a fit up to step {cal.fit_until:g}: {score}"
        + "".join(f"; {note}" for note in notes if note)
        + f"; {wrote(out, FORECAST_OUTPUTS)}"
    )


def _horizon(args: argparse.Namespace, log) -> int:
    """The schedule's length in logged steps: max_steps, or the later of the log's end and --until."""
    steps = log.series("reward")[0]
    last = max(float(steps[-1]), args.until or 0.0)
    return round(last - float(steps[0])) + 1


def _cmd_what_if(args: argparse.Namespace) -> None:
    from ..calibration.forecast import check_scenario, draws_note, goodness_of_fit, what_if
    from ..calibration.inference import calibrate
    from ..calibration.run_config import parse_scenario
    from ..reports.calibration_report import WHATIF_OUTPUTS, marked, write_whatif
    from .lm_forecast import lm_what_if_command

    scenarios = [parse_scenario(text) for text in args.scenario]
    log, run, fit_until = _calibration_inputs(args, "what-if")
    if answering_model(args, scenarios) == "lm":
        claim_out = lambda staged, outputs: claim(args, staged, "what-if", outputs)
        return lm_what_if_command(args, log, run, fit_until, scenarios, claim_out, why=lm_reason(args, scenarios))
    for changes in scenarios:
        check_scenario(run, changes)  # every scenario is checked before the calibration starts
    steps = log.series("reward")[0]
    first = float(steps[0])
    until = float(steps[-1]) if args.steps is None else first + args.steps - 1
    progress = stage_lines("what-if", enabled=not args.quiet)
    cal = calibrate(log, run, fit_until=fit_until, horizon=int(until - first) + 1, reward_map="auto", progress=progress)
    result = what_if(cal, scenarios, until=until, level=args.band, seed=args.seed, progress=progress)
    fit_check = goodness_of_fit(log, cal, result.baseline.band, level=args.band, seed=args.seed)
    _refuse_unfitted(args, "what-if", fit_check)
    out = Path(args.out)
    with staged_outputs() as staged:
        write_whatif(log, cal, result, fit_check, claim(args, staged, "what-if", WHATIF_OUTPUTS))
    for answer in result.answers:
        final = "—" if answer.final_reward is None else f"{answer.final_reward:.3f}"
        note = draws_note(answer.band)
        line = f"{answer.label}: {marked(answer.verdict, fit_check)}, final reward {final}"
        print(line + (f" ({note})" if note else ""))
    if not cal.stationary:
        print(f"calibration: {_not_stationary(cal)}")
    for note in _run_notes(run, args.run_config):
        print(f"calibration: {note}")
    if not fit_check.passed:
        print(f"calibration: it {fit_check.describe()}")
    print(wrote(out, WHATIF_OUTPUTS))


def add_parsers(sub) -> None:
    """`pgrpo-sim calibrate`, `forecast` and `what-if`."""
    formats = ("auto", *FORMATS)
    for name, func, help_text in (
        ("calibrate", _cmd_calibrate, "fit the population bandit to a training log (parameters with uncertainty)"),
        ("forecast", _cmd_forecast, "calibrate on the start of a log and forecast the rest with a band"),
        ("what-if", _cmd_what_if, "rerun a calibrated log with changed run-config keys, with verdicts"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "log", help="training log (TRL trainer_state.json or console, JSONL, TensorBoard, W&B CSV, verl)"
        )
        p.add_argument("--format", choices=formats, default="auto", help=FORMAT_HELP)
        p.add_argument(
            "--column",
            action="append",
            default=[],
            metavar="NAME=SOURCE",
            help="read canonical metric NAME from column SOURCE, e.g. reward=rewards/correctness_reward_func",
        )
        p.add_argument("--run", default=None, metavar="NAME", help=RUN_HELP)
        p.add_argument(
            "--run-config", default=None, help="JSON or YAML file of TRL GRPOConfig keys (docs/guide/calibration.md)"
        )
        p.add_argument("--band", type=finite_float, default=0.8, help="central probability of the band, in (0, 1)")
        p.add_argument("--seed", type=integer, default=0, help="seed of the band's draws (>= 0)")
        p.add_argument("--fit-until", type=finite_float, default=None, help="last logged step of the fit window")
        if name != "calibrate":
            add_level_args(p)
        if name == "forecast":
            p.add_argument(
                "--fit-fraction", type=finite_float, default=None, help="fit window as a fraction of the log"
            )
            p.add_argument(
                "--until",
                type=finite_float,
                default=None,
                help="forecast up to this step (default: the log's end; the run's max_steps on --model lm when later)",
            )
        if name == "what-if":
            p.add_argument(
                "--scenario",
                action="append",
                required=True,
                metavar="KEY=VALUE[,KEY=VALUE…]",
                help="run-config keys to change (repeatable: one scenario each)",
            )
            p.add_argument(
                "--steps",
                type=integer,
                default=None,
                help="logged steps to simulate, the first one included (>= 2; default: to the log's last)",
            )
        own_json = "" if name == "calibrate" else f", {name.replace('-', '')}.json"
        add_output_args(p, f"output directory (calibration.json{own_json}, report.md, figure)")
        if name != "calibrate":
            p.add_argument(
                "--force",
                action="store_true",
                help="answer even when the calibration fails its goodness-of-fit check (marked 'calibration failed')",
            )
        p.unknown_flag_hint = _scenario_hint if name == "what-if" else _run_config_hint
        p.set_defaults(func=func)


def _scenario_hint(flag: str, value: str | None) -> str:
    """what-if's advice on an unknown flag that names a run-config key: give it as a scenario."""
    key = flag.lstrip("-").replace("-", "_")
    from ..calibration.run_config import KEYS

    return f"a run-config key is changed with --scenario: --scenario {key}={value or 'VALUE'}" if key in KEYS else ""


def _run_config_hint(flag: str, value: str | None) -> str:
    """calibrate's and forecast's advice on an unknown flag that names a run-config key: set it in the file."""
    key = flag.lstrip("-").replace("-", "_")
    from ..calibration.run_config import KEYS

    return (
        f"{key} is a run-config key: set it in the --run-config file as {key}: {value or 'VALUE'}"
        if key in KEYS
        else ""
    )
