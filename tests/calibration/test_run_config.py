"""Run configurations: GRPOConfig names, precedence, scenarios and one-line errors (CLI: exit 2, nothing created)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pgrpo_sim.base.errors import PgrpoSimError
from pgrpo_sim.calibration.inputs import kl_warning
from pgrpo_sim.calibration.run_config import KEYS, RunConfig, log_settings, parse_scenario, resolve_run_config
from pgrpo_sim.calibration.run_config_files import load_run_config, read_run_config, translate_run_config
from pgrpo_sim.cli.common import cli_wording
from pgrpo_sim.logs.readers import read_log, tidy


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
        # beyond float32, where the bandit's η lives: refused here, not as "learning_rate must be finite" after
        # calibrating
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_cli_log_too_short_says_so(tmp_path):
    """A log long enough for fit (7 rewards) but not for the bandit's calibration (10): one line, nothing written."""
    _tiny_log(tmp_path / "log.jsonl", n=8)
    proc = _cli("forecast", "log.jsonl", "--model", "bandit", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "needs at least 10" in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_bad_scenario_is_refused_before_calibrating(tmp_path):
    _tiny_log(tmp_path / "log.jsonl")
    for scenario, match in (("num_generations=1", "num_generations"), ("optimizer=sgd", "cannot change optimizer")):
        proc = _cli("what-if", "log.jsonl", "--scenario", scenario, "--out", "out", cwd=tmp_path)
        assert proc.returncode == 2 and match in proc.stderr, proc.stderr
        assert not (tmp_path / "out").exists()


DATA = Path(__file__).parents[1] / "data"


def test_a_trl_grpo_config_dump_is_a_run_config():
    """Issue 37, 15: `trainer.args.to_dict()` of a GRPOConfig (tests/data/trl_grpo_config.json, TRL 1.16's and
    transformers 5's fields): its GRPOConfig names are read, the batch sizes give prompts per rollout and optimiser
    steps per epoch, and every other key is accepted and listed as not used."""
    dump = json.loads((DATA / "trl_grpo_config.json").read_text())
    loaded = load_run_config(DATA / "trl_grpo_config.json")
    keys = loaded.keys
    g = dump["num_generations"]
    assert keys["prompts_per_step"] == dump["generation_batch_size"] // g
    assert keys["steps_per_generation"] == dump["steps_per_generation"] // dump["gradient_accumulation_steps"]
    for name in ("learning_rate", "beta", "epsilon", "epsilon_high", "loss_type", "num_iterations", "max_steps"):
        assert keys[name] == dump[name], name
    assert keys["warmup_ratio"] == dump["warmup_steps"]  # transformers 5: warmup_steps below 1 is a fraction
    assert keys["optimizer"] == "adamw"  # optim adamw_torch_fused
    used = {"generation_batch_size", "gradient_accumulation_steps", "steps_per_generation", "optim", "warmup_steps"}
    assert set(loaded.not_used) == set(dump) - set(keys) - used
    assert {"output_dir", "logging_steps", "per_device_train_batch_size", "temperature"} <= set(loaded.not_used)
    run = resolve_run_config(keys).with_notes(*loaded.summary())
    assert run.assumed() == ""  # G, prompts per step, β and epochs all given
    assert any(note.startswith(f"not used ({len(loaded.not_used)} keys") for note in run.as_dict()["notes"])


def test_trl_batch_without_generation_batch_size():
    """prompts per rollout = per_device_train_batch_size × world size × steps_per_generation / G (TRL's
    generation_batch_size), with gradient accumulation as its default steps_per_generation."""
    base = {"output_dir": "o", "per_device_train_batch_size": 8, "gradient_accumulation_steps": 4}
    one = translate_run_config({**base, "num_generations": 8})
    assert one.keys["prompts_per_step"] == 8 * 4 // 8 and one.keys["steps_per_generation"] == 1
    assert "world size 1" in one.notes[0]
    two = translate_run_config({**base, "num_generations": 8, "world_size": 2, "steps_per_generation": 8})
    assert two.keys["prompts_per_step"] == 8 * 2 * 8 // 8 and two.keys["steps_per_generation"] == 8 // 4
    assert "max_steps" not in translate_run_config({**base, "max_steps": -1}).keys  # -1: trained by epochs
    with pytest.raises(PgrpoSimError, match="whole number"):  # a rollout of 2 × 1 completions: a quarter group
        translate_run_config({**base, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1})
    with pytest.raises(PgrpoSimError, match="steps_per_generation / gradient_accumulation_steps"):
        translate_run_config({**base, "steps_per_generation": 6})


def test_a_verl_config_nested_or_dotted():
    loaded = load_run_config(DATA / "verl_ppo_trainer.yaml")
    keys = loaded.keys
    actor = yaml.safe_load((DATA / "verl_ppo_trainer.yaml").read_text())["actor_rollout_ref"]["actor"]
    assert keys["num_iterations"] == actor["ppo_epochs"] and keys["beta"] == actor["kl_loss_coef"]
    assert (keys["epsilon"], keys["epsilon_high"]) == (actor["clip_ratio_low"], actor["clip_ratio_high"])
    assert keys["num_generations"] == 5 and keys["prompts_per_step"] == 32  # rollout.n, data.train_batch_size
    assert keys["steps_per_generation"] == 32 // actor["ppo_mini_batch_size"]
    assert keys["loss_type"] == "dapo" and keys["scale_rewards"] == "group" and "max_steps" not in keys
    assert {"trainer.project_name", "actor_rollout_ref.rollout.temperature"} <= set(loaded.not_used)
    dotted = {
        "actor_rollout_ref.actor.ppo_epochs": 2,
        "data.train_batch_size": 32,
        "actor_rollout_ref.rollout.n": 5,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 8,
        "actor_rollout_ref.actor.clip_ratio_low": 0.2,
        "actor_rollout_ref.actor.clip_ratio_high": 0.28,
        "actor_rollout_ref.actor.kl_loss_coef": 0.001,
    }
    assert translate_run_config(dotted).keys == {
        k: keys[k]
        for k in (
            "num_iterations",
            "prompts_per_step",
            "num_generations",
            "steps_per_generation",
            "epsilon",
            "epsilon_high",
            "beta",
        )
    }
    assert translate_run_config({**dotted, "actor_rollout_ref.actor.use_kl_loss": False}).keys["beta"] == 0.0
    with pytest.raises(PgrpoSimError, match="only grpo"):
        translate_run_config({"algorithm": {"adv_estimator": "gae"}})


def test_epsilon_high_below_epsilon_is_refused():
    """Issue 37, 9: a smaller upper clip is a slip, refused in a file, a log's settings and a scenario alike."""
    with pytest.raises(PgrpoSimError, match=r"epsilon_high \(0.1\) must be >= epsilon \(0.2\)"):
        resolve_run_config({"epsilon_high": 0.1})
    with pytest.raises(PgrpoSimError, match="epsilon_high"):
        resolve_run_config(None, {"epsilon_high": 0.28}).replace(epsilon=0.3)


def test_assumed_settings_and_a_kl_the_log_records():
    """Issue 37, 15: what was assumed is named, and a log with a non-zero KL calibrated at β = 0 is warned about."""
    assumed = resolve_run_config().assumed()
    assert assumed.startswith("assumed: G = 8, prompts_per_step = 8, β = 0") and "run_config=FILE" in assumed
    assert "pass --run-config FILE to set them" in cli_wording(assumed)  # as the command line says it
    assert "G =" not in resolve_run_config(None, {"num_generations": 6}).assumed()  # the log says it
    with pytest.warns(UserWarning, match="skipped 1 record"):  # the file's last record has no reward
        log = read_log(DATA / "trl_state.json")
    assert np.any(log.series("kl")[1] != 0)
    warning = kl_warning(resolve_run_config(), log)
    assert warning.startswith("warning: the log records a non-zero KL") and "β = 0 (default)" in warning
    assert kl_warning(resolve_run_config({"beta": 0.04}), log) == ""
    quiet = tidy([{"step": s, "reward": 0.1, "kl": 0.0} for s in range(5)], format="jsonl", path=None)
    assert kl_warning(resolve_run_config(), quiet) == ""


@pytest.mark.slow  # one calibration (~30 s on 2 busy cores)
def test_cli_names_assumed_settings_a_kl_at_beta_0_and_unused_keys(tmp_path):
    """Issue 37, 15: calibrate on a TRL log that records a KL, without a run config: the summary line names what
    was assumed and warns about β = 0, as the report does; with a GRPOConfig dump, neither, and its unused keys
    are one stderr line and a line of the report."""
    log = str(DATA / "trl_state.json")
    proc = _cli("calibrate", log, "--quiet", "--out", "a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "assumed: G = 8, prompts_per_step = 8, β = 0" in proc.stdout
    assert "warning: the log records a non-zero KL" in proc.stdout
    assert "warning: the log records a non-zero KL" in (tmp_path / "a" / "report.md").read_text()
    proc = _cli(
        "calibrate", log, "--quiet", "--run-config", str(DATA / "trl_grpo_config.json"), "--out", "b", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "assumed" not in proc.stdout and "warning" not in proc.stdout  # the dump gives G, P, β = 0.04, epochs
    unused = len(load_run_config(DATA / "trl_grpo_config.json").not_used)
    assert (
        [line for line in proc.stderr.splitlines() if "keys not used" in line]
        == [line for line in proc.stderr.splitlines() if f"{unused} keys not used" in line]
        != []
    )
    report = (tmp_path / "b" / "report.md").read_text()
    assert f"- not used ({unused} keys" in report and "- prompts_per_step = generation_batch_size" in report
    notes = json.loads((tmp_path / "b" / "calibration.json").read_text())["run_config"]["notes"]
    assert any(n.startswith("not used") for n in notes)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "run_configs"


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.yaml")), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_run_config_loads(path):
    """The shipped run configs are valid; an `eN_tbM` run of the reuse sweep takes N × 256/M optimiser steps per
    rollout of 256 completions (its name, read independently of the file)."""
    keys = load_run_config(path).keys
    config = RunConfig(**keys)
    assert config.learning_rate > 0
    named = re.search(r"_e(\d+)_tb(\d+)_", path.stem)
    if named:
        epochs, batch = map(int, named.groups())
        assert config.steps_per_rollout == epochs * 256 // batch
        assert config.num_generations * config.prompts_per_step == 256
