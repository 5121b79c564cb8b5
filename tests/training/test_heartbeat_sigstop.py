"""A rank frozen with SIGSTOP is named by rank 0 after train.heartbeat_warn_s, not after train.dist_timeout_s.

Two gloo ranks run `twotower train` (spawned as in test_dist_timeout.py); once rank 1 beats, the test stops it with
SIGSTOP, waits for rank 0's warning, lets it go on with SIGCONT, waits for the line saying so, then kills it (rank 0
then stops as for any rank lost mid-training).
"""
from __future__ import annotations

import os
import signal
import socket

import torch.multiprocessing as mp

from tests.synthetic import write_dataset
from tests.training.frozen_rank import free_port, store_client, train_rank, wait_for_beat, wait_until

WARN_S = 1


SETTINGS = ("train.dist_timeout_s=600", f"train.heartbeat_warn_s={WARN_S}")


def _wait(cond, within_s: float = 60.0) -> None:
    wait_until(cond, within_s)


def test_a_stopped_rank_is_named_after_train_heartbeat_warn_s(tmp_path):
    data = write_dataset(tmp_path / "data")["train"].parent
    port = free_port()
    ctx = mp.spawn(train_rank, args=(port, str(data), str(tmp_path), 2, SETTINGS), nprocs=2, join=False)
    rank1 = ctx.processes[1]
    err = tmp_path / "rank0.err"
    try:
        wait_for_beat(store_client(port), 1, 60.0)
        os.kill(rank1.pid, signal.SIGSTOP)
        _wait(lambda: "has sent no heartbeat" in err.read_text())
        os.kill(rank1.pid, signal.SIGCONT)
        _wait(lambda: "sends heartbeats again" in err.read_text())
    finally:
        os.kill(rank1.pid, signal.SIGCONT)
        os.kill(rank1.pid, signal.SIGKILL)
        ctx.processes[0].join(120)
    lines = [line for line in err.read_text().splitlines() if "heartbeat" in line]
    # what rank 0 said while rank 1 was stopped and resumed; after the SIGKILL above it may rightly warn again
    lines = lines[: next((i + 1 for i, line in enumerate(lines) if "sends heartbeats again" in line), len(lines))]
    assert len(lines) == 2, lines
    assert f"rank 1 (pid {rank1.pid} on {socket.gethostname()}) has sent no heartbeat for" in lines[0], lines
    assert "until train.dist_timeout_s=600 runs out" in lines[0]
    assert "rank 1 sends heartbeats again after" in lines[1]
