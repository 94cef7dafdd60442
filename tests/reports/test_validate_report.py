"""`validate`'s report.md as a reader sees it (no runs: made from stand-in results)."""

from pgrpo_sim.reports.validate import SECTIONS, VERDICT_Z, report_markdown


def test_the_report_has_no_internal_names_and_says_each_verdict_once():
    """Issue 37: the report printed `VERDICT_Z`, `rollout_claims.rollout_reuse`, `diagnostics.PROVOKED` (from the
    sections' descriptions) and "**Verdict: holds** — holds: …"."""
    results = {
        key: {"verdict": {"holds": i % 2 == 0, "text": f"numbers of {key}"}, "table": [["a", "E[s|p]"], [1, 2]]}
        for i, key in enumerate(SECTIONS)
    }
    text = report_markdown(results, quick=True, seed=0)
    for internal in ("VERDICT_Z", "rollout_claims.", "diagnostics.PROVOKED", "(`"):
        assert internal not in text, internal
    assert f"more than {VERDICT_Z:g} standard errors" in text  # the tolerance's value in its place
    assert "** holds" not in text and "** fails" not in text
    for i, key in enumerate(SECTIONS):
        word = "holds" if i % 2 == 0 else "fails"
        assert f"**Verdict: {word}.** numbers of {key}\n" in text
    assert text.count("| a | E[s\\|p] |") == len(SECTIONS)  # a | inside a cell is escaped, not a new column
