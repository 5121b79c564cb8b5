"""Retrieval metrics for BEIR-style qrels, and the one-call ``search_evaluate``.

Protocol: a document is relevant when its qrels score is > 0, queries averaged uniformly over the judged
queries with at least one relevant document (a query judged only 0 or below has no defined recall: it is skipped,
counted in ``skipped`` and said in a note, where pytrec_eval would average it in as 0); NDCG's gain is the score itself (trec_eval's ``ndcg_cut``,
which BEIR reports), so graded qrels (0/1/2) are measured as BEIR measures them. Metrics come from
:mod:`twotower.evaluation.metrics`.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Sequence

import numpy as np

from twotower.config import SearchConfig
from twotower.errors import ConfigError, DataError
from twotower.results import PAD_ID, Results
from twotower.search.beir import Corpus, relevant_rows, with_unknown_rows
from twotower.text.encoder import EncoderSettings
from twotower.utils.runtime import keeps_caller_state

if TYPE_CHECKING:
    from twotower.search.bm25 import BM25Config
    from twotower.search.fusion import FusionChoice

__all__ = ["METRIC_KEYS", "RETRIEVERS", "evaluate_retriever", "search_evaluate"]

logger = logging.getLogger(__name__)

#: Keys of every metrics dict this module returns, in table order.
METRIC_KEYS = ("NDCG@10", "Recall@10", "Recall@100", "MRR@10")
RETRIEVERS = ("bm25", "dense", "hybrid")


def evaluate_retriever(
    results: Results,
    qrels: Mapping[str, Mapping[str, int]] | Sequence[np.ndarray],
    *,
    query_ids: Sequence[str] | None = None,
    corpus: Corpus | None = None,
) -> dict[str, float]:
    """Mean NDCG@10, Recall@10, Recall@100 and MRR@10 of ``results`` (ids = corpus rows).

    ``qrels`` is either ``{query id: {doc id: relevance}}`` (then ``query_ids``
    — the order of the rows of ``results`` — and ``corpus`` are required) or
    already a list of relevant corpus-row arrays, one per row of ``results``.
    ``results`` needs at least 100 columns (Recall@100).
    """
    from twotower.evaluation.metrics import graded_ndcg_at_k, mrr_at_k, ndcg_at_k, recall_at_k  # noqa: PLC0415

    grades = None
    if isinstance(qrels, Mapping):
        if query_ids is None or corpus is None:
            raise ConfigError("evaluate_retriever with a qrels dict needs query_ids= (row order) and corpus=")
        relevant = relevant_rows(list(query_ids), dict(qrels), corpus)
        if any(r > 1 for q in query_ids for r in qrels.get(q, {}).values()):
            grades = [{corpus.row_of[d]: r for d, r in qrels.get(q, {}).items() if r > 0} for q in query_ids]
    else:
        relevant = list(qrels)
    if len(relevant) != len(results):
        raise ConfigError(f"{len(results)} result rows but relevance for {len(relevant)} queries")
    if results.shape[1] < 100:
        raise ConfigError(f"Recall@100 needs 100 results per query; search with k>=100 (got {results.shape[1]})")
    if not any(r.size for r in relevant):  # every metric would be NaN (nothing to average)
        raise DataError("no query has a relevant document (a qrels score > 0); nothing to evaluate")
    ids = results.ids
    # binary gains are the graded formula's with every grade 1: the binary path is kept for the figures it gave
    ndcg = ndcg_at_k(ids, relevant, 10) if grades is None else graded_ndcg_at_k(ids, grades, 10)
    return {
        "NDCG@10": float(np.nanmean(ndcg)),
        "Recall@10": float(np.nanmean(recall_at_k(ids, relevant, 10))),
        "Recall@100": float(np.nanmean(recall_at_k(ids, relevant, 100))),
        "MRR@10": float(np.nanmean(mrr_at_k(ids, relevant, 10))),
    }


@keeps_caller_state()
def search_evaluate(
    beir_dir: str | os.PathLike[str],
    split: str = "test",
    retriever: str = "bm25",
    model: str | os.PathLike[str] | None = None,
    rerank: str | os.PathLike[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = SearchConfig.cache_dir,
    rerank_top: int = SearchConfig.rerank_top,
    fusion: "FusionChoice | Mapping[str, object] | None" = None,
    max_length: int | None = None,
    query_max_length: int | None = None,
    rerank_settings: "object | None" = None,
    encoder_backend: str | None = None,
    encoder_threads: int | None = EncoderSettings.threads,
    threads: int | None = None,
    keep_unknown: bool = False,
    bm25: "BM25Config | None" = None,
    keep_unknown_name: str = "keep_unknown=True",
) -> dict[str, float]:
    """Evaluate one retriever on ``qrels/{split}.tsv`` of a BEIR directory.

    ``model`` is a sentence-transformers directory (a fine-tuned
    :mod:`~twotower.search.finetune` output, whose query and document towers
    are both used) or ``None`` for zero-shot all-MiniLM-L6-v2. ``hybrid`` fuses
    BM25 and dense with ``fusion`` (a :class:`~twotower.search.fusion.FusionChoice` or its ``{"name", "params"}`` dict;
    default RRF with ``SearchConfig.rrf_k``, since no validation split is tuned here). ``rerank`` is
    a cross-encoder directory that reorders the top ``rerank_top``. ``max_length`` / ``query_max_length``: word
    pieces the encoders read of a document / query; ``None``: the lengths ``model`` was fine-tuned with (its
    marker), else ``SearchConfig``'s (the reranker likewise reads its own training length). ``rerank_settings``:
    the cross-encoder's forward pass (a :class:`~twotower.text.encoder.RerankSettings`; None: its defaults).
    ``encoder_backend`` / ``encoder_threads``: the bi-encoder's forward pass, as ``--encoder-backend`` /
    ``--encoder-threads`` (:func:`~twotower.search.finetune.encoder_settings`: None reads
    ``TWOTOWER_ENCODER_BACKEND``, else the backend ``model`` was fine-tuned through, else ``EncoderSettings``').
    ``threads``: torch's, FAISS's and the BLAS pools' thread count during the call (``--threads``; the caller's
    counts are put back when it returns; None: left as they are). ``keep_unknown`` (``--keep-unknown``): a qrels
    pair whose corpus id is not in ``corpus.jsonl`` is counted as relevant and never retrieved, as BEIR's evaluation
    counts it, with a warning naming how many and one of them; False (the default) refuses the qrels file, naming
    ``keep_unknown_name`` as the way to keep them (``search evaluate`` passes ``--keep-unknown``).
    ``bm25``: the settings of BM25 (retriever bm25 and hybrid) as a :class:`~twotower.search.bm25.BM25Config`
    (``--token-pattern``); None: its defaults.
    Returns the four :data:`METRIC_KEYS` plus ``seconds``, ``queries`` (those averaged: with at least one
    relevant document), ``skipped`` (judged queries without one, which have no defined metric) and, for dense and
    hybrid, ``truncation`` (how many passages the encoder cut: :func:`~twotower.text.encoder.truncation_report`)
    with the ``max_length`` / ``query_max_length`` read and the resolved ``encoder_backend`` (the forward pass that
    encoded the corpus and the queries), and with a reranker ``rerank_truncation`` (how many
    reranked pairs it cut), ``rerank_backend`` (the resolved forward pass) and ``without_rerank``: the four metrics
    (and ``seconds``) of the same first stage before reranking. For hybrid, ``dense_only``: ``{"queries": N,
    "example": ID}``, the scored queries BM25 matched no document for (ranked by the dense retriever alone), and
    the first of them (None when N is 0).
    """
    from twotower.search.beir import load_beir, resolve_beir_dir  # noqa: PLC0415

    from twotower.search.fusion import FusionChoice, as_hybrid_fusion, fuse_with_head  # noqa: PLC0415

    if retriever not in RETRIEVERS:
        raise ConfigError(f"retriever must be one of {', '.join(RETRIEVERS)}; got {retriever!r}")
    # checked before any data is read; a dict (as SearchIndex takes) was an AttributeError after BM25 and dense ran
    from twotower.search.artefacts import check_bi_encoder_dir, existing_dir  # noqa: PLC0415

    # the folders, before any data is read: a missing rerank folder failed after BM25 and dense ran (its kind is
    # checked when it loads, naming CrossEncoderReranker's model_path)
    if model is not None and retriever != "bm25":
        check_bi_encoder_dir(model, "model")
    if rerank is not None:
        existing_dir(rerank, "rerank", "cross-encoder")
    if isinstance(rerank_top, bool) or not isinstance(rerank_top, (int, np.integer)) or rerank_top < 1:
        # rerank_top=0 reranked nothing and reported the first stage as reranked (capped at the corpus below)
        raise ConfigError(f"rerank_top: must be a positive integer, got {rerank_top!r}")  # as SearchIndex.search says
    choice = (as_hybrid_fusion(fusion) if fusion is not None
              else FusionChoice(name="rrf", params={"k": SearchConfig.rrf_k}))
    from twotower.search.bm25 import check_bm25_config  # noqa: PLC0415

    check_bm25_config(bm25)
    from twotower.search.finetune import encoder_settings  # noqa: PLC0415
    from twotower.utils.runtime import set_threads  # noqa: PLC0415

    # a bad backend or thread count is refused before any data is read
    encoder_settings(model if retriever != "bm25" else None, encoder_backend, encoder_threads)
    set_threads(threads)
    t0 = time.perf_counter()
    data = load_beir(beir_dir, split, keep_unknown=keep_unknown,
                     unknown_fix=f"; {keep_unknown_name} counts such a pair as relevant and never retrieved, as "
                                 "BEIR's evaluation does")
    # an unknown id gets a row past the corpus's last, which no search returns: judged, never retrieved
    judged_corpus = with_unknown_rows(data.corpus, data.qrels)
    qids = list(data.queries)
    n_judged = sum(any(r > 0 for r in data.qrels[q].values()) for q in qids)
    if n_judged == 0:  # checked before any retrieval: every metric would be NaN
        raise DataError("no query has a relevant document (every score is <= 0); nothing to evaluate",
                        file=str(resolve_beir_dir(beir_dir) / "qrels" / f"{split}.tsv"))
    qtexts = [data.queries[q] for q in qids]
    doc_texts = data.corpus.doc_texts()
    # the first stage returns every candidate the cross-encoder is to re-score: --rerank-top 200 re-scored only the
    # 100 (SearchConfig.depth) it was given, as `search query` (which retrieves max(k, rerank_top)) never did
    # (never wider than the corpus: --rerank-top 100000 would allocate [queries, 100000] lists of padding)
    k = max(SearchConfig.depth, min(rerank_top, len(data.corpus)) if rerank is not None else 0)
    parts: list[Results] = []
    truncation = None
    if retriever in ("bm25", "hybrid"):
        from twotower.search.bm25 import BM25Retriever  # noqa: PLC0415

        parts.append(BM25Retriever(bm25).fit(doc_texts, data.corpus.ids).search(qtexts, k))
    if retriever in ("dense", "hybrid"):
        from twotower.search.finetune import load_dense_retriever  # noqa: PLC0415

        dense = load_dense_retriever(model, cache_dir=cache_dir, max_length=max_length,
                                     query_max_length=query_max_length, encoder_backend=encoder_backend,
                                     encoder_threads=encoder_threads).fit(doc_texts)
        truncation = dense.truncation
        parts.append(dense.search(qtexts, k))
    dense_only = None
    if retriever == "hybrid":
        # as SearchIndex.search fuses: the head never depends on how deep --rerank-top makes the lists
        results = fuse_with_head(choice, parts, top_k=k)
        # the scored queries BM25 matched nothing for: their hybrid list is the dense one alone (the note `search
        # query` and POST /search give per query; an evaluation of many said nothing of how many)
        lexical = parts[0].ids
        alone = [q for i, q in enumerate(qids) if any(r > 0 for r in data.qrels[q].values())
                 and not (lexical[i] != PAD_ID).any()]
        dense_only = {"queries": len(alone), "example": alone[0] if alone else None}
    else:
        results = parts[0]
    without_rerank = None
    if rerank is not None:
        from twotower.search.rerank import CrossEncoderReranker  # noqa: PLC0415

        # the same first stage unreranked, scored beside it: a reranked row alone cannot show that the
        # cross-encoder made the lists worse (a barely trained one took NDCG@10 from 0.87 to 0.38)
        without_rerank = {**evaluate_retriever(results, data.qrels, query_ids=qids, corpus=judged_corpus),
                          "seconds": round(time.perf_counter() - t0, 2)}

        # show_progress: periodic log lines, as corpus encoding gives (queries x rerank_top pairs take minutes)
        reranker = CrossEncoderReranker(rerank, settings=rerank_settings)
        results = reranker.rerank(qtexts, results, doc_texts, top_n=rerank_top, show_progress=True, count_cut=True)
        cut = reranker.last_truncation
        if cut is not None and cut["cut"]:
            logger.info("%s of %s (query, passage) pairs cut at %d word pieces for the cross-encoder (longest %s)",
                        f"{cut['cut']:,}", f"{cut['pairs']:,}", cut["max_length"], f"{cut['longest']:,}")
    metrics = evaluate_retriever(results, data.qrels, query_ids=qids, corpus=judged_corpus)
    metrics["queries"] = n_judged
    metrics["skipped"] = len(qids) - n_judged
    if dense_only is not None:
        metrics["dense_only"] = dense_only
    if truncation is not None:
        metrics["truncation"] = truncation
        metrics["max_length"] = dense.max_length
        metrics["query_max_length"] = dense.query_max_length
        metrics["encoder_backend"] = dense.doc_encoder.backend
    if without_rerank is not None:
        metrics["without_rerank"] = without_rerank
        metrics["rerank_backend"] = reranker.backend
    if rerank is not None and reranker.last_truncation is not None:
        metrics["rerank_truncation"] = reranker.last_truncation
    metrics["seconds"] = round(time.perf_counter() - t0, 2)
    return metrics
