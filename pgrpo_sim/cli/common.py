"""What every command shares: the parser classes and number types of the flags, claiming `--out` (with what an
interrupt leaves), output-file checks, memory checks, figures and tables."""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..base.errors import PgrpoSimError
from ..models.bandit.configuration import MODES as MODES  # the --mode choices
from ..models.bandit.renamed import current_names
from .outputs import check_distinct_outputs, check_output_dir, check_output_file, command_settings


class UsageError(PgrpoSimError):
    """A user error of the command line itself (flags, files), printed like every `PgrpoSimError`."""


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help with every option's default, as `ArgumentDefaultsHelpFormatter`, except where the help text
    already states it or there is none to state (None, off, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or action.default is False or action.default in ([], argparse.SUPPRESS)
        if unset or "default" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)".lstrip()


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        # no abbreviations: `--steps` must never be read as `--steps-per-generation` (nor any prefix as a flag)
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # values that start with "-" but are numbers or lists of them (-1e9, -1,2, -.5) are values, not flags
        self._negative_number_matcher = re.compile(r"^-(?:\d|\.\d)[\d.,:eE+-]*$")

    unknown_flag_hint: Callable[[str, str | None], str] | None = None
    """A command's advice on an unknown flag: called with its name and its value (None when none follows), it
    returns a clause for the error ("" for none)."""

    def error(self, message: str):  # argparse's own errors: one line, exit 2
        raise UsageError(message)

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, and a command's parser also records the options given on the command line as `explicit`
        (their dests; a default is not a choice the user made): parsed again into a namespace that already holds
        a placeholder for every option, which argparse leaves where no value was given; and as `typed`, dest → the
        flag as typed (a short alias or the TRL name), for messages (`flag_of`). A command's unknown flag is refused
        first (`_refuse_unknown_flags`), before a missing required one is."""
        tokens = sys.argv[1:] if args is None else list(args)
        if self._subparsers is None:
            self._refuse_unknown_flags(tokens)
        parsed, rest = super().parse_known_args(args, namespace)
        if self._subparsers is None:
            unset = {
                a.dest: None if a.nargs == 0 or "append" in type(a).__name__.lower() else _UNSET for a in self._actions
            }
            unset.pop(argparse.SUPPRESS, None)
            probe = argparse.Namespace(**unset)  # None where argparse adds to the value (append, count)
            super().parse_known_args(args, probe)
            parsed.explicit = frozenset(dest for dest, value in unset.items() if getattr(probe, dest) is not value)
            parsed.typed = {
                action.dest: token.partition("=")[0]
                for token in tokens
                if token.startswith("--")
                for action in [self._option_string_actions.get(token.partition("=")[0])]
                if action is not None
            }
        return parsed, rest

    def _refuse_unknown_flags(self, args: list[str]) -> None:
        """A `UsageError` naming the command line's flags this parser does not know ("unrecognized arguments: …",
        as argparse says it), with `unknown_flag_hint`'s advice; argparse itself would first ask for a missing
        required flag, which misleads when the flag is only misnamed."""
        unknown, hints = [], []
        takes_value = False  # the previous token is a known flag that takes a value: this one is that value
        for i, token in enumerate(args):
            if token == "--":
                break
            name, eq, value = token.partition("=")
            action = self._option_string_actions.get(name if name.startswith("--") else token[:2])
            is_flag = token.startswith("-") and token != "-" and " " not in token
            if not is_flag or self._negative_number_matcher.match(token) or takes_value or action is not None:
                takes_value = action is not None and action.nargs != 0 and not eq and token in action.option_strings
                continue
            unknown.append(token)
            following = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
            if self.unknown_flag_hint is not None:
                hints.append(self.unknown_flag_hint(name, value if eq else following))
        if unknown:
            hint = next((h for h in hints if h), "")
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}" + (f" ({hint})" if hint else ""))


def flag_of(args: argparse.Namespace, dest: str) -> str:
    """The flag that set `dest`, as the command line typed it (`--eta` or `--learning-rate`); `--` + dest when it
    was not typed."""
    return getattr(args, "typed", {}).get(dest, "--" + dest.replace("_", "-"))


_UNSET = object()
"""Placeholder of an option not given on the command line (`Parser.parse_known_args`)."""


def integer(text: str) -> int:
    """argparse type of an integer flag (its range is checked with the rest of the command's input)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def finite_float(text: str) -> float:
    """argparse type of a real-valued flag: a finite number (NaN and ±inf are refused here)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


LIBRARY_WORDING = (
    ("pass run=None", "drop --run"),
    ("run=NAME", "--run NAME"),
    ("run_config=FILE", "--run-config FILE"),
    ("columns={'reward': SOURCE}", "--column reward=SOURCE"),
    ("use the bandit level", "use --model bandit"),
    ("map one with reward=NAME", "map one with --column reward=NAME"),
)
"""How the library's messages name a Python keyword (or level) → the flag the command line has for it."""
LIBRARY_PATTERNS = ((re.compile(r": reward=(\S+) reads it"), r": --column reward=\1 reads it"),)
"""The same for a keyword with a value the message names (`re.sub` pattern → replacement)."""

PARAMETER_FLAGS = {
    "n_arms": "--arms",
    "n_correct": "--correct",
    "n_prompts": "--prompts",
    "minibatches": "--steps-per-generation",
}
"""`bandit.config` parameters whose flag is not their name."""


def cli_wording(message: str) -> str:
    """A library message (an error, a note) as the command line shows it: the Python keywords of `LIBRARY_WORDING`
    replaced by their flags, and a leading `bandit.config` parameter whose flag is not its name followed by the flag
    ("n_arms (--arms) must be ...")."""
    for library, flag in LIBRARY_WORDING:
        message = message.replace(library, flag)
    for pattern, flag in LIBRARY_PATTERNS:
        message = pattern.sub(flag, message)
    name, _, rest = message.partition(" ")
    return f"{name} ({PARAMETER_FLAGS[name]}) {rest}" if name in PARAMETER_FLAGS else message


IMAGE_SUFFIXES = ("png", "pdf", "svg")
"""File types `--plot` writes (by its suffix)."""


MODE_HELP = "expected: the exact mean update, one run; sampled: drawn groups, --seeds runs"


FORMAT_HELP = "log format (auto: from the file's name and contents)"


RUN_HELP = "the run to read from a file that holds several (a W&B long-form CSV: run_name,metric,step,value)"


OVERWRITE_HELP = "replace another command's output in --out"


def add_output_args(
    p: argparse.ArgumentParser,
    out_help: str,
    *,
    default: str | None = None,
    overwrite_help: str = OVERWRITE_HELP,
    quiet_help: str | None = "no progress lines on stderr",
) -> None:
    """`--out` (required unless it has a `default`), `--overwrite` and `--quiet` (None: the command has none), as
    every command that writes has them."""
    if default is None:
        p.add_argument("--out", required=True, help=out_help)
    else:
        p.add_argument("--out", default=default, help=out_help)
    p.add_argument("--overwrite", action="store_true", help=overwrite_help)
    if quiet_help is not None:
        p.add_argument("--quiet", action="store_true", help=quiet_help)


def version() -> str:
    """The installed package's version (importlib.metadata), or "unknown" when it is run from a bare source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pgrpo-sim")
    except PackageNotFoundError:
        return "unknown"


def claim(args: argparse.Namespace, staged, command: str, outputs: Sequence[str], *, resumable: bool = False) -> Path:
    """Claim --out for `command` (refusing another command's or a foreign directory): the folder in it where the
    command writes its outputs, moved into place only when `staged` (`runtime.outputs.staged_outputs`) commits them;
    and what an interrupt leaves, for its one line: a resumable command's finished chunks, or the previous results.
    """
    settings = command_settings(args)  # in the mark: a rerun with other settings needs --overwrite
    check_output_dir(args.out, command, overwrite=args.overwrite, settings=settings)  # again: it may have changed
    out = Path(args.out)  # not before the check: Path("") is "."
    note = untouched_note(args)
    stage = staged.directory(
        out, command, outputs, overwrite=args.overwrite, resumable=resumable, settings=settings, translate=current_names
    )
    if resumable:
        args.interrupt_note = f"the finished chunks are kept in {out}/chunks; rerun the same command to resume"
    else:
        args.interrupt_note = note
    return stage


def wrote(out: str | Path, outputs: Sequence[str]) -> str:
    """A summary line's last clause, naming every file of `outputs` that is in `out` ("wrote DIR/a, b and c")."""
    names = [name for name in outputs if (Path(out) / name).exists()] or list(outputs)
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"wrote {Path(out)}/{listed}"


def untouched_note(args: argparse.Namespace) -> str:
    """What an interrupt before the outputs are written leaves: the previous results in --out, or nothing."""
    out = getattr(args, "out", None)
    existed = out is not None and Path(out).is_dir() and any(Path(out).iterdir())
    return f"the previous results in {out} are unchanged" if existed else "nothing was written"


def check_file_outputs(args: argparse.Namespace) -> None:
    """--out and --plot: not the same file, and each one writable (creating nothing)."""
    check_distinct_outputs({"--out": args.out, "--plot": args.plot})
    check_output_file(args.out, "--out", overwrite=args.overwrite)
    if args.plot is not None:
        check_output_file(args.plot, "--plot", IMAGE_SUFFIXES, overwrite=args.overwrite)


def check_memory(what: str, need: int, held: str, advice: str) -> None:
    """A `UsageError` when `need` bytes of `held` results (what a command keeps of its runs) exceed this machine's
    physical memory: refused in one line before a run that would end in an out-of-memory traceback."""
    from ..runtime.jax_setup import physical_memory

    have = physical_memory()
    if have is not None and need > have:
        raise UsageError(
            f"{what} needs about {need / 1e9:.3g} GB of {held}, more than this machine's {have / 1e9:.3g} GB: {advice}"
        )


def plot(draw, *args, **kwargs) -> None:
    """Call a figure function; a write error becomes one line naming --plot."""
    try:
        draw(*args, **kwargs)
    except OSError as exc:
        raise UsageError(f"cannot write --plot: {exc.strerror or exc}") from None


def print_table(out: dict) -> None:
    """`name  value` lines, names aligned, floats to 6 significant digits (`theory`, `predict`)."""
    width = max(map(len, out))
    for k, v in out.items():
        print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")


def write_table(staged, path: str, header: Sequence[str], rows: np.ndarray, *, integer_first: bool) -> None:
    """The table as CSV at --out `path`, through `staged` (`runtime.outputs.staged_outputs`)."""
    try:
        with open(staged.file(path), "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            for row in rows:
                first = int(row[0]) if integer_first else f"{row[0]:.8g}"
                writer.writerow([first] + [f"{v:.8g}" for v in row[1:]])
    except OSError as exc:
        raise UsageError(f"cannot write --out {path}: {exc.strerror}") from None


def describe(args: argparse.Namespace, swept: Sequence[str] = ()) -> str:
    """The fixed settings of a run, for a figure title; `swept` parameters are named as axes, not values."""
    parts = [
        ("", f"N={args.arms} c={args.correct}"),
        ("p_ref", f"p_ref={args.p_ref}"),
        ("learning_rate", f"η={args.learning_rate}"),
        ("momentum", f"μ={args.momentum}"),
        ("beta", f"β={args.beta}"),
        ("num_generations", f"G={args.num_generations}"),
        ("lag", f"{args.lag_model}(lag={args.lag})"),
    ]
    fixed = [text for name, text in parts if name not in swept]
    if "lag" in swept:
        fixed.append(f"{args.lag_model} lag")
    text = " ".join(fixed) + f" {args.mode}"
    if swept:
        text += "; swept: " + ", ".join(_axis_symbol(n) for n in swept)
    return text


def _axis_symbol(name: str) -> str:
    return {"learning_rate": "η", "momentum": "μ", "beta": "β", "lag": "τ", "num_generations": "G"}.get(name, name)
