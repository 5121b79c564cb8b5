"""What the Trainer refuses under torchrun before it trains (training/rank_checks.py): three gloo ranks (one ``mp.spawn``) build a Trainer in
each scenario and record what it raised, so a refusal is seen on every rank (one rank refusing alone would leave the
others waiting in a collective)."""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.models.feature_block import FeatureArrays
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.trainer import Trainer

WORLD = 3
N_USERS, N_ITEMS, PER_USER = 8, 10, 5


def _trainer(batch_size: int = 8, rows: int = N_USERS * PER_USER, out_dim: int = 4, *, user: dict | None = None,
             item_numeric: int = 0, out_dir: Path | None = None, **train_over: object) -> Trainer:
    users = np.repeat(np.arange(N_USERS), PER_USER)[:rows]
    items = np.arange(users.size) % N_ITEMS
    seqs = UserSequences.from_arrays(users, items, np.arange(users.size), N_USERS)
    tower = dict(hidden=(8,), out_dim=out_dim, dropout=0.0, id_dim=4, history_dim=4, history_len=3)
    # item_numeric: numeric item feature columns, as another data.items file on one node gives
    features = FeatureArrays(np.zeros((N_ITEMS, 0), np.int64), (), (), (), np.zeros((N_ITEMS, item_numeric), np.float32))
    model = TwoTowerModel(ModelConfig(user=TowerConfig(**{"use_id": True, "history": "mean", **tower, **(user or {})}),
                                      item=TowerConfig(**tower)),
                          N_USERS, N_ITEMS, item_features=features if item_numeric else None)
    train = TrainConfig(**{"epochs": 1, "batch_size": batch_size, "progress": False, "checkpoint": out_dir is not None,
                           "history_dropout": 0.0, **train_over})
    return Trainer(model, seqs, loss=LossConfig(), train=train, eval=EvalConfig(baselines=()), out_dir=out_dir)


def _resumed(rank: int, checkpoints: Path, scenario: str, source: str | None) -> int | None:
    """A fit of epoch 3 resumed from a copy of ``checkpoints/<source>`` (this rank's own, as on a node of its own),
    or started afresh (``source`` None); the epochs it trained (timing out after 20 s in a collective)."""
    out = checkpoints / f"{scenario}_rank{rank}"
    if source is not None:
        shutil.copytree(checkpoints / source, out)
    return len(_trainer(out_dir=out, epochs=3, dist_timeout_s=20).fit(resume=source is not None).history)


said_fit: list[dict] = []  # the epoch rows of a fit, as log.jsonl records them


def _scenarios(rank: int, checkpoints: Path) -> dict:
    return {
        "batch_below_world": lambda: _trainer(batch_size=2),
        "batch_at_world": lambda: _trainer(batch_size=WORLD),
        # rank 2's node holds a copy of the training file without its last row
        "rank2_data_short": lambda: _trainer(rows=N_USERS * PER_USER - (rank == 2)),
        "rank2_model": lambda: _trainer(out_dim=8 if rank == 2 else 4),
        "rank2_lr": lambda: _trainer(lr=0.01 if rank == 2 else 0.002),
        "threads_per_node": lambda: _trainer(threads=1 + rank),  # each node its own cores: not refused
        # model settings that keep every weight's shape: the gradients of two different models were averaged
        "rank2_normalize": lambda: _trainer(user={"normalize": rank != 2}),
        "rank2_seq_positions": lambda: _trainer(user={"history": "transformer", "seq_positions": "left" if rank == 2 else "right"}),
        "rank2_item_features": lambda: _trainer(item_numeric=1 if rank == 2 else 0),  # same settings, another file
        # a --resume where rank 2's node holds an older copy of the checkpoint, or rank 2 was started without --resume
        "resume_stale_copy": lambda: _resumed(rank, checkpoints, "stale", "epoch1" if rank == 2 else "epoch2"),
        "resume_on_one_rank_only": lambda: _resumed(rank, checkpoints, "fresh", None if rank == 2 else "epoch2"),
        "resume_same_copy": lambda: _resumed(rank, checkpoints, "same", "epoch2"),
        "fit": lambda: said_fit.append(_trainer().fit().history[-1]),
    }


def _worker(rank: int, port: int, out_dir: str, checkpoints: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    from twotower import distributed as tdist

    said: dict[str, str | None] = {}
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("twotower").addHandler(handler)
    logging.getLogger("twotower").setLevel(logging.INFO)
    try:
        for name, make in _scenarios(rank, Path(checkpoints)).items():
            try:
                make()
                said[name] = None
            except Exception as e:  # noqa: BLE001  (recorded for the test to read)
                said[name] = f"{type(e).__name__}: {e}"
    finally:
        tdist.cleanup()
    said["start_line"] = next((m for m in lines if m.startswith("training: ")), None)
    said["fit_world_size"] = said_fit[-1].get("world_size") if said_fit else None
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(said))
    os._exit(0)  # skip the slow interpreter teardown of a torch child


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _checkpoints(root: Path) -> Path:
    """Runs of one process: ``epoch1`` holds a checkpoint of epoch 1, ``epoch2`` the same run resumed to epoch 2."""
    _trainer(out_dir=root / "epoch2", epochs=1).fit()
    shutil.copytree(root / "epoch2", root / "epoch1")
    _trainer(out_dir=root / "epoch2", epochs=2).fit(resume=True)
    return root


