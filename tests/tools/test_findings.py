"""The validation findings in docs/findings.md and the README's summary are the tool's output
(`tools/findings.py`): generated from `validate --quick` results, checked against a fresh run (slow), and
consistent with themselves (fast)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pgrpo_sim.reports.validate import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import findings  # noqa: E402
from blocks import block  # noqa: E402

PAGES = (ROOT / "README.md", ROOT / "docs" / "findings.md")


def _results(holds: dict[str, bool]) -> dict:
    return {
        k: {"verdict": {"holds": v, "text": ("holds: " if v else "fails: ") + f"numbers of {k}"}}
        for k, v in holds.items()
    }


def test_blocks_are_generated_from_the_verdicts():
    holds = {key: i % 3 == 0 for i, key in enumerate(SECTIONS)}
    text = findings.findings_markdown(_results(holds))
    assert f"{sum(holds.values())} of {len(SECTIONS)} claims hold" in text
    for key, (title, _) in SECTIONS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| {title} |"))
        assert row.endswith(f"| numbers of {key} |") and ("**fails**" in row) == (not holds[key])
    summary = findings.summary_markdown(_results(holds))
    hold_line = next(line for line in summary.splitlines() if line.startswith("- hold: "))
    assert hold_line.count(";") == sum(holds.values()) - 1 and f"; {sum(holds.values())} hold." in summary
    page = f"intro\n{findings.BEGIN}\nold table\n{findings.END}\nrest\n"
    updated = findings.update(page, _results(holds))
    assert block(updated, findings.BEGIN, findings.END) == text
    assert updated.startswith("intro\n") and updated.endswith("rest\n")


def test_check_fails_when_a_page_and_the_results_drift(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results({key: True for key in SECTIONS})))
    page = tmp_path / "findings.md"
    page.write_text(f"x\n{findings.BEGIN}\nhand-written\n{findings.END}\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{findings.SUMMARY_BEGIN}\nhand-written\n{findings.SUMMARY_END}\n")
    assert findings.main([str(results), str(readme), str(page), "--check"]) == 1
    assert findings.main([str(results), str(readme), str(page)]) == 0
    assert findings.main([str(results), str(readme), str(page), "--check"]) == 0
    (tmp_path / "plain.md").write_text("no block here\n")
    assert findings.main([str(results), str(tmp_path / "plain.md")]) == 2


def test_the_published_blocks_agree_with_each_other():
    """The count of holding claims in the sentence equals the rows that hold, and the README's summary lists the
    same claims (a hand edit of either would break it)."""
    table = block(PAGES[1].read_text(), findings.BEGIN, findings.END)
    held, total = (int(v) for v in re.search(r"(\d+) of (\d+) claims hold", table).groups())
    assert total == len(SECTIONS)
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert len(rows) == len(SECTIONS) and held == sum("| holds |" in row for row in rows)
    summary = block(PAGES[0].read_text(), findings.SUMMARY_BEGIN, findings.SUMMARY_END)
    hold_line = next(line for line in summary.splitlines() if line.startswith("- hold: "))
    assert sorted(hold_line[len("- hold: ") :].split("; ")) == sorted(
        row.split(" | ")[0].lstrip("| ") for row in rows if "| holds |" in row
    )


@pytest.mark.slow
def test_published_findings_match_a_fresh_validate_quick(tmp_path):
    """~2 minutes: the docs quote exactly what `pgrpo-sim validate --quick` prints today."""
    out = tmp_path / "validation"
    # an empty cache: the command trains the language model's SFT start itself, under its own XLA settings, as it
    # did when the published numbers were made (a start trained under other settings differs in its last digits)
    env = dict(os.environ, PGRPO_SIM_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "pgrpo_sim.cli", "validate", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert findings.main([str(out / "results.json"), *map(str, PAGES), "--check"]) == 0, (
        "the findings drifted from the tool: run `PGRPO_SIM_CACHE=$(mktemp -d) pgrpo-sim validate --quick "
        "--out validation` and `python tools/findings.py validation/results.json README.md docs/findings.md`"
    )
