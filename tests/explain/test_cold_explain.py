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


@pytest.fixture
def dual_cold_run(mean_run, monkeypatch):
    """mean_run with a dual-head item tower (random text) whose item COLD lost its training rows."""
    from twotower.models.two_tower import TwoTowerModel

    run = mean_run
    cfg = run.config.model
    torch.manual_seed(0)
    text = np.random.default_rng(0).normal(size=(run.n_items, 8)).astype(np.float32)
    model = TwoTowerModel(replace(cfg, item=replace(cfg.item, dual_head=True)), len(run.user_vocab), run.n_items,
                          item_text=text).eval()
    cold = run.item_vocab.index(COLD)
    with torch.no_grad():  # as training leaves an item it never saw (pipeline/experiment.py)
        model.item_tower.id_emb.weight[cold] = 0.0
    h = run.history
    keep = h.items != cold
    counts = np.add.reduceat(keep, h.indptr[:-1]) * (np.diff(h.indptr) > 0)
    history = UserSequences(np.concatenate([[0], np.cumsum(counts)]).astype(h.indptr.dtype), h.items[keep],
                            h.timestamps[keep])
    monkeypatch.setattr(run, "model", model)
    monkeypatch.setattr(run, "history", history)
    return run


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
