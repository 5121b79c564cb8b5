"""``POST /search``: hybrid (BM25 + dense) text search over a saved search index, optional reranking.

:class:`SearchService` is the search counterpart of
:class:`twotower.serving.service.RecommenderService`: plain Python, loaded
once, with typed fields; its dense half searches a
:class:`twotower.index.VectorIndex` (the project's one top-K path).
:func:`build_search_router` mounts it (``twotower serve --search-index DIR
[--rerank PATH]``), sharing the app's concurrency gate, body limit and error
map with the recommender routes.
"""
# no `from __future__ import annotations`: FastAPI must see the request model classes defined in build_search_router

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from twotower.config import MAX_QUERY_CHARS, SearchConfig
from twotower.results import answer_score
from twotower.search.checks import first_stage_orders, rerank_top_needs_rerank, wordless
from twotower.search.pipeline import shortfall
from twotower.serving.json_body import UniqueKeysRoute
from twotower.serving.schemas import ERROR_RESPONSES
from twotower.serving.routes import json_response, run_budgeted
from twotower.serving.settings import ServiceSettings

if TYPE_CHECKING:
    from twotower.search.pipeline import SearchIndex
    from twotower.search.rerank import CrossEncoderReranker
    from twotower.serving.budget import WorkBudget
    from twotower.text.encoder import RerankSettings

