"""Following a log while it is written (`follow_log`): the writer is driven by a fake `sleep` (each poll's wait
writes the next records) on a fake clock, so every test is deterministic and sleeps for real not at all."""

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.base.errors import PgrpoSimError

follow_log = ps.logs.follow_log

DATA = Path(__file__).parents[1] / "data"
OWN = Path(__file__).parent / "data"
ANCHORS = Path(__file__).parents[3] / "shared" / "anchors"


class Writer:
    """A fake clock and `sleep`: each wait advances the clock by the seconds asked and runs the next writing step
    (a function), if any is left; a follow that outlives 10⁴ fake seconds fails the test."""

    def __init__(self, *steps):
        self.now, self.steps, self.waits = 0.0, list(steps), []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        assert self.now < 10_000, "follow_log did not end"  # a test's bug: fail, not hang
        if self.steps:
            self.steps.pop(0)()


def _record(step: int) -> str:
    return json.dumps({"step": step, "reward": step / 10, "kl": 0.01}) + "\n"


def _append(path: Path, text: str):
    def step():
        with path.open("a") as f:
            f.write(text)

    return step


def _rewrite(path: Path, text: str):
    return lambda: path.write_text(text)


def _follow(path, writer, **kwargs):
    """Every log `follow_log` yields, as (steps, rewards) lists, and the writer's clock when each came."""
    out = []
    for log in follow_log(path, sleep=writer.sleep, clock=writer.clock, **kwargs):
        out.append((list(log["step"]), list(log["reward"]), writer.now))
    return out


def test_a_jsonl_log_written_record_by_record(tmp_path):
    """One record per poll, a yield per `every` of them; at the idle end the odd last one comes alone."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(_record(1))
    writer = Writer(*[_append(path, _record(step)) for step in range(2, 8)])
    seen = _follow(path, writer, every=2, poll=0.5, idle=2.0)
    assert [steps for steps, _, _ in seen] == [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6], list(range(1, 8))]
    assert seen[-1][1] == pytest.approx([s / 10 for s in range(1, 8)])
    assert [when for *_, when in seen] == [0.5, 1.5, 2.5, 3.0 + 2.0]  # the last: 2 s after step 7 was written
    assert set(writer.waits) == {0.5}


def test_the_yielded_log_is_read_log_of_the_given_path(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(_record(1) + _record(2))
    writer = Writer()
    (log,) = follow_log(str(path), every=2, idle=1.0, sleep=writer.sleep, clock=writer.clock)
    expected = ps.logs.read_log(path)
    assert log.path == str(path) and log.format == expected.format == "jsonl"
    assert log.data.keys() == expected.data.keys() and all(np.array_equal(log[k], expected[k]) for k in log.data)


def test_a_partial_last_line_is_read_once_it_is_ended(tmp_path):
    """A record cut mid-line is left out, not an error, and not read as the number it was cut to (CSV)."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(_record(1) + _record(2) + _record(3)[:20])
    writer = Writer(_append(path, _record(3)[20:] + _record(4)[:9]), _append(path, _record(4)[9:]))
    seen = _follow(path, writer, every=1, idle=3.0)
    assert [steps for steps, _, _ in seen] == [[1, 2], [1, 2, 3], [1, 2, 3, 4]]

    table = tmp_path / "metrics.csv"
    table.write_text("step,reward\n1,0.25\n2,0.4")  # row 2's reward is 0.45 once written
    writer = Writer(_append(table, "5\n"))
    seen = _follow(table, writer, every=1, idle=3.0)
    assert [rewards for _, rewards, _ in seen] == [[0.25], [0.25, 0.45]]


