"""The benchmark driver runs and its NumPy baselines agree with pgrpo-sim (timings are never checked)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RUN = BENCHMARKS / "run.py"
sys.path.insert(0, str(BENCHMARKS))

import bench_rollouts  # noqa: E402
import harness  # noqa: E402


@pytest.mark.slow
def test_baselines_agree_with_pgrpo_sim():
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--check"], capture_output=True, text=True, timeout=400, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[ok]" in proc.stdout and "FAIL" not in proc.stdout
    for workload in (
        "bench_bandit",
        "bench_sde",
        "bench_compile",
        "bench_scaling",
        "bench_grad",
        "bench_rollouts",
        "bench_lm",
        "bench_whatif",
    ):
        assert f"[ok] {workload}:" in proc.stdout


@pytest.mark.slow
def test_numpy_rollout_reuse_is_pgrpo_sims_update():
    """The hand-written NumPy gradient of the reused-rollout loss (clipped samples included) and whole reward
    curves on pgrpo-sim's own draws, at small size (the benchmark's check runs them larger)."""
    for description, passed in (bench_rollouts.check_gradient(points=16), bench_rollouts.check_replay(4, 12)):
        assert passed, description


def test_unknown_workload_is_refused():
    proc = subprocess.run(
        [sys.executable, str(RUN), "--only", "bench_nothing"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "unknown workloads" in proc.stderr


def test_compile_time_counts_overlapping_spans_once():
    rec = harness.CompileRecorder()
    rec.spans = [
        (rec.TRACE, 0.0, 1.0, "f"),
        (rec.BACKEND, 0.5, 2.0, "jit(f)"),  # overlaps the trace span
        (rec.BACKEND, 3.0, 3.5, "jit(_chunk)"),
        (rec.BACKEND, 3.1, 3.2, "jit(add)"),  # inside the previous span
    ]
    assert abs(rec.seconds() - 2.5) < 1e-12
    assert rec.compilations() == {"jit(f)": 1, "jit(_chunk)": 1, "jit(add)": 1}
    assert sum(rec.compilations(r"_chunk\b").values()) == 1
    assert rec.slowest(1) == [("jit(f)", 1, 1.5)]


def test_out_of_the_box_env_drops_only_the_device_count_flag(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2 --xla_cpu_foo=1")
    assert harness.out_of_the_box_env()["XLA_FLAGS"] == "--xla_cpu_foo=1"
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    assert "XLA_FLAGS" not in harness.out_of_the_box_env()


def test_performance_table_is_replaced_between_its_markers(tmp_path):
    """A full run rewrites only the performance page's generated block: the table of the rows it timed."""
    import run

    readme = tmp_path / "performance.md"
    readme.write_text(f"# x\n\nbefore\n\n{run.PAGE_BEGIN}\nold table\n{run.PAGE_END}\n\nafter\n")
    case = dict(workload="expected", size="C=10", steps=5, work=50.0, unit="config-steps")
    rows = [dict(case=case, ours=dict(seconds=0.5, compile_s=0.1, rss_mib=10), base=dict(seconds=2.0, rss_mib=5),
                 ratio=4.0, target=20.0)]  # fmt: skip
    run.update_page(rows, (0.5, 1.5), readme)
    text = readme.read_text()
    assert "old table" not in text and text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "| expected | C=10 | 5 | 100 config-steps | 25 | NumPy | 4× | 20× missed |" in text
