"""The README's Python tour runs as written, from the repository's root (its log is one of the test logs), and says
what it returns."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # compiles the bandit's programs and trains the language model's SFT start: about a minute
def test_the_python_tour_runs(monkeypatch):
    text = (ROOT / "README.md").read_text()
    (tour,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    monkeypatch.chdir(ROOT)
    names: dict = {}
    exec(compile(tour, "README.md", "exec"), names)
    assert names["run"].reward.shape == (2001,) and names["noisy"].reward.shape == (64, 2001)
    assert names["final"].shape == (32,) and names["small"].readouts["reward"].shape == (4, 40)
    assert 0 < float(names["pred"].p_star) < 1 and len(names["log"].series("reward")[0]) > 0
