"""The `pgrpo-sim` command: outputs, JSON keys, and one-line errors with exit code 2."""

import argparse
import csv
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.cli import SIMULATE_COLUMNS, build_parser, main

THEORY = ["theory", "--eta", "0.05", "--momentum", "0.9", "--lag", "2", "--stiffness", "0.3"]


def _csv_rows(path) -> list[dict[str, str]]:
    """A CSV file's rows, header name → value."""
    with open(path) as f:
        return list(csv.DictReader(f))


def test_no_compile_cache_before_or_after_the_command():
    parse = build_parser().parse_args
    assert [parse(argv).no_compile_cache for argv in (THEORY, ["--no-compile-cache", *THEORY])] == [False, True]
    assert parse([*THEORY, "--no-compile-cache"]).no_compile_cache is True


def test_theory_json(capsys):
    assert main([*THEORY, "--noise", "0.1", "--group-size", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["damping_ratio"] == pytest.approx(float(ps.damping_ratio(0.05, 0.9, 2.0, 0.3)), rel=1e-12)
    assert out["regime"] == "underdamped" and out["critical_lag"] == pytest.approx(0.1 / 0.015)
    assert out["spectral_radius_stale"] == pytest.approx(float(ps.spectral_radius(0.05, 0.9, 2, 0.3)), rel=1e-12)
    assert out["discrete_regime_refresh"] in ps.theory.DISCRETE_REGIMES
    assert out["stationary_variance"] == pytest.approx(float(ps.stationary_variance(0.05, 0.9, 2.0, 0.3, 0.1, 8)))
    assert set(out) >= {
        "mass",
        "damping",
        "stiffness",
        "natural_frequency",
        "spectral_radius_refresh",
        "discrete_regime_stale",
    }


def test_theory_text(capsys):
    assert main(THEORY) == 0
    text = capsys.readouterr().out
    assert "damping_ratio" in text and "stationary_variance" not in text


@pytest.mark.slow
def test_simulate_writes_csv_and_plot(tmp_path, capsys):
    out, png = tmp_path / "traj.csv", tmp_path / "traj.png"
    args = [
        "simulate",
        "--steps",
        "30",
        "--mode",
        "sampled",
        "--seeds",
        "4",
        "--beta",
        "0.5",
        "--out",
        str(out),
        "--plot",
        str(png),
    ]
    assert main(args) == 0
    rows = _csv_rows(out)
    assert tuple(rows[0]) == SIMULATE_COLUMNS and len(rows) == 31
    assert float(rows[0]["reward"]) == pytest.approx(0.2, abs=1e-6)
    config = ps.bandit.config(beta=0.5)
    run = ps.simulate(config, 30, mode="sampled", seeds=4, key=jax.random.key(0))
    spread = np.std(np.asarray(run.reward), 0, ddof=1)  # the sample std across seeds, as `from_run` reports it
    np.testing.assert_allclose([float(r["reward_std"]) for r in rows], spread, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ps.from_run(run).data["reward_std"], spread, rtol=1e-12)
    assert png.stat().st_size > 1000
    assert "0 of 4 run(s) diverged" in capsys.readouterr().out


def test_simulate_defaults_run(tmp_path):
    assert main(["simulate", "--steps", "20", "--out", str(tmp_path / "x.csv")]) == 0
    rows = _csv_rows(tmp_path / "x.csv")
    assert all(float(r["reward_std"]) == 0 for r in rows)  # expected mode: no seed spread


def test_simulate_reward_std_is_nan_where_undefined(tmp_path):
    """reward_std is NaN for one sampled seed (no spread to measure) and after an expected-mode run diverged
    (without KL, μ = 0.9 and η = 1e308 overflow float64 within a few steps); the read-outs of the steps before the
    divergence are finite, though one arm's probability underflowed to 0 (0·log 0 = 0 in entropy and KL)."""
    one = tmp_path / "one.csv"
    assert main(["simulate", "--steps", "3", "--mode", "sampled", "--seeds", "1", "--out", str(one)]) == 0
    assert all(np.isnan(float(r["reward_std"])) for r in _csv_rows(one))
    div = tmp_path / "div.csv"
    assert main(["simulate", "--steps", "30", "--momentum", "0.9", "--eta", "1e308", "--out", str(div)]) == 0
    rows = _csv_rows(div)
    last = max(i for i, r in enumerate(rows) if np.isfinite(float(r["reward"])))
    assert last < len(rows) - 1  # it diverged
    assert all(np.isnan(float(r["reward_std"])) for r in rows[last + 1 :])
    assert all(np.isfinite(float(r[c])) for r in rows[: last + 1] for c in ("reward_std", "entropy", "kl_ref", "kl"))


@pytest.mark.parametrize(
    "argv, word",
    [
        (["theory", "--eta", "-1", "--stiffness", "0.3"], "learning_rate"),
        (["theory", "--eta", "0.1", "--momentum", "1", "--stiffness", "0.3"], "momentum"),
        (["theory", "--eta", "0.1", "--stiffness", "nan"], "stiffness"),
        (["theory", "--eta", "0.1", "--stiffness", "0.3", "--noise", "0.1", "--group-size", "1"], "num_generations"),
        (["theory", "--eta", "x", "--stiffness", "0.3"], "--eta"),
        (["simulate", "--out", "x.csv", "--group-size", "1"], "num_generations"),
        (["simulate", "--out", "x.csv", "--p-ref", "1.5"], "p_ref"),
        (["simulate", "--out", "x.csv", "--lag", "2"], "lag"),
        (["simulate", "--out", "x.csv", "--lag-model", "async"], "lag-model"),
        (["simulate", "--out", "x.csv", "--steps", "0"], "steps"),
        (["simulate", "--out", "/nonexistent/dir/x.csv", "--steps", "2"], "--out"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, word, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pgrpo-sim: error:") and word in err


def test_console_script_exit_code():
    proc = subprocess.run(
        [sys.executable, "-m", "pgrpo_sim.cli", "theory", "--eta", "0", "--stiffness", "1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_predict_json_matches_python(capsys):
    argv = ["predict", "--eta", "0.1", "--momentum", "0.5", "--beta", "0.5", "--group-size", "8", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    pred = ps.predict(ps.bandit.config(learning_rate=0.1, momentum=0.5, beta=0.5, num_generations=8)).as_dict()
    for key in (
        "p_star",
        "stiffness",
        "mass",
        "damping",
        "damping_ratio",
        "natural_frequency",
        "regime",
        "critical_lag",
        "noise",
        "stationary_variance",
        "spectral_radius",
    ):
        assert out[key] == pytest.approx(pred[key], rel=1e-9) if isinstance(pred[key], float) else out[key] == pred[key]


def test_predict_without_fixed_point_says_why(capsys):
    assert main(["predict", "--beta", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stable"] is False and out["reason"] == "no interior fixed point" and out["p_star"] is None


@pytest.mark.slow
def test_oscillator_writes_paths(tmp_path, capsys):
    out, png = tmp_path / "osc.csv", tmp_path / "osc.png"
    argv = [
        "oscillator",
        "--eta",
        "0.05",
        "--momentum",
        "0.9",
        "--lag",
        "2",
        "--stiffness",
        "0.3",
        "--noise",
        "0.01",
        "--group-size",
        "8",
        "--e0",
        "-0.4",
        "--steps",
        "40",
        "--paths",
        "50",
        "--out",
        str(out),
        "--plot",
        str(png),
    ]
    assert main(argv) == 0
    rows = _csv_rows(out)
    assert (
        list(rows[0]) == ["step", "mean", "std", "path_0", "path_1", "path_2", "path_3", "path_4"] and len(rows) == 41
    )
    assert float(rows[0]["mean"]) == pytest.approx(-0.4) and float(rows[-1]["std"]) > 0
    assert png.stat().st_size > 1000
    assert "late std" in capsys.readouterr().out
    # past the critical lag (τ* = (1 − μ)/(ηK) = 0.1/0.3 < 2 at η = 1) the oscillator is unstable: reported as
    # diverged, not as a late standard deviation
    unstable = [*argv[:2], "1.0", *argv[3:-4], "--out", str(tmp_path / "unstable.csv")]
    assert main(unstable) == 0
    printed = capsys.readouterr().out
    assert "diverged (unstable" in printed and "late std" not in printed


@pytest.mark.parametrize(
    "argv, word",
    [
        (["predict", "--optimizer", "adam"], "optimizer"),
        (["predict", "--eta", "0"], "learning_rate"),
        (
            ["oscillator", "--eta", "0.1", "--stiffness", "0.3", "--noise", "-1", "--group-size", "8", "--out", "x"],
            "noise",
        ),
        (
            [
                "oscillator",
                "--eta",
                "0.1",
                "--stiffness",
                "0.3",
                "--noise",
                "0.1",
                "--group-size",
                "8",
                "--paths",
                "0",
                "--out",
                "x",
            ],
            "paths",
        ),
    ],
)
def test_predict_and_oscillator_bad_input(argv, word, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and word in err


def _subparsers():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return parser, sub.choices


def test_help_shows_every_default_and_no_abbreviations():
    """Issue 37, 8 and 13: every option with a default says it in --help (argparse wraps lines, so whitespace is
    normalised), and no parser matches a prefix of a flag."""
    parser, commands = _subparsers()
    for name, sub in {"pgrpo-sim": parser, **commands}.items():
        assert not sub.allow_abbrev, name
        text = " ".join(sub.format_help().split())
        for action in sub._actions:
            default = action.default
            if not action.option_strings or default is None or default is False or default in ([], argparse.SUPPRESS):
                continue
            assert f"(default: {default})" in text or "default" in (action.help or ""), (name, action.dest)


def test_version_is_the_installed_one(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"pgrpo-sim {importlib.metadata.version('pgrpo-sim')}"


TRL_NAMES = {  # issue 37, 14: TRL's name → the short form it stands for, with a value for each
    ("--learning-rate", "0.3"): "--eta",
    ("--num-generations", "4"): "--group-size",
    ("--epsilon", "0.1"): "--clip",
    ("--epsilon-high", "0.3"): "--clip-high",
}


@pytest.mark.parametrize("command", ["simulate", "sweep", "tune"])
def test_trl_names_set_the_same_settings_as_the_short_forms(command):
    _, commands = _subparsers()
    rest = {"simulate": ["--out", "x"], "sweep": ["--out", "x"], "tune": ["--objective", "final-reward", "--out", "x"]}
    common = ["--beta", "0.1", "--num-iterations", "2", "--steps-per-generation", "1", "--scale-rewards", "none"]
    trl = [v for pair in TRL_NAMES for v in pair] + ["--loss-type", "dr_grpo"]
    short = [v for (_, value), flag in TRL_NAMES.items() for v in (flag, value)]
    a = commands[command].parse_args(trl + common + rest[command])
    b = commands[command].parse_args(short + common + rest[command])
    parser_own = ("explicit", "typed", "loss_type")
    assert {k: v for k, v in vars(a).items() if k not in parser_own} == {
        k: v for k, v in vars(b).items() if k not in parser_own
    }
    assert (a.typed["learning_rate"], b.typed["learning_rate"]) == ("--learning-rate", "--eta")  # for messages
    assert (a.learning_rate, a.num_generations, a.epsilon, a.epsilon_high) == (0.3, 4, 0.1, 0.3)
    help_text = commands[command].format_help()
    for (name, _), flag in TRL_NAMES.items():
        assert f"{flag} " in help_text and f"{name} " in help_text  # help shows both


def test_simulate_with_trl_names_runs_as_with_the_short_forms(tmp_path, capsys):
    args = ["simulate", "--steps", "5", "--beta", "0.5"]
    trl = ["--learning-rate", "0.3", "--num-generations", "4", "--loss-type", "dapo"]
    assert main([*args, *trl, "--out", str(tmp_path / "a.csv")]) == 0
    assert main([*args, "--eta", "0.3", "--group-size", "4", "--out", str(tmp_path / "b.csv")]) == 0
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()


def _readme_tune_examples() -> list[list[str]]:
    """The concrete `pgrpo-sim tune` lines of the gradients guide (not the usage template with alternatives)."""
    text = (Path(__file__).parents[1] / "docs" / "guide" / "gradients.md").read_text()
    lines = [line.split("#")[0].split() for line in text.splitlines() if line.startswith("pgrpo-sim tune --objective")]
    return [line[1:] for line in lines if not any("|" in word or "[" in word for word in line)]


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_readme_tune_usage_runs_and_an_edge_point_is_warned(tmp_path, capsys):
    """Issue 37, 16: the guide's tune example runs as written (its best point inside the box), and a search whose
    best point lies on the box's edge says so on stderr and in summary.json."""
    (example,) = _readme_tune_examples()
    quick = ["--restarts", "2", "--iterations", "30"]  # the README's point, found with fewer Adam steps
    example[example.index("--out") + 1] = str(tmp_path / "readme")
    assert main(example + quick) == 0
    summary = json.loads((tmp_path / "readme" / "summary.json").read_text())
    assert summary["on_box_edge"] == {} and "warning" not in summary
    assert "warning" not in capsys.readouterr().err
    # β = 0.5, μ = 0, no lag: ζ = 1 needs η beyond the default box (η <= 1); Adam moves in logit(box coordinate), so
    # a larger step (--search-lr 3) reaches the edge in 20 iterations
    edge = ["tune", "--objective", "damping-ratio", "--target", "1", "--out", str(tmp_path / "edge")]
    assert main([*edge, "--restarts", "2", "--iterations", "20", "--search-lr", "3"]) == 0
    summary = json.loads((tmp_path / "edge" / "summary.json").read_text())
    assert summary["on_box_edge"] == {"learning_rate": "upper"} and "edge of the search box" in summary["warning"]
    err = capsys.readouterr().err
    assert err.count("pgrpo-sim: warning:") == 1 and "learning_rate at its upper bound" in err
