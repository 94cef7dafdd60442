"""The SFT starts shipped in the package are the ones `tools/ship_starts.py` lists, named as the current code names
them: a change of any setting, default or recipe constant that changes a start leaves its file unnamed, and this
fails until the tool makes it again."""

import sys
from pathlib import Path

import pytest

from pgrpo_sim.models.lm import pretrain

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import ship_starts  # noqa: E402


def test_the_shipped_starts_are_the_listed_ones():
    missing, extra = ship_starts.stale(pretrain.SHIPPED_STARTS)
    assert not missing, f"run python tools/ship_starts.py: {missing} missing"
    assert not extra, f"shipped but not listed: {extra}"
    assert ship_starts.main(["--check"]) == 0


def test_a_shipped_start_is_read_not_trained(tmp_path, monkeypatch):
    """With an empty cache, the default configuration's start comes from the package: no SFT, nothing cached."""
    monkeypatch.setenv(pretrain.CACHE_ENV, str(tmp_path))

    def no_training(*args):
        raise AssertionError("trained although shipped")

    monkeypatch.setattr(pretrain, "train_start", no_training)
    args = next(iter(ship_starts.wanted().values()))
    start = pretrain.pretrained_start(*args[:4], start_format=args[4])
    assert start.steps > 0 and start.accuracy == pytest.approx(args[2], abs=0.05)  # the target within SFT's check noise
    assert not (tmp_path / "lm").exists() or not list((tmp_path / "lm").iterdir())
    with pytest.raises(AssertionError, match="trained although shipped"):  # another seed is not shipped
        pretrain.pretrained_start(*args[:3], args[3] + 1, start_format=args[4])
