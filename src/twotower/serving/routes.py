"""Thin HTTP routes: validate (pydantic), hand the work to :class:`RecommenderService` in a worker thread, answer JSON.

Another router (e.g. ``POST /search``) plugs in with ``app.include_router``
(or ``create_app(..., routers=[...])``) and reuses :func:`get_service` and
:func:`run_compute`, so it shares the concurrency limits.

Work is bounded, not only sizes: a request with ``"explain": true`` explains
its first ``explain_k`` items only (``ServiceSettings.explain_k``, default 10),
every request runs under a compute-time budget (``time_budget_s``; 503 past
it), and a client that disconnects stops the work at the next step
(:mod:`twotower.serving.budget`).
"""
import os
import time
from typing import Annotated, Any, Callable, Sequence, TypeVar
from urllib.parse import quote

import anyio
import anyio.to_thread
from fastapi import APIRouter, Path, Request
from pydantic import BeforeValidator
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from twotower.errors import NotFoundError
from twotower.serving.json_body import UniqueKeysRoute
from twotower.serving.schemas import ERROR_RESPONSES
from twotower.serving.budget import WorkBudget, ask_instead
from twotower.serving.errors import json_bytes
from twotower.serving.examples import example_ids
from twotower.serving.middleware import service_metric_lines
from twotower.serving.schemas import MAX_ID_CHARS, HealthResponse, Schemas, coerce_id
from twotower.serving.service import RecommenderService, RecRequest
from twotower.serving.settings import ServiceSettings

__all__ = ["build_router", "get_service", "run_compute", "run_budgeted", "json_response"]

# the GET routes take the rest of the path as the id (`{item_id:path}`): a client percent-encodes a slash
# (`/items/a%2Fb`), the server decodes it before routing, and a plain `{item_id}` then matched no route at all.
# The same rule as ids in JSON bodies (coerce_id: surrounding whitespace dropped): `/items/%2050` was looked
# up as " 50" and answered 404 while {"item_id": " 50"} found item 50.
PathId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS), BeforeValidator(coerce_id)]

T = TypeVar("T")

#: the characters of a URL's path and query kept as they are when a redirect's Location is built (RFC 3986's
#: reserved and unreserved ones, and "%" of what the client already encoded)
_URL_SAFE = "/%:@!$&'()*+,;=-._~"


def _without_trailing_slash(request: Request, path_id: str) -> Response | None:
    """A 307 to the same URL without its trailing slashes, for a GET /items/{id}/ or /users/{id}/ whose id (with
    the slash) is unknown; None otherwise. The other GET routes answer ``/healthz/`` with that redirect
    (Starlette's ``redirect_slashes``), but these read the rest of the path as the id, so ``/items/50/`` looked up item "50/"
    and answered 404. Only a slash typed in the URL counts: an id that ends in one, sent percent-encoded
    (``/items/a%2F``), is looked up as it is, and redirecting it would loop. The Location is the path as the client
    sent it (still encoded) with its query, relative, so the Host header plays no part."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    if not raw.endswith(b"/") or not path_id.rstrip("/"):
        return None
    query = request.scope.get("query_string") or b""
    # bytes quoted as bytes (a raw UTF-8 byte stays that byte); what is already percent-encoded stays so
    location = quote(raw.rstrip(b"/"), safe=_URL_SAFE) + (f"?{quote(query, safe=_URL_SAFE + '?')}" if query else "")
    return RedirectResponse(location, status_code=307)


def _found_or_moved(request: Request, path_id: str, look_up: Callable[[str], Any]) -> Response:
    """``look_up(path_id)``'s answer; for an unknown id typed with a trailing slash, the redirect without it
    (:func:`_without_trailing_slash`), else the NotFoundError."""
    try:
        return json_response(look_up(path_id))
    except NotFoundError:
        if (moved := _without_trailing_slash(request, path_id)) is None:
            raise
        return moved


#: why a sent history is worth shortening (a sequence tower's pass grows with it), said beside that advice
HISTORY_LEN_NOTE = "the user tower reads at most its newest model.user.history_len items"


def recommend_hint(reqs: Sequence[RecRequest], default_k: int) -> str:
    """What a /recommend(/batch) 503 says to ask less of: only what the requests held (a known user's request at the
    default k was told of filters, explain_k, batches and explain it never sent)."""
    asks = []
    k = max(r.k or default_k for r in reqs)
    if k > default_k:
        asks.append(f"ask for fewer items (k={k})")
    if any(r.filters for r in reqs):
        asks.append("send fewer filter values")
    explained = [r.explain_k or 1 for r in reqs if r.explain]
    if explained:
        asks.append("ask for a smaller explain_k or no explain" if max(explained) > 1 else "ask for no explain")
    if len(reqs) > 1:
        asks.append(f"send fewer requests per batch ({len(reqs)})")
    if any(r.history for r in reqs):
        asks.append(f"send shorter histories ({HISTORY_LEN_NOTE})")
    return ask_instead(asks)


def similar_hint(k: int, filters: Any, default_k: int) -> str:
    """What a /similar-items 503 says to ask less of (its filters scan the catalogue; a larger k lists more)."""
    return ask_instead([*([f"ask for fewer items (k={k})"] if k > default_k else []),
                        *(["send fewer filter values"] if filters else [])])


def explain_hint(history: Sequence[str] | None) -> str:
    """What a /explain 503 says to ask less of: a sent history (its variants are the work); a known user's is
    the run's, nothing the request can shorten."""
    return ask_instead([f"send a shorter history ({HISTORY_LEN_NOTE})"] if history else [])


