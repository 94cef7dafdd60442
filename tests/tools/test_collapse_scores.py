"""tools/collapse_scores.py: a foresight rerun resumes from the rows it saved (no forecast run twice), and the what-if
rows it prints read back as the rows it was given (`--whatif-from-page`)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANCHORS = ROOT.parent / "shared" / "anchors"
sys.path.insert(0, str(ROOT / "tools"))

import collapse_scores  # noqa: E402

pytestmark = pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")
RUNS = ["lr_sweep_3e-6", "lr_sweep_1e-5", "off_policy_e1_tb256_ga64"]


def test_an_interrupted_foresight_rerun_resumes_from_its_saved_rows(tmp_path, monkeypatch):
    """Forecasts stand in (no level runs); the second one is interrupted. The rows saved by then are the first
    run's; the rerun forecasts only the other two, and its rows equal an uninterrupted run's."""
    asked = []

    def forecast(anchors, spec, until, end, out):
        asked.append(spec["name"])
        if len(asked) == 2:
            raise KeyboardInterrupt
        return len(asked) / 10, "", 1.0

    monkeypatch.setattr(collapse_scores, "_forecast", forecast)
    results = tmp_path / "results.json"
    argv = [str(ANCHORS), str(tmp_path / "page.md"), "--results", str(results), "--only", *RUNS]
    with pytest.raises(KeyboardInterrupt):
        collapse_scores.main(argv)
    saved = json.loads(results.read_text())["foresight"]
    assert [r["name"] for r in saved] == RUNS[:1] and saved[0]["p"] == 0.1
    asked.clear()
    monkeypatch.setattr(collapse_scores, "_forecast", lambda *args: (0.5, "", 1.0))
    collapse_scores.main(argv)
    rows = json.loads(results.read_text())["foresight"]
    assert [r["name"] for r in rows] == RUNS and [r["p"] for r in rows] == [0.1, 0.5, 0.5]
    assert rows[0] == saved[0]  # kept as saved, not forecast again
    collapse_scores.main([*argv[:-3], RUNS[0]])  # another --only: the other runs' rows stay in the file
    assert json.loads(results.read_text())["foresight"] == rows


def test_the_what_if_rows_read_back_from_the_block_they_are_printed_in():
    collapsed = ("lr_sweep_1e-4", "off_policy_e4_tb64_ga16", "GRPO-No-Clip_e2_tb256")
    pairs = enumerate(collapse_scores.WHATIF_RUNS.items())
    rows = [dict(check=c, scenario=s, run=r, label=int(r in collapsed), p=k / 12) for k, ((c, s), r) in pairs]
    text = collapse_scores.markdown([], rows)
    assert collapse_scores.what_if_rows_of_block(text) == rows
