"""Log readers (TRL state and console, typed JSONL, verl JSONL and console, TensorBoard, W&B CSV, generic CSV/JSONL,
simulate output), run settings, bad input, and every real anchor log (format, steps, reward range, fit report)."""

import ast
import csv
import json
import math
import re
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.logs import readers as logs
from pgrpo_sim.reports import log_report as report

DATA = Path(__file__).parents[1] / "data"
OWN = Path(__file__).parent / "data"
ANCHORS = Path(__file__).parents[3] / "shared" / "anchors"
ANCHOR_FILES = {
    "trl_gsm8k_llama31_8b_trainer_state.json": "trl",
    "trl_wordle_qwen25_3b_trainer_state.json": "trl",
    "custom_countdown_qwen3_06b_metrics.jsonl": "jsonl",
}
needs_anchors = pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")
ALL_ANCHORS = (
    sorted(str(p.relative_to(ANCHORS)) for p in [*ANCHORS.glob("*"), *ANCHORS.glob("sweeps/*/*")] if p.is_file())
    if ANCHORS.is_dir()
    else []
)
NAN = math.nan


def test_trl_state_current_keys_eval_and_bad_row():
    """TRL 0.26 keys; eval records merged at their step; the summary record dropped; a NaN reward skipped."""
    with pytest.warns(UserWarning, match="skipped 1 record"):
        log = logs.read_log(DATA / "trl_state.json")
    assert log.format == "trl" and len(log) == 39 and list(log.skipped_steps) == [17.0]
    assert (
        log.sources["clip_frac"] == "clip_ratio/region_mean" and log.sources["zero_std_frac"] == "frac_reward_zero_std"
    )
    steps, evals = log.series("eval_reward")
    assert list(steps) == [10, 20, 30, 40] and evals[0] == pytest.approx(0.7 * (1 - math.exp(-10 / 12)), abs=1e-4)
    assert "train_runtime" in log.other and "rewards/accuracy_reward/mean" in log.other
    assert {"policy_kl", "ratio_max", "n_samples"} <= set(log.missing)
    assert np.all(np.isfinite(log["reward"]))


def test_verl_jsonl_and_console_agree():
    """verl's file logger ({"step", "data"}) and its console lines (numpy reprs, other output interleaved) give the
    same table; validation keys carry the data source and are found by pattern."""
    jsonl, console = logs.read_log(DATA / "verl_metrics.jsonl"), logs.read_log(DATA / "verl_console.log")
    assert jsonl.format == console.format == "verl" and jsonl.sources == console.sources
    for name in jsonl.data:
        np.testing.assert_array_equal(jsonl[name], console[name])
    assert jsonl.sources["reward"] == "critic/score/mean" and jsonl.sources["policy_kl"] == "actor/ppo_kl"
    assert jsonl.sources["eval_reward"] == "val-core/openai/gsm8k/reward/mean@1"
    assert jsonl["step"][0] == 0 and np.isnan(jsonl["reward"][0])  # validation-only record at step 0
    assert list(jsonl.series("eval_reward")[0]) == [0, 5, 10, 15, 20, 25, 30]


def test_generic_csv_needs_a_column_map():
    with pytest.raises(ValueError, match=r"no reward column .* map one with reward=NAME"):
        logs.read_log(DATA / "generic.csv")
    log = logs.read_log(
        DATA / "generic.csv", columns=logs.parse_column_map(["reward=my_reward", "eval_reward = eval/acc"])
    )
    assert log.format == "csv" and log.sources["step"] == "Step"  # names are matched ignoring case
    assert list(log.series("eval_reward")[0]) == [5, 10, 15, 20, 25]  # empty cells are "not logged", not NaN rows
    assert log.skipped_steps.size == 0 and "my_reward_sd" in log.other


def test_simulate_csv_output():
    log = logs.read_log(DATA / "simulate.csv")
    assert log.format == "csv" and len(log) == 61
    assert log.sources["kl"] == "kl_ref" and log.sources["zero_std_frac"] == "zero_adv_frac"
    assert log["reward"][0] == pytest.approx(0.2, abs=1e-6)


def test_from_run_expected_and_sampled():
    """An expected-mode run maps field by field; a sampled one (here a stand-in with the `bandit.Run` fields of
    shape (seeds, steps)) is averaged over seeds with reward_std the spread across seeds and n_samples = seeds."""
    run = ps.simulate(ps.bandit.config(p_ref=0.2, learning_rate=0.2, beta=0.5, num_generations=8), 30)
    expected = logs.from_run(run)
    assert expected.format == "simulation" and len(expected) == 31 and "reward_std" not in expected
    np.testing.assert_array_equal(expected["kl"], np.asarray(run.kl_ref))
    rng = np.random.default_rng(0)
    fields = {f: rng.random((5, 31)) for f in ps.bandit.Run._fields if f not in ("final_logits", "final_opt_state")}
    sampled = SimpleNamespace(**fields | dict(true_reward=None))
    log = logs.from_run(sampled)
    np.testing.assert_allclose(log["reward"], fields["reward"].mean(0))
    np.testing.assert_allclose(log["reward_std"], fields["reward"].std(0, ddof=1))
    np.testing.assert_allclose(log["zero_std_frac"], fields["zero_adv_frac"].mean(0))
    assert np.all(log["n_samples"] == 5) and "true_reward" not in log
    np.testing.assert_allclose(logs.from_run(sampled, index=2)["reward"], fields["reward"][2])
    with pytest.raises(ValueError, match=r"index must be an integer in \[0, 4\]"):
        logs.from_run(sampled, index=5)
    one_seed = SimpleNamespace(**{f: v[:1] for f, v in fields.items()} | dict(true_reward=None))
    assert np.all(np.isnan(logs.from_run(one_seed).data["reward_std"]))  # one seed has no spread, not a spread of 0


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