#: get_service's 503 when the app's startup never ran: "still loading" sent a caller waiting for a load that
#: would never come (FastAPI's TestClient runs the lifespan only inside a `with` block)
NOT_STARTED = ("the service has not started: create_app's startup (its lifespan) has not run; a server runs it, "
               "and a TestClient inside `with TestClient(app) as client:`")


def get_service(request: Request) -> RecommenderService:
    if getattr(request.app.state, "started", True) is False:
        raise HTTPException(503, NOT_STARTED)
    service = getattr(request.app.state, "service", None)
    if service is None:
        raise HTTPException(503, "the service is still loading")
    return service


async def run_compute(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a worker thread, at most ``settings.max_concurrency`` at once; its compute time feeds the
    429 gate's wait estimate (recorded here, on the event loop, so the metrics need no lock)."""
    spent: list[float] = []

    def timed() -> T:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t0)

    try:
        return await anyio.to_thread.run_sync(timed, limiter=request.app.state.compute_limiter)
    finally:
        metrics = getattr(request.app.state, "metrics", None)
        if spent and metrics is not None:
            metrics.observe_compute(spent[0])


async def run_budgeted(request: Request, fn: Callable[..., T], *args: Any, budget_hint: str = WorkBudget.HINT,
                       **kwargs: Any) -> T:
    """:func:`run_compute` with ``budget=WorkBudget`` passed to ``fn``: its clock starts in the worker, and it is
    marked gone as soon as the client disconnects (``fn`` calls ``budget.check()`` between steps). ``budget_hint``
    says in the 503 what to ask for instead."""
    settings = request.app.state.settings
    budget = WorkBudget(settings.time_budget_s, f"{request.method} {request.url.path}", budget_hint)

    def work() -> T:
        budget.start()
        return fn(*args, budget=budget, **kwargs)

    async def watch_disconnect() -> None:
        while True:  # the body has been read: the next message is the disconnect (or never comes)
            message = await request.receive()
            if message["type"] == "http.disconnect":
                budget.gone.set()
                return

    outcome: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_disconnect)
        try:
            outcome.append(await run_compute(request, work))
        except Exception as e:  # noqa: BLE001 - re-raised below, outside the task group (no ExceptionGroup)
            outcome.append(e)
        finally:
            tg.cancel_scope.cancel()
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


def answer_batch(service: RecommenderService, reqs: Sequence[RecRequest], *, budget: WorkBudget,
                 batch: bool = True) -> list[dict[str, Any]]:
    """Recommendations for ``reqs`` (one index search) with their bounded explanations (the service's
    ``explain_k`` rule, the same for Python callers), all under ``budget``. An unknown id or a bad filter in
    a batch is named with its request (``requests[3].user_id``) by the service, before any search, in a
    batch of one too; ``batch=False``: the one request of ``POST /recommend``, named without ``requests[0]``."""
    budget.check()
    # the check runs between filter values (each scans the catalogue's metadata, up to 16 fields x 1000 values
    # a request), between explanation steps and between blocks of a sequence tower's ad-hoc histories: the long
    # loops (a known user's lookup is one index search)
    kw = {"check": budget.check} if any(r.explain or r.filters or r.history for r in reqs) else {}
    if not batch:
        return [service.recommend(reqs[0], **kw)]
    return service.recommend_batch(reqs, **kw)


