from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError, DataError
from twotower.results import PAD_ID
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config, BM25Retriever

from search_data import DOCS

from tests.extras import needs_text

pytestmark = needs_text

TEXTS = [d["title"] + " " + d["text"] for d in DOCS]
IDS = [d["_id"] for d in DOCS]


def test_search_finds_the_matching_document_and_pads():
    r = BM25Retriever().fit(TEXTS, IDS)
    res = r.search(["liver cancer coffee", "insulin"], k=10)
    assert res.shape == (2, 10)
    assert res.ids[0, 0] == 3 and res.ids[1, 0] == 4
    assert res.ids[1, 1] == PAD_ID  # no other document mentions insulin
    assert np.all(np.diff(res.scores[0][res.ids[0] != PAD_ID]) <= 0)


def test_save_load_roundtrip(tmp_path):
    r = BM25Retriever(BM25Config(k1=1.5)).fit(TEXTS, IDS)
    r.save(tmp_path / "bm25")
    r2 = BM25Retriever.load(tmp_path / "bm25")
    assert r2.doc_ids == IDS and r2.config.k1 == 1.5
    a, b = r.search(["aspirin heart"], 3), r2.search(["aspirin heart"], 3)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.scores, b.scores)
    assert not list((tmp_path / "bm25").rglob("*.pkl"))



def test_save_refuses_a_folder_of_other_files_and_keeps_them(tmp_path):
    # the folder is swapped in whole: a folder of the user's files was replaced by the index, its files gone
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    r = BM25Retriever().fit(TEXTS, IDS)
    with pytest.raises(ConfigError, match=r"^path .*mine: a non-empty folder that is not a BM25 index"):
        r.save(mine)
    assert (mine / "notes.txt").read_text() == "mine" and not (mine / "meta.json").exists()


def test_save_replaces_an_earlier_index_and_refuses_one_holding_other_files_unless_forced(tmp_path):
    r = BM25Retriever().fit(TEXTS, IDS)
    r.save(tmp_path / "bm25")
    r.save(tmp_path / "bm25")  # an earlier BM25 index of its own files: replaced
    (tmp_path / "bm25" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"notes\.txt.*force=True"):
        r.save(tmp_path / "bm25")
    r.save(tmp_path / "bm25", force=True)
    assert not (tmp_path / "bm25" / "notes.txt").exists()
    assert BM25Retriever.load(tmp_path / "bm25").doc_ids == IDS

def test_score_matches_search_and_errors():
    r = BM25Retriever().fit(TEXTS, IDS)
    res = r.search(["risk of heart attack"], 3)
    ids, scores = res.row(0)
    assert ids.size >= 2
    np.testing.assert_allclose(r.score(["risk of heart attack"], [ids])[0], scores, rtol=1e-5)
    with pytest.raises(ConfigError, match="before fit"):
        BM25Retriever().search(["x"], 1)
    with pytest.raises(DataError, match="no BM25 index"):
        BM25Retriever.load("/nonexistent/bm25")
    with pytest.raises(ConfigError, match="method"):
        BM25Config(method="bm99")


def test_indexing_prints_no_bm25s_debug_line_at_the_info_level():
    """bm25s sets its logger to DEBUG when imported; at the CLI's INFO level nothing of it shows."""
    import subprocess
    import sys

    code = ("import logging; logging.basicConfig(level=logging.INFO)\n"
            "from twotower.search.bm25 import BM25Retriever\n"
            "BM25Retriever().fit(['coffee and liver cancer', 'insulin'], ['a', 'b'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "INFO:twotower.search.bm25" in out.stderr  # our own line shows: the capture works
    assert "DEBUG" not in out.stderr


def test_a_query_with_no_known_term_has_no_hits():
    """It used to be searched as the vocabulary's first token and got a made-up, high-scoring hit."""
    r = BM25Retriever().fit(TEXTS, IDS)
    res = r.search(["zyxxy quorble", "insulin", "the of and"], k=3)  # unknown words; a known one; stopwords only
    assert res.shape == (3, 3)
    assert (res.ids[0] == PAD_ID).all() and np.isneginf(res.scores[0]).all()
    assert res.ids[1, 0] == 4  # the other queries of the batch are unaffected
    assert (res.ids[2] == PAD_ID).all()
    assert r.search(["zyxxy"], k=2).row(0)[0].size == 0


def test_hybrid_fusion_and_metrics_of_an_all_padding_bm25_row():
    from twotower.results import Results
    from twotower.search.evaluate import evaluate_retriever
    from twotower.search.fusion import rrf, score_interpolation

    bm25 = BM25Retriever().fit(TEXTS, IDS).search(["zyxxy"], k=100)
    dense = Results.from_scores_and_ids(np.array([[0.9, 0.5]]), np.array([[2, 0]]), 100)
    for fused in (rrf([bm25, dense], top_k=100), score_interpolation([bm25, dense], [0.5, 0.5], top_k=100)):
        assert list(fused.row(0)[0]) == [2, 0]  # the dense list alone decides
    m = evaluate_retriever(bm25, [np.array([1])])
    assert m == {"NDCG@10": 0.0, "Recall@10": 0.0, "Recall@100": 0.0, "MRR@10": 0.0}


def test_a_corpus_without_any_indexable_word_is_refused_with_what_bm25_reads():
    # stop words and punctuation only: bm25s.index died with "max() arg is an empty sequence"
    with pytest.raises(DataError, match=r"none of the 3 documents has a word BM25 indexes \(words of letters or "
                                        r"digits, not stop words\).*--retriever dense"):
        BM25Retriever().fit(["a the", "of -- , the", ""], ["d1", "d2", "d3"])
    # with the pattern of older indexes, single letters and digits are not words either
    legacy = BM25Config(token_pattern=LEGACY_TOKEN_PATTERN)
    with pytest.raises(DataError, match=r"\(words of 2 or more letters or digits, not stop words\)"):
        BM25Retriever(legacy).fit(["a b", "x 1 the", ""], ["d1", "d2", "d3"])
    # one indexable word anywhere is enough: the other documents are indexed as empty
    res = BM25Retriever().fit(["a the", "of -- , the", "aspirin"], ["d1", "d2", "d3"]).search(["aspirin"], 3)
    assert res.ids[0].tolist() == [2, -1, -1]