__all__ = ["SearchService", "build_search_router", "MAX_QUERY_CHARS"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: what a hit's ``score`` is, per mode (the OpenAPI's description of ``SearchHit.score`` until the index is loaded,
#: when :func:`score_doc` puts the served index's own BM25 settings and fusion in it)
SCORE_DOC = ("what the list is ranked by, rounded to 6 decimals: mode bm25, the BM25 score (with the index's method, "
             "k1, b and token pattern, as `twotower search info` shows them; above 0, unbounded); dense, the cosine "
             "similarity of the query's and the document's embeddings (-1..1); hybrid, the fused score of the "
             "index's fusion: with RRF 1 / (k + rank) summed over the lists (BM25's, dense's) that hold the document "
             "(at most 2 / (k + 1)), with min-max or z-score interpolation the weighted sum of the normalised scores; "
             "with rerank, the cross-encoder's logit (past rerank_top: see reranked). Tied scores are ordered by the "
             "document's row in the corpus")
#: why a ``rerank_top`` sent without ``"rerank": true`` is refused
RERANK_TOP_NEEDS_RERANK = rerank_top_needs_rerank("rerank_top", '"rerank": true', "rerank", "send")


def score_doc(index: "SearchIndex") -> str:
    """:data:`SCORE_DOC` with the served index's BM25 settings and fusion in it. The text said "Lucene's, k1 1.2, b
    0.75" and RRF's "k=60" whatever the index was built with (`search index --token-pattern`, `--fusion`,
    `--rrf-k`, BM25Config's k1 and b), so an index built otherwise was described wrongly."""
    from twotower.search.bm25 import describe_tokens
    from twotower.search.fusion import as_fusion

    c = index.bm25.config
    bm25 = (f"the BM25 score of the served index ({c.method}, k1 {c.k1:g}, b {c.b:g}, token pattern "
            f"{c.token_pattern}: {describe_tokens(c.token_pattern)}; above 0, unbounded)")
    fusion = as_fusion(index.fusion)
    if fusion.name == "rrf":
        k = fusion.params.get("k", SearchConfig.rrf_k)
        hybrid = (f"the fused score of the index's fusion, {fusion.describe()}: 1 / (k + rank) summed over the lists "
                  f"(BM25's, dense's) that hold the document (k={k}: at most 2/{k + 1} = {2 / (k + 1):.6f})")
    else:
        hybrid = (f"the fused score of the index's fusion, {fusion.describe()}: the weighted sum of the normalised "
                  "scores (BM25's weight first)")
    return ("what the list is ranked by, rounded to 6 decimals: mode bm25, " + bm25 + "; dense, the cosine similarity "
            "of the query's and the document's embeddings (-1..1); hybrid, " + hybrid + "; with rerank, the "
            "cross-encoder's logit (past rerank_top: see reranked). Tied scores are ordered by the document's row "
            "in the corpus")


def route_doc(index: "SearchIndex") -> str:
    """POST /search's description with the served index's fusion in it, as :func:`score_doc` puts it in the score's:
    the fixed text said "RRF with k=60 unless it said otherwise" whatever the index was built with (`--fusion`,
    `--rrf-k`)."""
    from twotower.search.fusion import as_fusion

    return ("BM25, dense or (the default) hybrid search over the served index, optionally reranked.\n\n"
            f"Hybrid fuses BM25's and the dense retriever's top {SearchConfig.depth} by the fusion `twotower search "
            f"index --fusion` stored with the served index, {as_fusion(index.fusion).describe()}; the hits' `score` "
            "says what each mode ranks by.")


def describe_served_index(schema: dict, index: "SearchIndex") -> None:
    """Put the served index's own BM25 settings and fusion in ``schema`` (the OpenAPI document): POST /search's
    description (:func:`route_doc`) and its hits' ``score`` (:func:`score_doc`)."""
    hit = schema.get("components", {}).get("schemas", {}).get("SearchHit", {}).get("properties", {}).get("score")
    if hit is not None:
        hit["description"] = score_doc(index)
    route = schema.get("paths", {}).get("/search", {}).get("post")
    if route is not None:
        route["description"] = route_doc(index)


#: characters of each document's text returned with a hit
SNIPPET_CHARS = 300
#: words of the first passage searched for by :meth:`SearchService.warm_up`
_WARM_WORDS = 20


@dataclass(frozen=True)
class SearchService:
    """A loaded search index (checksums verified) plus an optional cross-encoder."""

    index: "SearchIndex"
    reranker: "Optional[CrossEncoderReranker]" = None
    index_dir: Optional[Path] = None

    @classmethod
    def load(cls, index_dir: "str | Path", rerank_dir: "str | Path | None" = None, *,
             rerank_settings: "Optional[RerankSettings]" = None) -> "SearchService":
        """Load ``index_dir`` (every file checked with :func:`twotower.utils.atomic.verify_files`) and a reranker
        whose forward pass ``rerank_settings`` names (None: :class:`~twotower.text.encoder.RerankSettings`'
        defaults), then :meth:`warm_up` both, so the service is ready when this returns."""
        from twotower.search import SearchIndex
        from twotower.search.rerank import CrossEncoderReranker

        index = SearchIndex.load(index_dir)
        reranker = (CrossEncoderReranker(str(rerank_dir), settings=rerank_settings) if rerank_dir is not None
                    else None)
        service = cls(index=index, reranker=reranker, index_dir=Path(index_dir))
        service.warm_up()
        return service

    def warm_up(self) -> float:
        """Answer one search as ``POST /search`` with its defaults would (hybrid; reranked when there is a
        cross-encoder) and return its seconds, logged.

        The first forward pass of each model pays one-time costs (torch's kernels and thread pool, the tokenizer,
        the cross-encoder's bfloat16 copy with ``--rerank-backend torch-bf16``). Left to the first request, they
        made it several times slower than the next (tiny index: 289 ms vs 52-86 ms), and on a loaded machine
        past the time budget: a 503. Every start path (``serve``, its workers, ``create_app``) loads through here,
        before the app reports ready.
        """
        corpus = self.index.corpus
        text = next((t for t in (*corpus.titles[:1], *corpus.texts[:1]) if t.strip()), "warm-up")
        query = " ".join(text.split()[:_WARM_WORDS])  # a query that BM25 matches, as a real one would be
        started = time.perf_counter()
        self.search(query, SearchConfig.k, "hybrid", self.reranker is not None, SearchConfig.rerank_top)
        seconds = time.perf_counter() - started
        if self.reranker is not None:
            # once more, warm: the seconds a pair this search left on the reranker size the first request's
            # batches near its deadline (CrossEncoderReranker.score), and the cold pass's one-time costs made them
            # look slow, so the first POST /search scored its 20 pairs in two batches where the CLI and every later
            # request scored one: padded otherwise, its scores differed in the 6th decimal (-1.134269 vs -1.134268)
            self.search(query, SearchConfig.k, "hybrid", True, SearchConfig.rerank_top)
        log.info("search warm-up (query encoder%s) took %.2f s", " and cross-encoder" if self.reranker else "",
                 seconds)
        return seconds

    def search(self, query: str, k: int, mode: str, rerank: bool, rerank_top: int,
               *, budget: "Optional[WorkBudget]" = None) -> dict[str, Any]:
        """``{"query", "mode", "reranked", "k", "items": [{"doc_id", "score", "rank", "title", "text"}]}``.

        The cross-encoder re-scores only the first ``rerank_top`` candidates (never widened to ``k``: the
        rest keep their first-stage order), so its cost is bounded by ``rerank_top``; ``budget`` is checked
        between stages and cross-encoder batches (HTTP: 503 past ``--time-budget``, abandoned on disconnect).
        """
        if rerank and self.reranker is None:
            from twotower.errors import ConfigError

            raise ConfigError("rerank: this service has no cross-encoder; start it with --rerank PATH")
        res = self.index.search([query], k, mode=mode, reranker=self.reranker if rerank else None,
                                rerank_top=rerank_top if rerank else None,
                                check=budget.check if budget is not None else None,
                                remaining=budget.remaining if budget is not None else None)
        corpus = self.index.corpus
        ids, scores = res.row(0)
        items = []
        for rank, (row, score) in enumerate(zip(ids, scores), start=1):
            text = corpus.texts[int(row)]
            items.append({
                "doc_id": corpus.ids[int(row)],
                "score": answer_score(score),
                "rank": rank,
                "title": corpus.titles[int(row)],
                "text": text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else ""),
            })
            if len(text) > SNIPPET_CHARS:  # a snippet, said: a client taking "text" for the passage lost the rest
                items[-1]["text_cut"] = True
            if rerank and rank > rerank_top:
                # past rerank_top the cross-encoder scored nothing: the score only keeps the first-stage order below the
                # reranked hits (twotower.search.rerank), so it is marked rather than passed off as a measurement
                items[-1]["reranked"] = False
        answer = {"query": query, "mode": mode, "reranked": bool(rerank), "k": k, "items": items}
        if rerank and self.reranker is not None:  # which forward pass scored them (the start line said it, once)
            answer["rerank_backend"] = self.reranker.backend
        short = shortfall(k, len(items), mode, len(corpus.ids))
        if short is not None:  # as POST /recommend says it: a short list is explained, never silent
            answer["shortfall"] = short
        lexical = self.index.dense_only([query], mode)[0]
        if lexical is not None:  # hybrid with no BM25 hit: said, as a short list is, not passed off as a fusion
            answer["dense_only"] = lexical
        cut = self.index.query_cuts([query], mode)[0]
        if cut is not None:  # as `twotower search query` notes it: the dense side read only the query's start
            answer["query_cut"] = cut
        return answer


