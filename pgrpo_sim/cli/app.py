"""The `pgrpo-sim` program: its parser (each command group adds its own subcommands) and `main`, which runs a
command with the process's JAX settings and turns `PgrpoSimError` into one line and exit code 2, Ctrl-C into one
line and exit code 130."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..base.errors import PgrpoSimError
from ..runtime.interrupts import deferred_interrupts, interrupt_handling, interrupt_requested
from . import calibration, fit, simulate, sweep, theory, tune, validate, watch
from .common import (
    Parser,
    cli_wording,
    untouched_note,
    version,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `pgrpo-sim` and its subcommands."""
    parser = Parser(prog="pgrpo-sim", description="Simulate GRPO training dynamics and test the oscillator theory.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    no_cache = "do not keep compiled programs in the per-user cache (~/.cache/pgrpo-sim/jax; also "
    no_cache += "PGRPO_SIM_NO_COMPILE_CACHE=1)"
    parser.add_argument("--no-compile-cache", action="store_true", help=no_cache)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    theory.add_theory_parser(sub)
    simulate.add_parser(sub)
    sweep.add_parsers(sub)
    validate.add_parser(sub)
    theory.add_predict_parsers(sub)
    fit.add_parser(sub)
    calibration.add_parsers(sub)
    tune.add_parser(sub)
    watch.add_parser(sub)
    for listed in sub._choices_actions:  # argparse keeps each command's help line here (no public accessor)
        command = sub.choices[listed.dest]
        command.description = command.description or listed.help  # and `pgrpo-sim COMMAND --help` says it too
        # after the command too; SUPPRESS: not given there, it leaves the value given before the command
        command.add_argument("--no-compile-cache", action="store_true", default=argparse.SUPPRESS, help=no_cache)
    return parser


def _use_agg_backend() -> None:
    """Matplotlib's file-only backend, without importing matplotlib before a command needs it."""
    if "matplotlib" in sys.modules:
        sys.modules["matplotlib"].use("Agg")
    else:
        os.environ["MPLBACKEND"] = "Agg"


def _interrupted(args: argparse.Namespace | None) -> int:
    """Say that the command was interrupted and what it left, in one line; returns the exit code 130."""
    with deferred_interrupts():  # a second Ctrl-C does not cut the line short
        note = getattr(args, "interrupt_note", None) or "nothing was written"  # None: while parsing
        print(f"pgrpo-sim: interrupted; {note}", file=sys.stderr, flush=True)
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pgrpo-sim` console script; returns the exit code: 0 done, 2 bad input or an output that
    cannot be written (one line on stderr), 130 interrupted (one line), 3 a watch's alert (`cli.watch`). Outputs are
    replaced only when all are complete (`runtime.outputs.staged_outputs`): after 2 or 130 the previous results are as
    they were."""
    _use_agg_backend()  # the command line only writes figures to files
    args = None
    with interrupt_handling():
        try:
            args = build_parser().parse_args(argv)
            from ..runtime.jax_setup import configure_jax

            configure_jax(compile_cache=not args.no_compile_cache, compile_bound=getattr(args, "compile_bound", False))
            args.interrupt_note = untouched_note(args)  # until the command claims --out (a long fit comes first)
            code = args.func(args) or 0  # a command's own code: watch's alert
            if interrupt_requested():  # it came while the outputs were moved into place, or a callback dropped it
                args.interrupt_note = "the command had finished: its outputs are complete"
                raise KeyboardInterrupt
        except PgrpoSimError as exc:
            print(f"pgrpo-sim: error: {cli_wording(str(exc))}", file=sys.stderr)
            code = 2
        except KeyboardInterrupt:
            code = _interrupted(args)
        except Exception:
            # Ctrl-C inside code that turns the KeyboardInterrupt into another error (a class being created during
            # an import: "RuntimeError: Error calling __set_name__"): an interrupt all the same
            if not interrupt_requested():
                raise
            code = _interrupted(args)
    if argv is None:  # the program itself, not a call from Python: its interpreter is about to exit
        import signal

        # its exit runs JAX's clean-up (atexit) callbacks: a Ctrl-C there would print "Exception ignored in atexit
        # callback"; after an interrupt, JAX's runtime may still be running work dispatched to its threads, whose
        # clean-up under way once crashed (`tune`, exit 139): exit at once, nothing is left to write
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if code == 130:
            import gc

            # a stopped worker pool (validate) is held in reference cycles: collected, its semaphores are released;
            # left to os._exit, multiprocessing's resource tracker warns of them on stderr after the one line
            gc.collect()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return code
