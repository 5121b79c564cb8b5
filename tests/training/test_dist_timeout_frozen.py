"""A rank frozen with SIGSTOP until train.dist_timeout_s: rank 0's timeout line names its pid and host, and how to end
torchrun's wait for it, without first waiting for it to report a timeout it cannot report.

The line said "rank 1 did not answer ... it hangs, or worked alone longer than that; raise train.dist_timeout_s"
after waiting min(dist_timeout_s, 10) s more, though the heartbeat had named the frozen process seconds before.
Two gloo ranks run `twotower train` (spawned as in test_heartbeat_sigstop.py); once rank 1 beats, the test stops
it with SIGSTOP and reads rank 0's line.
"""
from __future__ import annotations

import os
import signal
import socket
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

import twotower.distributed as tdist
from tests.synthetic import write_dataset
from tests.training.frozen_rank import free_port, store_client, train_rank, wait_for_beat, wait_until
from twotower.cli.train_cmd import _timed_out_line
from twotower.distributed import torchrun_kill_grace_s


SETTINGS = ("train.dist_timeout_s=8", "train.heartbeat_warn_s=1")


def _wait(cond, within_s: float = 90.0) -> None:
    wait_until(cond, within_s)


def test_the_timeout_line_names_a_frozen_rank_s_pid_and_how_to_end_torchrun_s_wait(tmp_path):
    data = write_dataset(tmp_path / "data")["train"].parent
    port = free_port()
    ctx = mp.spawn(train_rank, args=(port, str(data), str(tmp_path), 2, SETTINGS), nprocs=2, join=False)
    rank1 = ctx.processes[1]
    err = tmp_path / "rank0.err"
    try:
        wait_for_beat(store_client(port), 1, 90.0)
        os.kill(rank1.pid, signal.SIGSTOP)
        _wait(lambda: "status " in err.read_text())
    finally:
        os.kill(rank1.pid, signal.SIGCONT)
        os.kill(rank1.pid, signal.SIGKILL)
        ctx.processes[0].join(120)
    text = err.read_text()
    assert "status 1" in text, text
    line = next(x for x in text.splitlines() if "did not answer" in x)
    host = socket.gethostname()
    assert line.startswith(f"error: rank 1 (pid {rank1.pid} on {host}) did not answer within train.dist_timeout_s=8"), line
    assert "sent no heartbeat for train.heartbeat_warn_s, a frozen process" in line, line
    assert f"torchrun waits {torchrun_kill_grace_s()} s for a frozen rank before it sends SIGKILL: `kill -9 {rank1.pid}` on {host} ends it" in line
    assert "raise train.dist_timeout_s" not in line  # it did not work alone: it is stopped


def test_silent_ranks_does_not_wait_for_a_rank_the_heartbeat_named_frozen(monkeypatch):
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(master.port))
    monkeypatch.setattr(tdist, "rank", lambda: 0)
    monkeypatch.setattr(tdist, "world_size", lambda: 3)
    naps: list[float] = []
    monkeypatch.setattr(tdist.time, "sleep", naps.append)
    assert tdist.silent_ranks(10.0, frozen={1, 2}) == [1, 2]  # neither can report its timeout: no wait for them
    assert naps == []
    master.set("twotower/timed_out/0/2", "1")
    assert tdist.silent_ranks(0.0, frozen={1}) == [1]  # rank 2 timed out too: not silent


def test_the_line_tells_a_frozen_rank_from_one_that_hangs(monkeypatch):
    import twotower.heartbeat as hb

    monkeypatch.setattr(tdist, "silent_ranks", lambda wait_s, frozen=(): [1, 2])
    monkeypatch.setattr(hb, "frozen_ranks", lambda: {1: ("4242", "nodeB")})
    line = _timed_out_line(RuntimeError("[pair.cc:1] Timed out waiting 8000ms for recv"), 8.0, Path("run"),
                           lambda out: "the run folder holds nothing")
    first = line.splitlines()[0]
    assert first.startswith("error: ranks 1 (pid 4242 on nodeB), 2 did not answer within train.dist_timeout_s=8 "
                            "(Timed out waiting 8000ms for recv): rank 1 sent no heartbeat"), first
    assert "`kill -9 4242` on nodeB ends it at once; rank 2 hangs, or worked alone longer" in first, first
    assert line.splitlines()[1] == "the run folder holds nothing"


