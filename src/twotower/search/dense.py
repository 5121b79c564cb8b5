"""Dense retrieval: encode the corpus once (cached), search a vector index.

A two-tower text model may use one encoder for both sides or separate query
and document encoders (``doc_encoder``); scores are inner products of
L2-normalised embeddings (cosine).
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from twotower.config import SearchConfig
from twotower.errors import ConfigError
from twotower.results import Results
from twotower.text.cache import cached_encode
from twotower.text.encoder import TextEncoder, check_max_length, log_truncation

__all__ = ["DenseRetriever"]


class DenseRetriever:
    """``fit(doc_texts)`` encodes and indexes the corpus; ``search(queries, k) -> Results``.

    ``index`` is any :class:`twotower.index.VectorIndex` (default
    :class:`~twotower.index.exact.ExactIndex`); its ids are corpus rows
    ``0..n-1``. ``cache_dir`` keeps corpus embeddings between runs (keyed by the
    document encoder's ``model_id``); queries are not cached.
    """

    def __init__(
        self,
        encoder: TextEncoder,
        index: "object | None" = None,
        *,
        doc_encoder: TextEncoder | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_length: int = SearchConfig.max_length,
        query_max_length: int = SearchConfig.query_max_length,
        batch_size: int = 32,
        show_progress: bool = True,
    ) -> None:
        if index is None:
            from twotower.index.exact import ExactIndex  # noqa: PLC0415

            index = ExactIndex()
        self.encoder = encoder
        self.doc_encoder = doc_encoder or encoder
        self.index = index
        self.cache_dir = cache_dir
        self.max_length = int(max_length)
        for name, length in (("max_length", max_length), ("query_max_length", query_max_length)):
            if int(length) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {length}")
        check_max_length(self.doc_encoder, self.max_length)  # now, not after the corpus is tokenized
        self.query_max_length = int(query_max_length)
        # the query tower too: `search index --query-max-length 600` wrote an index whose every dense or hybrid
        # query (`search query`, POST /search) then failed on MiniLM's 512 positions
        check_max_length(self.encoder, self.query_max_length, "query_max_length")
        self.batch_size = int(batch_size)
        self.show_progress = show_progress
        self.doc_embeddings: np.ndarray | None = None  # [N, D]
        #: text_encoder.truncation_report of the corpus ``fit`` read (how many passages were cut at ``max_length``)
        self.truncation: dict[str, int] | None = None

    def fit(self, doc_texts: Sequence[str]) -> "DenseRetriever":
        """Encode (or read from the cache) and index ``doc_texts``; logs once how many were cut at ``max_length``."""
        self.truncation = log_truncation(self.doc_encoder, doc_texts, self.max_length, cache_dir=self.cache_dir)
        emb = cached_encode(self.doc_encoder, doc_texts, self.cache_dir, max_length=self.max_length,
                            batch_size=self.batch_size, show_progress=self.show_progress)  # [N, D]
        return self.fit_embeddings(emb)

    def fit_embeddings(self, doc_embeddings: np.ndarray) -> "DenseRetriever":
        """Index precomputed corpus embeddings ``[N, D]`` (rows = corpus rows)."""
        self.doc_embeddings = np.ascontiguousarray(doc_embeddings, dtype=np.float32)
        self.index.build(self.doc_embeddings, np.arange(len(self.doc_embeddings), dtype=np.int64))
        return self

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        """``[Q, D]`` L2-normalised query embeddings from the query tower, read at ``query_max_length``."""
        from twotower.search.checks import check_query_texts  # noqa: PLC0415

        return self.encoder.encode(check_query_texts(queries), batch_size=64, max_length=self.query_max_length,
                                   show_progress=False)  # [Q, D]

    def search(self, queries: Sequence[str], k: int) -> Results:
        """Top-``k`` corpus rows per query by cosine score (``Results`` of ``[Q, k]``; -1 pads past the corpus)."""
        if self.doc_embeddings is None:
            raise ConfigError("DenseRetriever.search called before fit()")
        return self.search_embeddings(self.encode_queries(queries), k)

    def search_embeddings(self, query_embeddings: np.ndarray, k: int) -> Results:
        """As :meth:`search`, for query embeddings ``[Q, D]`` already encoded."""
        return self.index.search(query_embeddings, k)

    def score(self, queries: Sequence[str], rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Cosine scores of the doc rows ``rows[q]`` for each query ``q``."""
        if self.doc_embeddings is None:
            raise ConfigError("DenseRetriever.score called before fit()")
        q = self.encode_queries(queries)  # [Q, D]
        return [self.doc_embeddings[np.asarray(r, dtype=np.int64)] @ q[i] for i, r in enumerate(rows)]
