"""A sequence tower trained on sequence examples reads a user with no items through a state those examples never
train: it is fitted after training to the training popularity (pipeline/empty_history.py), saved with the weights."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.explain.explain_tiny_run import train_tiny_run


def _empty_user_scores(run) -> np.ndarray:
    """Scores of every item for a user with an empty history, as the run scores it after loading."""
    return _empty_user_scores_of(run.model)


def _empty_user_scores_of(model) -> np.ndarray:
    window = np.full((1, model.history_len), model.pad_item, dtype=np.int64)
    with torch.no_grad():
        user = model.user_embeddings(None, window)  # [1, D]
        items = model.all_item_embeddings()  # [I, D]
    return (items @ user[0]).numpy()


@pytest.fixture(scope="module")
def sequence_run(tmp_path_factory):
    import twotower as tt

    out = tmp_path_factory.mktemp("empty_seq") / "run"
    train_tiny_run(out, history="transformer", epochs=2, extra=("train.examples=sequence",))
    return tt.TrainedRun.load(out)


def test_an_empty_history_is_read_through_the_fitted_state_and_saved_with_the_weights(sequence_run):
    """Before: the state stayed zero, every score 0, and the list was the catalogue's first items in id order."""
    scores = _empty_user_scores(sequence_run)  # from the loaded run: the fitted state was saved
    assert np.ptp(scores) > 1e-3
    record = json.loads((sequence_run.dir / "run.json").read_text())["empty_history"]
    assert record["fitted"] is True and record["cross_entropy_after"] < record["cross_entropy_before"]
    assert record["target"] == "each training user's first item"


def test_the_fit_ranks_the_items_new_users_start_with_first():
    """Item vectors with a direction that orders them by how often they start a sequence: the fitted state finds
    it, and the empty history's list starts with the items sequences start with, the most frequent first."""
    from twotower.config import ModelConfig, TowerConfig
    from twotower.models.history import UserSequences
    from twotower.models.two_tower import TwoTowerModel
    from twotower.pipeline.empty_history import first_items, fit_empty_history

    n_items, dim = 60, 8
    user = TowerConfig(use_id=False, use_features=False, history="transformer", history_len=5, history_dim=dim,
                       hidden=(), head=False, out_dim=dim)
    item = TowerConfig(use_id=True, id_dim=dim, hidden=(), head=False, out_dim=dim)
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=user, item=item, share_item_embeddings=True), 10, n_items)
    rng = np.random.default_rng(0)
    starts = rng.permutation(n_items)[:12]  # the items sequences start with, item starts[j] the (j+1)-th most often
    users = np.repeat(np.arange(12), 3)
    seq_items = np.stack([starts, rng.integers(0, n_items, 12), rng.integers(0, n_items, 12)], axis=1).ravel()
    seqs = UserSequences.from_arrays(users, seq_items, np.tile(np.arange(3), 12), 12)
    counts = first_items(seqs, n_items)
    np.testing.assert_array_equal(np.flatnonzero(counts), np.sort(starts))
    counts[starts] = np.arange(12, 0, -1, dtype=np.float64)  # distinct frequencies, the most frequent first
    table = model.item_tower.id_emb.weight
    with torch.no_grad():
        table.normal_(0, 0.1)
        table[:n_items, 0] = torch.as_tensor(np.log1p(counts), dtype=torch.float32)
    info = fit_empty_history(model, counts, 0.1, seed=0)
    scores = _empty_user_scores_of(model)
    assert set(np.argsort(-scores)[:12].tolist()) == set(starts.tolist()) and np.argmax(scores) == starts[0]
    assert info["top10_overlap_with_target"] >= 8 and info["cross_entropy_after"] < info["cross_entropy_before"]


def test_causal_examples_train_it_and_nothing_is_fitted_after(tmp_path):
    import twotower as tt

    out = train_tiny_run(tmp_path / "run", history="gru", epochs=1)
    run = tt.TrainedRun.load(out)
    assert "empty_history" not in json.loads((out / "run.json").read_text())
    assert np.ptp(_empty_user_scores(run)) > 0  # trained on each user's first item


def test_a_sequence_run_saved_before_the_fit_is_named_when_loaded(sequence_run, tmp_path, caplog):
    """An old-run audit: a run saved before the state was fitted ranked a user with no history from the
    untrained state (the catalogue in id order), and nothing said so."""
    import shutil

    import twotower as tt
    from twotower.pipeline.artifacts import write_manifest

    old = tmp_path / "old"
    shutil.copytree(sequence_run.dir, old)
    info = json.loads((old / "run.json").read_text())
    del info["empty_history"]
    (old / "run.json").write_text(json.dumps(info))
    write_manifest(old)
    with caplog.at_level("WARNING"):
        tt.TrainedRun.load(old)
    assert "did not fit the sequence tower's empty-history state" in caplog.text and "--resume" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        tt.TrainedRun.load(sequence_run.dir)  # a run saved today: fitted, nothing to say
    assert "empty-history" not in caplog.text
