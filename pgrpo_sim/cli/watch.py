"""`pgrpo-sim watch`: follow a training log while the run writes it and forecast the run's end every N logged steps,
with an alert that a launcher can act on (issue 49; docs/guide/watch.md).

The log is followed by `logs.follow.follow_log`; each forecast (`calibration.watch.watch_forecast`: the
language-model level calibrated on the log so far) runs in a worker process, at most one at a time, so the
following never waits on it: a snapshot that arrives while one runs waits for it, and a newer one replaces it. Each
finished forecast prints one status line and rewrites `--out`'s status.json and watch.png (atomically). Exit codes:
0 when the log stops growing for `--idle` seconds, `ALERT_EXIT` when the collapse probability is at or above
`--alert` in two forecasts in a row, 2 on bad input or when the forecast worker dies, 130 on Ctrl-C (status.json
kept).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from ..base.checks import check_range, check_seed
from ..base.errors import PgrpoSimError
from ..base.files import write_atomically
from ..base.progress import report
from ..base.serialise import json_text
from ..calibration.watch import CONSECUTIVE
from ..logs.readers import FORMATS
from ..runtime.outputs import staged_outputs
from ..runtime.stage_lines import stage_lines
from .common import FORMAT_HELP, OVERWRITE_HELP, RUN_HELP, claim, finite_float, integer
from .outputs import check_output_dir, command_settings

WATCH_OUTPUTS = ("status.json", "watch.png")
ALERT_EXIT = 3
"""The exit code of a watch that raised its alert (0: the log stopped growing; 2: bad input or a forecast worker
that died; 130: Ctrl-C)."""


class Watch:
    """The forecasts of one watch (`calibration.watch.Forecasts`: at most one running, the newest snapshot waiting):
    on each finished one it prints its line and rewrites `out`'s files, and tells whether the alert holds
    (`collect`).

    Args:
        submit: starts a forecast of a snapshot, returning a `concurrent.futures.Future` of its
            `watch_forecast` entry.
        alert: the collapse probability that alarms; in (0, 1].
        out: the folder of status.json and watch.png, or None (status lines only).
        settings: the watch's settings, recorded in status.json.
        say: prints a status line (`print`).
    """

    def __init__(self, submit: Callable, alert: float, out: Path | None, settings: dict, say: Callable = print):
        from ..calibration.watch import Forecasts

        self.queue = Forecasts(submit, alert)
        self.out, self.settings, self.say = out, settings, say
        self.state = "watching"
        self.latest = None  # the last snapshot offered (the figure's logged reward)

    def offer(self, log) -> bool:
        """Take a new snapshot of the log (forecast now, or once the running forecast has finished); returns whether
        the alert holds (a finished forecast is collected first)."""
        self.latest = log
        alerted = self.collect()
        self.queue.offer(log)
        return alerted

    def collect(self, *, wait: bool = False) -> bool:
        """Collect finished forecasts (`wait`: wait for the running one and the waiting snapshot's), each said and
        written; returns whether the alert holds.

        Raises:
            PgrpoSimError: the forecast worker is gone (e.g. killed for memory): the watch cannot go on.
        """
        for outcome in self.queue.finished(wait=wait):
            self.say(outcome.line)
            if outcome.alerted:
                self.state = "alert"
            self.write()
            if self.queue.stopped:
                raise PgrpoSimError(f"watch: {outcome.line}")
            if outcome.alerted:
                return True
        return False

    def write(self) -> None:
        """Rewrite status.json and watch.png in `out` (each atomically); nothing without `out`."""
        if self.out is None:
            return
        queue = self.queue
        forecasts = queue.forecasts
        status = dict(state=self.state, alert=queue.alert, consecutive=queue.consecutive, settings=self.settings,
                      forecasts=forecasts, failures=[dict(error=f) for f in queue.failures])  # fmt: skip
        write_atomically(self.out / "status.json", lambda h: h.write(json_text(status, indent=2).encode()))
        if self.latest is None:
            return
        import matplotlib.pyplot as plt

        from ..viz.calibration_figures import watch_figure

        steps, reward = self.latest.series("reward")
        fig = watch_figure(steps, reward, forecasts, alert=queue.alert)
        try:
            write_atomically(self.out / "watch.png", lambda h: fig.savefig(h, format="png", dpi=120))
        finally:
            plt.close(fig)


def _check(args: argparse.Namespace) -> None:
    """Every flag, before anything is read, started or created."""
    from ..calibration.run_config_files import load_run_config

    check_range("every", args.every, 1, integer=True)
    check_range("alert", args.alert, 0.0, 1.0, low_open=True)
    check_range("poll", args.poll, 0.0, low_open=True)
    check_range("idle", args.idle, 0.0, low_open=True)
    check_range("band", args.band, 0.0, 1.0, low_open=True, high_open=True)
    check_seed(args.seed)
    if args.eval_size is not None:
        check_range("eval-size", args.eval_size, 1, integer=True)
    loaded = load_run_config(args.run_config) if args.run_config else None
    if args.until is None and (loaded is None or loaded.keys.get("max_steps") is None):
        raise PgrpoSimError(
            "watch needs the run's end: give max_steps in --run-config, or --until (the last logged step)"
        )
    if args.out is not None:
        check_output_dir(args.out, "watch", overwrite=args.overwrite, settings=command_settings(args))


def _cmd_watch(args: argparse.Namespace) -> int:
    from ..calibration.watch import watch_forecast
    from ..logs.follow import follow_log
    from ..logs.readers import parse_column_map
    from ..runtime.workers import worker_pool
    from .calibration import min_log_steps

    _check(args)
    columns = parse_column_map(args.column)
    progress = stage_lines("watch", enabled=not args.quiet)
    out = None
    if args.out is not None:
        with staged_outputs() as staged:  # the folder claimed as watch's, with a first status
            stage = claim(args, staged, "watch", WATCH_OUTPUTS)
            write_atomically(stage / "status.json", lambda h: h.write(json_text(dict(state="waiting")).encode()))
        out = Path(args.out)
        args.interrupt_note = f"{out}/status.json holds the forecasts so far"
    report(progress, f"following {args.log}: a forecast every {args.every} logged steps, each minutes long")
    need = max(args.every, min_log_steps())
    with worker_pool(1) as pool:

        def submit(log):
            return pool.submit(watch_forecast, log, args.run_config, until=args.until, level=args.band,
                               seed=args.seed, eval_size=args.eval_size, progress=progress)  # fmt: skip

        watch = Watch(submit, args.alert, out, command_settings(args))

        def sleep(seconds: float) -> None:  # the follower's wait: finished forecasts are collected meanwhile
            if watch.collect():
                raise _Alerted
            time.sleep(seconds)

        try:
            for log in follow_log(args.log, every=args.every, format=args.format, columns=columns, run=args.run,
                                  poll=args.poll, idle=args.idle, sleep=sleep):  # fmt: skip
                if log.series("reward")[0].size >= need and watch.offer(log):
                    raise _Alerted
            report(progress, f"the log has not grown for {args.idle:g} s: the last forecasts")
            if watch.collect(wait=True):
                raise _Alerted
        except _Alerted:
            print(f"ALERT: collapse probability ≥ {args.alert:g} in {CONSECUTIVE} forecasts in a row")
            return ALERT_EXIT
        except KeyboardInterrupt:
            watch.state = "interrupted"
            watch.write()
            raise
        watch.state = "ended"
        watch.write()
    print(f"the log stopped growing; {len(watch.queue.forecasts)} forecasts, no alert")
    return 0


class _Alerted(Exception):
    """Raised out of the follower's loop when the alert holds."""


def add_parser(sub) -> None:
    """`pgrpo-sim watch`."""
    p = sub.add_parser("watch", help="follow a log being written and warn while the run is heading for a collapse")
    p.add_argument("log", help="the training log being written (any format calibrate reads; a TensorBoard folder)")
    p.add_argument("--format", choices=("auto", *FORMATS), default="auto", help=FORMAT_HELP)
    p.add_argument("--column", action="append", default=[], metavar="NAME=SOURCE",
                   help="read canonical metric NAME from column SOURCE (repeatable)")  # fmt: skip
    p.add_argument("--run", default=None, metavar="NAME", help=RUN_HELP)
    p.add_argument(
        "--run-config", default=None, help="JSON or YAML file of TRL GRPOConfig keys (max_steps: the run's end)"
    )
    p.add_argument("--every", type=integer, default=10, help="logged steps between two forecasts (>= 1; default 10)")
    p.add_argument("--alert", type=finite_float, default=0.5,
                   help=f"collapse probability that alarms in {CONSECUTIVE} forecasts in a row, exit code "
                        f"{ALERT_EXIT} (in (0, 1]; default 0.5)")  # fmt: skip
    p.add_argument("--until", type=finite_float, default=None,
                   help="the last logged step to forecast (default: the run config's max_steps)")  # fmt: skip
    p.add_argument("--idle", type=finite_float, default=600.0,
                   help="seconds without a new line after which the watch ends (> 0; default 600)")  # fmt: skip
    p.add_argument("--poll", type=finite_float, default=5.0, help="seconds between two looks at the log (> 0)")
    p.add_argument("--band", type=finite_float, default=0.8, help="central probability of the band, in (0, 1)")
    p.add_argument("--seed", type=integer, default=0, help="seed of the forecasts' runs (>= 0)")
    p.add_argument("--eval-size", type=integer, default=None, metavar="N",
                   help="prompts in the eval set, when the log's reward is an eval accuracy")  # fmt: skip
    p.add_argument("--out", default=None, help="folder of status.json and watch.png, kept current (default: none)")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_cmd_watch)
