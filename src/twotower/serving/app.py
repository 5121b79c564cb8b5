"""The FastAPI app factory: a lifespan that loads everything once, the middlewares, the routes.

>>> app = create_app("runs/demo", settings=ServiceSettings(max_concurrency=2))  # doctest: +SKIP

``uvicorn`` serves it (``twotower serve --run DIR``). An IntegrityError while
loading (a corrupted artefact, an index built for another model) refuses to
start with a message saying how to fix it.
"""
from __future__ import annotations

import gc
import logging
import os
import threading
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, AsyncIterator, Iterable, Iterator, Mapping, Sequence

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute

from twotower.errors import ConfigError, IntegrityError, TwoTowerError
from twotower.serving.docs import install_docs, local_assets
from twotower.serving.errors import CatchAllMiddleware, install_error_handlers
from twotower.serving.examples import install_body_examples
from twotower.serving.middleware import (BodyLimit, ConcurrencyGate, HeadAsGet, HostCheck, Metrics, MetricsMiddleware,
                                         SecurityHeaders)
from twotower.serving.routes import build_router
from twotower.serving.schemas import HealthResponse, make_schemas
from twotower.serving.service import RecommenderService, check_run_arg
from twotower.serving.settings import ServiceSettings
from twotower.serving.threads import service_threads

if TYPE_CHECKING:  # the encoder module loads torch; the app needs it only with a reranker
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.text.encoder import RerankSettings

__all__ = ["create_app", "STATIC_DIR"]

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"