def test_a_last_line_never_ended_is_read_at_the_idle_end(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(_record(1) + _record(2).rstrip("\n"))  # a writer that ends no last line
    seen = _follow(path, Writer(), every=1, idle=2.0)
    assert [steps for steps, _, _ in seen] == [[1], [1, 2]]
    assert [when for *_, when in seen] == [0.0, 2.0]


def test_a_trainer_state_rewritten_at_each_save(tmp_path):
    """TRL rewrites trainer_state.json whole at each checkpoint; a poll that catches it cut short reads it again."""
    path = tmp_path / "trainer_state.json"

    def state(steps: int) -> str:
        history = [{"step": s, "loss": 0.1, "reward": s / 10} for s in range(1, steps + 1)]
        return json.dumps({"global_step": steps, "log_history": history}, indent=2) + "\n"

    path.write_text(state(2))
    cut = state(4)[: len(state(4)) // 2]
    writer = Writer(_rewrite(path, cut), _rewrite(path, state(4)), _rewrite(path, cut), _rewrite(path, state(6)))
    seen = _follow(path, writer, every=2, poll=1.0, idle=5.0, patience=3.0)
    assert [steps for steps, _, _ in seen] == [[1, 2], [1, 2, 3, 4], list(range(1, 7))]
    assert [when for *_, when in seen] == [0.0, 2.0, 4.0]


def test_a_log_that_appears_late(tmp_path):
    """A path not written yet (nor its folder) is waited for, however long: `patience` is for logs that fail."""
    path = tmp_path / "later" / "metrics.jsonl"
    writer = Writer(
        *[lambda: None] * 99,
        lambda: path.parent.mkdir(),
        _rewrite(path, ""),  # created empty, written later
        _rewrite(path, _record(1) + _record(2)),
    )
    seen = _follow(path, writer, every=2, poll=1.0, idle=200.0, patience=5.0)
    assert [(steps, when) for steps, _, when in seen] == [([1, 2], 102.0)]


def test_the_idle_end(tmp_path):
    """The log stops changing: the steps not yet yielded come once more, however few; none: no final yield."""
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(_record(s) for s in range(1, 4)))
    seen = _follow(path, Writer(), every=5, poll=1.0, idle=4.0)
    assert [(steps, when) for steps, _, when in seen] == [([1, 2, 3], 4.0)]
    path.write_text("".join(_record(s) for s in range(1, 6)))
    seen = _follow(path, Writer(), every=5, poll=1.0, idle=4.0)
    assert [(steps, when) for steps, _, when in seen] == [([1, 2, 3, 4, 5], 0.0)]


def test_the_idle_end_yields_values_logged_since_the_last_yield(tmp_path):
    """An eval logged at the last step adds no reward step (no yield while following), but the final log has it."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(_record(1) + _record(2))
    writer = Writer(_append(path, json.dumps({"step": 2, "eval_reward": 0.5}) + "\n"))
    logs = list(follow_log(path, every=2, idle=3.0, sleep=writer.sleep, clock=writer.clock))
    assert [len(log) for log in logs] == [2, 2] and "eval_reward" not in logs[0]
    assert list(logs[1]["eval_reward"]) == pytest.approx([np.nan, 0.5], nan_ok=True)


def test_a_log_rewritten_shorter_counts_from_where_it_is(tmp_path):
    """A run restarted into the same file: `every` counts from its new length, not from the old one's."""
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(_record(s) for s in range(1, 5)))
    writer = Writer(_rewrite(path, _record(1)), _append(path, _record(2)), _append(path, _record(3)))
    seen = _follow(path, writer, every=2, idle=3.0)
    assert [steps for steps, _, _ in seen] == [[1, 2, 3, 4], [1, 2, 3]]


