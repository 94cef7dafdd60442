"""Run configurations: GRPOConfig names, precedence, scenarios and one-line errors (CLI: exit 2, nothing created)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.calibration.run_config import (
    KEYS,
    RunConfig,
    log_settings,
    parse_scenario,
    read_run_config,
    resolve_run_config,
)
from pgrpo_sim.logs.readers import tidy


def test_precedence_file_over_log_over_defaults():
    run = resolve_run_config({"learning_rate": 2e-6}, {"learning_rate": 1e-5, "num_generations": 6, "foo": 1})
    assert run.learning_rate == 2e-6 and run.sources["learning_rate"] == "run-config"
    assert run.num_generations == 6 and run.sources["num_generations"] == "log"
    assert run.beta == 0.0 and run.sources["beta"] == "default"
    assert set(run.sources) == set(KEYS)


def test_no_clip_losses_have_no_clip_unless_given():
    assert resolve_run_config(None, {"loss_type": "grpo_no_clip"}).clip is None
    assert resolve_run_config({"epsilon": 0.3}, {"loss_type": "grpo_no_clip"}).clip == (0.3, 0.3)
    assert RunConfig(epsilon=0.2, epsilon_high=0.28).clip == (0.2, 0.28)
    assert resolve_run_config({"loss_type": "grpo_no_clip"}, {"epsilon": 0.2}).clip is None  # the log's ε is moot
    clipped = resolve_run_config(None, {"epsilon": 0.2, "loss_type": "grpo_clip"})
    assert clipped.replace(loss_type="grpo_no_clip").clip is None  # a what-if to a loss without a clip
    assert clipped.replace(loss_type="grpo_no_clip", epsilon=0.3).clip == (0.3, 0.3)


def test_yaml_and_json_files(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "learning_rate: 1.0e-6\nnum_generations: 8\nepsilon_high: null\nscale_rewards: false\n"
    )
    (tmp_path / "b.json").write_text(json.dumps({"learning_rate": 1e-6, "max_steps": 300}))
    a = read_run_config(tmp_path / "a.yaml")
    assert a == {"learning_rate": 1e-6, "num_generations": 8, "epsilon_high": None, "scale_rewards": "none"}
    assert read_run_config(tmp_path / "b.json") == {"learning_rate": 1e-6, "max_steps": 300}


@pytest.mark.parametrize(
    "text, match",
    [
        ("learning_rate: -1e-6\n", "learning_rate"),
        ("num_generations: 1\n", "num_generations"),
        ("num_genrations: 8\n", "unknown key 'num_genrations'"),
        ("- 1\n- 2\n", "mapping"),
        ("num_generations: 2.5\n", "integer"),
        ("num_generations: true\n", "num_generations must be a number, got True"),
        ("prompts_per_step: 6\nsteps_per_generation: 4\n", "must divide"),
        ("lr_scheduler_type: exponential\n", "lr_scheduler_type"),
        # beyond float32, where the bandit's η lives: refused here, not as "eta must be finite" after calibrating
        ("learning_rate: 1.0e+300\n", r"learning_rate must be in \(0, 3\.40282e\+38\]"),
        ("beta: 1.0e+39\n", "beta"),
        ("num_generations: 100000\n", "num_generations must be in \\[2, 4096\\]"),
        ("max_steps: 1.0e+11\n", "max_steps"),
    ],
)
def test_bad_run_configs_are_one_line_errors(tmp_path, text, match):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(PgrpoSimError, match=match) as err:
        resolve_run_config(read_run_config(path))
    assert "\n" not in str(err.value)


def test_scenarios_parse_and_check():
    assert parse_scenario("learning_rate=2e-5, num_iterations=4") == {"learning_rate": 2e-5, "num_iterations": 4}
    assert parse_scenario("epsilon=none") == {"epsilon": None}
    bad_scenarios = (
        ("lr=1", "unknown run-config key 'lr'"),
        ("beta", "KEY=VALUE"),
        ("", "changes nothing"),
        ("learning_rate=1e-5,learning_rate=2e-5", "sets learning_rate twice"),  # the last one silently won
    )
    for bad, match in bad_scenarios:
        with pytest.raises(PgrpoSimError, match=match):
            parse_scenario(bad)
    run = RunConfig()
    changed = run.replace(num_generations=4)
    assert changed.num_generations == 4 and changed.sources["num_generations"] == "scenario"
    with pytest.raises(PgrpoSimError, match="num_generations"):
        run.replace(num_generations=1)


def test_log_settings_read_a_constant_learning_rate():
    records = [{"step": s, "reward": 0.1, "learning_rate": 4e-5} for s in range(5)]
    settings = log_settings(tidy(records, format="jsonl", path=None, settings={"num_generations": 8}))
    assert settings == {"num_generations": 8, "learning_rate": 4e-5, "lr_scheduler_type": "constant"}
    decaying = [{"step": s, "reward": 0.1, "learning_rate": 4e-5 * (1 - s / 10)} for s in range(5)]
    assert log_settings(tidy(decaying, format="jsonl", path=None)) == {}
    two = tidy(records[:2], format="jsonl", path=None)  # two equal values may be a schedule held for two steps
    assert two.settings == {} and log_settings(two) == {}


def _cli(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "pgrpo_sim.cli", *argv], capture_output=True, text=True, cwd=cwd)


def _tiny_log(path: Path, n: int = 40):
    rng = np.random.default_rng(0)
    lines = [json.dumps({"step": s, "reward": float(rng.uniform(0.2, 0.4))}) for s in range(n)]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "config, extra, match",
    [
        ({"num_genrations": 8}, [], "unknown key 'num_genrations'"),
        ({"learning_rate": -1e-6}, [], "learning_rate"),
        ({"num_generations": 1}, [], "num_generations"),
        ({}, ["--fit-until", "1000"], "fit-until"),
        ({}, ["--band", "1.5"], "band"),
    ],
)
def test_cli_input_errors_exit_2_and_create_nothing(tmp_path, config, extra, match):
    _tiny_log(tmp_path / "log.jsonl")
    (tmp_path / "run.json").write_text(json.dumps(config))
    proc = _cli("calibrate", "log.jsonl", "--run-config", "run.json", "--out", "out", *extra, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert match in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_cli_log_too_short_says_so(tmp_path):
    _tiny_log(tmp_path / "log.jsonl", n=6)
    proc = _cli("forecast", "log.jsonl", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "needs at least 10" in proc.stderr and not (tmp_path / "out").exists()


def test_cli_bad_scenario_is_refused_before_calibrating(tmp_path):
    _tiny_log(tmp_path / "log.jsonl")
    for scenario, match in (("num_generations=1", "num_generations"), ("optimizer=sgd", "cannot change optimizer")):
        proc = _cli("what-if", "log.jsonl", "--scenario", scenario, "--out", "out", cwd=tmp_path)
        assert proc.returncode == 2 and match in proc.stderr, proc.stderr
        assert not (tmp_path / "out").exists()
