"""Explanations are grounded: what they name comes from the user's own files and the tower re-run by hand.

Recency pooling (the default tower): each history item weighs ``recency_decay ** age`` (age 0 = newest) and
leave-one-out sets one weight to 0, the others keeping theirs. The weights are written out here from that
rule, the history is read from the training CSV and the metadata from the items CSV, not from the run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from twotower.explain import explain_recommendation


def test_every_named_item_and_value_is_the_users_and_every_number_is_the_towers(feature_run) -> None:
    run = feature_run
    data = run.dir.parent / (run.dir.name + "_data")
    train = pd.read_csv(data / "train.csv", dtype={"user_id": str, "item_id": str})
    items = pd.read_csv(data / "items.csv", dtype={"item_id": str}).set_index("item_id")
    model, L, decay = run.model, run.model.history_len, run.config.model.user.recency_decay
    emb = run.item_embeddings()
    for u in range(0, 40, 5):
        uid = run.user_vocab.id_at(u)
        rows = train[train.user_id == uid]
        # the window: the newest L training items by (timestamp, item row), right-aligned
        hist = sorted(zip(rows.timestamp, run.item_vocab.encode(rows.item_id)))
        window = [int(i) for _, i in hist][-L:]
        scores = run.scores_for_users(np.array([u]))[0]
        scores[[i for _, i in hist]] = -np.inf
        item = int(np.argmax(scores))  # the user's top recommendation
        e = explain_recommendation(run, user_row=u, item_row=item, top=L)

        assert not e["already_seen"]
        assert e["item"]["title"] == items.loc[e["item_id"], "title"]
        assert sorted(h["item_id"] for h in e["history"]) == sorted(run.item_vocab.id_at(i) for i in window)
        for h in e["history"]:
            assert run.item_vocab.id_at(window[len(window) - 1 - h["age"]]) == h["item_id"]
            assert (h["title"], h["genres"]) == tuple(items.loc[h["item_id"], ["title", "genres"]])

        # the tower re-run by hand
        pad = [model.pad_item] * (L - len(window))
        hist_t = torch.tensor([pad + window])
        w = torch.tensor([[0.0] * len(pad) + [decay ** (len(window) - 1 - j) for j in range(len(window))]])

        def score(weights: torch.Tensor) -> float:
            with torch.no_grad():
                vec = model.user_tower(torch.tensor([u]), hist_t, history_weights=weights)[0].numpy()
            return float(vec @ emb[item])

        full = score(w)
        assert e["score"] == pytest.approx(full, abs=1e-5)
        assert e["empty_history_score"] == pytest.approx(score(torch.zeros_like(w)), abs=1e-5)
        # the ranks: the top recommendation is first in the user's list; without the history, its place among the
        # same unseen items scored from the empty-history vector
        assert e["rank"] == 1
        with torch.no_grad():
            empty = model.user_tower(torch.tensor([u]), hist_t, history_weights=torch.zeros_like(w))[0].numpy()
        unseen = np.setdiff1d(np.arange(run.n_items), [i for _, i in hist])
        by_empty = emb @ empty  # every item's score in one product, the item's own among them
        assert e["empty_history_rank"] == 1 + int((by_empty[unseen] > by_empty[item]).sum())
        items_all = [int(i) for _, i in hist]
        for h in e["history"]:
            # leave-one-out is the item deleted from the history: the older items move up one step (and one from
            # before the window moves in), re-read with their new recency weights
            at = len(items_all) - 1 - h["age"]
            win = (items_all[:at] + items_all[at + 1:])[-L:]
            pads = [model.pad_item] * (L - len(win))
            w_del = torch.tensor([[0.0] * len(pads) + [decay ** (len(win) - 1 - j) for j in range(len(win))]])
            with torch.no_grad():
                vec = model.user_tower(torch.tensor([u]), torch.tensor([pads + win]), history_weights=w_del)[0].numpy()
            assert h["contribution"] == pytest.approx(full - float(vec @ emb[item]), abs=1e-5)

        # shared metadata: window items sharing a genre with the item, counted here
        genres = set(items.loc[e["item_id"], "genres"].split("|"))
        for g in e["shared_metadata"].get("genres", []):
            assert g["value"] in genres
            assert g["count"] == sum(g["value"] in items.loc[run.item_vocab.id_at(i), "genres"].split("|")
                                     for i in window)
        # the sentence names no title outside the history entries and the item
        named = {t for t in items.title if t in e["text"]}
        assert named <= {h["title"] for h in e["history"]} | {e["item"]["title"]}
