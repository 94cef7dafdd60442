"""mkdocs hooks: the command-line reference generated from the argparse parser (not typed by hand), and the
changelog taken from the repository's CHANGELOG.md."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

CLI_MARK = "<!-- generated: command-line reference -->"
CHANGELOG_MARK = "<!-- generated: changelog -->"
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


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CLI_MARK in markdown:
        return markdown.replace(CLI_MARK, cli_reference())
    if CHANGELOG_MARK in markdown:
        text = (ROOT / "CHANGELOG.md").read_text()
        return markdown.replace(CHANGELOG_MARK, text.split("\n", 1)[1])  # without its own title
    return markdown
