"""The README's "What we found" block is the tool's output: generated from `validate --quick` results, checked
against a fresh run (slow), and consistent with itself (fast)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pgrpo_sim.reports import findings
from pgrpo_sim.reports.validate import SECTIONS

README = Path(__file__).resolve().parents[2] / "README.md"


def _results(holds: dict[str, bool]) -> dict:
    return {
        k: {"verdict": {"holds": v, "text": ("holds: " if v else "fails: ") + f"numbers of {k}"}}
        for k, v in holds.items()
    }


def test_block_is_generated_from_the_verdicts():
    holds = {key: i % 3 == 0 for i, key in enumerate(SECTIONS)}
    text = findings.findings_markdown(_results(holds))
    assert f"{sum(holds.values())} of {len(SECTIONS)} claims hold" in text
    for key, (title, _) in SECTIONS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| {title} |"))
        assert row.endswith(f"| numbers of {key} |") and ("**fails**" in row) == (not holds[key])
    readme = f"intro\n{findings.BEGIN}\nold table\n{findings.END}\nrest\n"
    updated = findings.update_readme(readme, _results(holds))
    assert findings.readme_findings(updated) == text and updated.startswith("intro\n") and updated.endswith("rest\n")


def test_check_fails_when_readme_and_results_drift(tmp_path):
    import json

    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results({key: True for key in SECTIONS})))
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{findings.BEGIN}\nhand-written\n{findings.END}\n")
    assert findings.main([str(results), str(readme), "--check"]) == 1
    assert findings.main([str(results), str(readme)]) == 0
    assert findings.main([str(results), str(readme), "--check"]) == 0


def test_readme_block_agrees_with_itself():
    """The count of holding claims in the sentence equals the rows that hold (a hand edit would break it)."""
    block = findings.readme_findings(README.read_text())
    held, total = (int(v) for v in re.search(r"(\d+) of (\d+) claims hold", block).groups())
    assert total == len(SECTIONS)
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert len(rows) == len(SECTIONS) and held == sum("| holds |" in row for row in rows)


@pytest.mark.slow
def test_readme_findings_match_a_fresh_validate_quick(tmp_path):
    """~2 minutes: the README quotes exactly what `pgrpo-sim validate --quick` prints today."""
    out = tmp_path / "validation"
    # an empty cache: the command trains the language model's SFT start itself, under its own XLA settings, as it
    # did when the README's numbers were made (a start trained under other settings differs in its last digits)
    env = dict(os.environ, PGRPO_SIM_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "pgrpo_sim.cli", "validate", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert findings.main([str(out / "results.json"), str(README), "--check"]) == 0, (
        "README.md's findings drifted from the tool: run `PGRPO_SIM_CACHE=$(mktemp -d) pgrpo-sim validate --quick "
        "--out validation` and `python -m pgrpo_sim.reports.findings validation/results.json README.md`"
    )