def _on_threads(search: Callable[..., T], threads: int) -> Callable[..., T]:
    """``search`` run on ``threads`` torch/FAISS threads (``serve --threads``), set in the worker thread that runs it
    as the recommender's routes set theirs: a search-only server set no count at all, so torch used every core and
    POST /search's dense scores differed from `search query --threads 1`'s in the 6th decimal."""

    def run(*args: Any, **kwargs: Any) -> T:
        from twotower.serving.threads import service_threads

        with service_threads(threads):
            return search(*args, **kwargs)

    return run


def _search_hint(k: int, rerank: bool, default_k: int) -> str:
    """What a /search 503 says to ask less of: a k past the default, the reranking asked for (it named rerank_top
    and rerank to a request that sent neither)."""
    from twotower.serving.budget import ask_instead

    return ask_instead([*([f"ask for a smaller k (k={k})"] if k > default_k else []),
                        *(["ask for a smaller rerank_top or no rerank"] if rerank else [])])


def build_search_router(settings: ServiceSettings) -> APIRouter:
    default_top = min(SearchConfig.rerank_top, settings.max_k)

    class SearchRequest(BaseModel):
        # strict like the recommender's schemas: "5" or true is not a k, "yes" not a boolean (422 naming the field)
        model_config = ConfigDict(extra="forbid", strict=True)
        query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the query text")
        k: int = Field(min(SearchConfig.k, settings.max_k), ge=1, le=settings.max_k,
                       description=f"list length, 1..{settings.max_k}")
        mode: Literal["bm25", "dense", "hybrid"] = "hybrid"
        rerank: bool = Field(False, description="rerank the top candidates with the cross-encoder")
        rerank_top: Optional[int] = Field(
            None, ge=1, le=settings.max_k,
            description=f"with rerank: how many of the first stage's candidates the cross-encoder rescores, "
                        f"1..{settings.max_k} (default {default_top}; the rest keep their first-stage order: "
                        f"{first_stage_orders()}); only with \"rerank\": true (422 without it)")

        @field_validator("rerank_top")
        @classmethod
        def _rerank_top_needs_rerank(cls, value: Optional[int], info: ValidationInfo) -> Optional[int]:
            # ignored before: {"rerank_top": 5} without "rerank": true answered the fused list, and nothing said the
            # cross-encoder never ran (the same rule as /recommend's explain_k without "explain": true)
            if value is not None and info.data.get("rerank") is False:
                raise ValueError(RERANK_TOP_NEEDS_RERANK)
            return value

    class SearchHit(BaseModel):
        doc_id: str
        score: float = Field(description=SCORE_DOC)
        rank: int
        title: str
        text: str = Field(description=f"the passage's first {SNIPPET_CHARS} characters, then '…' where it is longer "
                                      "(text_cut: true)")
        text_cut: Optional[bool] = Field(None, description=f"true where text is the passage cut to {SNIPPET_CHARS} "
                                         "characters (the whole passage is in the corpus the index was built from)")
        reranked: Optional[bool] = Field(None, description="false on a reranked answer's hits past rerank_top: the "
                                      "cross-encoder did not score them, and their score only places them, in their "
                                      f"first-stage order ({first_stage_orders()}), below the reranked hits")

    class SearchResponse(BaseModel):
        query: str
        mode: str
        reranked: bool
        k: int
        items: list[SearchHit]
        rerank_backend: str | None = Field(None, description="present on a reranked answer: the cross-encoder's "
                                           "forward pass (torch or torch-bf16; `serve --rerank-backend`)")
        shortfall: dict | None = Field(None, description="present when fewer than k hits came back: how many "
                                       "are missing and why")
        query_cut: dict | None = Field(None, description="present when the dense query tower read only the first "
                                       "`read` of the query's `word_pieces`")
        dense_only: dict | None = Field(None, description="present when mode hybrid's BM25 half matched no "
                                        "document, so the list is the dense retriever's alone: `reason` says why")

    router = APIRouter(route_class=UniqueKeysRoute, responses=ERROR_RESPONSES)  # a key sent twice: refused

    @router.post("/search", response_model=SearchResponse, tags=["search"])
    async def search(body: SearchRequest, request: Request) -> Response:
        """BM25, dense or (the default) hybrid search over the served index, optionally reranked.

        Hybrid fuses BM25's and the dense retriever's top 100 by the fusion `twotower search index --fusion` stored
        with the index (RRF with k=60 unless it said otherwise); the hits' `score` says what each mode ranks by.
        """
        # once the index is loaded, the OpenAPI document says its own fusion instead (route_doc)
        service = getattr(request.app.state, "search", None)
        if service is None:
            raise HTTPException(503, "the search index is still loading")
        if (why := wordless(body.query)) is not None:
            from twotower.errors import DataError

            # "query: only white space" kept as it was said; control characters alone were ranked for (a 200)
            said = "only white space" if why.endswith("only white space") else why.removeprefix("holds ")
            raise DataError(f"query: {said}; send some words to search for")
        return json_response(await run_budgeted(
            request, _on_threads(service.search, settings.threads), body.query, body.k, body.mode, body.rerank,
            default_top if body.rerank_top is None else body.rerank_top,
            budget_hint=_search_hint(body.k, body.rerank, min(SearchConfig.k, settings.max_k))))

    return router
