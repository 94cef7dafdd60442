"""Phase diagrams: predicted regimes per cell, agreement bookkeeping, and the CLI outputs."""

import json

import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.analysis.phase import agreement, interior_mask, predict_grid
from pgrpo_sim.analysis.sweep import parse_axis, run_sweep
from pgrpo_sim.cli import main
from pgrpo_sim.viz import figures


def test_interior_mask():
    predicted = np.array([[0, 0, 0, 1], [0, 0, 1, 1], [0, 0, 1, 1]])
    inside = interior_mask(predicted)
    expected = np.array([[True, True, False, False], [True, False, False, True], [True, False, False, True]])
    np.testing.assert_array_equal(inside, expected)


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_predicted_regimes_match_theory_cell_by_cell():
    base = dict(p_ref=0.2, beta=0.5, num_generations=8, momentum=0.9, lag_model="stale")
    ds = run_sweep(base, [parse_axis("learning_rate=log:0.003:1:5"), parse_axis("lag=0,4")], steps=400, progress=False)
    pred = predict_grid(ds)
    k = float(ps.predict(ps.bandit.config(**base, learning_rate=0.1)).stiffness)  # K does not depend on η or τ
    for i, learning_rate in enumerate(ds.learning_rate.values):
        for j, lag in enumerate(ds.lag.values):
            eta_eff = 2 * learning_rate
            assert pred.stiffness[i, j] == pytest.approx(k, rel=1e-6)
            code = int(ps.theory.regime_code(eta_eff, 0.9, float(lag), k))
            assert pred.continuous[i, j] == [0, 0, 1, 3][code]
            assert pred.discrete[i, j] == int(ps.theory.discrete_regime_code(eta_eff, 0.9, int(lag), k))
            assert pred.radius[i, j] == pytest.approx(float(ps.spectral_radius(eta_eff, 0.9, int(lag), k)), rel=1e-6)
    scores = agreement(ds.regime.values, pred)
    assert scores["cells"] == 10 and 0 <= scores["agreement_discrete"] <= 1


@pytest.mark.slow
def test_phase_diagram_command(tmp_path, capsys, monkeypatch):
    argv = [
        "phase-diagram",
        "--x",
        "learning_rate",
        "--y",
        "lag",
        "--grid",
        "learning_rate=log:0.003:1:8",
        "--grid",
        "lag=0:3",
        "--momentum",
        "0.9",
        "--steps",
        "600",
        "--save-trajectories",
        "100",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    titles = []
    real = figures.plot_phase_diagram
    monkeypatch.setattr(figures, "plot_phase_diagram", lambda *a, **k: titles.append(k["title"]) or real(*a, **k))
    assert main(argv) == 0  # the default β (0.5) has an interior fixed point: every cell has a prediction
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in (
        "agreement_continuous",
        "agreement_discrete",
        "agreement_continuous_interior",
        "agreement_discrete_interior",
    ):
        assert 0.0 <= summary[key] <= 1.0
    for name in ("phase.png", "phase.pdf", "sweep.nc", "summary.csv"):
        assert (tmp_path / name).stat().st_size > 500
    header, *rows = (tmp_path / "summary.csv").read_text().splitlines()
    assert "predicted_continuous" in header and "regime_name" in header
    assert len(rows) == 8 * 4 and "step" not in header.split(",")  # one row a cell, trajectories left out
    assert "agreement_continuous=" in capsys.readouterr().out
    assert summary["cells_without_prediction"] == 0 and summary["agreement_discrete"] > 0.5
    # the title names the swept axes as axes, not as the fixed values of their flags
    assert "swept: η, τ" in titles[0] and "η=" not in titles[0] and "lag=" not in titles[0] and "μ=0.9" in titles[0]
    # --x and --grid under the short alias: the same axis, the same settings (no --overwrite), the same summary
    aliased = [{"learning_rate": "eta", "learning_rate=log:0.003:1:8": "eta=log:0.003:1:8"}.get(a, a) for a in argv]
    assert "eta" in aliased and main(aliased) == 0
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


@pytest.mark.slow
def test_cells_without_a_fixed_point_are_left_out_of_the_agreement():
    """β as an axis: at β = 0 there is no interior fixed point, so no predicted regime; those cells are counted,
    not scored as "predicted unstable"."""
    base = dict(p_ref=0.2, num_generations=8, momentum=0.0, lag_model="stale")
    ds = run_sweep(base, [parse_axis("beta=0,0.5"), parse_axis("learning_rate=0.05,0.1")], steps=300, progress=False)
    pred = predict_grid(ds)
    np.testing.assert_array_equal(pred.valid, [[False, False], [True, True]])
    scores = agreement(ds.regime.values, pred)
    assert scores["cells_without_prediction"] == 2 and scores["cells"] == 4
    assert scores["agreement_discrete"] == float(np.mean(ds.regime.values[1] == pred.discrete[1]))
    assert scores["agreement_discrete"] == 1.0  # overdamped at μ = 0: monotone, as simulated


@pytest.mark.parametrize(
    "argv, word",
    [
        (["sweep", "--grid", "learning_rate=log:0:1:10"], "learning_rate=log:0:1:10"),
        (["sweep", "--grid", "temperature=1,2"], "temperature"),
        (["sweep", "--grid", "lag=0:3"], "lag-model"),
        (["sweep"], "--grid"),
        (["phase-diagram", "--x", "beta", "--y", "lag"], "beta"),
        (["sweep", "--grid", "learning_rate=0.1,-0.2"], "learning_rate"),
    ],
)
def test_sweep_cli_errors(argv, word, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and word in err
