"""Batches spread over devices: padding and placement on 4 simulated CPU devices, and a predictive band that is
the same on 1 and 4 devices up to float64 rounding (each draw is its own computation; only which rows XLA's
vector loops reach moves with the per-device batch, a few ulps: rtol 1e-14)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest


def _run(script: str, devices: int) -> str:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_pad_and_shard_on_four_devices():
    out = _run(
        """
        import numpy as np
        from pgrpo_sim.base.sharding import pad_to_devices, shard_batch
        x = np.arange(10.0).reshape(5, 2)
        padded = pad_to_devices(x)
        assert padded.shape == (8, 2) and np.array_equal(padded[:5], x) and np.all(padded[5:] == x[-1])
        assert pad_to_devices(padded) is padded
        placed = shard_batch(padded)
        assert sorted(s.data.shape for s in placed.addressable_shards) == [(2, 2)] * 4
        assert np.array_equal(np.asarray(placed), padded)
        assert len(shard_batch(x).sharding.device_set) == 1  # 5 rows do not split into 4: left whole
        print("ok")
        """,
        4,
    )
    assert out.strip() == "ok"


@pytest.mark.slow
def test_predictive_band_is_the_same_on_one_and_four_devices(tmp_path):
    script = f"""
        import math
        import jax
        import numpy as np
        jax.config.update("jax_enable_x64", True)  # as the calibration commands run
        from pgrpo_sim.calibration.inference import Calibration, predictive_band
        from pgrpo_sim.calibration.model import population_model
        from pgrpo_sim.calibration.run_config import RunConfig
        run = RunConfig(learning_rate=1e-5, num_generations=8, prompts_per_step=32, lr_scheduler_type="constant")
        model = population_model(run, 40, log_format="jsonl")
        theta = np.array([-1.0, 0.0, math.log(0.1 / 1e-5), -2.0])
        cal = Calibration(model, theta, 0.01 * np.eye(4), 1.0, ("reward",), {{}}, 1.0, 20.0, 20, "jsonl", 0.0)
        band = predictive_band(cal)  # 201 parameter draws: padded to 204 on 4 devices
        np.save(f"{tmp_path}/band_{{jax.device_count()}}.npy", [band.mean, band.lo, band.hi])
        """
    for n in (1, 4):
        _run(script, n)
    np.testing.assert_allclose(np.load(tmp_path / "band_1.npy"), np.load(tmp_path / "band_4.npy"), rtol=1e-14)
