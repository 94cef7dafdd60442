"""The one atomic write: a file is whole or untouched, and no temporary file is left behind."""

import pytest

from pgrpo_sim.base.files import save_atomically, write_atomically


def test_a_complete_write_replaces_the_file(tmp_path):
    path = tmp_path / "sub" / "a.bin"
    write_atomically(path, lambda h: h.write(b"old"))
    write_atomically(path, lambda h: h.write(b"new"))
    assert path.read_bytes() == b"new" and sorted(p.name for p in path.parent.iterdir()) == ["a.bin"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"old")

    def half(handle):
        handle.write(b"ha")
        raise KeyboardInterrupt  # Ctrl-C in the middle of a write

    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, half)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_a_cache_that_cannot_be_written_says_so(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert save_atomically(blocker / "a.bin", lambda h: h.write(b"x")) is False
    assert save_atomically(tmp_path / "ok.bin", lambda h: h.write(b"x")) is True
