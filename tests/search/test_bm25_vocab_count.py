"""The build log's "BM25 indexed N documents (vocab V ...)" counted the empty term bm25s adds to every vocabulary (its
id for unknown tokens): on a 5-document corpus it said 26 where `search info` said 25 of the same index."""
from __future__ import annotations

import pytest

from twotower.search.bm25 import BM25Config, BM25Retriever

pytest.importorskip("bm25s")

DOCS = ["aspirin heart attack", "vitamin d bone", "coffee liver", "sleep obesity children", "heart bone liver"]


def test_the_build_log_and_settings_count_the_same_distinct_terms(caplog):
    with caplog.at_level("INFO", logger="twotower.search.bm25"):
        bm25 = BM25Retriever(BM25Config(stopwords=None, stemmer=None)).fit(DOCS, [f"d{i}" for i in range(5)])
    terms = {w for d in DOCS for w in d.split()}
    assert bm25.settings()["vocabulary"] == len(terms) == 11
    assert f"BM25 indexed 5 documents (vocab {len(terms)};" in caplog.text
