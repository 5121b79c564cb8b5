"""Lexical retrieval with the ``bm25s`` package (sparse BM25, no pickles).

Saved layout of ``path/``: ``bm25s/`` (bm25s' own npy + JSON format) and
``meta.json`` (doc ids, tokenizer settings, parameters).
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from twotower.errors import ConfigError, DataError, IntegrityError
from twotower.results import PAD_ID, Results
from twotower.search.artefacts import is_bm25_index, out_check
from twotower.utils.atomic import atomic_dir, atomic_write_json, read_json
from twotower.utils.extras import require
from twotower.utils.folder_lock import writes_folder

__all__ = ["BM25Config", "BM25Retriever"]

logger = logging.getLogger(__name__)

_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")

#: the token pattern of an index saved before BM25Config.token_pattern existed (bm25s' default): words of 2 or more
#: letters or digits. Such an index records no pattern and is queried with this one, so its scores stay as they were.
LEGACY_TOKEN_PATTERN = r"(?u)\b\w\w+\b"

#: the stop-word list names bm25s.tokenize reads (its _infer_stopwords); any other string was a ValueError at the
#: first fit or search, long after the config was accepted
STOPWORDS = (
    "en",
    "english",
    "en_plus",
    "english_plus",
    "de",
    "german",
    "nl",
    "dutch",
    "fr",
    "french",
    "es",
    "spanish",
    "pt",
    "portuguese",
    "it",
    "italian",
    "ru",
    "russian",
    "sv",
    "swedish",
    "no",
    "norwegian",
    "zh",
    "chinese",
    "tr",
    "turkish",
    "ko",
    "korean",
    "da",
    "danish",
)


def stemmer_languages() -> tuple[str, ...] | None:
    """The Snowball stemmers PyStemmer offers (``Stemmer.algorithms()``), or None when it is not installed (then
    a stemmer is refused when BM25 first tokenizes, naming the extra to install)."""
    try:
        import Stemmer  # noqa: PLC0415 - a small C extension, in the text extras
    except ImportError:
        return None
    return tuple(Stemmer.algorithms())


@dataclass(frozen=True, kw_only=True)
class BM25Config:
    k1: float = 1.2  # Anserini / Pyserini default for BEIR
    b: float = 0.75
    method: str = "lucene"
    stopwords: str | None = "en"
    stemmer: str | None = "english"  # Snowball stemming (PyStemmer, in the text extras); None turns it off
    #: the words BM25 indexes and searches (Python ``re``, after lower-casing): every run of letters or digits, one
    #: letter included, as Lucene's StandardAnalyzer (Pyserini's BEIR baselines) keeps them. bm25s' own default,
    #: LEGACY_TOKEN_PATTERN, dropped them: "vitamin D" searched "vitamin" alone, "type 2 diabetes" lost its "2"
    #: (SciFact test NDCG@10 0.6791 -> 0.6857)
    token_pattern: str = r"(?u)\b\w+\b"

    def __post_init__(self) -> None:
        from twotower.config import _check, _check_types, _choice  # noqa: PLC0415 - the checks of every config dataclass

        # named as the other configs name their settings ("train.lr: must be > 0"), with the class a Python caller
        # built, as MiningConfig: "k1 must be a finite number >= 0" read unlike every other refusal. `search index`,
        # `search evaluate`, `search train` and `rerank train` replace token_pattern by --token-pattern
        # k1="a" was a TypeError from "<"; a NaN or infinite k1 (refused here, as any setting's) scored every document
        # NaN, and every list came back empty
        _check_types(self, "BM25Config.")
        _check(self.k1 >= 0, "BM25Config.k1", f"must be >= 0, got {self.k1}")
        _check(0.0 <= self.b <= 1.0, "BM25Config.b", f"must be in [0, 1], got {self.b}")
        _choice(self.method, "BM25Config.method", _METHODS)
        # checked here, not at the first fit: stemmer="klingon" was a KeyError from PyStemmer there
        _check(self.stopwords is None or self.stopwords in STOPWORDS, "BM25Config.stopwords",
               f"must be one of {', '.join(STOPWORDS)} or None (keep every word), got {self.stopwords!r}")
        _check_token_pattern(self.token_pattern, "BM25Config.token_pattern")
        languages = stemmer_languages() if self.stemmer is not None else None
        _check(languages is None or self.stemmer in languages, "BM25Config.stemmer",
               f"must be one of {', '.join(languages or ())} or None (no stemming), got {self.stemmer!r}")


def _check_token_pattern(pattern: str, name: str) -> None:
    """A pattern bm25s can split with: it compiles, finds no empty token and has no capturing group (``findall``
    would return the group, or tuples of groups, instead of the words); refused when the config is built, not at
    the first fit. ``name``: the setting, said first (``BM25Config.token_pattern: '(\\w+)' has a capturing group``)."""
    # as typed, without repr's doubled backslashes ('\\w*' read as another pattern than the \w* given)
    shown = f"'{pattern}'" if isinstance(pattern, str) and "'" not in pattern and pattern.isprintable() else repr(pattern)
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"{name}: {shown} is not a valid regular expression ({e})") from None
    if compiled.groups:
        raise ConfigError(f"{name}: {shown} has a capturing group, so bm25s would index the group instead of the "
                          "whole match; write groups as (?:...)")
    # \b\w*\b matches nothing in "" but an empty run at the end of every word: probed on a text with words too
    if compiled.fullmatch("") is not None or any(not m.group() for m in compiled.finditer("Vitamin D, type-2 ...")):
        raise ConfigError(f"{name}: {shown} matches the empty string, so every text would hold empty tokens; it "
                          "must match one character or more, e.g. (?u)\\b\\w+\\b")


def check_bm25_config(config: object) -> None:
    """``config`` is a BM25Config or None (the defaults): a dict or a pattern string given for it was refused only
    when BM25 first read ``config.k1``, after the corpus was read."""
    if config is not None and not isinstance(config, BM25Config):
        raise ConfigError(f"bm25 must be a BM25Config (e.g. BM25Config(token_pattern=...)) or None, got "
                          f"{type(config).__name__} {config!r:.200}")


def describe_tokens(pattern: str) -> str:
    """What a token pattern indexes, in words (for messages about a corpus with nothing to index)."""
    return {LEGACY_TOKEN_PATTERN: "words of 2 or more letters or digits",
            BM25Config.token_pattern: "words of letters or digits"}.get(pattern, f"tokens matching {pattern!r}")


def _stemmer(name: str | None):
    if name is None:
        return None
    Stemmer = require("Stemmer", f"BM25 with stemmer={name!r} (stemmer=None turns it off)")
    return Stemmer.Stemmer(name).stemWords


def _import_bm25s():
    """``import bm25s`` without its import-time ``setLevel(DEBUG)`` on the "bm25s" logger.

    bm25s forces its logger to DEBUG, which prints "Building index from tokens" at the CLI's
    default level; the level the application set before the import (or none) is put back.
    """
    import sys  # noqa: PLC0415

    if sys.modules.get("bm25s") is not None:  # None: an import that failed before (require says so again)
        return sys.modules["bm25s"]
    bm25s_logger = logging.getLogger("bm25s")
    before = bm25s_logger.level
    bm25s = require("bm25s", "BM25 search")
    bm25s_logger.setLevel(before)
    return bm25s


def _ids_and_vocab(tokens: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    """Each document's token ids and a vocabulary numbered in sorted token order.

    Given the token strings, bm25s numbers its vocabulary in the order of a Python ``set``, which follows
    the string hash seed of the process: two ``search index`` runs over the same corpus wrote different
    ``vocab.index.json`` and score matrices (the same scores, columns permuted). Sorted, the saved index is
    the same bytes every run.
    """
    vocab = {t: i for i, t in enumerate(sorted({t for doc in tokens for t in doc}))}
    return [[vocab[t] for t in doc] for doc in tokens], vocab


def _json_type(value: object) -> str:
    """What a JSON value is, in JSON's words (a list is an array, None is null)."""
    return {dict: "a JSON object", list: "a JSON array", str: "a JSON string", bool: "a JSON boolean",
            type(None): "null"}.get(type(value), "a JSON number")