def answer_json(service: RecommenderService, reqs: Sequence[RecRequest], *, budget: WorkBudget, batch: bool) -> bytes:
    """:func:`answer_batch` serialised in the worker: 256 x k=1000 answers are ~40 MB of JSON, about a
    second of encoding that would otherwise stall the event loop (and /healthz) after the work is done.

    A batch is encoded answer by answer and joined, the bytes ``json.dumps({"results": answers})`` gives: one
    ``json.dumps`` of the whole body is one C call that holds the GIL throughout, so the event loop's thread could
    not run either, and /healthz waited 1.1 s behind a 54 MB answer (`python bench/bounded_work.py`); between two
    answers' encodings the loop gets its turn."""
    answers = answer_batch(service, reqs, budget=budget, batch=batch)
    budget.check()  # over budget already: answer 503 now rather than encode a large body first
    if not batch:
        return json_bytes(answers[0])
    return b'{"results": [' + b", ".join(json_bytes(a) for a in answers) + b"]}"


def json_response(body: Any, status: int = 200) -> Response:
    """Serialise without re-validating (the service builds JSON-safe dicts)."""
    return Response(json_bytes(body), status_code=status, media_type="application/json")


def _rec(body: Any, explain_k: int) -> RecRequest:
    """The service request; ``explain_k``: how many items get an explanation where the body names none
    (:func:`default_explain_k`)."""
    return RecRequest(
        user_id=body.user_id,
        history=tuple(body.history) if body.history is not None else None,
        user_features=body.user_features,
        k=body.k,
        exclude_seen=body.exclude_seen,
        exclude_items=tuple(body.exclude_items) if body.exclude_items is not None else None,
        filters=body.filters,
        explain=body.explain,
        # the app's cap only with explain (the schema refuses explain_k without it, as RecRequest does)
        explain_k=(body.explain_k if body.explain_k is not None else explain_k) if body.explain else None,
    )


def default_explain_k(settings: ServiceSettings, service: RecommenderService) -> int:
    """How many items a request with ``"explain": true`` and no ``explain_k`` gets explained: the app's
    ``explain_k`` (its schema's default), at most the service's own, which refuses more. An app given settings of
    its own over a loaded service (``create_app(service=..., settings=...)``) filled in its 20 where the service
    allowed 10, and ``{"explain": true}`` alone was refused for an explain_k the client never sent."""
    return min(settings.explain_k, service.settings.explain_k)


def refuse_empty_histories(service: RecommenderService, bodies: Sequence[Any], *, batch: bool) -> None:
    """A 422 for each request body with an empty ``history`` (``body.history``, ``body.requests[1].history``), in
    the words of `recommend --history` and tt.recommend, unless its ``user_features`` alone describe a user with no
    history yet on a run that reads them (:meth:`TrainedRun.describes_new_user`): then it is served from them. A
    ``user_features`` naming a column the run does not read is left to the service, which names it (as with a history).
    Raised as pydantic's own too-short error was, so the answer keeps its shape (``details`` with ``loc``)."""
    from fastapi.exceptions import RequestValidationError

    run = service.run
    errors = [{"type": "too_short", "loc": ("body", "requests", b, "history") if batch else ("body", "history"),
               "msg": "", "input": [], "ctx": {"min_length": 1, "actual_length": 0,
                                               "feature_columns": tuple(run.user_feature_columns)}}
              for b, body in enumerate(bodies)
              if body.history is not None and not body.history and not run.describes_new_user(body.user_features)
              and not run.unknown_user_feature_columns(body.user_features)]  # the service names the column
    if errors:
        raise RequestValidationError(errors)


