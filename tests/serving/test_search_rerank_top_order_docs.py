"""POST /search's schema says what orders the hits past rerank_top in every mode, as `search query` marks them.

`rerank_top` and a hit's `reranked` said the rest keep their "fused order", which is true of mode hybrid only: with
mode bm25 or dense nothing is fused, and they keep BM25's or the dense order (the CLI's mark said so already).
"""
from __future__ import annotations

from fastapi import FastAPI

from twotower.search.checks import FIRST_STAGE_ORDER
from twotower.serving import ServiceSettings
from twotower.serving.search_service import build_search_router


def _schemas() -> dict:
    app = FastAPI()
    app.include_router(build_search_router(ServiceSettings()))
    return app.openapi()["components"]["schemas"]


def _says_every_mode(text: str) -> None:
    assert set(FIRST_STAGE_ORDER) == {"bm25", "dense", "hybrid"}
    for mode, order in FIRST_STAGE_ORDER.items():
        assert f"{mode}, {order}" in text, (mode, text)
    # "fused" only where something is fused: mode hybrid's order
    assert text.count("fused") == 1, text


def test_rerank_top_says_the_first_stage_order_of_every_mode():
    _says_every_mode(_schemas()["SearchRequest"]["properties"]["rerank_top"]["description"])


def test_a_hit_marked_not_reranked_says_the_first_stage_order_of_every_mode():
    _says_every_mode(_schemas()["SearchHit"]["properties"]["reranked"]["description"])

