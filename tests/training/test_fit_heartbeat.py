"""``Trainer.fit`` called from Python under torchrun beats like `twotower train`: one heartbeat thread a rank.

Only the pipeline's ``train_run`` (`twotower train`) started the heartbeats, so a script that built a Trainer and
called ``fit`` under torchrun had a frozen rank named at ``train.dist_timeout_s`` alone. Two gloo ranks (spawned as
in test_trainer_distributed.py) record the heartbeat threads running in each epoch, first of a direct ``fit``, then
of `twotower train` (whose pipeline beats around the data reading too: its fit must not start a second thread).
"""
from __future__ import annotations

import json
import os
import socket
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.synthetic import write_dataset
from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.heartbeat import DONE, heartbeat_key
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.trainer import Trainer


def _beating() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("twotower-heartbeat-"))


def _worker(rank: int, port: int, data: str, tmp: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), TWOTOWER_THREADS="1")
    seen: dict[str, list] = {"fit": [], "cli": []}
    phase = ["fit"]
    run_epoch = Trainer._run_epoch

    def recording(self, epoch):
        seen[phase[0]].append(_beating())
        return run_epoch(self, epoch)

    Trainer._run_epoch = recording
    users = np.repeat(np.arange(8), 4)
    seqs = UserSequences.from_arrays(users, np.arange(users.size) % 10, np.tile(np.arange(4), 8), 8)
    tower = TowerConfig(hidden=(8,), out_dim=4, id_dim=4)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(use_id=True, hidden=(8,), out_dim=4, id_dim=4), item=tower), 8, 10)
    train = TrainConfig(epochs=2, batch_size=8, progress=False, checkpoint=False, heartbeat_warn_s=1)
    Trainer(model, seqs, loss=LossConfig(), train=train, eval=EvalConfig(baselines=())).fit()  # joins the group
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=30))
    left = _beating()
    # both ranks out of fit before either reads the other's entry: read at once, a rank still finishing its last
    # epoch on a loaded machine showed its last beat, not yet "done" (a race of this test, not of the heartbeat)
    dist.barrier()
    after_fit = {"left": left, "stored": [store.get(heartbeat_key(r)).decode() for r in range(2)]
                 if store.check([heartbeat_key(0), heartbeat_key(1)]) else None}
    dist.barrier()  # both ranks have read the store before the next run beats into it again
    phase[0] = "cli"
    from twotower.cli.main import main

    status = main(["-q", "train", "--train", f"{data}/train.csv", "--valid", f"{data}/valid.csv", "--out",
                   f"{tmp}/run", "--epochs", "2", "--no-eval", "--no-progress", "train.batch_size=32",
                   "model.user.hidden=[8]", "model.item.hidden=[8]", "model.user.out_dim=4", "model.item.out_dim=4",
                   "train.heartbeat_warn_s=1"])
    (Path(tmp) / f"rank{rank}.json").write_text(json.dumps({**seen, **after_fit, "status": status}))
    os._exit(0)  # skip the slow teardown of a torch child


def test_fit_beats_under_torchrun_once_a_rank_also_inside_twotower_train(tmp_path):
    data = write_dataset(tmp_path / "data")["train"].parent
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(port, str(data), str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        me = [f"twotower-heartbeat-{rank}"]
        assert got["fit"] == [me, me], got  # Trainer.fit from Python: its rank beats in every epoch
        assert got["left"] == [] and got["stored"] == [DONE, DONE], got  # stopped with fit, each rank said done
        assert got["status"] == 0 and got["cli"] == [me, me], got  # `twotower train`: one thread, not two
