"""Log readers (TRL, verl JSONL and console, generic CSV/JSONL, simulate output), bad input, and the fit report
on the real anchor logs."""

import json
import math
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.logs import readers as logs
from pgrpo_sim.reports import log_report as report

DATA = Path(__file__).parents[1] / "data"
ANCHORS = Path(__file__).parents[3] / "shared" / "anchors"
ANCHOR_FILES = {
    "trl_gsm8k_llama31_8b_trainer_state.json": "trl",
    "trl_wordle_qwen25_3b_trainer_state.json": "trl",
    "custom_countdown_qwen3_06b_metrics.jsonl": "jsonl",
}
needs_anchors = pytest.mark.skipif(not ANCHORS.is_dir(), reason="shared/anchors not present")


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
    with pytest.raises(ValueError, match="no reward column .* map one with reward=NAME"):
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
    """An expected-mode run maps field by field; a sampled one (here a stand-in with the `BanditRun` fields of
    shape (seeds, steps)) is averaged over seeds with reward_std the spread across seeds and n_samples = seeds."""
    run = ps.simulate(ps.bandit_config(p_ref=0.2, eta=0.2, beta=0.5, group_size=8), 30)
    expected = logs.from_run(run)
    assert expected.format == "simulation" and len(expected) == 31 and "reward_std" not in expected
    np.testing.assert_array_equal(expected["kl"], np.asarray(run.kl_ref))
    rng = np.random.default_rng(0)
    fields = {f: rng.random((5, 31)) for f in ps.BanditRun._fields if f not in ("final_logits", "final_opt_state")}
    sampled = SimpleNamespace(**fields | dict(true_reward=None))
    log = logs.from_run(sampled)
    np.testing.assert_allclose(log["reward"], fields["reward"].mean(0))
    np.testing.assert_allclose(log["reward_std"], fields["reward"].std(0, ddof=1))
    np.testing.assert_allclose(log["zero_std_frac"], fields["zero_adv_frac"].mean(0))
    assert np.all(log["n_samples"] == 5) and "true_reward" not in log
    np.testing.assert_allclose(logs.from_run(sampled, index=2)["reward"], fields["reward"][2])


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


def test_a_text_reward_column_is_named(tmp_path):
    with pytest.raises(ValueError, match="column 'reward' holds no finite number") as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs.read_log(_write(tmp_path, "text.csv", "step,reward\n1,good\n2,bad\n"))
    assert "no reward column" not in str(info.value)


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
    for law in ps.LAWS:
        fitted = saved["fits"][law]
        assert set(fitted) >= {"params", "r2", "r2_smoothed", "reduced_chi2", "aic", "bic"}
        assert all(set(v) == {"value", "stderr"} for v in fitted["params"].values())
        assert math.isfinite(fitted["r2"]) and math.isfinite(fitted["r2_smoothed"])
    assert set(saved["prediction"]) >= {"plateau", "damping_ratio", "regime"}
    assert set(saved["diagnostics"]) == {"first", "hacking", "degeneracy", "concentration", "instability"}
    r2 = {law: (saved["fits"][law]["r2"], saved["fits"][law]["r2_smoothed"]) for law in ps.LAWS}
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
        (["fit", str(DATA / "simulate.csv"), "--samples-per-step", "0", "--out", "x"], "samples per step must be >= 1"),
        (["fit", str(DATA / "simulate.csv"), "--format", "yaml", "--out", "x"], "--format"),
    ],
)
def test_cli_fit_errors(argv, word, capsys, tmp_path):
    from pgrpo_sim.cli import main

    assert main(argv[:-1] + [str(tmp_path / "out")]) == 2
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
