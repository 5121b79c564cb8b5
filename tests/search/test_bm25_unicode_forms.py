"""BM25 matches a word whatever Unicode form it is written in.

`POST /search {"query": "Café au lait", "mode": "bm25"}` found the document about café au lait, the same query in
decomposed form ("Cafe" + U+0301 COMBINING ACUTE ACCENT, as macOS file names and some keyboards write it) did not:
the tokenizer cut "cafe\u0301" to "cafe", a word no document had. The dense side (MiniLM's tokenizer normalises
text) found it both ways, so a hybrid list changed with the bytes of a query that reads the same.
"""
from __future__ import annotations

import unicodedata

import numpy as np

from twotower.results import PAD_ID
from twotower.search.bm25 import BM25Retriever

from tests.extras import needs_text

pytestmark = needs_text

DOCS = ["Café au lait naïve drinkers sleep less", "Tea drinkers and sleep quality", "Coffee and the liver"]
IDS = ["cafe", "tea", "coffee"]


def _hits(retriever: BM25Retriever, query: str) -> tuple[list[int], np.ndarray]:
    res = retriever.search([query], k=3)
    ids, scores = res.row(0)
    return [int(i) for i in ids if i != PAD_ID], scores


def test_a_decomposed_query_finds_what_the_composed_one_finds():
    r = BM25Retriever().fit(DOCS, IDS)
    composed = "café naïve"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    ids_c, scores_c = _hits(r, composed)
    ids_d, scores_d = _hits(r, decomposed)
    assert ids_c == [0]
    assert ids_d == ids_c
    np.testing.assert_array_equal(scores_d, scores_c)


def test_a_decomposed_corpus_is_found_by_a_composed_query():
    r = BM25Retriever().fit([unicodedata.normalize("NFD", d) for d in DOCS], IDS)
    assert _hits(r, "café naïve")[0] == [0]
