"""Generated blocks of the README and the docs pages: text between a `<!-- BEGIN … -->` and an `<!-- END … -->`
marker, written by a tool (`findings.py`, `anchor_study.py`, `lm_checks.py`, `benchmarks/run.py`), never by hand."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


class MissingBlock(ValueError):
    """The file has no block between the two markers."""


def split_block(text: str, begin: str, end: str) -> tuple[str, str, str]:
    """`text` cut at the block: what comes up to `begin` (inclusive), the block, what comes from `end` on."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise MissingBlock(f"no block between {begin!r} and {end!r}")
    return text[: start + len(begin)], text[start + len(begin) : stop], text[stop:]


def block(text: str, begin: str, end: str) -> str:
    """The block in `text`, without its markers and the newlines around it."""
    return split_block(text, begin, end)[1].strip("\n")


def replace_block(text: str, begin: str, end: str, body: str) -> str:
    """`text` with its block replaced by `body`."""
    head, _, tail = split_block(text, begin, end)
    return f"{head}\n{body}\n{tail}"


def anchor_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every anchor-study tool takes: the shared anchors folder, the page whose block it rewrites, and
    where to save its numbers as JSON."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("anchors", type=Path, help="the shared anchors folder")
    parser.add_argument("page", type=Path, help="the page whose block is rewritten (docs/anchor-study.md)")
    parser.add_argument("--results", type=Path, default=None, help="also save the numbers as JSON here")
    return parser


def publish(page: Path, begin: str, end: str, body: str, results: Path | None, numbers: dict) -> None:
    """Print `body`, write it into `page`'s block, and with `results` save `numbers` there as JSON."""
    print(body)
    page.write_text(replace_block(page.read_text(), begin, end, body))
    if results:
        results.write_text(json.dumps(numbers, indent=2))
