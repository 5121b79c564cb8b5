"""Pure-ASGI middlewares: request metrics, the in-flight gate (429), the body limit (413), HEAD as GET,
security headers (CSP).

Order, outermost first: :class:`SecurityHeaders` (CSP and friends on every answer) ->
:class:`MetricsMiddleware` (sees every answer, including 413/429/500) -> :class:`HostCheck` (when hosts
are restricted) -> :class:`BodyLimit` -> :class:`ConcurrencyGate` ->
:class:`~twotower.serving.errors.CatchAllMiddleware` -> :class:`HeadAsGet` -> FastAPI.
The body is read before the gate admits a request: a client stalling its body
holds no slot of the gate.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from twotower.errors import OverloadError
from twotower.serving.errors import BodyTimeout, HostNotAllowed, PayloadTooLarge, error_response
from twotower.serving.settings import host_name

__all__ = ["Metrics", "MetricsMiddleware", "ConcurrencyGate", "BodyLimit", "HeadAsGet", "HostCheck", "SecurityHeaders",
           "UNGATED_PATHS", "WAIT_REJECTION_MARK", "PAGE_CSP", "DOCS_CSP"]

# in the message of a 429 refused for its expected wait (not for a full queue): clients such as
# bench/serve_load.py tell the two reasons apart by it
WAIT_REJECTION_MARK = "expected wait"

#: Cheap endpoints that must answer even when the service is saturated.
UNGATED_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/", "/openapi.json", "/docs", "/redoc"})
_UNGATED_PREFIXES = ("/static/", "/docs/")
#: Methods counted under their own name in the metrics; any other is counted as "other". The HTTP server (h11)
#: passes any token as a method, so without this a client could add a metric series per made-up method.
METRIC_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Latency histogram buckets (seconds).
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def _ungated(path: str) -> bool:
    return path in UNGATED_PATHS or path.startswith(_UNGATED_PREFIXES)


class Metrics:
    """Request counters and latency histograms, rendered in the Prometheus text format.

    Updated only from the event loop thread, so no lock is needed.
    """

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = {}  # (route, method, status) -> count
        self.latency: dict[str, list[int]] = {}  # route -> cumulative-able bucket counts (+Inf last)
        self.latency_sum: dict[str, float] = {}
        self.in_flight = 0
        # the gate's 429s by reason: "queue_full" (max_in_flight admitted) or "wait" (expected wait for a compute
        # slot over max_wait_ms), so an operator can tell a full queue from a slow compute estimate
        self.rejected_by_reason: dict[str, int] = {"queue_full": 0, "wait": 0}
        self.rejected_too_large = 0
        self.body_timeouts = 0
        # moving average of one request's compute time in a worker thread (seconds): what the gate's wait
        # estimate multiplies, once `computed` >= WARM requests have finished
        self.compute_s = 0.0
        self.computed = 0

    #: requests timed before the gate trusts :attr:`compute_s` (the first ones of a process are slow: cold caches)
    WARM = 8

    def observe_compute(self, seconds: float) -> None:
        """Fold one request's compute time into :attr:`compute_s`: the plain mean of the first 16, then an
        exponential moving average of weight 1/16 (so one slow cold start does not linger)."""
        self.computed += 1
        self.compute_s += (seconds - self.compute_s) / min(self.computed, 16)

    @property
    def rejected_overload(self) -> int:
        """All 429s of the gate, whatever the reason."""
        return sum(self.rejected_by_reason.values())

    def reject(self, reason: str) -> None:
        """Count one 429 of the gate under ``reason`` (a key of ``rejected_by_reason``)."""
        self.rejected_by_reason[reason] += 1

    #: seconds between two writes of a worker's counters to the shared folder (:meth:`share`)
    PUBLISH_EVERY_S = 1.0

    def share(self, folder: str | Path) -> None:
        """Under ``serve --workers N``: publish this process's counters to ``folder`` (one JSON file per process) and
        render the sum over every process's file, so that ``GET /metrics`` answers for the whole server whichever
        worker accepts the scrape. Each worker counted only its own requests before: successive scrapes of one
        address read different workers' counters (207, then 94, then 207 requests), which Prometheus takes as
        counter resets. A file is rewritten at most every :attr:`PUBLISH_EVERY_S` while requests finish (the last
        one of a burst always published), and by the scraped worker before it sums, so each process's part of a
        counter never goes back from one scrape to the next; a worker that died and was restarted keeps its file
        under its old pid, so the sums never fall."""
        self._shared = Path(folder)
        self._shared.mkdir(parents=True, exist_ok=True)
        self._published = 0.0
        self._publish_pending = False

    _shared: Path | None = None

    def _state(self) -> dict[str, Any]:
        return {"requests": [[r, m, st, n] for (r, m, st), n in self.requests.items()],
                "latency": self.latency, "latency_sum": self.latency_sum, "in_flight": self.in_flight,
                "rejected_by_reason": self.rejected_by_reason, "rejected_too_large": self.rejected_too_large,
                "body_timeouts": self.body_timeouts}

    def publish(self) -> None:
        """Write this process's counters to the shared folder (atomically: a reader sees the old or the new file)."""
        if self._shared is None:
            return
        self._published, self._publish_pending = time.monotonic(), False
        path = self._shared / f"{os.getpid()}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self._state()), encoding="utf-8")
        os.replace(tmp, path)

    def _publish_soon(self) -> None:
        wait = self._published + self.PUBLISH_EVERY_S - time.monotonic()
        if wait <= 0:
            self.publish()
        elif not self._publish_pending:  # the trailing write, so that a burst's last requests are not left out
            try:
                asyncio.get_running_loop().call_later(wait, self.publish)
                self._publish_pending = True
            except RuntimeError:  # no event loop (called from Python): now
                self.publish()

    def _summed(self) -> "Metrics":
        """A Metrics holding the sum of every process's published counters (this one's published first)."""
        self.publish()
        total = Metrics()
        for path in sorted(self._shared.glob("*.json")) if self._shared is not None else ():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # removed as the server stops
            for route, method, status, n in state["requests"]:
                total.requests[(route, method, status)] = total.requests.get((route, method, status), 0) + n
            for route, counts in state["latency"].items():
                mine = total.latency.setdefault(route, [0] * len(counts))
                total.latency[route] = [a + b for a, b in zip(mine, counts)]
                total.latency_sum[route] = total.latency_sum.get(route, 0.0) + state["latency_sum"][route]
            for reason, n in state["rejected_by_reason"].items():
                total.rejected_by_reason[reason] = total.rejected_by_reason.get(reason, 0) + n
            total.in_flight += state["in_flight"]
            total.rejected_too_large += state["rejected_too_large"]
            total.body_timeouts += state["body_timeouts"]
        return total

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        counts = self.latency.setdefault(route, [0] * (len(BUCKETS) + 1))
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                counts[i] += 1
                break
        else:
            counts[-1] += 1
        self.latency_sum[route] = self.latency_sum.get(route, 0.0) + seconds
        if self._shared is not None:
            self._publish_soon()

    def render(self) -> str:
        """The Prometheus text of these counters; under :meth:`share`, of every worker's summed."""
        if self._shared is not None:
            return self._summed().render()
        out = [
            "# HELP twotower_requests_total HTTP requests by route, method and status.",
            "# TYPE twotower_requests_total counter",
        ]
        for (route, method, status), n in sorted(self.requests.items()):
            out.append(f'twotower_requests_total{{route="{route}",method="{method}",status="{status}"}} {n}')
        out += [
            "# HELP twotower_request_duration_seconds Request latency by route.",
            "# TYPE twotower_request_duration_seconds histogram",
        ]
        for route, counts in sorted(self.latency.items()):
            cum = 0
            for bound, c in zip(BUCKETS, counts):
                cum += c
                out.append(f'twotower_request_duration_seconds_bucket{{route="{route}",le="{bound:g}"}} {cum}')
            cum += counts[-1]
            out.append(f'twotower_request_duration_seconds_bucket{{route="{route}",le="+Inf"}} {cum}')
            out.append(f'twotower_request_duration_seconds_sum{{route="{route}"}} {self.latency_sum[route]:.6f}')
            out.append(f'twotower_request_duration_seconds_count{{route="{route}"}} {cum}')
        out += [
            "# HELP twotower_in_flight_requests Requests admitted and not yet answered.",
            "# TYPE twotower_in_flight_requests gauge",
            f"twotower_in_flight_requests {self.in_flight}",
            "# HELP twotower_overload_rejections_total Requests answered 429 by the concurrency gate.",
            "# TYPE twotower_overload_rejections_total counter",
            f"twotower_overload_rejections_total {self.rejected_overload}",
            "# HELP twotower_overload_rejections_by_reason_total The 429s of the gate by reason: queue_full "
            "(max_concurrency + max_queue requests admitted) or wait (expected wait over --max-wait-ms).",
            "# TYPE twotower_overload_rejections_by_reason_total counter",
            *(f'twotower_overload_rejections_by_reason_total{{reason="{r}"}} {n}'
              for r, n in sorted(self.rejected_by_reason.items())),
            "# HELP twotower_payload_too_large_total Requests answered 413 by the body limit.",
            "# TYPE twotower_payload_too_large_total counter",
            f"twotower_payload_too_large_total {self.rejected_too_large}",
            "# HELP twotower_body_timeouts_total Requests answered 408: the body did not arrive within --body-timeout.",
            "# TYPE twotower_body_timeouts_total counter",
            f"twotower_body_timeouts_total {self.body_timeouts}",
        ]
        return "\n".join(out) + "\n"