BAD = {
    "missing": (None, "log file not found"),
    "truncated.json": ('{\n  "log_history": [\n    {"step": 1, "reward": 0.1},\n', "not valid JSON \\(line 3"),
    "object.json": ('{\n  "global_step": 3\n}\n', "without log_history"),
    "nolist.json": ('{"log_history": 3}', "no log_history list"),
    "bad.jsonl": ('{"step": 1, "reward": 0.1}\n{"step": 2, "reward": \n', "line 2"),
    "array.jsonl": ('{"step": 1, "reward": 0.1}\n[1, 2]\n', "line 2 is not a JSON object"),
    "noreward.jsonl": ('{"step": 1, "loss": 0.1}\n', "no reward column"),
    "backwards.jsonl": (
        '{"step": 5, "reward": 0.1}\n{"step": 6, "reward": 0.2}\n{"step": 2, "reward": 0.3}\n',
        "backwards: step 2",
    ),
    "twice.jsonl": ('{"step": 1, "reward": 0.1}\n{"step": 1, "reward": 0.2}\n', "logs 'reward' twice"),
    "nostep.jsonl": ('{"step": 1, "reward": 0.1}\n{"reward": 0.2}\n', "record 2 of nostep.jsonl has no 'step'"),
    "allnan.jsonl": (
        '{"step": 1, "reward": NaN}\n{"step": 2, "reward": null, "eval_reward": 0.1}\n',
        "no record with a finite",
    ),
    "arrays.json": ("[[1, 0.1], [2, 0.2]]", "JSON array of list values, not of objects"),
    "arrays.jsonl": ("[1, 0.1]\n[2, 0.2]\n", "holds JSON arrays, not objects"),
    "truncated_array.json": ('[{"step": 1,\n', "not valid JSON \\(line 2"),
    "ragged.csv": ("step,reward\n1,0.1\n2\n", "row 3 has 1 fields"),
    "header.csv": ("step,reward\n", "no data rows"),
    "noconsole.log": ("nothing to see\n", "no data rows"),
    "text.log": ("nothing to see\nhere either\n", "no reward column"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_line_value_error(tmp_path, name):
    text, match = BAD[name]
    path = tmp_path / name if text is None else _write(tmp_path, name, text)
    with pytest.raises(ValueError, match=match) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the all-NaN log warns about its skipped records first
        logs.read_log(path)
    assert "\n" not in str(info.value)


def test_non_numeric_csv_rewards_are_skipped_and_counted(tmp_path):
    """Issue 17: 14 of 100 rewards "n/a" were silently dropped ("skipped 0"); a text cell in a numeric column is
    a logged value that is not a number, counted like NaN; an empty cell is "not logged"."""
    rows = [f"{i},{'n/a' if i % 7 == 3 else 0.5},{'' if i == 0 else 0.1}" for i in range(100)]
    with pytest.warns(UserWarning, match="skipped 14 record"):
        log = logs.read_log(_write(tmp_path, "na.csv", "step,reward,kl\n" + "\n".join(rows) + "\n"))
    assert log.skipped_steps.size == 14 and len(log) == 86 and log.skipped_steps[0] == 3
    assert np.isnan(log["kl"][0])


def test_a_text_cell_is_missing_data_and_a_nan_reward_a_blow_up(tmp_path):
    """Both are skipped and counted, but only the logged NaN is a blow-up that fires the instability diagnostic at
    once; one "n/a" in a smooth curve used to flag instability at its step."""
    rows = [f"{i},{0.8 - 0.6 * 0.9**i}" for i in range(30)]
    for cell, blowup in (("n/a", False), ("nan", True)):
        text = "step,reward\n" + "\n".join([*rows[:12], f"12,{cell}", *rows[13:]]) + "\n"
        with pytest.warns(UserWarning, match="skipped 1 record"):
            log = logs.read_log(_write(tmp_path, f"{cell.replace('/', '')}.csv", text))
        assert list(log.skipped_steps) == [12] and list(log.blowup_steps) == ([12] if blowup else [])
        assert ps.diagnose(log).instability.first_step == (12 if blowup else None)


def test_a_text_reward_column_is_named(tmp_path):
    with pytest.raises(ValueError, match="column 'reward' holds no finite number") as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs.read_log(_write(tmp_path, "text.csv", "step,reward\n1,good\n2,bad\n"))
    assert "no reward column" not in str(info.value)


def test_json_arrays_of_records_and_numbers_as_strings(tmp_path):
    """A JSON array of records reads as the same records in JSON lines; a string holding a number is that number
    (the console's dicts are written so), and a text reward ("n/a") is skipped and counted as in a CSV."""
    records = [dict(step=s, reward=0.5 + 0.01 * s, kl=0.1) for s in range(1, 20)]
    lines = logs.read_log(_write(tmp_path, "lines.jsonl", "\n".join(json.dumps(r) for r in records)))
    array = logs.read_log(_write(tmp_path, "array.json", json.dumps(records)))
    texts = [{k: str(v) for k, v in r.items()} | (dict(reward="n/a") if r["step"] == 7 else {}) for r in records]
    with pytest.warns(UserWarning, match="skipped 1 record"):
        text = logs.read_log(_write(tmp_path, "text.jsonl", "\n".join(json.dumps(r) for r in texts)))
    assert lines.format == array.format == "jsonl"
    for name in ("step", "reward", "kl"):
        np.testing.assert_array_equal(array[name], lines[name])
        np.testing.assert_array_equal(text[name], np.delete(lines[name], 6))
    assert list(text.skipped_steps) == [7]


def test_nan_rows_are_skipped_and_counted(tmp_path):
    text = "\n".join(json.dumps(dict(step=s, reward=r)) for s, r in [(1, 0.1), (2, None), (3, 0.3)]) + "\n"
    text += '{"step": 4, "reward": NaN}\n{"step": 5, "reward": 0.5}\n'
    with pytest.warns(UserWarning, match="skipped 2 record"):
        log = logs.read_log(_write(tmp_path, "gaps.jsonl", text))
    assert list(log["step"]) == [1, 3, 5] and list(log.skipped_steps) == [2, 4]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(format="yaml"), "format must be auto or one of"),
        (dict(columns={"reward": "nope"}), "column 'nope' \\(for reward\\) is not in"),
    ],
)
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        logs.read_log(DATA / "simulate.csv", **kwargs)


