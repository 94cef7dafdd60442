"""Issue #50, "What a new user hit": the logged learning-rate schedule read as the run's (item 1), one-line errors
where there were tracebacks or wrong hints (item 5), short logs and the language-model level's start (item 6), and
summary lines that name every file written. No calibration runs here: where a command would calibrate, the
calibration is stood in for (`_stand_in`) or refused before it starts."""

import importlib
import math
import re
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from pgrpo_sim.calibration import language_model as lmcal, results
from pgrpo_sim.calibration.inputs import calibration_inputs
from pgrpo_sim.calibration.run_config import log_settings, resolve_run_config
from pgrpo_sim.cli import main
from pgrpo_sim.logs.readers import read_log, tidy
from pgrpo_sim.reports import calibration_report

ANCHORS = Path("/work/shared/anchors")
GSM8K = ANCHORS / "trl_gsm8k_llama31_8b_trainer_state.json"
GSM8K_CONFIG = Path(__file__).parents[1] / "examples" / "run_configs" / "trl_gsm8k_llama31_8b.yaml"
needs_anchors = pytest.mark.skipif(not GSM8K.exists(), reason="the shared anchor logs are not on this machine")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _hf_rate(kind: str, count: int, warmup: int, total: int) -> float:
    """transformers' schedule factors (`get_*_schedule_with_warmup`'s lr_lambda), written out here, independently
    of the package's."""
    if kind == "constant":
        return 1.0
    if count < warmup:
        return count / max(1, warmup)
    if kind == "constant_with_warmup":
        return 1.0
    progress = (count - warmup) / max(1, total - warmup)
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def _laid_log(kind, peak, warmup, total, *, steps=None, every=1, after_step=True):
    """A log of steps 1 … `steps` (default `total`) of a `total`-step run whose learning rate follows `kind` with
    `warmup` steps to `peak`, logged every `every` steps, after the scheduler's step (count = step) or before it
    (count = step − 1)."""
    records = [
        {"step": s, "reward": 0.3, "learning_rate": peak * _hf_rate(kind, s if after_step else s - 1, warmup, total)}
        for s in range(1, (steps or total) + 1)
        if s % every == 0 or s == 1
    ]
    return tidy(records, format="jsonl", path=None)


# ---- item 1: the logged schedule -----------------------------------------------------------------------------------


@needs_anchors
def test_the_gsm8k_log_gives_its_peak_cosine_schedule_and_warm_up_as_the_log_s_settings():
    """The GSM8K log records its learning rate per step: read as the run config of that run (examples/run_configs)
    sets it, 5e-6 peak, cosine, warm-up 0.1, each from the log; the assumed line no longer names them."""
    config = yaml.safe_load(GSM8K_CONFIG.read_text())
    log = read_log(GSM8K)
    settings = log_settings(log)
    assert settings["learning_rate"] == pytest.approx(5e-6, rel=1e-9)
    assert settings["learning_rate"] == pytest.approx(config["learning_rate"], rel=1e-9)
    assert settings["lr_scheduler_type"] == config["lr_scheduler_type"] == "cosine"
    assert settings["warmup_ratio"] == pytest.approx(config["warmup_ratio"])
    _, run, _ = calibration_inputs(log)
    assert run.learning_rate == pytest.approx(5e-6) and run.lr_scheduler_type == "cosine"
    assert {run.sources[k] for k in ("learning_rate", "lr_scheduler_type", "warmup_ratio")} == {"log"}
    assert run.warmup_steps(len(log)) == round(config["warmup_ratio"] * config["max_steps"])
    assumed = run.assumed()
    assert assumed.startswith("assumed: G = 8") and "learning_rate" not in assumed and "lr_scheduler" not in assumed


@pytest.mark.parametrize(
    "kind, warmup, every, after_step",
    [
        ("constant", 0, 1, True),
        ("constant_with_warmup", 7, 1, True),
        ("linear", 0, 1, False),  # TRL 0.26 logs the rate before its scheduler's step
        ("linear", 13, 1, True),
        ("cosine", 0, 1, True),
        ("cosine", 25, 1, False),
        ("cosine", 12, 5, True),  # logged every 5 steps: the warm-up ends between two logged steps
    ],
)
def test_a_schedule_laid_in_a_log_is_read_back(kind, warmup, every, after_step):
    total, peak = 120, 3e-5
    log = _laid_log(kind, peak, warmup, total, every=every, after_step=after_step)
    settings = log_settings(log)
    assert settings["learning_rate"] == pytest.approx(peak, rel=1e-9)
    assert settings["lr_scheduler_type"] == kind
    if kind == "constant":
        assert "warmup_ratio" not in settings  # a constant schedule has no warm-up
    else:
        assert settings["warmup_ratio"] == pytest.approx(warmup / total)
        run = resolve_run_config(None, settings)
        assert run.warmup_steps(total) == warmup  # the simulator's warm-up: ⌈ratio × length⌉ is the laid one


