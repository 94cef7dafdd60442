"""`validate` at tiny resolution: every section runs, numbers are finite or marked missing, verdicts follow."""

import json
import math

import pytest

from pgrpo_sim.reports.validate import SECTIONS, Resolution, fluctuations, validate

TINY = Resolution(
    group_sizes=(2, 4),
    seeds_curves=8,
    fluct_group_sizes=(4, 8),
    seeds_fluct=64,
    onset_points=12,
    lag_pairs=((0.05, 0.9),),
    refresh_pairs=((1.0, 0.0),),
    max_lag=6,
    lag_steps=600,
)


pytestmark = pytest.mark.slow  # a whole (tiny) validation run: ~40 s


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("validation")
    results = validate(out, resolution=TINY, log=lambda line: None)
    return out, results


def _walk(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


def test_every_section_runs_and_writes(report):
    out, results = report
    assert set(results) == set(SECTIONS)
    saved = json.loads((out / "results.json").read_text())
    assert set(saved) == set(SECTIONS)
    text = (out / "report.md").read_text()
    for key, (title, _) in SECTIONS.items():
        assert title in text and isinstance(saved[key]["verdict"]["holds"], bool) and saved[key]["verdict"]["text"]
        if "figure" in saved[key]:
            assert (out / saved[key]["figure"]).stat().st_size > 1000


def test_numbers_are_finite_or_marked_missing(report):
    _, results = report
    for key, section in results.items():
        for path, value in _walk(section):
            if value is None:
                parent = path.rsplit(".", 1)
                reason = parent[0] + "." + parent[1] + "_missing_reason"
                assert any(p == reason for p, _ in _walk(section)), f"{key}{path} is missing without a reason"
            elif isinstance(value, float):
                assert math.isfinite(value), f"{key}{path} = {value}"


def test_verdicts_follow_from_the_numbers(report):
    _, r = report
    g = r["group_size_invariance"]
    assert g["verdict"]["holds"] == all(k["curve_spread"] <= g["tolerance"] for k in g["kinds"].values())
    f = r["fluctuations"]
    scaling = abs(f["slope"] + 1) <= 0.1 + 2 * f["slope_stderr"]
    ratios_ok = all(abs(v / p - 1) <= 0.2 for v, p in zip(f["variance"], f["predicted_variance"]))
    assert f["verdict"]["holds"] == (scaling and ratios_ok)
    o = r["oscillation_onset"]
    assert o["verdict"]["holds"] == (
        abs(o["measured_onset"] - o["discrete_onset"]) <= o["grid_step"]
        and abs(o["measured_onset"] - o["continuous_onset"]) <= o["grid_step"]
    )
    s = r["stiffness"]
    assert s["verdict"]["holds"] == (s["max_fit_error_overdamped"] <= 0.05)
    sat = r["saturation_law"]["cases"]
    assert r["saturation_law"]["verdict"]["holds"] == (
        sat[0]["r2_saturation"] >= 0.99
        and min(sat[1]["bic_critical"], sat[1]["bic_oscillator"]) < sat[1]["bic_saturation"]
    )
    fm = r["failure_modes"]["cases"]
    assert r["failure_modes"]["verdict"]["holds"] == (
        all(fm[m]["first"] == m for m in ("hacking", "degeneracy", "concentration", "instability"))
        and fm["healthy"]["first"] is None
    )
    # the rloo advantage is exactly unbiased: its expected dynamics do not depend on G
    assert g["kinds"]["rloo"]["curve_spread"] < 1e-12


def test_same_seed_same_numbers():
    a = fluctuations(TINY, 3, None)
    b = fluctuations(TINY, 3, None)
    assert a["variance"] == b["variance"] and a["slope"] == b["slope"]
