"""The library's progress: told to a callback, silent without one."""

import numpy as np
import pytest

from pgrpo_sim.logs import laws


@pytest.mark.slow
def test_the_library_tells_a_callback_and_is_silent_without_one(capsys):
    t = np.arange(40.0)
    y = 0.8 - 0.6 * np.exp(-t / 10)
    told = []
    laws.fit_laws(t, y, progress=told.append)
    assert told == [f"fitting the {law} law ({i + 1}/3)" for i, law in enumerate(laws.LAWS)]
    laws.fit_laws(t, y)
    assert capsys.readouterr() == ("", "")
