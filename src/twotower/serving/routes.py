"""Thin HTTP routes: validate (pydantic), hand the work to :class:`RecommenderService` in a worker thread, answer JSON.

Another router (e.g. ``POST /search``) plugs in with ``app.include_router``
(or ``create_app(..., routers=[...])``) and reuses :func:`get_service` and
:func:`run_compute`, so it shares the concurrency limits.
"""
import functools
from typing import Any, Callable, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Request
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse, Response

from twotower.serving.errors import json_bytes
from twotower.serving.schemas import Schemas
from twotower.serving.service import RecommenderService, RecRequest

__all__ = ["build_router", "get_service", "run_compute", "json_response"]

T = TypeVar("T")


def get_service(request: Request) -> RecommenderService:
    service = getattr(request.app.state, "service", None)
    if service is None:
        raise HTTPException(503, "the service is still loading")
    return service


async def run_compute(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a worker thread, at most ``settings.max_concurrency`` at once."""
    return await anyio.to_thread.run_sync(
        functools.partial(fn, *args, **kwargs), limiter=request.app.state.compute_limiter
    )


def json_response(body: Any, status: int = 200) -> Response:
    """Serialise without re-validating (the service builds JSON-safe dicts)."""
    return Response(json_bytes(body), status_code=status, media_type="application/json")


def _rec(body: Any) -> RecRequest:
    return RecRequest(
        user_id=body.user_id,
        history=tuple(body.history) if body.history is not None else None,
        user_features=body.user_features,
        k=body.k,
        exclude_seen=body.exclude_seen,
        filters=body.filters,
        explain=body.explain,
    )


def build_router(s: Schemas) -> APIRouter:
    """The JSON endpoints; request and response models come from ``s`` (see :func:`make_schemas`)."""
    router = APIRouter()
    RecommendRequest, BatchRequest = s.RecommendRequest, s.BatchRequest
    SimilarRequest, ExplainRequest = s.SimilarRequest, s.ExplainRequest

    @router.post("/recommend", response_model=s.RecommendResponse, tags=["recommend"])
    async def recommend(body: RecommendRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Top-k items for a known user or an ad-hoc history."""
        service = get_service(request)
        return json_response(await run_compute(request, service.recommend, _rec(body)))

    @router.post("/recommend/batch", response_model=s.BatchResponse, tags=["recommend"])
    async def recommend_batch(body: BatchRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Several recommendation requests answered with one index search."""
        service = get_service(request)
        reqs = [_rec(r) for r in body.requests]  # type: ignore[attr-defined]
        return json_response({"results": await run_compute(request, service.recommend_batch, reqs)})

    @router.post("/similar-items", response_model=s.SimilarResponse, tags=["items"])
    async def similar_items(body: SimilarRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Items closest to an item in embedding space (the item itself excluded)."""
        service = get_service(request)
        b: Any = body
        return json_response(await run_compute(request, service.similar_items, b.item_id, b.k, b.filters))

    @router.post("/explain", response_model=s.ExplainResponse, tags=["recommend"])
    async def explain(body: ExplainRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Why an item is recommended to a user (501 when twotower.explain is not installed)."""
        service = get_service(request)
        b: Any = body
        history = tuple(b.history) if b.history is not None else None
        return json_response(
            await run_compute(request, service.explain, item_id=b.item_id, user_id=b.user_id, history=history)
        )

    @router.get("/items/{item_id}", response_model=s.ItemResponse, tags=["items"])
    async def item(item_id: str, request: Request) -> Response:
        """An item's metadata and whether the index holds it."""
        return json_response(get_service(request).item(item_id))

    @router.get("/users/{user_id}", response_model=s.UserResponse, tags=["users"])
    async def user(user_id: str, request: Request) -> Response:
        """A known user's training history, newest first (the last 50; ``n_history`` counts all)."""
        return json_response(get_service(request).user(user_id))

    @router.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @router.get("/readyz", response_model=s.ReadyResponse, tags=["ops"])
    async def readyz(request: Request) -> Response:
        """Readiness: model and index loaded and built for the same model (503 otherwise)."""
        service = get_service(request)
        info = service.readiness()
        return json_response(info, 200 if info["ready"] else 503)

    @router.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
    async def metrics(request: Request) -> PlainTextResponse:
        """Prometheus text format: requests by route and status, latency histogram, in-flight, 429s."""
        return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")

    return router