def test_a_run_config_file_outranks_the_log_and_sets_the_schedule_s_length(tmp_path):
    """The file's values stand over the log's; its max_steps is the length the log's warm-up is a share of."""
    log = _laid_log("linear", 2e-5, 10, 200, steps=100)  # a run of 200 steps, of which the log holds the first 100
    config = tmp_path / "run.yaml"
    config.write_text("learning_rate: 1.0e-5\nmax_steps: 200\n")
    _, run, _ = calibration_inputs(log, config)
    assert run.learning_rate == 1e-5 and run.sources["learning_rate"] == "run-config"
    assert run.lr_scheduler_type == "linear" and run.sources["lr_scheduler_type"] == "log"
    assert run.warmup_ratio == pytest.approx(10 / 200) and run.sources["warmup_ratio"] == "log"
    assert log_settings(log, max_steps=200)["warmup_ratio"] == pytest.approx(10 / 200)
    assert log_settings(log) != log_settings(log, max_steps=200)  # over the log's 100 steps, another reading


def test_a_logged_rate_no_schedule_matches_sets_nothing_and_is_named():
    """An exponential decay is none of the four schedules: learning_rate stays TRL's default, and both the assumed
    line and a warning say so."""
    records = [{"step": s, "reward": 0.3, "learning_rate": 1e-5 * 0.97**s} for s in range(1, 101)]
    log = tidy(records, format="jsonl", path=None)
    assert "learning_rate" not in log_settings(log) and "lr_scheduler_type" not in log_settings(log)
    _, run, _ = calibration_inputs(log)
    assert run.sources["learning_rate"] == "default"
    assert f"learning_rate = {run.learning_rate:g}" in run.assumed()
    assert any(note.startswith("warning: the log's learning rate") for note in run.notes)


def test_the_assumed_line_names_the_learning_rate_and_the_file_when_one_was_given(tmp_path):
    run = resolve_run_config()
    assumed = run.assumed()
    for key in ("learning_rate", "lr_scheduler_type", "warmup_ratio", "epsilon", "scale_rewards"):
        assert f"{key} = " in assumed, key
    assert "pass run_config=FILE" in assumed
    given = run.assumed("configs/run.yaml")
    assert "run_config=FILE" not in given and given.endswith("run.yaml does not set them")


# ---- the command line, calibrations stood in for -------------------------------------------------------------------


def _stand_in(monkeypatch, seen: dict):
    """Replace the calibration, its answers and the writers by stand-ins that record the run they were given and
    write every output file empty (the summary line is what is tested)."""
    fc = importlib.import_module("pgrpo_sim.calibration.forecast")  # the package exports a function of that name
    inference = importlib.import_module("pgrpo_sim.calibration.inference")

    cal = types.SimpleNamespace(stationary=True, fit_until=75.0, n_points=75, overdispersion=1.0, map_offset=0.0)
    passed = types.SimpleNamespace(passed=True, describe=lambda: "passes")

    def calibrate(log, run, **kwargs):
        seen["run"] = run
        return cal

    def writer(outputs):
        def write(*args):
            for name in outputs:
                (args[-1] / name).write_text("")
            return {"parameters": {}}

        return write

    record = {"set": {"beta": 0.1}, "verdict": "learns", "final_reward": 0.5}
    # no band: draws_note, its only reader, is stood in
    scenario = results.Scenario({"beta": 0.1}, "learns", 0.5, None, None, None, record)
    forecast = results.Forecast("bandit", None, 75.0, 250.0, None, None, None, None, {})
    monkeypatch.setattr(inference, "calibrate", calibrate)
    monkeypatch.setattr(fc, "forecast", lambda *a, **k: forecast)
    monkeypatch.setattr(fc, "what_if", lambda *a, **k: results.WhatIf("bandit", scenario, (scenario,), 0.8, {}))
    monkeypatch.setattr(fc, "goodness_of_fit", lambda *a, **k: passed)
    monkeypatch.setattr(fc, "draws_note", lambda band: "")
    monkeypatch.setattr(calibration_report, "calibration_band", lambda *a, **k: (None, passed))
    monkeypatch.setattr(calibration_report, "marked", lambda verdict, check: verdict)
    for name, outputs in (
        ("write_calibration", calibration_report.CALIBRATE_OUTPUTS),
        ("write_forecast", calibration_report.FORECAST_OUTPUTS),
        ("write_whatif", calibration_report.WHATIF_OUTPUTS),
    ):
        monkeypatch.setattr(calibration_report, name, writer(outputs))