def _label(value: Any) -> str:
    """A Prometheus label value: backslash, double quote and line feed escaped (the text format's rule)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def service_metric_lines(ready: Mapping[str, Any]) -> list[str]:
    """What a scrape needs to tell one server's model and index from another's (``GET /readyz``'s ``ready``
    mapping): an info gauge naming the model fingerprint and the index (kind, factory, search params, the
    fingerprint it was built for), and the item, indexed-item and user counts. /metrics said none of these,
    so a dashboard could not tell a retrained or an exact-search fallback server from the one it replaced."""
    index = ready["index"]
    labels = {"model_fingerprint": ready["model_fingerprint"], "index_backend": index["backend"],
              "index_factory": index["factory"] or "", "index_params": index["params"],
              "index_model_fingerprint": index["model_fingerprint"] or ""}
    info = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    lines = [
        "# HELP twotower_model_info The served model and index (value 1); labels name them.",
        "# TYPE twotower_model_info gauge",
        f"twotower_model_info{{{info}}} 1",
        "# HELP twotower_ready 1 when the index was built for the served model (GET /readyz answers 200), else 0.",
        "# TYPE twotower_ready gauge",
        f"twotower_ready {int(bool(ready['ready']))}",
        "# HELP twotower_items Items of the catalogue.",
        "# TYPE twotower_items gauge",
        f"twotower_items {ready['n_items']}",
        "# HELP twotower_indexed_items Items the index holds (searchable).",
        "# TYPE twotower_indexed_items gauge",
        f"twotower_indexed_items {index['count']}",
        "# HELP twotower_users Users known from training.",
        "# TYPE twotower_users gauge",
        f"twotower_users {ready['n_users']}",
    ]
    recall = index.get("recall")
    if recall is not None:  # an approximate index's recall measured at build, and the target it was tuned for
        lines += [
            "# HELP twotower_index_recall Recall@k of the served index against exact search, measured when built.",
            "# TYPE twotower_index_recall gauge",
            f"twotower_index_recall {recall['recall']}",
            "# HELP twotower_index_recall_target The recall target it was tuned for (missed: serve --allow-low-recall).",
            "# TYPE twotower_index_recall_target gauge",
            f"twotower_index_recall_target {recall['target']}",
        ]
    return lines


class MetricsMiddleware:
    """Count every HTTP answer by route template and status, and time it."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, known_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.metrics = metrics
        self.known_paths = frozenset(known_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 0  # no answer yet

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        except BaseException:
            status = status or 500  # escaped before any answer: the server answers 500
            raise
        finally:
            # no answer and no error: the client hung up before its body was in (BodyLimit), counted 499 as a
            # client gone mid-work is (ClientGone); it was counted a 500, a server error that never happened
            status = status or 499
            route = scope.get("route")
            # path_format: "/items/{item_id}" for the route "/items/{item_id:path}"
            path = getattr(route, "path_format", None) or getattr(route, "path", None) or (
                scope["path"] if scope["path"] in self.known_paths else "other")
            method = scope.get("method", "")
            self.metrics.observe(path, method if method in METRIC_METHODS else "other", status,
                                 time.perf_counter() - t0)


class ConcurrencyGate:
    """Admit at most ``max_in_flight`` work requests at once; answer the next one 429 before any work.

    With ``max_wait_s`` a request is also answered 429 when the wait it would
    have for a compute slot exceeds it: ``ahead * compute_s / max_concurrency``
    with ``ahead`` the admitted requests beyond the ``max_concurrency`` slots
    (itself included) and ``compute_s`` the recent compute time per request
    (:meth:`Metrics.observe_compute`). A fixed queue length bounds the wait
    only in requests, not in time: ten queued 5 ms requests are 50 ms for the
    last. Health, readiness, metrics, docs and static files are never gated.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_in_flight: int, max_concurrency: int | None = None,
                 max_wait_s: float | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.max_in_flight = max_in_flight
        self.max_concurrency = max_concurrency or max_in_flight
        self.max_wait_s = max_wait_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _ungated(scope["path"]):
            await self.app(scope, receive, send)
            return
        m = self.metrics
        if m.in_flight >= self.max_in_flight:
            m.reject("queue_full")
            err = OverloadError(f"the service is at capacity ({self.max_in_flight} requests in flight); retry shortly")
            await error_response(err)(scope, receive, send)
            return
        ahead = m.in_flight + 1 - self.max_concurrency
        if self.max_wait_s is not None and ahead > 0 and m.computed >= m.WARM:
            wait = ahead * m.compute_s / self.max_concurrency
            if wait > self.max_wait_s:
                m.reject("wait")
                err = OverloadError(f"the service is at capacity ({WAIT_REJECTION_MARK} {wait * 1e3:.0f} ms > the "
                                    f"{self.max_wait_s * 1e3:g} ms --max-wait-ms budget); retry shortly")
                await error_response(err)(scope, receive, send)
                return
        m.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            m.in_flight -= 1


class BodyLimit:
    """Answer 413 for bodies over ``max_bytes`` (by Content-Length, or while reading a chunked body), and 408
    for a body that has not arrived in full ``timeout_s`` seconds after the request began.

    The body is read here (bounded in size and time) and replayed to the app, so nothing
    downstream ever parses an oversized payload or waits on a stalled client.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.metrics.rejected_too_large += 1
        err = PayloadTooLarge(f"request body exceeds {self.max_bytes} bytes (the server's --max-body-bytes limit)")
        await error_response(err)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False  # the server rejects malformed lengths itself
                if too_big:
                    await self._reject(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        # one deadline for the whole body, not per chunk: a byte every few seconds must not keep it open
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0.0))
            except asyncio.TimeoutError:
                self.metrics.body_timeouts += 1
                err = BodyTimeout(f"request body not received in full within {self.timeout_s:g} s "
                                  f"({size} bytes arrived; the server's --body-timeout)")
                await error_response(err)(scope, receive, send)
                return
            if message["type"] != "http.request":
                return  # client went away
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._reject(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class HeadAsGet:
    """Answer ``HEAD`` on a GET route as its GET, headers only (``curl -I /healthz``, uptime checks).

    HTTP servers answer HEAD wherever they answer GET (RFC 9110, 9.3.2), but FastAPI routes list only the
    methods they are declared with, so ``HEAD /healthz`` was a 405. The route's answer is computed as for GET
    (Content-Length included) and its body dropped; a POST route still answers 405. The metrics keep ``HEAD``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        inner = dict(scope, method="GET")

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            await self.app(inner, receive, headers_only)
        finally:
            if "route" in inner:  # the route the router matched labels the metrics of this HEAD
                scope["route"] = inner["route"]


class HostCheck:
    """Answer 400 to a request whose ``Host`` header names none of ``allowed`` (``ServiceSettings.allowed_hosts``).

    A service bound to 127.0.0.1 is out of other machines' reach, not out of a browser's: a page of another site
    can re-point its own name at 127.0.0.1 (DNS rebinding), and the browser then sends it this service's
    answers as same-origin ones, with the site's name as ``Host``. A request without the header (HTTP/1.0) is
    let through: browsers always send it.
    """

    def __init__(self, app: ASGIApp, *, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = tuple(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope.get("headers", ()) if k == b"host"), None)
        host = None if raw is None else raw.decode("latin-1")
        if host is None or host_name(host) in self.allowed:
            await self.app(scope, receive, send)
            return
        shown = host if len(host) <= 100 else host[:100] + "..."  # a bounded echo
        err = HostNotAllowed(
            f"Host {shown!r} is not a name this server answers to ({', '.join(self.allowed)}): it is bound to this "
            "machine, and a web page could point another name at it (DNS rebinding); to reach it under that name, "
            f"restart it with --allow-host {host_name(shown) or 'NAME'}")
        await error_response(err)(scope, receive, send)


#: The explorer page (and every other answer but the API docs): its script and stylesheet are the files under
#: /static, it fetches this origin only, and it holds no inline script, inline style or event-handler attribute
#: (app.js sets a bar's width through CSSOM, which style-src does not govern), so nothing else is allowed: an
#: injected <script> or inline handler does not run, and no other site may frame the page (clickjacking).
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
#: FastAPI's own /docs (Swagger UI) and /redoc, used when fastapi-offline is not installed, load their script and
#: CSS from a CDN and start from an inline script, so PAGE_CSP would blank them; they get the policy's framing and
#: base/plugin parts only. With the local files the pages set their own strict policy (serving/docs.py), which
#: SecurityHeaders keeps.
DOCS_CSP = "base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})


class SecurityHeaders:
    """Add ``Content-Security-Policy`` (:data:`PAGE_CSP`, :data:`DOCS_CSP` on :data:`DOCS_PATHS`),
    ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and ``X-Frame-Options: DENY`` to every
    answer (the 4xx and 5xx given by the other middlewares included), unless the answer set the header itself.

    The explorer page served without them ran any script an injection put in it, could be framed by any site,
    and sent the full URL (its ``?user=`` id) as the Referer of a followed link.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = DOCS_CSP if scope["path"] in DOCS_PATHS else PAGE_CSP
        extra = [(b"content-security-policy", csp.encode()), (b"x-content-type-options", b"nosniff"),
                 (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                have = {name.lower() for name, _ in headers}
                message = {**message, "headers": headers + [(n, v) for n, v in extra if n not in have]}
            await send(message)

        await self.app(scope, receive, with_headers)
