"""`validate` at tiny resolution: every section runs, numbers are finite or marked missing, verdicts follow."""

import dataclasses
import json
import math

import pytest

from pgrpo_sim.reports.lm_claims import LMResolution
from pgrpo_sim.reports.rollout_claims import RolloutResolution
from pgrpo_sim.reports.validate import (
    BIC_DECISIVE,
    SECTIONS,
    VERDICT_Z,
    Resolution,
    fluctuations,
    oscillation_onset,
    validate,
)
from pgrpo_sim.viz.figures import validation_figure

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
    rollouts=RolloutResolution(
        reuse_etas=(1.0,), reuse_clips=(0.1,), max_epochs=4, cycles=20, spreads=(None,), prompts=2, population_steps=200
    ),
    lm=LMResolution(
        steps=6,
        seeds=2,
        learning_rates=(1e-3, 1e-2, 1e-1),
        reuse=((1, 1), (2, 2)),
        clip_epochs=(2,),
        settings=dict(
            prompts_per_step=4,
            num_generations=4,
            modulus=5,
            operands=2,
            max_completion_length=8,
            width=16,
            layers=1,
            heads=2,
            eval_size=16,
            eval_every=2,
            start_accuracy=0.3,
        ),
    ),
)


pytestmark = pytest.mark.slow  # a whole (tiny) validation run: ~40 s


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("validation")
    results = validate(out, resolution=TINY, log=lambda line: None, workers=2)
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
        assert not saved[key]["verdict"]["text"].startswith(("holds", "fails")), key  # the report says that once
        assert (out / saved[key]["figure"]).stat().st_size > 1000, key  # one figure per section
        assert f"]({saved[key]['figure']})" in text


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


def test_verdicts_follow_from_the_numbers_and_their_uncertainty(report):
    """Each tolerance is the uncertainty of what is compared: VERDICT_Z standard errors, one grid step, or a
    decisive BIC difference; no fixed slack."""
    _, r = report
    g = r["group_size_invariance"]
    for k in g["kinds"].values():
        d = k["largest_difference"]
        a, b = (str(v) for v in d["group_sizes"])
        se = math.hypot(k["sampled_late_stderr"][a], k["sampled_late_stderr"][b])
        assert d["z"] == pytest.approx(abs(k["sampled_late_mean"][b] - k["sampled_late_mean"][a]) / se)
    assert g["verdict"]["holds"] == all(k["largest_difference"]["z"] <= VERDICT_Z for k in g["kinds"].values())
    f = r["fluctuations"]
    assert f["slope_z"] == pytest.approx((f["slope"] + 1) / f["slope_stderr"])
    assert f["verdict"]["holds"] == (abs(f["slope_z"]) <= VERDICT_Z)
    assert f"{abs(f['slope_z']):.1f} s.e. from −1" in f["verdict"]["text"]
    o = r["oscillation_onset"]
    assert o["verdict"]["holds"] == (
        abs(o["measured_onset"] - o["discrete_onset"]) <= o["grid_step"]
        and abs(o["measured_onset"] - o["continuous_onset"]) <= o["grid_step"]
    )
    lag = r["lag_threshold"]
    for model, summary in lag["summary"].items():
        mine = [c for c in lag["cases"] if c["lag_model"] == model]
        near = lambda a, b: a == b if None in (a, b) else abs(a - b) <= 1
        assert summary["exact_matches"] == sum(near(c["measured"], c["exact"]) for c in mine)
        assert summary["continuous_matches"] == sum(
            c["measured"] is not None and abs(c["measured"] - c["continuous"]) <= 1 for c in mine
        )
    assert lag["verdict"]["holds"] == all(
        s["exact_matches"] == s["cases"] == s["continuous_matches"] for s in lag["summary"].values()
    )
    s = r["stiffness"]
    over = [c for c in s["cases"] if c["regime"] == "overdamped"]
    assert s["max_fit_z_overdamped"] == pytest.approx(max(abs(c["fit"] - c["exact"]) / c["fit_stderr"] for c in over))
    assert s["verdict"]["holds"] == (s["max_fit_z_overdamped"] <= VERDICT_Z)
    sat = r["saturation_law"]["cases"]
    gaps = [c["bic_saturation"] - min(c["bic_critical"], c["bic_oscillator"]) for c in sat]
    assert r["saturation_law"]["verdict"]["holds"] == (gaps[0] <= BIC_DECISIVE and gaps[1] > BIC_DECISIVE)
    fm = r["failure_modes"]["cases"]
    assert r["failure_modes"]["verdict"]["holds"] == (
        all(fm[m]["first"] == m for m in ("hacking", "degeneracy", "concentration", "instability"))
        and fm["healthy"]["first"] is None
    )
    spread = r["group_spread"]["rows"]
    exact_ok = all(row[f"{n}_exact_z"] <= VERDICT_Z for row in spread for n in ("spread", "zero_std_frac"))
    assert r["group_spread"]["verdict"]["holds"] == (exact_ok and spread[0]["spread_leading_z"] > VERDICT_Z)
    # the rloo advantage is exactly unbiased: its expected dynamics do not depend on G
    assert g["kinds"]["rloo"]["curve_spread"] < 1e-12


def test_same_seed_same_numbers():
    a = fluctuations(TINY, 3, None)
    b = fluctuations(TINY, 3, None)
    assert a["variance"] == b["variance"] and a["slope"] == b["slope"]


def test_sections_in_processes_give_the_numbers_of_this_process(report):
    """The report fixture ran the sections in two worker processes; run here, one after another, they give the
    same numbers, in the same order."""
    _, parallel = report
    alone = validate(None, resolution=TINY, log=lambda line: None)
    strip = lambda results: {k: {f: v for f, v in r.items() if f != "figure"} for k, r in results.items()}
    assert json.dumps(strip(alone), default=str) == json.dumps(strip(parallel), default=str)


def test_an_onset_grid_without_oscillation_fails_the_claim_instead_of_crashing(tmp_path):
    """μ up to 0.5 stays below the onset (≈ 0.72): no measured onset, a failed verdict saying so, a figure
    without the measured line, and the missing number marked (it raised RuntimeError and stopped validate)."""
    res = dataclasses.replace(TINY, onset_points=3, onset_max=0.5)
    out = oscillation_onset(res, 0, lambda name, *data: validation_figure(name, tmp_path, *data))
    assert not out["verdict"]["holds"] and "no measured onset" in out["verdict"]["text"]
    assert out["measured_onset"] is None and out["measured_onset_missing_reason"]
    assert (tmp_path / out["figure"]).stat().st_size > 1000
