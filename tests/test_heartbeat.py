"""Under torchrun, rank 0 names a rank whose heartbeat stopped (a frozen process) long before train.dist_timeout_s.

The others used to wait in silence for train.dist_timeout_s (1800 s by default). The staleness logic runs here on a
fake store and clock; tests/training/test_heartbeat_sigstop.py stops a real gloo rank.
"""
from __future__ import annotations

import logging
import threading
import time

import pytest

from twotower.config import TrainConfig
from twotower.errors import ConfigError
from twotower.heartbeat import DONE, Heartbeat, StaleWatch, heartbeat_key, rank_heartbeats


class FakeStore:
    def __init__(self, fail: bool = False) -> None:
        self.values: dict[str, str] = {}
        self.fail = fail

    def set(self, key: str, value: str) -> None:
        if self.fail:
            raise RuntimeError("Connection reset by peer")  # what a client says once the store's process ended
        self.values[key] = value

    def check(self, keys: list[str]) -> bool:
        return all(k in self.values for k in keys)

    def get(self, key: str) -> bytes:
        return self.values[key].encode()


def test_a_silent_rank_is_named_once_per_silence_with_how_long():
    watch = StaleWatch([1, 2], after_s=60, now=0.0)
    assert watch.observe({1: "1 a 10", 2: "1 b 11"}, 5.0) == ([], [])
    assert watch.observe({1: "2 a 10", 2: "1 b 11"}, 50.0) == ([], [])  # rank 2 silent 45 s: not yet
    assert watch.observe({1: "3 a 10", 2: "1 b 11"}, 65.0) == ([(2, 60.0)], [])
    assert watch.observe({1: "4 a 10", 2: "1 b 11"}, 200.0) == ([], [])  # named once, not at every look
    assert watch.observe({1: "5 a 10", 2: "2 b 11"}, 210.0) == ([], [(2, 205.0)])  # `kill -CONT`: beating again
    assert watch.observe({1: "6 a 10", 2: "2 b 11"}, 280.0) == ([(2, 70.0)], [])  # a second silence is named too


def test_a_rank_that_never_beat_is_named_and_a_finished_one_is_not():
    watch = StaleWatch([1, 2], after_s=60, now=0.0)
    assert watch.observe({1: None, 2: DONE}, 61.0) == ([(1, 61.0)], [])
    assert watch.observe({1: None, 2: DONE}, 600.0) == ([], [])  # rank 2 ended its training: no beats expected


def test_rank_0_warns_naming_the_rank_its_process_and_the_wait_left(caplog):
    clock = [0.0]
    store = FakeStore()
    beat = Heartbeat(0, 3, 60.0, 1800.0, connect=lambda: store, clock=lambda: clock[0])
    watch = StaleWatch([1, 2], 60.0, clock[0])
    store.values[heartbeat_key(1)] = "7 nodeB 4242"
    store.values[heartbeat_key(2)] = "7 nodeC 4343"
    with caplog.at_level(logging.WARNING, logger="twotower.distributed"):
        beat.check(store, watch)
        clock[0] = 30.0
        store.values[heartbeat_key(2)] = "8 nodeC 4343"
        beat.check(store, watch)
        clock[0] = 62.0
        beat.check(store, watch)
        clock[0] = 80.0  # rank 2 beat at 30 s: silent 50 s, not yet
        beat.check(store, watch)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert lines[0].startswith("rank 1 (pid 4242 on nodeB) has sent no heartbeat for 62 s: its process looks frozen"), lines
    assert "train.dist_timeout_s=1800 runs out (about 1738 s more)" in lines[0]
    assert "`kill -CONT` the process" in lines[0] and "kill it to end the wait now" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower.distributed"):
        clock[0] = 100.0
        store.values[heartbeat_key(1)] = "8 nodeB 4242"
        store.values[heartbeat_key(2)] = "9 nodeC 4343"
        beat.check(store, watch)
    assert [r.getMessage() for r in caplog.records] == ["rank 1 sends heartbeats again after 100 s of silence"]


