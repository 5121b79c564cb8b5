"""BM25Config refuses a stop-word list or stemmer that bm25s / PyStemmer do not know, when it is built."""

from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.search.bm25 import STOPWORDS, BM25Config, BM25Retriever


def test_an_unknown_stemmer_is_refused_naming_the_field_and_the_choices():
    pytest.importorskip("Stemmer")
    # was accepted, then a KeyError "Stemming algorithm 'klingon' not found" at the first fit
    with pytest.raises(ConfigError, match=r"^BM25Config\.stemmer: must be one of .*english.*or None \(no stemming\), got 'klingon'$"):
        BM25Config(stemmer="klingon")


@pytest.mark.parametrize("value", ["xx", "English", ""])
def test_an_unknown_stopwords_value_is_refused_naming_the_field_and_the_choices(value):
    # was accepted, then bm25s' ValueError "xx not recognized ..." at the first fit
    with pytest.raises(ConfigError, match=r"^BM25Config\.stopwords: must be one of en, english, .* or None \(keep every word\), got '"):
        BM25Config(stopwords=value)


def test_every_value_listed_is_one_bm25s_and_pystemmer_accept():
    import Stemmer
    from bm25s.tokenization import _infer_stopwords

    for name in STOPWORDS:
        assert len(_infer_stopwords(name)) > 0
        BM25Config(stopwords=name)
    for language in ("english", "german", "porter"):
        assert language in Stemmer.algorithms()
        BM25Config(stemmer=language)
    BM25Config(stopwords=None, stemmer=None)


def test_a_stemmer_other_than_english_still_indexes():
    r = BM25Retriever(BM25Config(stopwords="de", stemmer="german")).fit(["Die Häuser sind groß", "Ein Hund"], ["a", "b"])
    assert r.search(["Haus"], 1).ids[0, 0] == 0