def read_meta(path: Path) -> dict:
    """``path/meta.json`` of a saved BM25 index, its fields of the right JSON types; else an IntegrityError naming the
    file and the field. A ``config`` that was not an object (hand-edited, corrupted) was a bare TypeError ("'list'
    object is not a mapping") that named neither."""
    meta_path = path / "meta.json"
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or meta.get("kind") != "bm25":
        raise IntegrityError(f"{meta_path} is not a BM25 index")
    fix = "the file is corrupted or was edited; rebuild the index"
    for field, kind, want in (("config", dict, "a JSON object of BM25 settings (k1, b, ...)"),
                              ("doc_ids", list, "a JSON array of document ids")):
        if not isinstance(meta.get(field), kind):
            got = "nothing: the field is missing" if field not in meta else _json_type(meta[field])
            raise IntegrityError(f'{meta_path}: field "{field}" must be {want}, got {got}; {fix}')
    return meta


def _own_files(path: Path) -> frozenset[str]:
    """The files an earlier :meth:`BM25Retriever.save` wrote in ``path``: its meta.json and bm25s' own folder."""
    return frozenset({"meta.json", *(f.relative_to(path).as_posix() for f in (path / "bm25s").rglob("*"))})


class BM25Retriever:
    """``fit(doc_texts, doc_ids)`` then ``search(queries, k) -> Results`` (ids = doc rows)."""

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()
        self._bm25 = None
        self.doc_ids: list[str] = []

    def _tokenize(self, texts: Sequence[str], show_progress: bool = False):
        bm25s = _import_bm25s()

        # one Unicode form (NFC) for the corpus and the queries: "Cafe" + U+0301 was tokenized as "cafe", a word
        # no "Café" document holds, so a query typed in decomposed form (macOS, some keyboards) missed every match
        # the same words composed found (dense search, whose tokenizer normalises, found both). NFC leaves ASCII and
        # composed text as they are (SciFact's tokens are unchanged), unlike NFKC, which rewrites ligatures and "²"
        return bm25s.tokenize(
            [unicodedata.normalize("NFC", t) for t in texts],
            token_pattern=self.config.token_pattern,
            stopwords=self.config.stopwords,
            stemmer=_stemmer(self.config.stemmer),
            show_progress=show_progress,
            return_ids=False,
        )

    def fit(self, doc_texts: Sequence[str], doc_ids: Sequence[str]) -> "BM25Retriever":
        """Tokenize and index ``doc_texts`` (row ``i`` has id ``doc_ids[i]``); returns ``self``."""
        bm25s = _import_bm25s()

        if len(doc_texts) != len(doc_ids):
            raise DataError(f"{len(doc_texts)} texts but {len(doc_ids)} ids")
        if not doc_texts:
            raise DataError("cannot index an empty corpus")
        c = self.config
        tokens = self._tokenize(doc_texts)
        if not any(tokens):
            # bm25s.index fails on an empty vocabulary with "max() arg is an empty sequence", a traceback that names
            # neither the corpus nor what BM25 reads
            raise DataError(
                f"none of the {len(doc_texts)} documents has a word BM25 indexes ({describe_tokens(c.token_pattern)}"
                f"{', not stop words' if c.stopwords else ''}); BM25 and hybrid "
                "search cannot rank this corpus: use dense retrieval (--retriever dense)"
            )
        self._bm25 = bm25s.BM25(k1=c.k1, b=c.b, method=c.method)
        self._bm25.index(_ids_and_vocab(tokens), show_progress=False)
        self.doc_ids = [str(d) for d in doc_ids]
        logger.info("BM25 indexed %d documents (vocab %d; %s)", len(self.doc_ids), self._vocabulary(),
                    describe_tokens(c.token_pattern))
        return self

    @property
    def n_docs(self) -> int:
        """Documents indexed (0 before ``fit`` / ``load``)."""
        return len(self.doc_ids)

    def search(self, queries: Sequence[str], k: int, *, show_progress: bool = False) -> Results:
        """Top-``k`` doc rows per query, sorted by BM25 score; rows past the corpus are padded.

        Documents sharing no term with the query (score 0) are returned as padding.
        """
        if self._bm25 is None:
            raise ConfigError("BM25Retriever.search called before fit() or load()")
        from twotower.search.checks import check_depth, check_query_texts  # noqa: PLC0415

        queries = check_query_texts(queries)
        k = check_depth(k, "k", self.n_docs)
        kk = min(k, self.n_docs)
        vocab = self._bm25.vocab_dict
        tokens = [[t for t in q if t in vocab] for q in self._tokenize(queries)]
        ids = np.full((len(tokens), kk), PAD_ID, dtype=np.int64)  # [Q, kk]
        scores = np.full((len(tokens), kk), -np.inf, dtype=np.float32)
        # a query without a known term matches no document: its row stays all padding (bm25s needs >= 1
        # known token per query, so only the others are retrieved)
        # bm25s' retrieve() scores every document too, but its top-k keeps an arbitrary few of the documents tied
        # at the k-th score: the top 1 of a query was not the head of its top 10. Ties go to the smaller row, as in
        # every other ranking here (dense search, the recommender's top-k), so each list is a prefix of a longer one.
        known = [q for q, t in enumerate(tokens) if t]
        from twotower.text.encoder import EncoderSettings  # noqa: PLC0415 - the periodic-line interval, once
        from twotower.utils.progress import RateLog  # noqa: PLC0415

        # periodic log lines when asked, as text encoding and reranking give, never a third-party bar
        progress = RateLog(
            logger,
            "BM25 search",
            len(known),
            "queries",
            EncoderSettings.progress_seconds if show_progress else None,
            rate_unit="queries",
        )
        for done, q in enumerate(known, start=1):
            s = np.asarray(self._bm25.get_scores(tokens[q]), dtype=np.float32)  # [N]
            kth = np.partition(s, s.size - kk)[s.size - kk]  # the k-th largest score
            cand = np.flatnonzero((s >= kth) & (s > 0))  # every document at or above it: all ties at the cut kept
            top = cand[np.lexsort((cand, -s[cand]))[:kk]]  # by -score, then row
            ids[q, : top.size] = top
            scores[q, : top.size] = s[top]
            progress.update(done)
        return Results.from_scores_and_ids(scores, ids, k)

    def score(self, queries: Sequence[str], rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        """BM25 scores of the doc rows ``rows[q]`` for each query ``q`` (float32 arrays)."""
        if self._bm25 is None:
            raise ConfigError("BM25Retriever.score called before fit() or load()")
        from twotower.search.checks import check_query_texts  # noqa: PLC0415

        out = []
        for toks, r in zip(self._tokenize(check_query_texts(queries)), rows):
            toks = [t for t in toks if t in self._bm25.vocab_dict]
            r = np.asarray(r, dtype=np.int64)
            if not toks:
                out.append(np.zeros(r.size, dtype=np.float32))
                continue
            out.append(np.asarray(self._bm25.get_scores(toks), dtype=np.float32)[r])
        return out

    def settings(self) -> dict[str, object]:
        """What the index was built with and holds: the BM25Config fields (k1, b, method, stopwords, stemmer,
        token_pattern), ``documents`` and ``vocabulary`` (distinct terms indexed), as ``twotower search info`` shows
        them."""
        if self._bm25 is None:
            raise ConfigError("BM25Retriever.settings called before fit() or load()")
        return {**asdict(self.config), "documents": self.n_docs, "vocabulary": self._vocabulary()}

    def _vocabulary(self) -> int:
        """Distinct terms indexed: bm25s adds "" to the vocabulary it is given (its id for unknown tokens), not a term
        of the corpus. The build log counted it, one more than ``search info`` said of the same index."""
        vocab = self._bm25.vocab_dict
        return len(vocab) - ("" in vocab)

    @writes_folder("path", "BM25Retriever.save", check=out_check("BM25 index", is_bm25_index, own_files=_own_files))
    def save(self, path: str | os.PathLike[str], *, force: bool = False) -> None:
        """Write the index to the folder ``path`` (bm25s' npy + JSON files and ``meta.json``; no pickles), atomically.

        ``path`` is replaced whole: a non-empty folder that is not an earlier BM25 index is refused, before any
        work, and so is an earlier one holding files it did not write, unless ``force``, as ``SearchIndex.save``
        refuses them: unchecked, a folder of the user's files was swapped out for the index without a word."""
        if self._bm25 is None:
            raise ConfigError("nothing to save: call fit() first")
        with atomic_dir(path) as tmp:
            self.save_into(tmp)

    def save_into(self, folder: Path) -> None:
        """Write the index's files into ``folder``, a new folder inside an artefact whose writer checks and swaps in
        the whole (``SearchIndex.save``'s ``bm25/``): :meth:`save`'s check and lock would find, and leave a lock file
        in, that writer's temporary folder."""
        if self._bm25 is None:
            raise ConfigError("nothing to save: call fit() first")
        Path(folder).mkdir(parents=True, exist_ok=True)
        self._bm25.save(str(Path(folder) / "bm25s"), show_progress=False)
        atomic_write_json(
            Path(folder) / "meta.json",
            {"format": 1, "kind": "bm25", "config": asdict(self.config), "doc_ids": self.doc_ids},
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "BM25Retriever":
        """A retriever saved by :meth:`save`; a folder that is not one is a DataError or IntegrityError."""
        bm25s = _import_bm25s()

        path = Path(path)
        if not (path / "meta.json").is_file():
            raise DataError(f"no BM25 index at {path} (missing meta.json); build one with BM25Retriever.fit().save()")
        meta = read_meta(path)
        # an index saved before token_pattern was recorded was built with bm25s' default: queried with it, its scores
        # stay as they were (the current default would split "vitamin D" into a word the index never saw)
        config = {"token_pattern": LEGACY_TOKEN_PATTERN, **meta["config"]}
        if "token_pattern" not in meta["config"]:
            logger.warning("%s was saved before BM25 indexed one-letter words and single digits: it is searched as it "
                           "was built (\"vitamin D\" matches \"vitamin\" alone); rebuild it to index them", path)
        try:
            self = cls(BM25Config(**config))
        except (ConfigError, TypeError) as e:
            raise IntegrityError(f"{path}/meta.json: BM25 settings this version cannot use ({e})") from None
        try:
            self._bm25 = bm25s.BM25.load(str(path / "bm25s"), show_progress=False)
        except (OSError, ValueError) as e:
            raise IntegrityError(f"{path}/bm25s: unreadable BM25 index ({e})") from e
        self.doc_ids = list(meta["doc_ids"])
        if self._bm25.scores["num_docs"] != len(self.doc_ids):
            raise IntegrityError(f"{path}: index has {self._bm25.scores['num_docs']} docs, meta.json {len(self.doc_ids)}")
        return self
