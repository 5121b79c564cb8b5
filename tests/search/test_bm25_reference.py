"""BM25 scores and rankings against a plain-Python Lucene BM25 written from the formula.

Lucene's BM25 (Kamphuis et al., ECIR 2020, the ``method="lucene"`` variant)::

    idf(t)      = ln(1 + (N - df_t + 0.5) / (df_t + 0.5))
    score(q, d) = sum over query tokens t of  idf(t) * tf_td / (tf_td + k1 * (1 - b + b * |d| / avgdl))

Only the tokenizer is shared with the retriever (its stopwords and stemming); every count is made here.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from twotower.results import PAD_ID
from twotower.search.bm25 import BM25Config, BM25Retriever

from tests.extras import needs_text

pytestmark = needs_text

WORDS = ["apple", "banana", "cherry", "date", "grape", "kiwi", "lemon", "mango", "olive", "peach"]


def reference_scores(doc_tokens: list[list[str]], query: list[str], k1: float, b: float) -> list[float]:
    n = len(doc_tokens)
    avgdl = sum(len(d) for d in doc_tokens) / n
    df = Counter(t for d in doc_tokens for t in set(d))
    out = []
    for d in doc_tokens:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return out


def reference_ranking(scores: list[float], k: int) -> list[int]:
    """Documents sharing a term with the query (score > 0), best first, ties to the smaller row; -1 padded."""
    rows = sorted((r for r, s in enumerate(scores) if s > 0), key=lambda r: (-scores[r], r))[:k]
    return rows + [PAD_ID] * (min(k, len(scores)) - len(rows))


def random_corpus(seed: int, n_docs: int = 30) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    docs = [" ".join(rng.choice(WORDS, size=rng.integers(1, 9))) for _ in range(n_docs)]
    queries = [" ".join(rng.choice(WORDS, size=rng.integers(1, 4), replace=False)) for _ in range(12)]
    return docs, queries


@pytest.mark.parametrize(("seed", "k1", "b"), [(0, 1.2, 0.75), (1, 0.9, 0.4), (2, 2.0, 1.0), (3, 1.2, 0.0)])
def test_scores_and_rankings_equal_the_formula(seed: int, k1: float, b: float) -> None:
    docs, queries = random_corpus(seed)
    r = BM25Retriever(BM25Config(k1=k1, b=b, stemmer=None)).fit(docs, [f"d{i}" for i in range(len(docs))])
    doc_tokens = r._tokenize(docs)
    res = r.search(queries, k=10)
    for q, (query, tokens) in enumerate(zip(queries, r._tokenize(queries))):
        want = reference_scores(doc_tokens, tokens, k1, b)
        got = r.score([query], [np.arange(len(docs))])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        # the ranking is checked on the float32 scores the retriever returns (the formula's float64 values can
        # split a tie that float32 keeps); those scores are the formula's, as just checked
        assert res.ids[q].tolist() == reference_ranking(got.tolist(), 10), query
        shown = res.ids[q] != PAD_ID
        np.testing.assert_allclose(res.scores[q][shown], np.asarray(want)[res.ids[q][shown]], rtol=1e-5)


def test_tied_documents_go_to_the_smaller_row_whatever_k() -> None:
    """Identical documents tie; the list at every k is the head of a longer one, smaller rows first.

    bm25s' top-k picked any of the tied documents (the top 1 of "apple" was row 5, its top 2 rows 2 and 5),
    so Recall@1 and Recall@10 of one query were read off different rankings.
    """
    docs = ["apple banana", "cherry date", "apple banana", "apple banana", "grape", "apple banana",
            "kiwi lemon apple banana"]
    r = BM25Retriever(BM25Config(stemmer=None)).fit(docs, [str(i) for i in range(len(docs))])
    full = r.search(["apple"], k=len(docs)).ids[0].tolist()
    assert full == [0, 2, 3, 5, 6, PAD_ID, PAD_ID]
    for k in range(1, len(docs) + 1):
        assert r.search(["apple"], k=k).ids[0].tolist() == full[:k], k
