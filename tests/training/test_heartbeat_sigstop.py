"""A rank frozen with SIGSTOP is named by rank 0 after train.heartbeat_warn_s, not after train.dist_timeout_s.

Two gloo ranks run `twotower train` (spawned as in test_dist_timeout.py); once rank 1 beats, the test stops it with
SIGSTOP, waits for rank 0's warning, lets it go on with SIGCONT, waits for the line saying so, then kills it (rank 0
then stops as for any rank lost mid-training).
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

from tests.synthetic import write_dataset
from twotower.heartbeat import DONE, heartbeat_key

WARN_S = 1


def _worker(rank: int, port: int, data: str, tmp: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), TWOTOWER_THREADS="1")
    from twotower.cli.main import main

    sys.stderr = open(Path(tmp) / f"rank{rank}.err", "w", buffering=1)  # line-buffered: the test reads it live
    status = main(["-q", "train", "--train", f"{data}/train.csv", "--valid", f"{data}/valid.csv", "--out",
                   f"{tmp}/run", "--epochs", "500", "--no-eval", "--no-progress", "train.batch_size=8", "train.patience=1000",
                   "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
                   "model.item.out_dim=8", "train.dist_timeout_s=600", f"train.heartbeat_warn_s={WARN_S}"])
    print(f"status {status}", file=sys.stderr)
    os._exit(0)  # skip the slow teardown of a torch child


def _wait(cond, within_s: float = 60.0) -> None:
    end = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_a_stopped_rank_is_named_after_train_heartbeat_warn_s(tmp_path):
    data = write_dataset(tmp_path / "data")["train"].parent
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.spawn(_worker, args=(port, str(data), str(tmp_path)), nprocs=2, join=False)
    rank1 = ctx.processes[1]
    err = tmp_path / "rank0.err"
    try:
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
        _wait(lambda: store.check([heartbeat_key(1)]) and store.get(heartbeat_key(1)).decode() != DONE)
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
