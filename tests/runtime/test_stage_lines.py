"""Stage lines of long commands: on stderr with the command and the elapsed time, silent with --quiet."""

import io

import numpy as np
import pytest

from pgrpo_sim.base.progress import report
from pgrpo_sim.runtime.stage_lines import stage_lines


def test_stage_lines_name_the_command_and_the_time_and_can_be_off():
    stream = io.StringIO()
    say = stage_lines("calibrate", stream=stream)
    say("drawing the band")
    report(say, "writing")
    lines = stream.getvalue().splitlines()
    assert [line.split("] ")[1] for line in lines] == ["drawing the band…", "writing…"]
    assert all(line.startswith("calibrate [") and " s] " in line for line in lines)
    assert stage_lines("calibrate", enabled=False, stream=stream) is None
    report(None, "nothing")  # no callback: silent


@pytest.mark.slow
def test_fit_prints_stage_lines_unless_quiet(tmp_path, capsys):
    from pgrpo_sim.cli import main

    log = tmp_path / "log.csv"
    log.write_text("step,reward\n" + "".join(f"{i},{0.8 - 0.6 * np.exp(-i / 10):.5f}\n" for i in range(40)))
    assert main(["fit", str(log), "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "fit [" in err and "fitting the oscillator law (3/3)…" in err and "writing" in err
    assert main(["fit", str(log), "--quiet", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().err == ""
