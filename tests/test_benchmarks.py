"""The benchmark driver runs and its NumPy baselines agree with pgrpo-sim (timings are never checked)."""

import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def test_baselines_agree_with_pgrpo_sim():
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[ok]" in proc.stdout and "FAIL" not in proc.stdout
