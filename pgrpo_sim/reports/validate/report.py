"""The report of `pgrpo-sim validate` (report.md): per claim, its description, verdict, table and figure, and under a
failed verdict what the failure means for a user's run (`sections.IF_FAILS`)."""

from __future__ import annotations

import re

from . import sections
from .common import VERDICT_Z


def _readable(doc: str) -> str:
    """A section's description for the report: the tolerance's value instead of its constant's name, and no
    references to the code that computes it (a parenthesised `module.name`)."""
    return re.sub(r"\s*\(`[\w.]+\.[\w.]+`\)", "", doc).replace("`VERDICT_Z`", f"{VERDICT_Z:g}")


def report_markdown(results: dict, *, quick: bool, seed: int) -> str:
    """The report: per claim, its verdict, table and figure, and what a failure means for a run."""
    lines = [
        "# pgrpo-sim validation report",
        "",
        f"Resolution: {'quick' if quick else 'full'}; seed {seed}. Each verdict is computed from the numbers below.",
        "",
        "| claim | verdict |",
        "|---|---|",
    ]
    for key, (title, _) in sections.SECTIONS.items():
        if key in results:
            v = results[key]["verdict"]
            lines.append(f"| {title} | {'holds' if v['holds'] else 'fails'} |")
    for key, (title, section) in sections.SECTIONS.items():
        if key not in results:
            continue
        r = results[key]
        assert section.__doc__ is not None  # a section's docstring states its claim
        lines += ["", f"## {title}", "", _readable(" ".join(section.__doc__.split("\n\n")[0].split())), ""]
        if r.get("figure"):
            lines += [f"![{title}]({r['figure']})", ""]
        table = r.get("table", [])
        if table:
            cells = lambda row: "| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |"
            lines.append(cells(table[0]))
            lines.append("|" + "---|" * len(table[0]))
            lines += [cells(row) for row in table[1:]]
            lines.append("")
        lines.append(f"**Verdict: {'holds' if r['verdict']['holds'] else 'fails'}.** {r['verdict']['text']}")
        if not r["verdict"]["holds"]:
            lines += ["", f"*What this means for a run:* {sections.IF_FAILS[key]}"]
    return "\n".join(lines) + "\n"
