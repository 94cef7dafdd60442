"""Strip outputs from notebooks in place, so they are stored in git without outputs.

    python notebooks/strip.py                  # every *.ipynb next to this script
    python notebooks/strip.py a.ipynb b.ipynb  # the given notebooks
    python notebooks/strip.py --check          # change nothing; exit 1 if any notebook is not stripped

Removes code-cell outputs, sets execution_count to null, drops cell metadata except "tags", and keeps only the
kernelspec and the language name in the notebook metadata. Needs only nbformat.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

KEEP_CELL_METADATA = ("tags",)


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without outputs, execution counts or volatile metadata (modified in place and returned)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata = nbformat.NotebookNode({k: v for k, v in cell.metadata.items() if k in KEEP_CELL_METADATA})
    kernelspec = nb.metadata.get("kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"})
    language = nb.metadata.get("language_info", {}).get("name", "python")
    nb.metadata = nbformat.NotebookNode(kernelspec=kernelspec, language_info={"name": language})
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to strip (default: all next to this script)")
    parser.add_argument("--check", action="store_true", help="report notebooks that need stripping; change nothing")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(Path(__file__).resolve().parent.glob("*.ipynb"))
    dirty = []
    for path in paths:
        original = path.read_text(encoding="utf-8")
        nb = strip(nbformat.reads(original, as_version=nbformat.NO_CONVERT))
        nbformat.validate(nb)
        stripped = nbformat.writes(nb) + "\n"
        if stripped != original:
            dirty.append(path)
            if not args.check:
                path.write_text(stripped, encoding="utf-8")
    verb = "need stripping" if args.check else "stripped"
    for path in dirty:
        print(f"{verb}: {path}")
    return 1 if args.check and dirty else 0


if __name__ == "__main__":
    sys.exit(main())