@pytest.mark.parametrize("items, match", [(["reward"], "NAME=SOURCE"), (["score=x"], "unknown metric 'score'")])
def test_bad_column_map(items, match):
    with pytest.raises(ValueError, match=match):
        logs.parse_column_map(items)


@needs_anchors
@pytest.mark.parametrize("name", list(ANCHOR_FILES))
def test_anchor_logs_read_fit_and_report(name, tmp_path):
    """Every real log: detected format, report files written, every law fitted with finite R² (printed: the
    README's table); the Countdown log's placeholder entropy is reported as constant."""
    log = logs.read_log(ANCHORS / name)
    assert log.format == ANCHOR_FILES[name] and log.skipped_steps.size == 0
    result = report.write_report(log, tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"fit.json", "report.md", "fit.png", "diagnostics.png"}
    saved = json.loads((tmp_path / "fit.json").read_text())
    assert saved == json.loads(json.dumps(result))
    for law in ps.logs.LAWS:
        fitted = saved["fits"][law]
        assert set(fitted) >= {"params", "r2", "r2_smoothed", "reduced_chi2", "aic", "bic"}
        assert all(set(v) == {"value", "stderr"} for v in fitted["params"].values())
        assert math.isfinite(fitted["r2"]) and math.isfinite(fitted["r2_smoothed"])
    assert set(saved["prediction"]) >= {"plateau", "damping_ratio", "regime"}
    assert set(saved["diagnostics"]) == {"first", "hacking", "degeneracy", "concentration", "instability"}
    r2 = {law: (saved["fits"][law]["r2"], saved["fits"][law]["r2_smoothed"]) for law in ps.logs.LAWS}
    print(
        f"\n{name}: "
        + ", ".join(f"{law} R² {raw:.3f} ({smoothed:.3f} smoothed)" for law, (raw, smoothed) in r2.items())
    )
    if name.startswith("custom_countdown"):
        assert "entropy" in log.constant and saved["noise"]["source"] == "reward_std"
        assert saved["noise"]["n_samples"] == 20


def test_cli_fit_writes_report(tmp_path, capsys):
    """`pgrpo-sim fit` on the verl fixture (which has an eval reward: the coupling is reported)."""
    from pgrpo_sim.cli import main

    out = tmp_path / "out"
    assert main(["fit", str(DATA / "verl_metrics.jsonl"), "--format", "verl", "--out", str(out)]) == 0
    assert "fitted 30 points of critic/score/mean" in capsys.readouterr().out
    saved = json.loads((out / "fit.json").read_text())
    assert saved["log"]["format"] == "verl" and saved["noise"]["source"] == "residuals"
    assert saved["coupling"] is not None and len(saved["coupling"]["ratio"]) == 7
    assert (out / "report.md").read_text().startswith("# Fit report: verl_metrics.jsonl")


