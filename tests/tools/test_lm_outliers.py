"""tools/lm_outliers.py reads the CS336 clip ablation's second-epoch records as a direct reading of the JSON lines
does (an independent parse: `statistics`, no NumPy)."""

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANCHORS = ROOT.parent / "shared" / "anchors"
sys.path.insert(0, str(ROOT / "tools"))

import lm_outliers  # noqa: E402

pytestmark = pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")


def _second_epoch_norms(stem: str) -> dict[int, float]:
    path = ANCHORS / lm_outliers.ABLATION / f"{stem}.metrics.jsonl"
    by_step: dict[int, list[float]] = {}
    with path.open() as lines:
        for line in lines:
            record = json.loads(line)
            if record["type"] == "train" and record["rollout_epoch"] == 2:
                by_step.setdefault(record["grpo_step"], []).append(record["grad_norm"])
    return {step: statistics.fmean(values) for step, values in by_step.items()}


def test_the_real_runs_second_epoch_gradient_norms_are_read_as_logged():
    real = lm_outliers.real_runs(ANCHORS)
    clipped, free = (_second_epoch_norms(lm_outliers.RUNS[name]) for name in ("clip (0.2, 0.2)", "no clip"))
    first = real["first_step"]
    assert first["clip (0.2, 0.2)"] == pytest.approx(clipped[first["steps"]], rel=1e-12)
    assert first["no clip"] == pytest.approx(free[first["steps"]], rel=1e-12)
    low, high = lm_outliers.LATER
    ratios = [free[s] / clipped[s] for s in sorted(clipped) if low <= s <= high]
    assert real["later_ratio"][1] == pytest.approx(statistics.median(ratios), rel=1e-12)