def test_a_frozen_rank_0_is_named_by_rank_1_at_error_level(caplog):
    """A rank > 0 logs errors only under torchrun (cli/main.py): a warning of its would not be seen."""
    clock = [0.0]
    store = FakeStore()
    beat = Heartbeat(1, 3, 60.0, 1800.0, connect=lambda: store, clock=lambda: clock[0], watch=[0])
    watch = StaleWatch(beat.watch, 60.0, clock[0])
    store.values[heartbeat_key(0)] = "5 nodeA 4141"
    store.values[heartbeat_key(2)] = "5 nodeA 4343"  # silent too, but rank 0 names it, not rank 1
    with caplog.at_level(logging.ERROR, logger="twotower.distributed"):
        beat.check(store, watch)
        for t in (61.0, 120.0, 300.0):
            clock[0] = t
            beat.check(store, watch)
    records = caplog.records
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.ERROR
    line = records[0].getMessage()
    assert line.startswith("rank 0 (pid 4141 on nodeA) has sent no heartbeat for 61 s: its process looks frozen"), line
    assert "kill it to end the wait now (the run folder keeps the checkpoint of rank 0's last finished epoch" in line
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="twotower.distributed"):
        clock[0] = 310.0
        store.values[heartbeat_key(0)] = "6 nodeA 4141"
        beat.check(store, watch)
    assert [r.getMessage() for r in caplog.records] == ["rank 0 sends heartbeats again after 310 s of silence"]


def test_rank_0_is_watched_by_every_rank_and_named_by_rank_1_and_each_other_nodes_first_rank():
    from twotower.heartbeat import names_silence, watched_ranks

    # 2 nodes x 3 processes: ranks 0-2 on node A, 3-5 on node B
    assert [watched_ranks(r, 6) for r in range(6)] == [[1, 2, 3, 4, 5], [0], [0], [0], [0], [0]]
    assert [names_silence(r, r % 3) for r in range(6)] == [True, True, False, True, False, False]


def test_a_rank_that_names_nothing_still_knows_every_frozen_rank_for_its_timeout_line(caplog):
    """Rank 2 of 3 on rank 0's node watched no rank: its timeout line could not name a frozen rank 1 (or 0). It reads
    rank 0's beat and rank 0's verdict on the others, two keys a beat, and logs none of it."""
    from twotower.heartbeat import frozen_key

    clock = [0.0]
    store = FakeStore()
    zero = Heartbeat(0, 3, 60.0, 1800.0, connect=lambda: store, clock=lambda: clock[0])
    two = Heartbeat(2, 3, 60.0, 1800.0, connect=lambda: store, clock=lambda: clock[0], says=False)
    watches = [StaleWatch(b.watch, 60.0, 0.0) for b in (zero, two)]
    store.values[heartbeat_key(1)] = "5 nodeA 4242"
    with caplog.at_level(logging.WARNING, logger="twotower.distributed"):
        for t in (0.0, 30.0, 61.0, 62.0):
            clock[0] = t
            for r, b, w in ((0, zero, watches[0]), (2, two, watches[1])):
                store.values[heartbeat_key(r)] = f"{int(t)} nodeA {4000 + r}"
                b.check(store, w)
    assert two.frozen == {1: ("4242", "nodeA")} == zero.frozen
    assert [r.getMessage()[:6] for r in caplog.records] == ["rank 1"]  # rank 0's warning alone
    clock[0] = 70.0
    store.values[heartbeat_key(1)] = "6 nodeA 4242"  # `kill -CONT`
    zero.check(store, watches[0])
    two.check(store, watches[1])
    assert two.frozen == {} == zero.frozen
    for t in (200.0, 300.0):  # rank 0 froze: rank 2 sees it itself, quietly (rank 1 names it)
        clock[0] = t
        store.values[heartbeat_key(2)] = f"{int(t)} nodeA 4002"
        two.check(store, watches[1])
    assert two.frozen == {0: ("4000", "nodeA")}
    store.values[frozen_key()] = "not json"
    two.check(store, watches[1])
    assert two.frozen == {0: ("4000", "nodeA")}