@pytest.mark.parametrize(
    "argv, word",
    [
        (["fit", "missing.json", "--out", "x"], "log file not found"),
        (["fit", str(DATA / "generic.csv"), "--out", "x"], "no reward column"),
        (["fit", str(DATA / "generic.csv"), "--column", "reward", "--out", "x"], "NAME=SOURCE"),
        (
            ["fit", str(DATA / "simulate.csv"), "--metric", "eval_reward", "--out", "x"],
            "metric 'eval_reward' is not in",
        ),
        (["fit", str(DATA / "simulate.csv"), "--samples-per-step", "0", "--out", "x"], "must be an integer >= 1"),
        (["fit", str(DATA / "simulate.csv"), "--format", "yaml", "--out", "x"], "--format"),
    ],
)
def test_cli_fit_errors(argv, word, capsys, tmp_path):
    from pgrpo_sim.cli import main

    assert main([*argv[:-1], str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()  # nothing written on bad input
    err = capsys.readouterr().err
    assert word in err and err.count("\n") == 1


def test_constant_log_reports_nulls_not_numbers(tmp_path):
    """A run that never earns reward (reward and reward_std 0 throughout): no noise information, R² and χ²
    undefined → null in fit.json, and no flag."""
    records = [dict(step=float(s), reward=0.0, reward_std=0.0, n_samples=8.0) for s in range(60)]
    result = report.write_report(logs.tidy(records, format="jsonl", path=None), tmp_path)
    assert result["noise"]["source"] == "residuals"
    assert all(f["r2"] is None and f["reduced_chi2"] is None for f in result["fits"].values())
    assert result["prediction"]["regime"] == "undetermined" and result["diagnostics"]["first"] is None


@pytest.mark.slow
def test_plateaus_the_run_has_not_reached_are_called_extrapolations(tmp_path):
    """A success rate decaying as 0.3·e^(−t/150) towards 0 (a collapse, noise 0.003): logged for 200 steps it ends
    at 0.08, so the saturation law's plateau (≈ 0) lies beyond every logged value and the report says so; logged
    for 2000 steps the run reaches 0 and no plateau is beyond the data."""
    rng = np.random.default_rng(0)

    def analysed(steps):
        t = np.arange(steps, dtype=float)
        reward = 0.3 * np.exp(-t / 150) + 0.003 * rng.standard_normal(steps)
        records = [dict(step=s, reward=r) for s, r in zip(t, reward, strict=True)]
        return report.write_report(logs.tidy(records, format="jsonl", path=None), tmp_path / str(steps))

    short = analysed(200)
    beyond = {p["law"]: p for p in short["plateaus_beyond_data"]}
    assert "saturation" in beyond and abs(beyond["saturation"]["value"]) < 0.02  # the true plateau, 0
    assert beyond["saturation"]["value"] < short["fitted_range"][0]
    assert "Plateaus beyond every fitted value" in (tmp_path / "200" / "report.md").read_text()
    assert analysed(2000)["plateaus_beyond_data"] == []


# ------------------------------------------------------------------------------- issue 15: more formats


def _nan_equal(actual, expected):
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected, float))


def test_trl_console_with_progress_bars():
    """Hand-written TRL console output: dicts after carriage returns and after a progress bar on the same line,
    string and float values, a stray non-metric dict, an eval dict at step 2 and the closing summary (no step)."""
    path = OWN / "trl_console.log"
    assert "\r{'loss'" in path.read_bytes().decode() and logs.detect_format(path) == "trl_console"
    log = logs.read_log(path)
    assert log.format == "trl_console" and log.sources["step"] == "step" and log.skipped_steps.size == 0
    _nan_equal(log["step"], [1, 2, 3])
    _nan_equal(log["reward"], [0.125, 0.375, 0.75])
    _nan_equal(log["reward_std"], [0.5, 0.25, 0.125])
    _nan_equal(log["kl"], [0, 0.0625, 0.125])
    _nan_equal(log["grad_norm"], [0.25, 0.75, NAN])  # 'nan' is logged, not a number
    _nan_equal(log["learning_rate"], [1e-5, 2e-5, 3e-5])
    _nan_equal(log["eval_reward"], [NAN, 0.5, NAN])  # eval belongs to the latest step, apart from the reward
    _nan_equal(log.other["train_runtime"], [NAN, NAN, 30.5])
    _nan_equal(log.other["eval_loss"], [NAN, 0.1, NAN])
    assert "eos_token_id" not in log.other and log.settings == {}  # learning rate not constant
    assert log.summary()["settings"] == {}


