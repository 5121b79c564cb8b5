"""Per-row id lookups never copy the whole id list.

``Vocabulary.ids`` returns a copy, so ``ids[row]`` per record is O(I) each: the first explanation over
Book-Crossing's 331k items (one record per item for the metadata column roles) ran for over ten minutes,
and ``recommend --users all`` wrote its frame the same way.
"""
from __future__ import annotations

import numpy as np
import pytest

from twotower.data.vocab import Vocabulary
from twotower.errors import NotFoundError
from twotower.explain import explainer
from twotower.pipeline.recommend import recommend_users, results_to_frame, results_to_items


@pytest.fixture()
def no_id_list_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    def copy_refused(self: Vocabulary) -> list[str]:
        raise AssertionError("Vocabulary.ids copied the whole id list for one lookup")

    monkeypatch.setattr(Vocabulary, "ids", property(copy_refused))


def test_vocabulary_id_at_reads_one_row() -> None:
    vocab = Vocabulary(["b", "a", "007"], kind="item")
    assert [vocab.id_at(r) for r in range(3)] == ["b", "a", "007"]
    assert vocab.id_at(np.int64(2)) == "007"
    with pytest.raises(NotFoundError, match="item row"):
        vocab.id_at(3)
    with pytest.raises(NotFoundError, match="item row"):
        vocab.id_at(-1)


def test_records_lists_and_explanations_look_ids_up_row_by_row(mean_run, no_id_list_copies) -> None:
    run = mean_run
    explainer._COLUMNS.pop(run, None)  # the column roles read every item's record: recompute them here
    records = [run.item_record(r) for r in range(run.n_items)]
    assert [rec["item_id"] for rec in records] == list(run.item_vocab)
    explainer.run_metadata_columns(run)
    rows = np.arange(len(run.user_vocab))
    res = recommend_users(run, rows, 3, None)
    frame = results_to_frame(run, rows, res)
    assert frame["user_id"].tolist()[:3] == [run.user_vocab.decode([0])[0]] * 3
    assert results_to_items(run, res, 0)[0]["item_id"] == run.item_vocab.decode([int(res.ids[0, 0])])[0]
    out = explainer.explain_recommendation(run, user_row=0, item_row=int(res.ids[0, 0]))
    assert out["user_id"] == run.user_vocab.decode([0])[0]