@pytest.fixture(scope="module")
def said(tmp_path_factory) -> list[dict[str, str | None]]:
    out = tmp_path_factory.mktemp("rank_checks")
    checkpoints = _checkpoints(tmp_path_factory.mktemp("checkpoints"))
    mp.spawn(_worker, args=(_free_port(), str(out), str(checkpoints)), nprocs=WORLD, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


def test_a_global_batch_smaller_than_the_ranks_is_refused_on_every_rank(said) -> None:
    # it trained nothing: every batch of 2 was skipped on 3 ranks, loss 0.0 logged and untrained weights kept
    for r in range(WORLD):
        assert said[r]["batch_below_world"] is not None, f"rank {r} accepted train.batch_size=2 on {WORLD} ranks"
        assert said[r]["batch_below_world"].startswith("ConfigError: train.batch_size=2")
        assert f"at least {WORLD}" in said[r]["batch_below_world"]
        assert said[r]["batch_at_world"] is None


def test_training_data_differing_on_one_rank_is_refused_on_every_rank(said) -> None:
    # it trained on (rank 2's) other examples without a word, or failed in gloo's "collective mismatch"
    for r in range(WORLD):
        got = said[r]["rank2_data_short"]
        assert got is not None, f"rank {r} accepted rank 2's other training data"
        assert got.startswith("DataError: the ranks read different training data")
        assert "rank 0: 40 interactions" in got and "rank 2: 39 interactions" in got and "rank 1:" not in got


def test_settings_differing_on_one_rank_are_refused_but_the_threads_are_each_node_s(said) -> None:
    for r in range(WORLD):
        got = said[r]["rank2_lr"]
        assert got is not None and got.startswith("ConfigError: the ranks were given different settings")
        assert "train.lr=0.002 on rank 0, 0.01 on rank 2" in got
        assert said[r]["threads_per_node"] is None


def test_a_model_differing_on_one_rank_is_refused_on_every_rank(said) -> None:
    for r in range(WORLD):
        # the settings are compared before the shapes now, so the refusal names the setting (it said "rank 2 built
        # another model than rank 0 (its weights' shapes differ: other model settings or feature files)")
        got = said[r]["rank2_model"]
        assert got is not None and got.startswith("ConfigError: the ranks were given different settings (")
        assert "model.item.out_dim=4 on rank 0, 8 on rank 2" in got
        # the same settings, another feature file on rank 2's node: only the shapes tell
        got = said[r]["rank2_item_features"]
        assert got is not None and got.startswith("ConfigError: rank 2 built another model than rank 0")


def test_model_settings_that_keep_the_shapes_are_compared_too(said) -> None:
    # only train.* and loss.* settings and the weights' shapes were compared: these trained silently, averaging
    # the gradients of two different models
    for r in range(WORLD):
        got = said[r]["rank2_normalize"]
        assert got is not None and got.startswith("ConfigError: the ranks were given different settings (")
        assert "model.user.normalize=True on rank 0, False on rank 2" in got
        got = said[r]["rank2_seq_positions"]
        assert got is not None and "model.user.seq_positions='right' on rank 0, 'left' on rank 2" in got


def test_a_resume_from_different_checkpoints_is_refused_on_every_rank_before_training(said) -> None:
    # rank 2 resumed epoch 1 from its node's stale copy, rank 0 epoch 2: the ranks trained a mixed model, then
    # waited for each other until train.dist_timeout_s
    for r in range(WORLD):
        got = said[r]["resume_stale_copy"]
        assert got is not None and got.startswith("ConfigError: the ranks resumed from different checkpoints (")
        assert "rank 0: " in got and "stale_rank0/checkpoint, epoch 2, step " in got
        assert "stale_rank2/checkpoint, epoch 1, step " in got and "rank 1:" not in got
        assert "copy rank 0's checkpoint folder to the same path on every node" in got
        got = said[r]["resume_on_one_rank_only"]
        assert got is not None and "rank 2: no --resume, starts at epoch 1" in got
        assert said[r]["resume_same_copy"] is None  # copies of one checkpoint: epoch 3 trained


def test_the_start_line_says_how_many_negatives_a_query_sees_across_ranks(said) -> None:
    # the line said "batch 8 across 3 ranks, loss inbatch (...)": whether a query met its rank's share of the batch
    # or the whole global batch was not said
    line = said[0]["start_line"]  # batch_at_world's: one example a rank, scored against the other ranks' two
    assert line is not None and "batch 3 across 3 ranks, loss inbatch: 2 negatives a query, gathered from 3 ranks (" in line
    assert said[1]["start_line"] is None  # rank 0 speaks for all


def test_each_epoch_row_records_the_number_of_ranks_it_ran_on(said) -> None:
    # a run resumed on another number of processes said nowhere how many trained which epoch (examples/s, and
    # with dropout the results, depend on it)
    assert [said[r]["fit"] for r in range(WORLD)] == [None] * WORLD
    assert [said[r]["fit_world_size"] for r in range(WORLD)] == [WORLD] * WORLD
    assert _trainer().fit().history[-1]["world_size"] == 1  # one process, no torchrun
