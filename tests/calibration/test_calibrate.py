"""Calibration on logs with known parameters (sampled-mode runs at P = 32 prompts, G = 8), band coverage on held-out
steps, and the three commands end to end on a real log. Slow: each calibration is ~20 s of BFGS through the
simulator."""

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pgrpo_sim.analysis import VERDICTS
from pgrpo_sim.calibration import PARAMETERS, calibrate, forecast, horizon_limit, synthetic_log
from pgrpo_sim.calibration.run_config import RunConfig

pytestmark = pytest.mark.slow

RUN = RunConfig(
    learning_rate=1e-5, num_generations=8, prompts_per_step=32, dataset_size=32, lr_scheduler_type="constant"
)
TRUTH = np.array([-1.5, 0.0, math.log(0.03 / 1e-5), math.log(0.125 / 0.875)])  # c = 4 of 32 prompts unsolvable
ANCHORS = Path(__file__).parents[3] / "shared" / "anchors"


@pytest.mark.parametrize("seed", [0, 1])
def test_recovers_known_parameters(seed):
    """Every parameter within 4 standard errors of the truth that made the log (the synthetic run's 32 prompts are
    a coarse version of the model's 64-quantile population, a bias well inside that)."""
    log = synthetic_log(RUN, TRUTH, 200, seed=seed)
    cal = calibrate(log, RUN)
    z = (cal.theta - TRUTH) / cal.stderr
    assert np.all(np.abs(z) < 4), dict(zip(PARAMETERS, np.round(z, 2), strict=True))
    assert cal.undetermined == () and cal.used == ("reward", "zero_std_frac", "reward_std")
    assert cal.stationary, cal.map_offset  # an on-policy (smooth) posterior: BFGS ends at its mode


def test_logs_of_similar_length_and_other_float_keys_share_the_fit_compilation(backend_compiles):
    """A second log 10 steps longer (the same 32-step bucket), from a run with another learning rate and β, is
    fitted by the same compiled program: the bandit is traced and the model's steps bucketed."""
    calibrate(synthetic_log(RUN, TRUTH, 100, seed=3), RUN)
    backend_compiles.clear()
    other = RUN.replace(learning_rate=2e-5, beta=0.01)
    cal = calibrate(synthetic_log(other, TRUTH, 110, seed=4), other)
    assert "_fit" not in " ".join(backend_compiles), backend_compiles
    assert cal.model.steps == 110 and np.all(np.isfinite(cal.theta))  # the calibration keeps the log's own length


def test_band_coverage_of_held_out_steps_is_nominal():
    """Over 10 logs, the 80 % band covers the held-out steps 80 % of the time within ±0.1 (the issue's tolerance;
    the seed-to-seed s.e. of the mean coverage is about 0.02 here)."""
    coverage = []
    for seed in range(10):
        log = synthetic_log(RUN, TRUTH, 240, seed=100 + seed)
        cal = calibrate(log, RUN, fit_until=100)
        result = forecast(log, cal, level=0.8, seed=seed)
        assert result.heldout is not None and result.heldout["n"] == 141  # steps 101…241
        coverage.append(result.heldout["coverage"])
    assert abs(np.mean(coverage) - 0.8) <= 0.1, coverage
    beyond = horizon_limit(1, 100) + 1  # 10 fit windows of steps 1…100 past step 1
    with pytest.raises(ValueError, match=f"until must be <= {beyond - 1:g}"):
        forecast(log, cal, until=beyond)


@pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")
def test_commands_end_to_end_on_a_real_log(tmp_path):
    log = ANCHORS / "sweeps" / "cs336_long_run" / "final_on_policy_lr4e-5_400.metrics.jsonl"
    cli = lambda *a: subprocess.run([sys.executable, "-m", "pgrpo_sim.cli", *a], capture_output=True, text=True)
    proc = cli("forecast", str(log), "--fit-fraction", "0.3", "--out", str(tmp_path / "f"))
    assert proc.returncode == 0, proc.stderr
    f = json.loads((tmp_path / "f" / "forecast.json").read_text())
    keys = {"model", "fit_until", "until", "band", "steps", "mean", "lo", "hi", "heldout", "diverged_fraction"}
    assert keys <= set(f)
    assert f["model"] == "bandit" and f["until"] == f["steps"][-1]
    said = f["diverged_fraction"] > 0 and not f["diverged"]  # a diverged MAP run is said as "diverged" instead
    assert ("posterior draws diverge" in proc.stdout) == said, proc.stdout
    assert len(f["steps"]) == len(f["mean"]) == len(f["lo"]) == len(f["hi"])
    assert f["steps"][0] == 1.0  # the first rewarded step is θ_0 (step 0 of this log holds only an eval)
    held = f["heldout"]
    assert set(held) == {"mae", "coverage", "n", "baselines"} and 0 <= held["coverage"] <= 1
    assert set(held["baselines"]) == {"persistence", "saturation", "critical", "oscillator", "sigmoid"}
    worse = held["mae"] > held["baselines"]["persistence"]  # the summary line says so where it is
    assert ("repeating the last logged reward did better" in proc.stdout) == worse, proc.stdout
    assert all(lo <= m <= hi for lo, m, hi in zip(f["lo"], f["mean"], f["hi"], strict=True))
    out = tmp_path / "w"
    proc = cli("what-if", str(log), "--model", "bandit", "--scenario", "learning_rate=8e-5", "--scenario",
               "num_iterations=4", "--steps", "200", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    w = json.loads((out / "whatif.json").read_text())
    assert [s["set"] for s in w["scenarios"]] == [{"learning_rate": 8e-5}, {"num_iterations": 4}]
    for entry in [w["baseline"], *w["scenarios"]]:
        assert entry["verdict"] in VERDICTS and len(entry["steps"]) == 200  # --steps N: N logged steps
    lines = proc.stdout.splitlines()  # one per run; a share of diverged draws is said on its line
    for line, entry in zip(lines, [w["baseline"], *w["scenarios"]], strict=False):  # notes follow the runs' lines
        said = entry["diverged_fraction"] > 0 and entry["verdict"] != "diverges"
        assert ("posterior draws diverge" in line) == said, line
    assert (out / "whatif.png").stat().st_size > 1000 and (out / "report.md").read_text().count("| ") > 10
    proc = cli("calibrate", str(log), "--out", str(out))  # what-if's directory: refused without --overwrite
    assert proc.returncode == 2 and "--overwrite" in proc.stderr


@pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")
def test_a_kink_of_the_clipped_posterior_is_reported():
    """On the CS336 2-epoch clip (0.2, 0.2) log, BFGS ends where the posterior's gradient is far from zero (the
    clipped surrogate is piecewise smooth): the Newton step from the MAP is several standard errors, and the
    calibration says it is not a stationary point. The on-policy long run, fitted to the same window, is one."""
    from pgrpo_sim.calibration.run_config import log_settings, resolve_run_config
    from pgrpo_sim.logs.readers import read_log

    offsets = {}
    for name in ("cs336_clip_ablation/GRPO-Clip_0p20_0p20_e2_tb256", "cs336_long_run/final_on_policy_lr4e-5_400"):
        log = read_log(ANCHORS / "sweeps" / f"{name}.metrics.jsonl")
        cal = calibrate(log, resolve_run_config(None, log_settings(log)), fit_until=110)
        offsets[name.split("/")[0]] = (cal.map_offset, cal.stationary, cal.as_dict()["stationary"])
    assert offsets["cs336_clip_ablation"][0] > 1 and offsets["cs336_clip_ablation"][1:] == (False, False), offsets
    assert offsets["cs336_long_run"][0] < 0.01 and offsets["cs336_long_run"][1:] == (True, True), offsets


@pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")
def test_a_calibration_that_misses_its_window_is_said_and_gives_no_verdicts(tmp_path):
    """Issue 37: on the whole CS336 clip (0.2, 0.2) log the command line's calibration ends its mean near 0.48
    while the log sits at 0.6–0.85: `calibrate` says it failed (line, report, calibration.json), `forecast`
    refuses in one line (exit 2, nothing written), and `what-if --force` marks every verdict."""
    log = str(ANCHORS / "sweeps" / "cs336_clip_ablation" / "GRPO-Clip_0p20_0p20_e2_tb256.metrics.jsonl")
    cli = lambda *a: subprocess.run([sys.executable, "-m", "pgrpo_sim.cli", *a], capture_output=True, text=True)
    proc = cli("calibrate", log, "--out", str(tmp_path / "c"))
    assert proc.returncode == 0 and proc.stdout.startswith("CALIBRATION FAILED: it misses its fit window"), proc
    check = json.loads((tmp_path / "c" / "calibration.json").read_text())["goodness_of_fit"]
    assert check["passed"] is False and check["above"] - check["expected_each_side"] > check["tolerance_above"]
    assert "**Goodness of fit: the calibration misses" in (tmp_path / "c" / "report.md").read_text()
    assert "calibrate [" in proc.stderr  # stage lines
    proc = cli("forecast", log, "--quiet", "--out", str(tmp_path / "f"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "misses its fit window" in proc.stderr, proc
    assert "--force" in proc.stderr and not (tmp_path / "f").exists()
    proc = cli("what-if", log, "--model", "bandit", "--scenario", "epsilon=none", "--steps", "50", "--force",
               "--quiet", "--out", str(tmp_path / "w"))  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc
    verdicts = [line for line in proc.stdout.splitlines() if "final reward" in line]
    assert len(verdicts) == 2 and all("(calibration failed)" in line for line in verdicts), proc.stdout
    w = json.loads((tmp_path / "w" / "whatif.json").read_text())
    assert w["goodness_of_fit"]["passed"] is False
    assert all(e["calibration_failed"] for e in [w["baseline"], *w["scenarios"]])


def test_recovers_an_affine_reward_map():
    """A log whose reward is −1 + 3 × the success rate (it leaves [0, 1]) is read by `reward_map="auto"` as an
    affine map: a, b and every other parameter within 4 standard errors of the truth, as in the plain case."""
    log = synthetic_log(RUN, TRUTH, 200, seed=0, scale=3.0)
    log = dataclasses.replace(log, data=dict(log.data, reward=log["reward"] - 1.0))
    cal = calibrate(log, RUN, reward_map="auto")
    truth = np.append(TRUTH, [-1.0, math.log(3.0)])
    z = (cal.theta - truth) / cal.stderr
    assert cal.affine and np.all(np.abs(z) < 4), dict(zip(cal.parameters, np.round(z, 2), strict=True))
    with pytest.raises(ValueError, match="not \\[0, 1\\]"):
        calibrate(log, RUN)  # the library's default reads reward / reward_scale as the success rate
