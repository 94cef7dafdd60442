"""mkdocs hooks: the command-line reference generated from the argparse parser and the API reference from the
public namespaces (neither typed by hand), the
changelog taken from the repository's CHANGELOG.md, the home page's tour taken from the README, and the notebooks
of `notebooks/` added as pages (rendered by mkdocs-jupyter, not executed: they are stored without outputs and CI
executes them with nbmake)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

CLI_MARK = "<!-- generated: command-line reference -->"
CHANGELOG_MARK = "<!-- generated: changelog -->"
TOUR_MARK = "<!-- generated: readme tour -->"
API_MARK = "<!-- generated: api reference -->"
GROUPS = ("theory", "bandit", "lm", "analysis", "logs", "calibration", "viz")
"""The public namespaces `ps.<group>`, in the API page's order."""
ROOT = Path(__file__).resolve().parent.parent


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:  # argparse keeps its subparsers here; it has no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def cli_reference() -> str:
    """Every command's `--help`, as `pgrpo-sim COMMAND --help` prints it."""
    from pgrpo_sim.cli import build_parser

    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    parts = ["## pgrpo-sim", "", "```text", parser.format_help().rstrip(), "```"]
    for name, sub in _subcommands(parser).items():
        parts += ["", f"## pgrpo-sim {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(parts)


def readme_tour() -> str:
    """The README's tour (from its model table to the picture), with its links made relative to the docs folder: the
    home page and the README say it once."""
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## Four levels of model") : text.index("## What we found")]
    return tour.replace("](docs/", "](")


def level_interface() -> list[str]:
    """The API page's table of the one level interface: every function and class that `ps.bandit` and `ps.lm` both
    hold (tests/test_level_interface.py holds them to the same verbs, parameters and result types), each linked to
    its entry in the group's section below."""
    import importlib

    from pgrpo_sim.calibration.results import LEVELS

    bandit, lm = (importlib.import_module(f"pgrpo_sim.{group}") for group in LEVELS)
    shared = [n for n in bandit.__all__ if n in lm.__all__ and callable(getattr(bandit, n))]
    link = lambda group, name: f"[`ps.{group}.{name}`](#pgrpo_sim.{group}.{name})"
    parts = [
        "## The level interface",
        "",
        "The bandit and the language model are two implementations of one level: `ps.bandit` and `ps.lm` hold the same "
        "verbs under the same names, with the same parameters, and answer on a log with the same result types "
        "([the same job on both levels](guide/models.md#the-same-job-on-both-levels)). What each level adds is in its "
        "own section below.",
        "",
        "| name | `ps.bandit` | `ps.lm` |",
        "|---|---|---|",
    ]
    for name in shared:
        same = getattr(bandit, name) is getattr(lm, name)
        parts.append(f"| `{name}` | {link('bandit', name)} | {'the same class' if same else link('lm', name)} |")
    return [*parts, ""]


def api_reference() -> str:
    """One section per public namespace `ps.<group>`: its docstring, then every function and class of its `__all__`
    from its docstring (mkdocstrings); constants are named in a line."""
    import importlib
    import inspect

    import pgrpo_sim

    in_groups = {n for g in GROUPS for n in importlib.import_module(f"pgrpo_sim.{g}").__all__}
    root_only = [n for n in pgrpo_sim.__all__ if n not in in_groups and n not in GROUPS]
    parts = ["## `ps`", "", "The names no group holds (every other root name is its group's, documented there).", ""]
    for name in root_only:
        if callable(getattr(pgrpo_sim, name)):
            parts += [f"::: pgrpo_sim.{name}", "    options:", "      show_root_full_path: false", ""]
        else:
            parts += [f"`{name}` = `{getattr(pgrpo_sim, name)!r}`", ""]
    parts += level_interface()
    for group in GROUPS:
        namespace = importlib.import_module(f"pgrpo_sim.{group}")
        parts += [f"## `ps.{group}`", "", inspect.getdoc(namespace).split("\n\n")[0].split(": ", 1)[1], ""]
        constants = [n for n in namespace.__all__ if not callable(getattr(namespace, n))]
        if constants:
            parts += ["Constants: " + ", ".join(f"`{n}`" for n in constants) + ".", ""]
        for name in namespace.__all__:
            if callable(getattr(namespace, name)):
                parts += [f"::: pgrpo_sim.{group}.{name}", "    options:", "      show_root_full_path: false", ""]
    # the trainer callbacks: read from the lazy stub without importing them (ForecastCallback needs transformers,
    # which the docs build does not install); mkdocstrings reads the sources statically
    integrations = importlib.import_module("pgrpo_sim.integrations")
    parts += ["## `pgrpo_sim.integrations`", "", inspect.getdoc(integrations).split("\n\n")[0].split(": ", 1)[1], ""]
    parts += ["Constants: " + ", ".join(f"`{n}`" for n in integrations.__all__ if n.isupper()) + ".", ""]
    for name in integrations.__all__:
        if not name.isupper():
            parts += [f"::: pgrpo_sim.integrations.{name}", "    options:", "      show_root_full_path: false", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if API_MARK in markdown:
        return markdown.replace(API_MARK, api_reference())
    if TOUR_MARK in markdown:
        return markdown.replace(TOUR_MARK, readme_tour())
    if CLI_MARK in markdown:
        return markdown.replace(CLI_MARK, cli_reference())
    if CHANGELOG_MARK in markdown:
        text = (ROOT / "CHANGELOG.md").read_text()
        return markdown.replace(CHANGELOG_MARK, text.split("\n", 1)[1])  # without its own title
    return markdown


@event_priority(50)  # before mkdocs-jupyter's own on_files, which turns the notebooks it finds into pages
def on_files(files, config):
    """The repository's notebooks, as `notebooks/NAME.ipynb` pages of the site."""
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(File(f"notebooks/{notebook.name}", str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