def test_trl_console_only_dicts_and_errors(tmp_path):
    """Only the printed dicts (e.g. grep'ed out, float values with nan/inf and numpy reprs) is still a console log;
    a training dict after the end-of-training summary means two runs; a NaN reward is a skipped step."""
    lines = [
        "{'loss': 0.1, 'reward': 0.25, 'kl': nan}",
        "{'loss': 0.2, 'reward': np.float64(0.5), 'kl': inf}",
        "{'loss': 0.3, 'reward': nan, 'kl': 0.5}",
        "{'loss': 0.4, 'reward': 0.75, 'kl': -inf}",
    ]
    path = _write(tmp_path, "only.txt", "\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="skipped 1 record"):
        log = logs.read_log(path)
    assert log.format == "trl_console" and list(log.skipped_steps) == [3]
    _nan_equal(log["step"], [1, 2, 4])
    _nan_equal(log["reward"], [0.25, 0.5, 0.75])
    _nan_equal(log["kl"], [NAN, math.inf, -math.inf])
    twice = "\n".join([*lines[:2], "{'train_runtime': 5.0, 'epoch': 1.0}", *lines[:1]]) + "\n"
    with pytest.raises(ValueError, match=r"more than one run: .* summary at step 2"):
        logs.read_log(_write(tmp_path, "twice.log", twice))
    with pytest.raises(ValueError, match="no TRL console dicts"):
        logs.read_log(_write(tmp_path, "none.log", "hello {'eos_token_id': 2}\n"), format="trl_console")


def test_typed_jsonl_one_row_per_grpo_step():
    """Hand-written CS336-style log: the rollout gives reward / reward_std / n_samples, train metrics are averaged
    over the step's two updates (a null clip_fraction left out), eval stays eval_reward, settings are read."""
    path = OWN / "typed_metrics.jsonl"
    log = logs.read_log(path)
    assert log.format == "typed_jsonl" and logs.detect_format(path) == "typed_jsonl"
    _nan_equal(log["step"], [0, 1, 2])  # step 0: the eval before training
    _nan_equal(log["reward"], [NAN, 0.25, 0.5])
    _nan_equal(log["reward_std"], [NAN, 0.5, 0.25])
    _nan_equal(log["n_samples"], [NAN, 8, 8])
    _nan_equal(log["entropy"], [NAN, (0.75 + 0.25) / 2, 0.5])
    _nan_equal(log["grad_norm"], [NAN, (1.0 + 0.5) / 2, (0.25 + 0.75) / 2])
    _nan_equal(log["policy_kl"], [NAN, (0.0 + 0.5) / 2, (0.25 + 0.75) / 2])
    _nan_equal(log["clip_frac"], [NAN, 0.125, (0.25 + 0.125) / 2])
    _nan_equal(log["eval_reward"], [0.125, NAN, 0.875])
    _nan_equal(log.other["loss"], [NAN, 0.375, 0.5])
    _nan_equal(log.other["answer_accuracy"], [NAN, 0.25, 0.5])  # the rollout's accuracy ...
    _nan_equal(log.other["eval/answer_accuracy"], [0.125, NAN, 0.875])  # ... and the validation set's
    _nan_equal(log.other["step_seconds"], [NAN, 10.0, 12.0])
    assert log.sources["reward"] == "reward" and log.sources["eval_reward"] == "eval/reward"
    assert "kl" not in log and "reference_kl" not in log.other  # null in every update: not logged
    assert "optimizer_step" not in log.other and "eval/optimizer_step" not in log.other
    assert log.settings == dict(
        num_generations=4,
        prompts_per_step=2,
        num_iterations=2,
        steps_per_generation=1,
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        learning_rate=1e-5,
        loss_type="grpo_clip",
    )
    assert log.summary()["settings"] == log.settings and json.dumps(log.summary())


def test_typed_jsonl_settings_and_errors(tmp_path):
    """No clipping: no epsilon; a setting that changes is not a setting; a second rollout at one step is a
    resumed log; a rollout without grpo_step is an error."""
    rows = [
        dict(type="rollout", grpo_step=1, reward=0.1, group_size=8),
        dict(type="train", grpo_step=1, loss_type="grpo_no_clip", cliprange=0.2, learning_rate=1e-5, kl_coef=0.04),
        dict(type="rollout", grpo_step=2, reward=0.2, group_size=8),
        dict(type="train", grpo_step=2, loss_type="grpo_no_clip", cliprange=0.2, learning_rate=5e-6, kl_coef=0.04),
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    log = logs.read_log(_write(tmp_path, "noclip.jsonl", text))
    assert log.settings == dict(num_generations=8, beta=0.04, loss_type="grpo_no_clip")
    with pytest.raises(ValueError, match=re.escape("step 1 of resumed.jsonl has two rollout records")):
        logs.read_log(_write(tmp_path, "resumed.jsonl", text + json.dumps(rows[0]) + "\n"))
    with pytest.raises(ValueError, match=re.escape("record 2 of nostep.jsonl (rollout) has no grpo_step")):
        logs.read_log(_write(tmp_path, "nostep.jsonl", text[: text.index("\n") + 1] + '{"type": "rollout"}\n'))
    evals = "".join(json.dumps(dict(type="eval", grpo_step=s, reward=0.1 * s)) + "\n" for s in range(1, 4))
    assert logs.detect_format(_write(tmp_path, "eval.jsonl", evals)) == "typed_jsonl"
    with pytest.raises(ValueError, match="no reward column"):  # an eval reward never stands in for the training one
        logs.read_log(tmp_path / "eval.jsonl")


def test_wandb_panel_and_history_exports(tmp_path):
    """A panel export (quoted, `<run> - ` prefix, __MIN/__MAX bands) and a run's history (train and eval rows at
    one trainer/global_step, merged; `_step` is W&B's own counter)."""
    panel = logs.read_log(OWN / "wandb_panel.csv")
    assert panel.format == "wandb" and panel.sources == {"step": "Step", "reward": "train/reward", "kl": "train/kl"}
    _nan_equal(panel["reward"], [0.25, 0.5, 0.75])
    _nan_equal(panel["kl"], [0, 0.125, NAN])
    assert panel.other == {}  # the band columns are not metrics
    history = logs.read_log(OWN / "wandb_history.csv")
    assert history.format == "wandb" and history.sources["step"] == "trainer/global_step"
    _nan_equal(history["step"], [1, 2, 3])
    _nan_equal(history["reward"], [0.125, 0.25, 0.5])
    _nan_equal(history["reward_std"], [0.25, 0.5, 0.25])
    _nan_equal(history["eval_reward"], [NAN, 0.5, NAN])
    assert history.settings == {"learning_rate": 1e-5} and "_runtime" in history.other
    plain = "Step,train/reward,train/reward__MIN,train/reward__MAX\n1,0.5,0.25,0.75\n2,0.625,0.5,0.75\n"
    log = logs.read_log(_write(tmp_path, "plain.csv", plain))
    assert log.format == "wandb" and list(log["reward"]) == [0.5, 0.625] and log.other == {}
    two = '"Step","a - train/reward","b - train/reward"\n1,0.1,0.2\n'
    with pytest.raises(ValueError, match="holds 2 W&B runs \\(a, b\\)"):
        logs.read_log(_write(tmp_path, "two.csv", two))
    table = '"Name","State","Runtime","train/reward"\n"run-a","finished",60,0.5\n"run-b","finished",61,0.6\n'
    with pytest.raises(ValueError, match="is a W&B runs table \\(one row per run: run-a, run-b\\)"):
        logs.read_log(_write(tmp_path, "table.csv", table))


def _event_file(folder: Path, scalars, tensors=(), text_tag=None) -> Path:
    """A TensorBoard event file written with tensorboard's own writer: `scalars` as old-style simple values
    (what torch's SummaryWriter writes), `tensors` as TF2 scalar tensors, plus an optional non-scalar text tag."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    scalar_meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    text_meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    values = [(step, summary_pb2.Summary.Value(tag=tag, simple_value=v)) for tag, step, v in scalars]
    values += [
        (step, summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(v), metadata=scalar_meta))
        for tag, step, v in tensors
    ]
    if text_tag:
        proto = tensor_util.make_tensor_proto(np.array([b"hello"], dtype=object))
        values.append((1, summary_pb2.Summary.Value(tag=text_tag, tensor=proto, metadata=text_meta)))
    for step, value in values:
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


TB_SCALARS = [
    ("train/reward", 1, 0.25),
    ("train/reward", 2, 0.5),
    ("train/reward", 3, 0.75),
    ("train/kl", 1, 0.0),
    ("train/kl", 3, 0.125),
    ("train/learning_rate", 1, 0.5),
    ("train/learning_rate", 2, 0.5),
    ("train/learning_rate", 3, 0.5),
]


def test_tensorboard_event_file_and_folder(tmp_path):
    """Old-style and tensor scalars at their steps (values exact in float32), a text tag ignored; the file, its
    folder, the folder above and a copy without the usual name all read alike."""
    path = _event_file(
        tmp_path / "runs" / "run-1", TB_SCALARS, tensors=[("eval/reward", 2, 0.625)], text_tag="train/completions"
    )
    for source in (path, path.parent, tmp_path / "runs"):
        log = logs.read_log(source)
        assert log.format == "tensorboard" and logs.detect_format(source) == "tensorboard"
        _nan_equal(log["step"], [1, 2, 3])
        _nan_equal(log["reward"], [0.25, 0.5, 0.75])
        _nan_equal(log["kl"], [0.0, NAN, 0.125])
        _nan_equal(log["eval_reward"], [NAN, 0.625, NAN])
        assert log.sources["reward"] == "train/reward" and log.settings == {"learning_rate": 0.5}
        assert "train/completions" not in log.other and log.other == {}
    renamed = tmp_path / "copy.bin"  # recognised by its content, but TensorBoard reads only its own file names
    renamed.write_bytes(path.read_bytes())
    assert logs.detect_format(renamed) == "tensorboard"
    with pytest.raises(ValueError, match=r"event file under another name; .*: rename it"):
        logs.read_log(renamed)
    text = tmp_path / "log.csv"
    text.write_text("step,reward\n1,0.5\n")
    with pytest.raises(ValueError, match=r"log.csv is not a TensorBoard event file"):  # not "under another name"
        logs.read_log(text, format="tensorboard")


def test_tensorboard_errors(tmp_path, monkeypatch):
    _event_file(tmp_path / "runs" / "a", TB_SCALARS[:1])
    _event_file(tmp_path / "runs" / "b", TB_SCALARS[1:2])
    with pytest.raises(ValueError, match="event files of 2 runs \\(a, b\\); pass one run's folder, or choose one"):
        logs.read_log(tmp_path / "runs")
    assert list(logs.read_log(tmp_path / "runs", run="b")["reward"]) == [0.5]  # --run picks a run's folder
    with pytest.raises(ValueError, match="no run 'c'; its runs: a, b"):
        logs.read_log(tmp_path / "runs", run="c")
    with pytest.raises(ValueError, match=r"holds one run.s event files: pass run=None"):
        logs.read_log(tmp_path / "runs" / "a", run="a")
    with pytest.raises(ValueError, match="directory without TensorBoard event files"):
        logs.read_log(_empty_dir(tmp_path))
    path = _event_file(tmp_path / "evalonly", [("eval/reward", 1, 0.5)])
    with pytest.raises(ValueError, match="no reward column"):
        logs.read_log(path)  # an eval reward is never the training reward
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_accumulator", None)
    with pytest.raises(ValueError, match=re.escape("pip install 'pgrpo-sim[tensorboard]'")) as info:
        logs.read_log(path)
    assert "\n" not in str(info.value)


def _empty_dir(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_new_canonical_names():
    """TRL 0.26's lower / upper clip fractions; the summary carries (empty) settings for a TRL state file."""
    with pytest.warns(UserWarning):
        log = logs.read_log(DATA / "trl_state.json")
    assert log.sources["clip_low_frac"] == "clip_ratio/low_mean" and "clip_high_frac" in log.missing
    assert "settings" in log.summary()
    records = [
        dict(step=1.0, reward=0.5, std_reward=0.25, token_entropy=0.5, clip_fraction=0.0, num_rollouts=8.0),
        dict(step=2.0, reward=0.5, std_reward=0.25, token_entropy=0.5, clip_fraction=0.0, num_rollouts=8.0),
    ]
    tidy = logs.tidy(records, format="jsonl", path=None)
    assert tidy.sources == dict(
        step="step",
        reward="reward",
        reward_std="std_reward",
        entropy="token_entropy",
        clip_frac="clip_fraction",
        n_samples="num_rollouts",
    )


# ------------------------------------------------------------------------- every real anchor log


def _expected_anchor(path: Path):
    """(format, rows, reward steps, min reward, max reward), read from the raw file without the readers."""
    text = path.read_text(encoding="utf-8")
    if path.name.endswith("trainer_state.json"):
        history = [r for r in json.loads(text)["log_history"] if "reward" in r]
        rewards = [r["reward"] for r in history]
        return "trl", len({r["step"] for r in history}), len(rewards), min(rewards), max(rewards)
    if path.name.endswith(".console.log"):
        dicts = [ast.literal_eval(s) for s in re.split(r"[\r\n]", text) if s.startswith("{'loss'")]
        rewards = [float(d["reward"]) for d in dicts]
        return "trl_console", len(dicts), len(rewards), min(rewards), max(rewards)
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    if any(r.get("type") == "rollout" for r in records):
        rollouts = [r for r in records if r["type"] == "rollout"]
        rows = {r["grpo_step"] for r in records if r["type"] in ("rollout", "eval")}
        rewards = [r["reward"] for r in rollouts]
        return "typed_jsonl", len(rows), len(rollouts), min(rewards), max(rewards)
    if path.name.startswith("custom_countdown"):
        rewards = [r["mean_reward"] for r in records]
        return "jsonl", len(records), len(rewards), min(rewards), max(rewards)
    raise AssertionError(f"no expectation for anchor {path}: add one to _expected_anchor")


def _long_form_runs(path: Path) -> dict[str, list[tuple[str, float, float]]]:
    """A W&B long-form CSV's (metric, step, value) rows by run, read with the csv module."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    runs = {}
    for row in rows:
        runs.setdefault(row["run_name"], []).append((row["metric"], float(row["step"]), float(row["value"])))
    return runs


LONG_FORM = [n for n in ALL_ANCHORS if n.endswith(".csv")]


@needs_anchors
@pytest.mark.parametrize("name", [n for n in ALL_ANCHORS if not n.endswith(".md") and n not in LONG_FORM])
def test_every_anchor_log_parses(name):
    """Every file in shared/anchors and its sweeps/ folders: the right format, step count and reward range, no
    step skipped; for the typed logs the reward is the rollout's and the eval reward the eval records' (no leak).
    The W&B long-form sweeps: `test_every_run_of_the_long_form_anchors_parses`."""
    path = ANCHORS / name
    fmt, rows, n_reward, low, high = _expected_anchor(path)
    log = logs.read_log(path)
    steps, reward = log.series("reward")
    assert (log.format, len(log), reward.size) == (fmt, rows, n_reward)
    assert (reward.min(), reward.max()) == (low, high) and log.skipped_steps.size == 0
    if fmt == "typed_jsonl":
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rollout = {r["grpo_step"]: r["reward"] for r in records if r["type"] == "rollout"}
        evals = {r["grpo_step"]: r["reward"] for r in records if r["type"] == "eval"}
        assert dict(zip(steps, reward, strict=True)) == rollout
        assert dict(zip(*log.series("eval_reward"), strict=True)) == evals
        assert log.settings["num_generations"] == 8 and log.settings["prompts_per_step"] == 32
        assert log.sources["n_samples"] == "num_rollouts" and np.all(log.series("n_samples")[1] == 256)
    if fmt == "trl_console":
        assert "eval_reward" not in log and log.other["train_runtime"][-1] > 0


@needs_anchors
def test_anchor_settings():
    """The settings the sweep logs state (anchors README: G = 8, 32 prompts, 2 epochs, clip (0.2, 0.28), β = 0,
    lr 4e-5 constant; the unclipped and on-policy runs state no clip range that applies)."""
    clip = logs.read_log(ANCHORS / "sweeps/cs336_clip_ablation/GRPO-Clip_0p20_0p28_e2_tb256.metrics.jsonl")
    assert clip.settings == dict(
        num_generations=8,
        prompts_per_step=32,
        num_iterations=2,
        steps_per_generation=1,
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        learning_rate=4e-5,
        loss_type="grpo_clip",
    )
    no_clip = logs.read_log(ANCHORS / "sweeps/cs336_clip_ablation/GRPO-No-Clip_e2_tb256.metrics.jsonl")
    assert "epsilon" not in no_clip.settings and no_clip.settings["loss_type"] == "grpo_no_clip"
    assert "clip_frac" in no_clip.missing  # clip_fraction is null in every update
    long_run = logs.read_log(ANCHORS / "sweeps/cs336_long_run/final_on_policy_lr4e-5_400.metrics.jsonl")
    assert long_run.settings["num_iterations"] == 1 and "epsilon" not in long_run.settings
    console = logs.read_log(ANCHORS / "sweeps/gsm8k_qwen35_9b_replicates/rho1.00_seed42.console.log")
    assert console.settings == {}  # warmup then decay: no constant learning rate, nothing else stated


@needs_anchors
@pytest.mark.parametrize("name", LONG_FORM)
def test_every_run_of_the_long_form_anchors_parses(name):
    """Each run of a W&B long-form sweep: without a run the file is refused with every run named; with one, its
    steps are the steps it logged anything at, its eval reward the logged values, and a metric logged once per
    optimiser step (several rows at one step) their mean there."""
    path = ANCHORS / name
    runs = _long_form_runs(path)
    assert logs.detect_format(path) == "wandb_long"
    with pytest.raises(ValueError, match=f"holds {len(runs)} runs.*run=NAME") as info:
        logs.read_log(path)
    assert all(run in str(info.value) for run in runs)
    for run, rows in runs.items():
        log = logs.read_log(path, run=run, columns={"reward": "eval/reward"})
        assert log.format == "wandb_long" and len(log) == len({step for _, step, _ in rows})
        evals = {step: value for metric, step, value in rows if metric == "eval/reward"}
        steps, reward = log.series("reward")
        assert dict(zip(steps, reward, strict=True)) == evals
        for metric in {m for m, _, _ in rows} - {"eval/reward"}:
            at = {}
            for m, step, value in rows:
                if m == metric:
                    at.setdefault(step, []).append(value)
            column = log.other.get(metric)
            if column is None:
                column = log[next(k for k, v in log.sources.items() if v == metric)]
            got = dict(zip(log["step"], column, strict=True))
            for step, values in at.items():
                assert got[step] == pytest.approx(sum(values) / len(values), rel=1e-12), (run, metric, step)


def test_long_form_runs_are_chosen_by_name(tmp_path):
    text = (
        "run_name,metric,step,value\n"
        "a,train/reward,0,0.1\na,train/reward,1,0.3\na,train/grad_norm,1,1.0\na,train/grad_norm,1,3.0\n"
        "b,train/reward,0,0.5\nb,eval/reward,0,0.6\n"
    )
    path = _write(tmp_path, "sweep.csv", text)
    with pytest.raises(ValueError, match=r"holds 2 runs in W&B long form; choose one with run=NAME: a, b"):
        logs.read_log(path)
    with pytest.raises(ValueError, match=r"no run 'c'; its runs: a, b"):
        logs.read_log(path, run="c")
    a = logs.read_log(path, run="a")
    assert a.format == "wandb_long" and list(a["step"]) == [0, 1] and list(a["reward"]) == [0.1, 0.3]
    assert np.isnan(a["grad_norm"][0]) and a["grad_norm"][1] == 2.0  # two optimiser steps at step 1: their mean
    b = logs.read_log(path, run="b")
    assert list(b["reward"]) == [0.5] and list(b["eval_reward"]) == [0.6]
    one = _write(tmp_path, "one.csv", "run_name,metric,step,value\nonly,reward,0,0.2\n")
    assert list(logs.read_log(one)["reward"]) == [0.2]  # one run: no name needed
    with pytest.raises(ValueError, match="csv log of one run: a run is chosen only in a W&B long-form CSV"):
        logs.read_log(DATA / "generic.csv", run="a")
    with pytest.raises(ValueError, match="it logs only an eval reward, 'eval/reward': reward=eval/reward reads it"):
        logs.read_log(_write(tmp_path, "eval.csv", "run_name,metric,step,value\nx,eval/reward,0,0.2\n"))


def test_cli_fit_reads_one_run_of_a_long_form_file(tmp_path, capsys):
    from pgrpo_sim.cli import main

    curve = lambda k, s: 0.8 - 0.6 * math.exp(-s / (8 + 4 * k))
    rows = "".join(f"r{k},train/reward,{s},{curve(k, s):.6f}\n" for k in (1, 2) for s in range(60))
    path = _write(tmp_path, "sweep.csv", "run_name,metric,step,value\n" + rows)
    assert main(["fit", str(path), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "choose one with --run NAME" in err and err.count("\n") == 1 and not (tmp_path / "none").exists()
    assert main(["fit", str(path), "--run", "r2", "--quiet", "--out", str(tmp_path / "fit")]) == 0
    fitted = json.loads((tmp_path / "fit" / "fit.json").read_text())
    assert fitted["log"]["format"] == "wandb_long" and fitted["log"]["rows"] == 60