def build_router(s: Schemas) -> APIRouter:
    """The JSON endpoints; request and response models come from ``s`` (see :func:`make_schemas`)."""
    router = APIRouter(route_class=UniqueKeysRoute, responses=ERROR_RESPONSES)  # a key sent twice: refused
    RecommendRequest, BatchRequest = s.RecommendRequest, s.BatchRequest
    SimilarRequest, ExplainRequest = s.SimilarRequest, s.ExplainRequest

    @router.post("/recommend", response_model=s.RecommendResponse, tags=["recommend"])
    async def recommend(body: RecommendRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Top-k items for a known user or an ad-hoc history."""
        service = get_service(request)
        refuse_empty_histories(service, [body], batch=False)
        settings = request.app.state.settings
        reqs = [_rec(body, default_explain_k(settings, service))]
        return Response(await run_budgeted(request, answer_json, service, reqs, batch=False,
                                           budget_hint=recommend_hint(reqs, settings.default_k)),
                        media_type="application/json")

    @router.post("/recommend/batch", response_model=s.BatchResponse, tags=["recommend"])
    async def recommend_batch(body: BatchRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Several recommendation requests answered with one index search."""
        service = get_service(request)
        bodies = body.requests  # type: ignore[attr-defined]
        refuse_empty_histories(service, bodies, batch=True)
        settings = request.app.state.settings
        reqs = [_rec(r, default_explain_k(settings, service)) for r in bodies]
        return Response(await run_budgeted(request, answer_json, service, reqs, batch=True,
                                           budget_hint=recommend_hint(reqs, settings.default_k)),
                        media_type="application/json")

    @router.post("/similar-items", response_model=s.SimilarResponse, tags=["items"])
    async def similar_items(body: SimilarRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Items closest to an item in embedding space (the item itself excluded)."""
        service = get_service(request)
        b: Any = body

        def similar(*, budget: WorkBudget) -> dict[str, Any]:  # budgeted: its filters scan the catalogue too
            budget.check()
            return service.similar_items(b.item_id, b.k, b.filters, exclude_items=b.exclude_items, check=budget.check)

        hint = similar_hint(b.k, b.filters, request.app.state.settings.default_k)
        return json_response(await run_budgeted(request, similar, budget_hint=hint))

    @router.post("/explain", response_model=s.ExplainResponse, tags=["recommend"])
    async def explain(body: ExplainRequest, request: Request) -> Response:  # type: ignore[valid-type]
        """Why an item is recommended to a user (501 when twotower.explain is not installed)."""
        service = get_service(request)
        b: Any = body
        refuse_empty_histories(service, [b], batch=False)
        history = tuple(b.history) if b.history is not None else None

        def one(*, budget: WorkBudget) -> dict[str, Any]:
            budget.check()
            return service.explain(item_id=b.item_id, user_id=b.user_id, history=history, user_features=b.user_features,
                                   check=budget.check, top=b.top, method=b.method)

        # a sequence tower's pass grows with the history it reads (a 500-item one: 0.7 s idle, 3.0 s loaded)
        return json_response(await run_budgeted(request, one, budget_hint=explain_hint(history)))

    @router.get("/items/{item_id:path}", response_model=s.ItemResponse, tags=["items"])
    async def item(item_id: PathId, request: Request) -> Response:
        """An item's metadata and whether the index holds it."""
        return _found_or_moved(request, item_id, get_service(request).item)

    @router.get("/users/{user_id:path}", response_model=s.UserResponse, tags=["users"])
    async def user(user_id: PathId, request: Request) -> Response:
        """A known user's training history, newest first (the last 50; ``n_history`` counts all)."""
        return _found_or_moved(request, user_id, get_service(request).user)

    @router.get("/examples", response_model=s.ExamplesResponse, tags=["users"])
    async def examples(request: Request) -> Response:
        """Real ids to try: the users with the most history and a recent ad-hoc history (the explorer's start page)."""
        service = get_service(request)
        cached = getattr(request.app.state, "examples", None)
        if cached is None or cached[0] is not service:  # computed once per loaded run, O(users)
            cached = (service, example_ids(service.run, histories=service.read_histories))
            request.app.state.examples = cached
        return json_response(cached[1])

    @router.get("/healthz", response_model=HealthResponse, tags=["ops"])
    async def healthz() -> HealthResponse:
        """Liveness: the process answers (``pid``: which server process, one of N with ``--workers N``)."""
        return HealthResponse(status="ok", pid=os.getpid())

    @router.get("/readyz", response_model=s.ReadyResponse, tags=["ops"])
    async def readyz(request: Request) -> Response:
        """Readiness: model and index loaded and built for the same model (503 otherwise)."""
        service = get_service(request)
        info = service.readiness()
        return json_response(info, 200 if info["ready"] else 503)

    @router.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
    async def metrics(request: Request) -> PlainTextResponse:
        """Prometheus text format: requests by route and status, latency histogram, in-flight, 429s; the served
        model and index (twotower_model_info), readiness, and the item and user counts."""
        text = request.app.state.metrics.render()
        service = getattr(request.app.state, "service", None)
        if isinstance(service, RecommenderService):  # loaded (a scrape during start-up gets the counters alone)
            text += "\n".join(service_metric_lines(service.readiness())) + "\n"
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return router
