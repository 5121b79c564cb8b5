"""A rank that hangs mid-epoch: the others stop after ``train.dist_timeout_s`` with one line naming it.

They waited for gloo's default 30 minutes and then printed a traceback ("Timed out waiting 1800000ms for recv
operation to complete") that named neither the rank nor a setting. Two gloo ranks run `twotower train` (spawned
as in test_trainer_distributed.py); rank 1 stops answering in its first epoch until rank 0 has reported.
"""
from __future__ import annotations

import io
import os
import socket
import sys
import time
from pathlib import Path

import torch.multiprocessing as mp

from tests.synthetic import write_dataset

TIMEOUT_S = 2


def _worker(rank: int, port: int, data: str, tmp: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), TWOTOWER_THREADS="1")
    done = Path(tmp) / "rank0.done"
    if rank == 1:
        from twotower.training.trainer import Trainer

        def hang(self, epoch):  # alive (the launcher's store still answers) but never at the next collective
            end = time.monotonic() + 120
            while not done.exists() and time.monotonic() < end:
                time.sleep(0.1)
            os._exit(0)

        Trainer._run_epoch = hang
    from twotower.cli.main import main

    sys.stderr = err = io.StringIO()
    try:
        status = main(["-q", "train", "--train", f"{data}/train.csv", "--valid", f"{data}/valid.csv", "--out",
                       f"{tmp}/run", "--epochs", "2", "--no-eval", "--no-progress", "train.batch_size=32",
                       "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
                       "model.item.out_dim=8", f"train.dist_timeout_s={TIMEOUT_S}"])
        (Path(tmp) / f"rank{rank}.err").write_text(f"{status}\n{err.getvalue()}")
    finally:
        if rank == 0:  # rank 1 hangs until then
            done.write_text("")
    os._exit(0)  # skip the slow teardown of a torch child


def test_a_hanging_rank_is_named_after_train_dist_timeout_s(tmp_path):
    data = write_dataset(tmp_path / "data")["train"].parent
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(port, str(data), str(tmp_path)), nprocs=2, join=True)
    status, err = (tmp_path / "rank0.err").read_text().split("\n", 1)
    assert status == "1", err
    assert "Traceback" not in err
    # the error is the first error line (the start's warnings, e.g. its few optimizer steps, may come before it)
    first = next(line for line in err.splitlines() if line.startswith("error:"))
    assert first.startswith(f"error: rank 1 did not answer within train.dist_timeout_s={TIMEOUT_S} (Timed out"), first
    assert "raise train.dist_timeout_s" in first
