"""`write_csv` against pandas' own writer: the same table read back."""

import numpy as np
import pandas as pd

from pgrpo_sim.base.outputs import write_csv


def test_write_csv_reads_back_as_pandas_writes_it(tmp_path):
    """A frame with a named MultiIndex, float32 and float64 columns (NaN, ±inf, 1/3, a tiny value), integers and
    strings that need quoting: read back by pandas, Arrow's file equals `to_csv`'s exactly (float32 values in
    their shortest round-trip form, so float32(read) is bit-equal to the original)."""
    index = pd.MultiIndex.from_product([[0.001, 0.1], [0.0, 0.5]], names=["eta", "momentum"])
    frame = pd.DataFrame(
        {
            "reward": np.array([0.1, np.nan, np.inf, -1e-30], np.float32),
            "variance": [1.0 / 3, np.nan, -np.inf, 2.0],
            "step": [1, -1, 0, 7],
            "regime": ["a", "b,c", 'q"', "none"],
        },
        index=index,
    )
    write_csv(frame, tmp_path / "arrow.csv")
    frame.to_csv(tmp_path / "pandas.csv")
    ours, theirs = pd.read_csv(tmp_path / "arrow.csv"), pd.read_csv(tmp_path / "pandas.csv")
    pd.testing.assert_frame_equal(ours, theirs)
    assert np.array_equal(ours["reward"].to_numpy(np.float32), frame["reward"].to_numpy(), equal_nan=True)
    assert (tmp_path / "arrow.csv").read_text().splitlines()[0] == "eta,momentum,reward,variance,step,regime"
