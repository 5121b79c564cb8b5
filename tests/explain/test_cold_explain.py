"""explain for an item without training interactions (a cold item): said to be cold, explained from metadata.

Its vector was trained by no one's history; "Because you watched X" credited co-watching that never happened,
and the dual-head split gave the zero-ID collaborative vector every cold item shares as the item's own share.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from twotower.explain import explain_by_id
from twotower.models.history import UserSequences

COLD = "i6"


def _dual_cold(run, monkeypatch, cold_ids, item_features=None):
    """``run`` with a dual-head item tower (random text, ``item_features`` if given) whose items ``cold_ids`` lost
    their training rows."""
    from twotower.models.two_tower import TwoTowerModel

    cfg = run.config.model
    torch.manual_seed(0)
    text = np.random.default_rng(0).normal(size=(run.n_items, 8)).astype(np.float32)
    model = TwoTowerModel(replace(cfg, item=replace(cfg.item, dual_head=True)), len(run.user_vocab), run.n_items,
                          item_text=text, item_features=item_features).eval()
    cold = [run.item_vocab.index(c) for c in cold_ids]
    with torch.no_grad():  # as training leaves an item it never saw (pipeline/experiment.py)
        model.item_tower.id_emb.weight[cold] = 0.0
    h = run.history
    keep = ~np.isin(h.items, cold)
    counts = np.add.reduceat(keep, h.indptr[:-1]) * (np.diff(h.indptr) > 0)
    history = UserSequences(np.concatenate([[0], np.cumsum(counts)]).astype(h.indptr.dtype), h.items[keep],
                            h.timestamps[keep])
    monkeypatch.setattr(run, "model", model)
    monkeypatch.setattr(run, "history", history)
    return run


@pytest.fixture
def dual_cold_run(mean_run, monkeypatch):
    """mean_run with a dual-head item tower (random text) whose item COLD lost its training rows."""
    return _dual_cold(mean_run, monkeypatch, [COLD])


@pytest.fixture
def dual_cold_feature_run(mean_run, monkeypatch):
    """As dual_cold_run, with a numeric item feature the collaborative head reads, and a second cold item."""
    from twotower.models.feature_block import FeatureArrays

    numeric = np.random.default_rng(1).normal(size=(mean_run.n_items, 2)).astype(np.float32)
    features = replace(FeatureArrays.empty(mean_run.n_items), numeric=numeric)
    return _dual_cold(mean_run, monkeypatch, [COLD, "i7"], item_features=features)


def test_a_cold_item_is_said_to_be_cold_and_explained_from_its_metadata(dual_cold_run) -> None:
    e = explain_by_id(dual_cold_run, user_id="u2", item_id=COLD)
    assert e["cold"] is True
    title = dual_cold_run.item_record(dual_cold_run.item_vocab.index(COLD))["title"]
    assert e["text"].startswith(f"{title} has no training interactions (a cold item), so its score rests on its text ")
    assert "the collaborative vector every cold item shares" in e["text"]
    assert "Because you" not in e["text"]
    for h in e["history"]:  # no history item is named as a reason
        assert h["title"] not in e["text"]
    genres = [v["value"] for v in e["shared_metadata"]["genres"]]
    assert genres and all(g in e["text"] for g in genres)
    # the numbers stay: the split still sums to the score
    assert e["heads"]["semantic"] + e["heads"]["collaborative"] == pytest.approx(e["score"], abs=1e-5)


def test_a_warm_item_keeps_its_history_sentence(dual_cold_run) -> None:
    e = explain_by_id(dual_cold_run, user_id="u2", item_id="i5")
    assert e["cold"] is False and "cold item" not in e["text"]


def test_a_dual_head_cold_item_with_features_is_not_said_to_share_its_collaborative_vector(dual_cold_feature_run) -> None:
    run = dual_cold_feature_run
    with torch.no_grad():  # two cold items: their collaborative heads read their own features, not one shared vector
        _, h = run.model.item_tower.forward_heads(torch.tensor([run.item_vocab.index(c) for c in (COLD, "i7")]))
    assert not torch.allclose(h.collaborative[0], h.collaborative[1], atol=1e-3)
    e = explain_by_id(run, user_id="u2", item_id=COLD)
    assert e["cold"] is True
    assert "every cold item shares" not in e["text"]  # was "... and the collaborative vector every cold item shares"
    # the features are the collaborative head's, never counted in the semantic head's share (it said "its text and
    # features (N% of the score, through the semantic head)")
    assert "its features (through the collaborative head)" in e["text"]
    assert "text and features" not in e["text"]
