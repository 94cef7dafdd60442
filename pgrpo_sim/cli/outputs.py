"""What the command line checks of its output paths (--out, --plot) before it validates or runs anything: each one
refused in one line naming the flag, creating nothing (docs/guide/command-line.md, "Outputs"). The writing itself,
staged and marked, is `runtime.outputs`'."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..base.errors import PgrpoSimError
from ..models.bandit.renamed import current_names
from ..runtime.outputs import other_settings, output_dir_owner

NOT_SETTINGS = frozenset(
    {
        "command", "func", "explicit", "typed", "interrupt_note", "compile_bound",  # the parser's and the program's own
        "out", "overwrite", "quiet", "yes", "no_compile_cache", "force",  # where and how it writes, not what
        "chunk_size", "max_memory", "coordinator", "num_processes", "process_id",  # how a sweep is split up
    }
)  # fmt: skip
"""Options that do not change what a command writes: left out of the settings its --out mark records."""
PATH_SETTINGS = frozenset({"log", "run_config"})
"""Options that name a file: recorded as absolute paths, so the same file named from elsewhere is the same setting."""


def command_settings(args) -> dict:
    """The settings of a command's run as its --out mark records them (`check_output_dir`): every option's value
    (defaults included) but `NOT_SETTINGS`, where JSON can hold it; `PATH_SETTINGS` as absolute paths.

    Args:
        args: the command's parsed `argparse.Namespace`.

    Returns:
        Option name (argparse's dest) → its value; sorted by name; a grid axis typed under a short alias
        (`--grid eta=…`) under TRL's name, so that both spellings are one setting.
    """
    simple = (str, int, float, bool, type(None))
    kept = {}
    for name, value in sorted(vars(args).items()):
        listed = isinstance(value, (list, tuple)) and all(isinstance(v, simple) for v in value)
        if name not in NOT_SETTINGS and (isinstance(value, simple) or listed):
            kept[name] = list(value) if isinstance(value, (list, tuple)) else value
            if name in PATH_SETTINGS and isinstance(value, str) and value:
                kept[name] = str(Path(value).absolute())
    return current_names(kept)


def _flag(name: str) -> str:
    """How the command line spells a setting (`command_settings`): its flag, or LOG for the log argument."""
    return name.upper() if name == "log" else "--" + name.replace("_", "-")


def _check_named(path, flag: str, what: str) -> None:
    if not str(path).strip():
        raise PgrpoSimError(f"{flag} must name a {what}, got an empty string")


def check_output_dir(
    path: str | os.PathLike, command: str, *, overwrite: bool = False, flag: str = "--out", settings=None
) -> None:
    """Raise `PgrpoSimError` (creating nothing) unless `pgrpo-sim {command}` may write into directory `path`: it does
    not exist yet and can be created, or it is `command`'s own (with the same `settings`, `command_settings`, where
    given and recorded; a record made before the bandit took TRL's names is read in them, `current_names`), or it
    is empty; another command's directory, the same command's run with other settings or a non-empty foreign one
    only with `overwrite`. An empty `path` is refused by name."""
    _check_named(path, flag, "folder")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise PgrpoSimError(f"{flag} {out} is a file, not a directory")
    if not out.exists():
        parent = next((p for p in out.absolute().parents if p.exists()), None)
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise PgrpoSimError(f"{flag} {out} cannot be created: {parent} is not a writable directory")
        return
    if not os.access(out, os.W_OK | os.X_OK):
        raise PgrpoSimError(f"{flag} {out} is not writable")
    owner = output_dir_owner(out)
    if overwrite:
        return
    differs = other_settings(out, command, settings, current_names) if owner == command else None
    if differs is not None:
        name, there, now = differs
        raise PgrpoSimError(
            f"{flag} {out} holds the output of `pgrpo-sim {command}` run with other settings ({_flag(name)} "
            f"{there!r} there, {now!r} now); use another {flag} or --overwrite to replace it"
        )
    if owner in (None, command):
        return
    if owner:
        raise PgrpoSimError(
            f"{flag} {out} holds the output of `pgrpo-sim {owner}`; use another {flag} or --overwrite to replace it"
        )
    raise PgrpoSimError(
        f"{flag} {out} is not empty and was not written by pgrpo-sim; use another {flag} or --overwrite"
    )


def check_output_file(
    path: str | os.PathLike, flag: str, suffixes: Iterable[str] | None = None, *, overwrite: bool = False
) -> None:
    """Raise `PgrpoSimError` (creating nothing) unless file `path` can be written: not a directory, not an
    existing file (unless `overwrite`), its directory exists and accepts a new file, and (given `suffixes`) its
    suffix is one of them. An empty `path` is refused by name."""
    _check_named(path, flag, "file")
    out = Path(path)
    if out.is_dir():
        raise PgrpoSimError(f"{flag} {out} is a directory; give a file name")
    if out.exists() and not overwrite:
        raise PgrpoSimError(f"{flag} {out} exists; give another file name or --overwrite to replace it")
    if suffixes is not None:
        allowed = sorted(suffixes)
        if out.suffix.lower().lstrip(".") not in allowed:
            raise PgrpoSimError(f"{flag} {out} must end in one of {', '.join('.' + s for s in allowed)}")
    existed = out.exists()
    try:
        with open(out, "ab"):
            pass
    except OSError as exc:
        raise PgrpoSimError(f"cannot write {flag} {out}: {exc.strerror}") from None
    if not existed:
        out.unlink()


def check_distinct_outputs(outputs: Mapping[str, str | os.PathLike | None]) -> None:
    """Raise `PgrpoSimError` when two of one command's outputs (flag → path; None: not given) name the same file,
    which the second would silently replace."""
    seen: dict[str, str] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        key = os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise PgrpoSimError(f"{seen[key]} and {flag} name the same file {path}: give each output its own name")
        seen[key] = flag