def create_app(
    run_dir: str | Path | TrainedRun | None = None,
    *,
    index_dir: str | Path | None = None,
    settings: ServiceSettings | None = None,
    service: RecommenderService | None = None,
    routers: Sequence[APIRouter] = (),
    search_index_dir: str | Path | None = None,
    rerank_dir: str | Path | None = None,
    rerank_settings: RerankSettings | None = None,
    search_service: object | None = None,
    exact: bool = False,
    allow_low_recall: bool = False,
) -> FastAPI:
    """A FastAPI app over ``run_dir`` (a run folder, loaded at startup, or a run already loaded with
    ``tt.TrainedRun.load``, served as it is) or an already loaded ``service``.

    ``routers`` are mounted after the built-in routes (e.g. ``POST /search``);
    ``app.include_router`` afterwards works too. ``rerank_settings`` names the forward pass of the
    ``rerank_dir`` cross-encoder (``serve --rerank-backend``; None: its defaults). ``exact`` /
    ``allow_low_recall``: as :meth:`RecommenderService.load`'s (``serve --exact`` / ``--allow-low-recall``),
    for a ``run_dir`` (a ``service`` was loaded with its own). ``settings``: the service's
    limits (``max_k``, ``max_history``, ...); None: those of ``service`` when one is given, else the defaults.
    """
    has_search = search_index_dir is not None or search_service is not None
    if run_dir is not None and service is not None:
        raise TypeError("create_app takes run_dir or service, not both")
    if (exact or allow_low_recall) and run_dir is None:
        raise TypeError("create_app's exact / allow_low_recall choose how a run_dir's index is served; "
                        "pass them to RecommenderService.load for a service")
    if run_dir is None and service is None and not has_search:
        raise TypeError("create_app needs a run_dir or service (recommender) and/or a search index")
    if run_dir is not None:
        check_run_arg(run_dir)
    has_recommender = run_dir is not None or service is not None
    # a loaded service brings its own limits: the app's schema checked requests against the defaults instead, so
    # a service loaded with max_k=2000 answered k=1500 from Python and 422 over HTTP (and max_k=5 the reverse)
    own = getattr(service, "settings", None)
    if settings is not None and not isinstance(settings, ServiceSettings):  # a dict failed at startup with an
        # AttributeError ("'dict' object has no attribute 'max_k'")
        shown = (f"ServiceSettings(**{dict(settings)!r})" if isinstance(settings, Mapping)
                 else "ServiceSettings(max_k=100)")
        raise ConfigError(f"create_app settings: a twotower.serving.ServiceSettings, e.g. {shown}; got a "
                          f"{type(settings).__name__}")
    settings = settings or (own if isinstance(own, ServiceSettings) else ServiceSettings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.started = True
        loaded_search = app.state.search is None and search_index_dir is not None
        loaded_service = app.state.service is None and has_recommender
        # the service's thread counts (settings.threads) for the app's whole life, so that a request switches only
        # its own thread's OpenMP counts; the host's back when the app stops
        with service_threads(settings.threads):
            if loaded_search:
                from twotower.serving.search_service import SearchService

                app.state.search = SearchService.load(search_index_dir, rerank_dir, rerank_settings=rerank_settings)
            if loaded_service:
                try:
                    app.state.service = RecommenderService.load(  # type: ignore[arg-type]
                        run_dir, index_dir, settings=settings, exact=exact, allow_low_recall=allow_low_recall,
                        exact_flag="create_app(RUN, exact=True)", allow_flag="create_app(RUN, allow_low_recall=True)")
                except IntegrityError as e:
                    log.critical("refusing to start: %s", e)
                    raise
                except TwoTowerError as e:
                    log.critical("cannot start: %s", e)
                    raise
            app.state.compute_limiter = anyio.CapacityLimiter(settings.max_concurrency)
            try:
                with _frozen_while_serving():
                    yield
            finally:  # what this startup loaded goes with the app's stop (a later start loads it again)
                if loaded_service:
                    app.state.service = None
                if loaded_search:
                    app.state.search = None

    docs_folder = local_assets()  # None: FastAPI's own /docs and /redoc, which load their scripts from a CDN
    app = FastAPI(
        title="twotower",
        summary="Two-tower retrieval: recommendations, similar items, explanations.",
        version=_version(),
        lifespan=lifespan,
        docs_url=None if docs_folder else "/docs",
        redoc_url=None if docs_folder else "/redoc",
    )
    if docs_folder is not None:
        install_docs(app, docs_folder)
    # False until the lifespan runs: a `TestClient(app)` outside a `with` block never runs it (get_service)
    app.state.started = False
    app.state.service = service
    app.state.search = search_service
    app.state.settings = settings
    app.state.metrics = metrics = Metrics()
    install_error_handlers(app)
    included = [build_router(make_schemas(settings)) if has_recommender else _ops_router()]
    if has_search:
        from twotower.serving.search_service import build_search_router

        included.append(build_search_router(settings))
    included += routers
    for router in included:
        app.include_router(router)
    install_body_examples(app)  # /docs' "Try it out" bodies, with the served run's ids
    _mount_static(app)
    known = _plain_paths([*app.routes, *(r for router in included for r in router.routes)])
    # added innermost first: the last one added sees the request first
    app.add_middleware(HeadAsGet)
    app.add_middleware(CatchAllMiddleware)
    # the gate inside the body limit: a request is admitted once its body is in (bounded by max_body_bytes), so
    # clients that send headers and stall their body hold no slot (20 such connections made every request a 429)
    app.add_middleware(ConcurrencyGate, metrics=metrics, max_in_flight=settings.max_in_flight,
                       max_concurrency=settings.max_concurrency,
                       max_wait_s=None if settings.max_wait_ms is None else settings.max_wait_ms / 1e3)
    app.add_middleware(BodyLimit, metrics=metrics, max_bytes=settings.max_body_bytes,
                       timeout_s=settings.body_timeout_s)
    if settings.allowed_hosts is not None:  # before any other work, inside the metrics (which count its 400s)
        app.add_middleware(HostCheck, allowed=settings.allowed_hosts)
    app.add_middleware(MetricsMiddleware, metrics=metrics, known_paths=known)
    app.add_middleware(SecurityHeaders)  # outermost: the 400/413/429 answered before routing get them too
    return app


#: apps started and not yet stopped in this process, which the collector's permanent generation serves
_serving_apps = 0
_serving_lock = threading.Lock()


@contextmanager
def _frozen_while_serving() -> Iterator[None]:
    """Every object alive at startup moved out of the collector's reach while an app serves, back in its reach once
    the last app of the process stops.

    The loaded run (vocabularies, metadata: millions of objects for a big catalogue) lives as long as the app: frozen,
    a full collection no longer walks it mid-request (200k items, 1 worker: p99 at 50 req/s 230-265 ms -> 30 ms).
    Left frozen after the stop, a host's process (a notebook, a test's ``TestClient``) never collected its own
    garbage from before the start again, nor the stopped apps' cycles (+8 MB of RSS a start/stop). ``gc.unfreeze``
    thaws the whole permanent generation, so also what a host froze itself."""
    global _serving_apps
    with _serving_lock:
        _serving_apps += 1
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        with _serving_lock:
            _serving_apps -= 1
            if not _serving_apps:
                gc.unfreeze()


def _plain_paths(routes: Iterable[BaseRoute]) -> list[str]:
    """Route paths without parameters: the metrics label of an answer given before routing (413, 429).

    The included routers' routes are passed in explicitly: FastAPI 0.16x keeps an included router as one
    entry of ``app.routes`` (no ``path``), so reading ``app.routes`` alone labelled a 413 or 429 on
    ``POST /recommend`` as route "other"."""
    return [p for r in routes if (p := getattr(r, "path", None)) and "{" not in p]


def _ops_router() -> APIRouter:
    """Health and metrics for a search-only service (the recommender router has its own)."""
    router = APIRouter()

    @router.get("/healthz", response_model=HealthResponse, tags=["ops"])
    async def healthz() -> HealthResponse:
        return HealthResponse(status="ok", pid=os.getpid())  # the recommender router's answer, pid an integer

    @router.get("/readyz", tags=["ops"])
    async def readyz(request: Request) -> dict[str, bool]:
        return {"ready": getattr(request.app.state, "search", None) is not None}

    @router.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
    async def metrics(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")

    return router


def _mount_static(app: FastAPI) -> None:
    """``GET /`` serves ``static/index.html`` and ``/static/*`` its assets, when the folder exists."""
    index_html = STATIC_DIR / "index.html"
    if not STATIC_DIR.is_dir():
        return
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    if index_html.is_file():

        @app.get("/", include_in_schema=False)
        async def explorer() -> FileResponse:
            return FileResponse(index_html)


def _version() -> str:
    from twotower.utils.version import installed_version

    return installed_version(fallback="0")
