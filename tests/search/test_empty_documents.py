"""One empty document does not refuse a collection (issue 13, item 15): it is indexed, counted and named once."""
from __future__ import annotations

import logging

import pytest
from search_data import DOCS, write_beir

from twotower.errors import DataError
from twotower.search.beir import load_corpus

from tests.extras import needs_text


def test_empty_documents_are_kept_with_one_warning(tmp_path, caplog):
    docs = [*DOCS, {"_id": "e1", "title": "", "text": ""}, {"_id": "e2", "text": "   "}]
    root = write_beir(tmp_path / "beir", docs=docs)
    with caplog.at_level(logging.WARNING):
        corpus = load_corpus(root / "corpus.jsonl")
    assert len(corpus.ids) == 7 and "e1" in corpus.ids and "e2" in corpus.ids
    warnings = [r for r in caplog.records if "empty title and text" in r.getMessage()]
    assert len(warnings) == 1 and "2 of 7" in warnings[0].getMessage() and "'e1', 'e2'" in warnings[0].getMessage()
    # it said they "can only rank last", but the dense encoder embeds an empty text like any other (an empty
    # passage came 3rd of 304 for a short query in a hybrid search)
    assert "dense and hybrid search may still return them" in warnings[0].getMessage()


@needs_text
def test_bm25_ranks_a_collection_with_an_empty_document(tmp_path):
    from twotower.search.bm25 import BM25Retriever

    docs = [*DOCS, {"_id": "e1", "title": "", "text": ""}]
    corpus = load_corpus(write_beir(tmp_path / "beir", docs=docs) / "corpus.jsonl")
    texts = [f"{t} {x}".strip() for t, x in zip(corpus.titles, corpus.texts)]
    bm25 = BM25Retriever().fit(texts, corpus.ids)
    res = bm25.search(["aspirin heart attack"], 3)
    assert res.ids[0, 0] == corpus.row_of["d1"]


def test_malformed_rows_and_all_empty_collections_are_still_refused(tmp_path):
    root = write_beir(tmp_path / "beir", docs=[{"_id": "e1", "title": "", "text": ""}])
    with pytest.raises(DataError, match="the only document has an empty title and text"):  # was "all 1 documents"
        load_corpus(root / "corpus.jsonl")
    root = write_beir(tmp_path / "beir2", docs=[*DOCS, {"_id": "d1", "text": "dup"}])
    with pytest.raises(DataError, match="duplicate document id"):
        load_corpus(root / "corpus.jsonl")


def test_one_empty_document_is_worded_in_the_singular(tmp_path, caplog):
    """"1 of 6 documents have an empty title and text (...); they are indexed as empty documents"."""
    root = write_beir(tmp_path / "beir", docs=[*DOCS, {"_id": "e1", "title": "", "text": ""}])
    with caplog.at_level(logging.WARNING):
        load_corpus(root / "corpus.jsonl")
    assert ("1 of 6 documents has an empty title and text ('e1'); it is indexed as an empty document: BM25 never "
            "matches it, dense and hybrid search may still return it") in caplog.text
