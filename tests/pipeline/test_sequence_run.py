"""A sequence-tower run (transformer / GRU user tower, all-positions training) on every path that
embeds a user from a history: recommend --user / --history, POST /recommend with a history,
/explain (exact leave-one-out), index build and serving."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "explain"))
from explain_tiny_run import train_tiny_run  # noqa: E402


@pytest.fixture(scope="module", params=["transformer", "gru"])
def seq_run(request, tmp_path_factory):
    import twotower as tt

    out = tmp_path_factory.mktemp(f"seq_{request.param}") / "run"
    train_tiny_run(out, history=request.param, epochs=2)
    return tt.TrainedRun.load(out)


def test_trained_tower_is_a_sequence_tower(seq_run):
    tower = seq_run.model.user_tower
    assert tower.is_sequence and tower.config.history in ("transformer", "gru")


def test_history_user_equals_stored_user(seq_run):
    """A new user with u3's training history gets u3's vector (no retraining, no user id)."""
    row = seq_run.user_row("u3")
    stored = seq_run.user_vectors(np.array([row]))
    hist = seq_run.history.of(row)
    fresh = seq_run.history_vectors([hist])
    np.testing.assert_allclose(np.asarray(fresh), np.asarray(stored), atol=1e-6)


def test_explain_leave_one_out_is_exact(seq_run):
    """Each contribution is the score lost when that item is deleted from what the encoder reads: the older items
    move up a column (with recency, "right", positions too: reading the column as padding kept their positions)."""
    from twotower.explain.attribution import attribute_history, item_vector

    model = seq_run.model.eval()
    row = seq_run.user_row("u5")
    window = seq_run.history.last_windows(np.array([row]), model.history_len, model.pad_item)[0]
    att = attribute_history(model, None, window, item_row=2, method="loo")
    v = item_vector(model, 2)
    pad = model.pad_item
    for col, c in zip(att.positions, att.contributions):
        hole = np.concatenate([[pad], window[:col], window[col + 1:]])  # the item deleted, padding at the oldest end
        with torch.no_grad():
            s = float(model.user_tower(None, torch.as_tensor(hole[None])) @ v)
        assert att.score - s == pytest.approx(float(c), abs=1e-5)


def test_cli_and_http_agree_for_history_user(seq_run, tmp_path):
    from fastapi.testclient import TestClient

    from twotower.pipeline.recommend import recommend_history
    from twotower.serving import RecommenderService, ServiceSettings, create_app

    hist_ids = ["i1", "i5", "i9", "i13"]
    cli = recommend_history(seq_run, hist_ids, 5)
    service = RecommenderService.load(seq_run.dir)
    with TestClient(create_app(service=service, settings=ServiceSettings())) as client:
        r = client.post("/recommend", json={"history": hist_ids, "k": 5})
        assert r.status_code == 200, r.text
        http_ids = [it["item_id"] for it in r.json()["items"]]
        e = client.post("/explain", json={"history": hist_ids, "item_id": http_ids[0]})
        assert e.status_code == 200, e.text
    vocab = seq_run.item_vocab.ids
    cli_ids = [vocab[int(i)] for i in np.asarray(cli.ids).reshape(-1)[:5]]
    assert http_ids == cli_ids
    assert not set(http_ids) & set(hist_ids)  # the input history is never recommended


def test_index_build_over_sequence_run(seq_run, tmp_path):
    from twotower.index import ExactIndex

    items = seq_run.item_embeddings()
    index = ExactIndex().build(np.asarray(items, np.float32), np.arange(len(items)))
    q = np.asarray(seq_run.user_vectors(np.arange(4)), np.float32)
    res = index.search(q, k=3)
    brute = np.argsort(-(q @ np.asarray(items, np.float32).T), axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(res.ids, brute)
