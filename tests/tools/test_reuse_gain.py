"""tools/reuse_gain.py reads the MATH sweep's eval rewards and the CS336 run's clip fractions as a direct reading of the
files does (an independent parse: split lines, `statistics`, no csv module or NumPy)."""

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANCHORS = ROOT.parent / "shared" / "anchors"
sys.path.insert(0, str(ROOT / "tools"))

import reuse_gain  # noqa: E402

pytestmark = pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")


def _eval_reward(run: str, step: int) -> float:
    for line in (ANCHORS / reuse_gain.MATH).read_text().splitlines()[1:]:
        name, metric, at, value = line.split(",")
        if name == run and metric == "eval/reward" and float(at) == step:
            return float(value)
    raise LookupError(run, step)


def test_the_real_runs_rewards_gains_and_clip_fractions_are_read_as_logged():
    real = reuse_gain.real_runs(ANCHORS)
    for step in reuse_gain.STEPS:
        e1, e4 = (_eval_reward(reuse_gain.REUSE[e], step) for e in (1, 4))
        assert real["reward"][4][step] == e4 and real["gain"][step] == pytest.approx(e4 / e1, rel=1e-12)
    path = ANCHORS / "sweeps" / "cs336_clip_ablation" / f"{reuse_gain.CS336}.metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    train = [r for r in records if r["type"] == "train" and r["grpo_step"] <= reuse_gain.CS336_STEPS]
    early = statistics.fmean(r["clip_fraction"] for r in train if r["grpo_step"] <= reuse_gain.EARLY)
    later = statistics.fmean(r["clip_fraction"] for r in train if r["grpo_step"] > reuse_gain.EARLY)
    assert real["clip"]["early"] == pytest.approx(early, rel=1e-12)
    assert real["clip"]["later"] == pytest.approx(later, rel=1e-12)
    assert real["clip"]["early"] > real["clip"]["later"]  # the format phase clips more: the page's reading