def test_a_log_that_never_appears_raises_at_the_idle_end(tmp_path):
    path = tmp_path / "metrics.jsonl"
    writer = Writer()
    with pytest.raises(PgrpoSimError, match=re.escape(f"log file not found: {path} (no change for 30 s)")):
        _follow(path, writer, every=1, poll=10.0, idle=30.0)
    assert writer.now == 30.0
    path.write_text("")
    with pytest.raises(PgrpoSimError, match=re.escape("metrics.jsonl is empty (no change for 30 s)")):
        _follow(path, Writer(), every=1, poll=10.0, idle=30.0)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (_record(1) + "{not json}\n" + _record(3), "metrics.jsonl is not valid JSON lines (line 2: "),
        (_record(2) + _record(1), "steps in metrics.jsonl go backwards"),
        ('{"step": 1, "loss": 0.5}\n', "no reward column in metrics.jsonl"),
    ],
)
def test_a_malformed_log_raises_once_it_stops_changing(tmp_path, text, match):
    """Retried while the log changes; raised (with the reader's message, naming the file followed) once it has not
    changed for `patience` seconds. Without `idle` too: following never ends, but a broken log does not hang it."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(text)
    writer = Writer(_append(path, "\n"), _append(path, "\n"))  # changes, still malformed
    with pytest.raises(PgrpoSimError, match=re.escape(match)) as info:
        _follow(path, writer, every=1, poll=1.0, patience=5.0)
    assert str(info.value).endswith("(no change for 5 s)") and "\n" not in str(info.value)
    assert "pgrpo-sim-follow" not in str(info.value)  # not the name of the copy read
    assert writer.now == 2.0 + 5.0


def test_a_log_that_breaks_after_yielding_raises(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(_record(1))
    writer = Writer(_append(path, _record(2)), _append(path, "oops\n"))
    seen = []
    with pytest.raises(PgrpoSimError, match=re.escape("is not valid JSON lines (line 3")):
        for log in follow_log(path, every=1, patience=3.0, idle=100.0, sleep=writer.sleep, clock=writer.clock):
            seen.append(len(log))
    assert seen == [1, 2] and writer.now == 2.0 + 3.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(every=0), "every must be >= 1, got 0"),
        (dict(every=2.5), "every must be an integer, got 2.5"),
        (dict(every=None), "every must be a number, got None"),
        (dict(every=True), "every must be a number, got True"),
        (dict(every=[1, 2]), "every must be a single number"),
        (dict(every=1, poll=0), "poll must be > 0, got 0"),
        (dict(every=1, poll=-1.0), "poll must be > 0, got -1"),
        (dict(every=1, poll=float("inf")), "poll must be finite, got inf"),
        (dict(every=1, idle=0), "idle must be > 0, got 0"),
        (dict(every=1, idle="5"), "idle must be a number, got '5'"),
        (dict(every=1, patience=-2), "patience must be > 0, got -2"),
        (dict(every=1, format="xml"), "format must be one of auto, trl,"),
        (dict(every=1, columns={"rewards": "r"}), "unknown metric 'rewards' in columns"),
        (dict(every=1, run=3), "run must be a run's name (str), got int"),
        (dict(every=1, format="jsonl", run="a"), "a jsonl log holds one run"),
    ],
)
def test_bad_arguments_are_refused_at_the_call(tmp_path, kwargs, message):
    """Refused when `follow_log` is called, not at the first `next` (and not retried as a log's failure)."""
    with pytest.raises(PgrpoSimError, match=re.escape(message)) as info:
        follow_log(tmp_path / "metrics.jsonl", **kwargs)
    assert "\n" not in str(info.value)
    with pytest.raises(PgrpoSimError, match="path must be a file path"):
        follow_log(3, every=1)  # pyright: ignore[reportArgumentType]


FIXTURES = [
    OWN / "trl_console.log",
    OWN / "typed_metrics.jsonl",
    OWN / "wandb_history.csv",
    DATA / "verl_console.log",
    DATA / "verl_metrics.jsonl",
    DATA / "trl_state.json",
    DATA / "generic.csv",
    ANCHORS / "custom_countdown_qwen3_06b_metrics.jsonl",
]


@pytest.mark.parametrize("source", FIXTURES, ids=lambda p: p.name)
def test_logs_written_in_pieces_are_read_as_a_whole(tmp_path, source):
    """Each format's log written a few hundred bytes at a poll, cut anywhere (mid-line, mid-number, mid-JSON): each
    yield is the start of the whole log, and the last one is `read_log` of the whole file."""
    if not source.exists():
        pytest.skip(f"{source} not present")
    columns = {"reward": "my_reward"} if source.name == "generic.csv" else None
    data = source.read_bytes()
    size = max(len(data) // 12, 50)
    path = tmp_path / source.name

    def piece(start):
        def write():
            with path.open("ab") as f:
                f.write(data[start : start + size])

        return write

    writer = Writer(*[piece(start) for start in range(0, len(data), size)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixture's skipped records warn at each read
        logs = list(follow_log(path, every=2, columns=columns, idle=3.0, sleep=writer.sleep, clock=writer.clock))
        whole = ps.logs.read_log(source, columns=columns)
    assert logs, "nothing yielded"
    last = logs[-1]
    assert last.format == whole.format and last.data.keys() == whole.data.keys()
    for name in whole.data:
        np.testing.assert_array_equal(last[name], whole[name], err_msg=name)
    for log in logs[:-1]:
        n = len(log)
        assert np.array_equal(log["step"], whole["step"][:n]) and log.format == whole.format
        np.testing.assert_array_equal(log["reward"], whole["reward"][:n])


def test_a_tensorboard_folder_that_appears_and_grows(tmp_path):
    """A folder is followed by its files' sizes and times, and read in place."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder = tmp_path / "runs" / "run-1"
    writers = []

    def log_steps(*steps):
        def write():
            if not writers:
                writers.append(EventFileWriter(str(folder)))
            for step in steps:
                value = summary_pb2.Summary.Value(tag="train/reward", simple_value=step / 4)
                event = event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=[value]))
                writers[0].add_event(event)
            writers[0].flush()

        return write

    writer = Writer(lambda: None, log_steps(1, 2), log_steps(3), log_steps(4), lambda: writers[0].close())
    seen = _follow(tmp_path / "runs", writer, every=2, idle=3.0)
    assert [(steps, rewards) for steps, rewards, _ in seen] == [
        ([1, 2], [0.25, 0.5]),
        ([1, 2, 3, 4], [0.25, 0.5, 0.75, 1]),
    ]
