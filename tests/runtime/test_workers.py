"""Worker processes with this process's JAX settings: the same settings, stopped at once on Ctrl-C, gone when their
parent is killed."""

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgrpo_sim.runtime.workers import shared_settings, worker_pool


def test_workers_share_the_settings_and_stop_at_once():
    """A worker has its parent's JAX settings and XLA_FLAGS; leaving the pool by an exception stops a running job
    (an hour's sleep) at once and leaves no process behind."""
    before = set(multiprocessing.active_children())
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt), worker_pool(2) as pool:
        assert pool.submit(shared_settings).result() == shared_settings()
        assert pool.submit(os.getenv, "XLA_FLAGS").result() == os.getenv("XLA_FLAGS")
        pool.submit(time.sleep, 3600)
        raise KeyboardInterrupt
    assert time.monotonic() - start < 60
    assert set(multiprocessing.active_children()) <= before


_ORPHANING_SCRIPT = """
import os, time
from pgrpo_sim.runtime.workers import worker_pool
if __name__ == "__main__":
    with worker_pool(2) as pool:
        print(pool.submit(os.getpid).result(), flush=True)
        time.sleep(3600)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from Linux's /proc")
def test_workers_exit_when_their_parent_is_killed(tmp_path):
    """kill -9 of the parent (which cannot stop its workers) leaves no worker behind for long: each exits within
    about `ORPHAN_POLL_S` of noticing its new parent."""
    script = tmp_path / "parent.py"
    script.write_text(_ORPHANING_SCRIPT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.2)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    """Running, not a zombie (a container's init may never reap the orphan)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
