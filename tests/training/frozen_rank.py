"""Ranks of `twotower train` started as torchrun starts them (gloo, one thread each), for the tests that stop one
with SIGSTOP: each rank writes its stderr, line-buffered, to ``TMP/rank{r}.err`` and ends it with ``status N``."""
from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from twotower.heartbeat import DONE, heartbeat_key


def train_rank(rank: int, port: int, data: str, tmp: str, world: int, settings: tuple[str, ...]) -> None:
    """One rank (``mp.spawn``'s target): `twotower train` on ``data`` with a small model and ``settings`` added."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), TWOTOWER_THREADS="1")
    if world > 2:  # the test holds the store, as torchrun's agent does: it outlives rank 0
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
    from twotower.cli.main import main

    sys.stderr = open(Path(tmp) / f"rank{rank}.err", "w", buffering=1)  # line-buffered: the test reads it live
    status = main(["-q", "train", "--train", f"{data}/train.csv", "--valid", f"{data}/valid.csv", "--out",
                   f"{tmp}/run", "--epochs", "500", "--no-eval", "--no-progress", "train.batch_size=8",
                   "train.patience=1000", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
                   "model.item.out_dim=8", *settings])
    print(f"status {status}", file=sys.stderr)
    os._exit(0)  # skip the slow teardown of a torch child


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond: Callable[[], bool], within_s: float) -> None:
    end = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def wait_for_beat(store: dist.TCPStore, rank: int, within_s: float) -> None:
    """Until ``rank`` has sent a heartbeat (it trains: stopping it now freezes a live rank)."""
    wait_until(lambda: store.check([heartbeat_key(rank)]) and store.get(heartbeat_key(rank)).decode() != DONE,
               within_s)


def store_client(port: int) -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