def test_the_line_gives_the_installed_torchruns_wait_not_a_fixed_30_s(monkeypatch):
    """The line said "torchrun waits 30 s" whatever torch was installed; it reads the wait where the page's test
    does (tests/test_torchrun_shutdown_wait.py), PContext.close's default."""
    import inspect

    import twotower.heartbeat as hb
    from torch.distributed.elastic.multiprocessing.api import PContext

    assert torchrun_kill_grace_s() == inspect.signature(PContext.close).parameters["timeout"].default
    monkeypatch.setattr(tdist, "silent_ranks", lambda wait_s, frozen=(): [1])
    monkeypatch.setattr(hb, "frozen_ranks", lambda: {1: ("4242", "nodeB")})
    monkeypatch.setattr(tdist, "torchrun_kill_grace_s", lambda: 45)
    line = _timed_out_line(RuntimeError("Timed out waiting 8000ms for recv"), 8.0, Path("run"), lambda out: "")
    assert "torchrun waits 45 s for a frozen rank before it sends SIGKILL: `kill -9 4242` on nodeB ends it" in line, line
    monkeypatch.setattr(tdist, "torchrun_kill_grace_s", lambda: None)  # a torch without the default: no number made up
    line = _timed_out_line(RuntimeError("Timed out waiting 8000ms for recv"), 8.0, Path("run"), lambda out: "")
    assert "torchrun waits a while for a frozen rank before it sends SIGKILL" in line, line


def test_a_third_rank_on_rank_0_s_node_names_the_frozen_rank_too(tmp_path):
    """Three ranks on one node: rank 2 watched no rank, so its own line read "[rank 2] error: rank 1 did not answer
    ... it hangs, or worked alone longer than that; raise train.dist_timeout_s", though rank 0 had named rank 1
    frozen. It now reads rank 0's verdict from the store each beat. The store is the test's, as under torchrun
    (its agent's): rank 0 ending does not take it away from rank 2's count of the ranks that timed out too."""
    data = write_dataset(tmp_path / "data")["train"].parent
    store = dist.TCPStore("127.0.0.1", 0, world_size=4, is_master=True, timeout=timedelta(seconds=60),
                          wait_for_workers=False)
    ctx = mp.spawn(train_rank, args=(store.port, str(data), str(tmp_path), 3, SETTINGS), nprocs=3, join=False)
    rank1 = ctx.processes[1]
    err = tmp_path / "rank2.err"
    try:
        wait_for_beat(store, 1, 90.0)
        os.kill(rank1.pid, signal.SIGSTOP)
        _wait(lambda: "status " in err.read_text() and "status " in (tmp_path / "rank0.err").read_text())
    finally:
        os.kill(rank1.pid, signal.SIGCONT)
        os.kill(rank1.pid, signal.SIGKILL)
        for p in (ctx.processes[0], ctx.processes[2]):
            p.join(120)
    text = err.read_text()
    assert "status 1" in text, text
    line = next(x for x in text.splitlines() if "did not answer" in x)
    host = socket.gethostname()
    assert line.startswith(f"[rank 2] error: rank 1 (pid {rank1.pid} on {host}) did not answer within "
                           "train.dist_timeout_s=8"), line
    assert f"`kill -9 {rank1.pid}` on {host} ends it at once" in line, line
    assert "raise train.dist_timeout_s" not in line, line
    assert "has sent no heartbeat" not in text, text  # rank 0 warned about rank 1; rank 2 says it once, in its line