@needs_anchors
def test_forecast_on_gsm8k_calibrates_at_the_logged_rate_and_names_what_it_assumed(workdir, capsys, monkeypatch):
    """Issue #50, 1: `forecast GSM8K --fit-fraction 0.3` hands the calibration the logged 5e-6 cosine schedule,
    and its summary line names the assumed values; with a run config, it names the file instead of asking for one
    (item 5)."""
    seen = {}
    _stand_in(monkeypatch, seen)
    assert main(["forecast", str(GSM8K), "--fit-fraction", "0.3", "--model", "bandit", "--quiet", "--out", "a"]) == 0
    run, line = seen["run"], capsys.readouterr().out.strip()
    assert run.learning_rate == pytest.approx(5e-6) and run.lr_scheduler_type == "cosine"
    assumed = re.search(r"assumed: [^;]*", line).group()
    assert "G = 8" in assumed and "learning_rate" not in assumed and "--run-config FILE" in assumed
    config = workdir / "partial.yaml"
    config.write_text("num_generations: 6\n")  # the run's G; the rest is not in it
    argv = [
        "forecast",
        str(GSM8K),
        "--fit-fraction",
        "0.3",
        "--run-config",
        str(config),
        "--model",
        "bandit",
        "--quiet",
        "--out",
        "b",
    ]
    assert main(argv) == 0
    line = capsys.readouterr().out.strip()
    assert "assumed: prompts_per_step = 8" in line and "partial.yaml does not set them" in line
    assert "pass --run-config" not in line


