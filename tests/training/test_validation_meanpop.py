"""MeanPop@k counts an item's distinct training users wherever it is computed.

A user who repeats an item (the same pair at another timestamp, which reading keeps) counted every time in the
trainer's validation figures (log.jsonl's valid_MeanPop@k) and in the benchmarks' evaluator, but once in
`twotower evaluate` and metrics.json: the same model on the same split had two MeanPop@10 (ML-100K's train with
30% of its rows repeated: 275.4 in log.jsonl, 211.5 from `twotower evaluate --split valid`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from twotower.config import DataConfig, EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.evaluation import EvalProtocol, Popularity, evaluate
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.pipeline.prepare import prepare
from twotower.pipeline.sources import load_sources
from twotower.training.scorer import TwoTowerScorer
from twotower.training.trainer import Trainer


def test_validation_meanpop_counts_a_users_repeats_once():
    # users 0-2 read items u+1..u+3 and item 0 three times; users 3-5 read items u+1..u+3 only, so item 0
    # (3 users, 9 interactions) is in their lists: with k = the catalogue, every list holds every unseen item
    users = np.repeat(np.arange(6), [6, 6, 6, 3, 3, 3])
    items = np.concatenate([[u + 1, u + 2, u + 3] + ([0, 0, 0] if u < 3 else []) for u in range(6)])
    seqs = UserSequences.from_arrays(users, items, np.arange(users.size), 6)
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, items)), shape=(6, 12))
    train.data[:] = 1.0
    valid = sp.csr_matrix((np.ones(6, np.float32), (np.arange(6), np.arange(6) + 5)), shape=(6, 12))
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=())), 6, 12)
    trainer = Trainer(model, seqs, loss=LossConfig(), train=TrainConfig(epochs=1, batch_size=8, progress=False,
                      checkpoint=False), eval=EvalConfig(baselines=(), ks=(12,)),
                      valid_relevant=valid, train_matrix=train)
    users_per_item = Popularity().fit(train).counts
    assert users_per_item[0] == 3
    assert trainer.item_counts[0] == 9  # logQ's frequencies keep counting every interaction
    want = evaluate(TwoTowerScorer(model, seqs), valid, train, EvalProtocol(ks=(10, 12)), users_per_item)
    got = trainer.validate()
    assert got["MeanPop@12"] == pytest.approx(want["MeanPop@12"])
    assert got["NDCG@12"] == pytest.approx(want["NDCG@12"])


def test_prepared_item_counts_are_distinct_training_users(tmp_path):
    rows = [("a", "x", 1), ("a", "x", 2), ("a", "x", 3), ("a", "y", 4), ("b", "y", 5), ("b", "z", 6)]
    path = tmp_path / "train.csv"
    pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).to_csv(path, index=False)
    prep = prepare(load_sources(DataConfig(train=str(path))))
    counts = dict(zip(prep.item_vocab.ids, prep.item_counts()))
    assert counts == {"x": 1.0, "y": 2.0, "z": 1.0}  # x: one user, three interactions
