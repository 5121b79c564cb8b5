"""A dual-head cold item whose text is empty (no title, no description): its semantic head read the empty string,
a vector every such item shares. `explain` said its score rested on "its text (N% of the score, through the
semantic head)" and `similar` queried it by that shared vector (MovieLens-100K with "Time Tracers (1995)"'s
title blanked: Drama films for an Action|Adventure|Sci-Fi item). Now the sentence says it has no text and cites
its features, and `similar` queries it by its served vector, which reads them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tests.explain.test_cold_explain import COLD, _dual_cold
from twotower.explain import explain_by_id
from twotower.index.exact import ExactIndex
from twotower.models.feature_block import FeatureArrays
from twotower.pipeline.similar import cold_item_mask, similar_items


def _blank_title(run, monkeypatch, item_id):
    meta = run.item_meta.copy()
    meta.loc[run.item_vocab.index(item_id), "title"] = np.nan
    monkeypatch.setattr(run, "item_meta", meta)


def test_a_cold_item_without_text_is_explained_and_searched_by_its_features(mean_run, monkeypatch) -> None:
    from dataclasses import replace

    numeric = np.random.default_rng(1).normal(size=(mean_run.n_items, 2)).astype(np.float32)
    run = _dual_cold(mean_run, monkeypatch, [COLD, "i7"],
                     item_features=replace(FeatureArrays.empty(mean_run.n_items), numeric=numeric))
    assert isinstance(run.item_meta, pd.DataFrame) and "title" in run.item_meta.columns
    _blank_title(run, monkeypatch, COLD)
    e = explain_by_id(run, user_id="u2", item_id=COLD)
    assert e["cold"] is True
    assert "its text" not in e["text"]
    assert "(a cold item) and no text, so its score rests on its features (through the collaborative head)" in e["text"]
    # and on the vector the semantic head gives every item without text, whose share is said (it was left out)
    both = e["heads"]["semantic"] > 0 and e["heads"]["collaborative"] > 0  # a share is said only then
    assert ("and the semantic head's vector for items without text (" in e["text"]) == both, e["text"]
    # a warm item without text: its share was "from the item's text (semantic head)"
    warm = next(i for i in ("i0", "i1", "i2", "i3") if i not in (COLD, "i7"))
    _blank_title(run, monkeypatch, warm)
    w = explain_by_id(run, user_id="u2", item_id=warm)
    assert w["cold"] is False and "heads" in w
    assert "from the item's text" not in w["text"], w["text"]
    both = w["heads"]["semantic"] > 0 and w["heads"]["collaborative"] > 0
    said = "% of the score comes from the semantic head's vector for items without text (this one has none)"
    assert (said in w["text"]) == both, w["text"]
    other = explain_by_id(run, user_id="u2", item_id="i7")  # a cold item with its title keeps the text clause
    assert "its text (" in other["text"] or "rests on its text" in other["text"]

    cold = cold_item_mask(run)
    rows = np.array([run.item_vocab.index(COLD), run.item_vocab.index("i7")])
    assert cold is not None and not cold[rows[0]] and cold[rows[1]]
    vectors = run.item_embeddings()
    _, spaces = similar_items(run, rows, 3, ExactIndex.over(vectors, np.arange(len(vectors))), vectors=vectors)
    assert spaces == ["item", "semantic"]