@pytest.mark.parametrize(
    "command, extra, outputs",
    [
        ("calibrate", [], calibration_report.CALIBRATE_OUTPUTS),
        ("forecast", ["--model", "bandit"], calibration_report.FORECAST_OUTPUTS),
        ("what-if", ["--model", "bandit", "--scenario", "beta=0.1"], calibration_report.WHATIF_OUTPUTS),
    ],
)
def test_summary_lines_name_every_file_written(command, extra, outputs, workdir, capsys, monkeypatch):
    _stand_in(monkeypatch, {})
    log = workdir / "run.jsonl"
    log.write_text("".join(f'{{"step": {s}, "reward": {0.2 + 0.01 * s}}}\n' for s in range(1, 31)))
    assert main([command, str(log), *extra, "--quiet", "--out", "out"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    written = re.search(r"wrote (\S+)/(.*)$", last)
    assert written and Path(written.group(1)) == Path("out"), last
    named = re.split(r", | and ", written.group(2))
    assert sorted(named) == sorted(outputs) == sorted(p.name for p in (workdir / "out").iterdir() if p.name[0] != ".")


# ---- item 5: one line, exit 2, nothing created ---------------------------------------------------------------------


def _refused(argv, capsys, workdir) -> str:
    before = sorted(workdir.iterdir())
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pgrpo-sim: error: "), err
    assert "Traceback" not in err and captured.out == ""
    assert sorted(workdir.iterdir()) == before  # nothing created
    return err


@pytest.fixture
def short_log(workdir):
    path = workdir / "run.jsonl"
    path.write_text("".join(f'{{"step": {s}, "reward": {0.2 + 0.01 * s}}}\n' for s in range(1, 31)))
    return str(path)


def test_a_binary_run_config_is_one_line(short_log, workdir, capsys):
    binary = workdir / "model.yaml"
    binary.write_bytes(bytes(range(128, 256)) * 4)  # no UTF-8 text
    err = _refused(["forecast", short_log, "--run-config", str(binary), "--out", "out"], capsys, workdir)
    assert "run-config model.yaml: not a text file" in err and "JSON or YAML" in err


def test_an_unknown_flag_is_named_before_a_missing_one_with_the_scenario_to_give(short_log, workdir, capsys):
    """`what-if LOG --learning_rate 1e-5` named the missing --scenario; now the unknown flag, and the scenario that
    sets it."""
    err = _refused(["what-if", short_log, "--learning_rate", "1e-5", "--out", "out"], capsys, workdir)
    assert "unrecognized arguments: --learning_rate" in err and "--scenario learning_rate=1e-5" in err
    assert "required" not in err
    err = _refused(
        ["what-if", short_log, "--scenario", "beta=0.1", "--num-generations=4", "--out", "o"], capsys, workdir
    )
    assert "--num-generations=4" in err and "--scenario num_generations=4" in err
    err = _refused(["forecast", short_log, "--beta", "0.04", "--out", "out"], capsys, workdir)
    assert "unrecognized arguments: --beta" in err and "--run-config file" in err
    err = _refused(["forecast", short_log, "--colour", "red", "--out", "out"], capsys, workdir)
    assert err.endswith("unrecognized arguments: --colour")  # no run-config key: no advice
    err = _refused(["forecast", short_log, "--band", "-0.5", "--out", "out"], capsys, workdir)
    assert "band" in err and "unrecognized" not in err  # a negative value is a value, checked as before


def test_the_reward_column_hint_names_the_column_flag(workdir, capsys):
    loss = workdir / "loss.jsonl"
    loss.write_text("".join(f'{{"step": {s}, "loss": 0.5}}\n' for s in range(1, 31)))
    err = _refused(["forecast", str(loss), "--out", "out"], capsys, workdir)
    assert "map one with --column reward=NAME" in err
    evals = workdir / "eval.jsonl"
    evals.write_text("".join(f'{{"step": {s}, "eval/reward": 0.5}}\n' for s in range(1, 31)))
    err = _refused(["forecast", str(evals), "--out", "out"], capsys, workdir)
    assert "--column reward=eval/reward reads it" in err


# ---- item 6: short logs, and the language-model level's start -----------------------------------------------------


def test_a_log_too_short_for_fit_is_too_short_for_forecast_with_the_same_minimum(workdir, capsys):
    """fit refuses a 3-step log, naming the points its fits need; forecast (which answered "learns") and what-if
    refuse it too, naming the same number; a log of that many steps passes this check (and meets the bandit's own)."""
    three = workdir / "three.jsonl"
    three.write_text("".join(f'{{"step": {s}, "reward": {0.1 * s}}}\n' for s in range(1, 4)))
    err = _refused(["fit", str(three), "--out", "out"], capsys, workdir)
    need = int(re.search(r"at least (\d+)", err).group(1))
    for argv in (["forecast", str(three)], ["what-if", str(three), "--scenario", "beta=0.1"]):
        err = _refused([*argv, "--out", "out"], capsys, workdir)
        assert "has 3 rewarded steps" in err and f"at least {need}" in err, err
    enough = workdir / "enough.jsonl"
    enough.write_text("".join(f'{{"step": {s}, "reward": {0.05 * s}}}\n' for s in range(1, need + 1)))
    err = _refused(["forecast", str(enough), "--model", "bandit", "--out", "out"], capsys, workdir)
    assert "rewarded steps; calibrate, forecast" not in err  # the bandit's own minimum speaks


@needs_anchors
@pytest.mark.parametrize(
    "argv, why",
    [
        (["forecast", str(GSM8K), "--fit-until", "3"], "the fit window holds 3 logged rewards"),
        (["what-if", str(GSM8K), "--scenario", "learning_rate=1e-5"], "a scenario changes learning_rate"),
    ],
)
def test_the_language_model_level_says_why_and_that_it_takes_minutes_before_it_starts(
    argv, why, workdir, capsys, monkeypatch
):
    """`forecast LOG --fit-until 3` started the level's multi-minute calibration silently: its first progress line
    now says why the level answers and that it takes minutes (the level's runs are stood in for by a refusal)."""
    from pgrpo_sim.models.lm import StartNotReached

    def unreachable(settings, steps, seed=0):
        raise StartNotReached(settings[0]["start_accuracy"], 0.41)

    monkeypatch.setattr(lmcal, "cached_runs_each", lambda jobs: [unreachable(*job) for job in jobs])
    assert main([*argv, "--out", "out"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    said = [i for i, line in enumerate(lines) if "answered by the language-model level" in line]
    assert said and why in lines[said[0]] and "takes minutes" in lines[said[0]], lines
    assert said[0] < len(lines) - 1 and lines[-1].startswith("pgrpo-sim: error: ")  # before the level ran
    assert not (workdir / "out").exists()


def test_the_schedule_fit_is_quick_on_a_long_log():
    """A long log (10⁴ steps) is read in well under a second: the warm-up is searched near the logged peak only."""
    import time

    log = _laid_log("cosine", 1e-6, 300, 10_000)
    start = time.perf_counter()
    settings = log_settings(log)
    assert time.perf_counter() - start < 2.0 and settings["warmup_ratio"] == pytest.approx(300 / 10_000)
    assert np.isclose(settings["learning_rate"], 1e-6)
