"""`deal`: jobs over threads, results in job order, the first failure by job order, lanes that run at once."""

import threading

import pytest

from pgrpo_sim.base.waiting import deal


def test_results_come_back_in_job_order_whichever_lane_ran_them():
    lanes_seen = set()

    def work(job, lane):
        lanes_seen.add(lane)
        return job * job

    assert deal(work, 7, 3) == [job * job for job in range(7)]
    assert lanes_seen <= {0, 1, 2} and deal(work, 0, 2) == []


def test_two_lanes_run_at_once():
    """Two jobs that each wait for the other at a barrier finish only if two lanes run them side by side (one lane
    would time the barrier out)."""
    barrier = threading.Barrier(2, timeout=5)
    assert sorted(deal(lambda job, lane: (barrier.wait(), lane)[1], 2, 2)) == [0, 1]


def test_the_first_failed_job_raises_and_no_lane_starts_another():
    started = []

    def work(job, lane):
        started.append(job)
        if job in (1, 2):
            raise ValueError(f"job {job}")
        return job

    with pytest.raises(ValueError, match="job 1"):
        deal(work, 20, 1)
    assert started == [0, 1]  # one lane: job 1 failed, job 2 never began