def test_a_rank_1_thread_watches_rank_0_by_default(monkeypatch, caplog):
    monkeypatch.setenv("LOCAL_RANK", "1")
    clock = [0.0]
    store = FakeStore()
    beat = Heartbeat(1, 2, 1.0, 1800.0, connect=lambda: store, clock=lambda: clock[0])
    assert beat.watch == [0]
    store.values[heartbeat_key(0)] = "1 nodeA 4141"
    with caplog.at_level(logging.ERROR, logger="twotower.distributed"):
        beat.start()
        assert _wait(lambda: heartbeat_key(1) in store.values)
        clock[0] = 100.0  # rank 0's beat never changes: frozen
        assert _wait(lambda: any("rank 0 (pid 4141" in r.getMessage() for r in caplog.records))
        beat.stop()


def _wait(cond, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)
    return cond()


def test_the_thread_beats_and_leaves_done_when_stopped():
    store = FakeStore()
    beat = Heartbeat(1, 2, 1.0, 1800.0, connect=lambda: store)
    beat.start()
    assert _wait(lambda: store.values.get(heartbeat_key(1), "").startswith("2 "))  # beats, again and again
    beat.stop()
    assert not beat._thread.is_alive()
    assert store.values[heartbeat_key(1)] == DONE  # rank 0 expects no more beats from a rank that finished


@pytest.mark.parametrize("broken", ["set", "connect"])
def test_a_store_gone_ends_the_thread_without_a_word(broken, monkeypatch):
    raised: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))

    def connect():
        if broken == "connect":
            raise RuntimeError("connection refused")
        return FakeStore(fail=True)

    beat = Heartbeat(0, 2, 1.0, 1800.0, connect=connect)
    beat.start()
    assert _wait(lambda: not beat._thread.is_alive())
    beat.stop()
    assert raised == []


def test_one_process_starts_no_heartbeat():
    with rank_heartbeats(TrainConfig()):
        assert not [t for t in threading.enumerate() if t.name.startswith("twotower-heartbeat")]


def test_the_threshold_is_zero_or_at_least_a_second():
    assert TrainConfig(heartbeat_warn_s=0).heartbeat_warn_s == 0
    with pytest.raises(ConfigError, match="train.heartbeat_warn_s"):
        TrainConfig(heartbeat_warn_s=0.5)


def test_frozen_ranks_are_those_of_this_run_s_heartbeat(monkeypatch):
    """The timeout line (cli/train_cmd.py) names the ranks the heartbeat saw frozen: not an earlier run's, in a
    Python process that trains twice under torchrun, the second time with train.heartbeat_warn_s=0."""
    import twotower.heartbeat as hb

    clock = [0.0]
    store = FakeStore()
    earlier = Heartbeat(0, 2, 60.0, 1800.0, connect=lambda: store, clock=lambda: clock[0])
    watch = StaleWatch([1], 60.0, 0.0)
    store.values[heartbeat_key(1)] = "3 nodeB 4242"
    earlier.check(store, watch)
    clock[0] = 61.0
    earlier.check(store, watch)
    monkeypatch.setattr(hb, "_last", [earlier])
    assert hb.frozen_ranks() == {1: ("4242", "nodeB")}
    monkeypatch.setattr("twotower.distributed.world_size", lambda: 2)
    with rank_heartbeats(TrainConfig(heartbeat_warn_s=0)):
        assert hb.frozen_ranks() == {}


def test_leaving_the_block_waits_until_the_thread_is_out_of_a_slow_store_call(monkeypatch):
    # a daemon thread coming back from a TCP store call (C++, the GIL let go) while the interpreter shuts down aborts
    # the process ("terminate called without an active exception"): under torchrun a rank died with status -6 after
    # training, and torchrun stopped rank 0 mid-evaluation. The block waited 5 s; a store call may block longer.
    import twotower.distributed as tdist
    import twotower.heartbeat as hb

    class SlowDone(FakeStore):
        def set(self, key: str, value: str) -> None:
            if value == DONE:
                time.sleep(6.0)  # the last call, in flight when the block ends
            super().set(key, value)

    store = SlowDone()
    monkeypatch.setattr(hb, "_launcher_store", lambda timeout_s: store)
    monkeypatch.setattr(tdist, "world_size", lambda: 2)
    monkeypatch.setattr(tdist, "rank", lambda: 1)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    with rank_heartbeats(TrainConfig(heartbeat_warn_s=1.0)):
        assert _wait(lambda: heartbeat_key(1) in store.values)
    assert not [t for t in threading.enumerate() if t.name.startswith("twotower-heartbeat")]
    assert store.values[heartbeat_key(1)] == DONE
