"""Both sides of every limit, the error map, overload and startup refusal."""
from __future__ import annotations

import asyncio
import re
import threading
import time

import httpx
import numpy as np
import pytest

from twotower.errors import ConfigError, IntegrityError


def test_k_at_and_over_max_k(make_client):
    c = make_client(max_k=5)
    assert c.post("/recommend", json={"user_id": "u1", "k": 5}).status_code == 200
    r = c.post("/recommend", json={"user_id": "u1", "k": 6})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["loc"] == ["body", "k"]
    assert c.post("/recommend", json={"user_id": "u1", "k": 0}).status_code == 422
    assert c.post("/similar-items", json={"item_id": "i1", "k": 6}).status_code == 422


def test_default_max_k(client):
    assert client.post("/recommend", json={"user_id": "u1", "k": 1000}).status_code == 200
    r = client.post("/recommend", json={"user_id": "u1", "k": 1001})
    assert r.status_code == 422
    # the bound is this server's, and the message says how it is set (another surface, tt.recommend, allows more)
    assert r.json()["error"]["message"] == ("body.k: must be at most 1000 (this server's "
                                            "max_k: `twotower serve --max-k` sets it, up to 10000), got 1001")


def test_one_k_bound_for_every_surface(service, run_dir):
    """tt.recommend took k up to a literal 10000, the service's Python API any k at all (k=5000 answered past
    ServiceSettings.max_k=1000, which only the HTTP schema held), and max_k itself could be set above the bound
    of the CLI. Now: config.MAX_K bounds every list, ServiceSettings.max_k (default 1000, at most MAX_K) the
    service's, from Python as over HTTP."""
    import twotower as tt
    from twotower.config import MAX_K
    from twotower.serving import RecRequest, ServiceSettings

    cap = service.settings.max_k
    assert cap == ServiceSettings.max_k < MAX_K
    said = rf"k: must be at most {cap} \(this server's max_k: `twotower serve --max-k` sets it"
    with pytest.raises(ConfigError, match=said):
        service.recommend(RecRequest(user_id="u1", k=cap + 1))
    with pytest.raises(ConfigError, match=rf"^requests\[1\]\.{said}"):
        service.recommend_batch([RecRequest(user_id="u1"), RecRequest(user_id="u1", k=cap + 1)])
    with pytest.raises(ConfigError, match=said):
        service.similar_items("i1", cap + 1)
    assert service.similar_items("i1", cap)["k"] == cap
    assert ServiceSettings(max_k=MAX_K).max_k == MAX_K
    with pytest.raises(ConfigError, match=f"ServiceSettings.max_k must be between 1 and {MAX_K}, got {MAX_K + 1}"):
        ServiceSettings(max_k=MAX_K + 1)
    run = tt.TrainedRun.load(run_dir)
    with pytest.raises(ConfigError, match=rf"^k: must be at most {MAX_K} \(twotower.config.MAX_K\), got {MAX_K + 1}$"):
        tt.recommend(run, ["u1"], k=MAX_K + 1)


def test_history_at_and_over_max_history(make_client):
    c = make_client(max_history=3)
    assert c.post("/recommend", json={"history": ["i1", "i2", "i3"]}).status_code == 200
    assert c.post("/recommend", json={"history": ["i1", "i2", "i3", "i4"]}).status_code == 422
    assert c.post("/recommend", json={"history": []}).status_code == 422


def test_batch_at_and_over_max_batch(make_client):
    c = make_client(max_batch=2)
    one = {"user_id": "u1", "k": 1}
    assert c.post("/recommend/batch", json={"requests": [one, one]}).status_code == 200
    assert c.post("/recommend/batch", json={"requests": [one, one, one]}).status_code == 422
    assert c.post("/recommend/batch", json={"requests": []}).status_code == 422


def test_body_too_large_is_413_before_parsing(make_client):
    c = make_client(max_body_bytes=200)
    ok = {"history": ["i1"] * 10}  # well under 200 bytes
    assert c.post("/recommend", json=ok).status_code == 200
    big = b'{"history": [' + b",".join([b'"i1"'] * 60) + b"]}"  # > 200 bytes
    r = c.post("/recommend", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["type"] == "payload_too_large"
    chunked = c.post("/recommend", content=iter([big[:100], big[100:]]), headers={"content-type": "application/json"})
    assert chunked.status_code == 413  # no Content-Length: counted while reading
    assert "twotower_payload_too_large_total 2" in c.get("/metrics").text


def test_answers_given_before_routing_are_counted_under_their_route(make_client):
    """413 (and 429) are answered by middleware before FastAPI routes the request; /metrics labelled them
    route="other" once FastAPI stopped flattening included routers into app.routes."""
    c = make_client(max_body_bytes=100)
    c.post("/recommend", content=b"{" + b" " * 200 + b"}", headers={"content-type": "application/json"})
    c.post("/recommend/batch", content=b"{" + b" " * 200 + b"}", headers={"content-type": "application/json"})
    text = c.get("/metrics").text
    assert 'twotower_requests_total{route="/recommend",method="POST",status="413"} 1' in text
    assert 'twotower_requests_total{route="/recommend/batch",method="POST",status="413"} 1' in text
    assert 'route="other"' not in text


def _post_recommend_scope(*, content_length: int) -> dict:
    """The ASGI scope of a `POST /recommend` whose body arrives (or not) through the test's own ``receive``."""
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/recommend", "raw_path": b"/recommend", "query_string": b"", "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(content_length).encode())],
            "client": ("127.0.0.1", 1), "server": ("test", 80)}


def test_a_client_hanging_up_before_its_body_is_in_is_not_counted_a_500(make_client):
    """A client that sent part of its body and left got no answer (nobody to read it) and /metrics counted it
    status="500", so a 5xx alert fired for clients going away; it is counted 499, as a client gone mid-work is."""
    c = make_client()
    sent = iter([{"type": "http.request", "body": b'{"us', "more_body": True}, {"type": "http.disconnect"}])

    async def receive():
        return next(sent)

    async def discard(message):
        pass

    scope = _post_recommend_scope(content_length=100)
    asyncio.run(c.app(scope, receive, discard))
    text = c.get("/metrics").text
    assert 'status="500"' not in text
    assert 'twotower_requests_total{route="/recommend",method="POST",status="499"} 1' in text


def test_made_up_methods_add_no_metric_series(client):
    """Any token is an HTTP method to the server (h11): each made-up one added a /metrics series for good."""
    for i in range(3):
        assert client.request(f"BREW{i}", "/healthz").status_code == 405
    text = client.get("/metrics").text
    assert "BREW" not in text
    assert 'twotower_requests_total{route="/healthz",method="other",status="405"} 3' in text


@pytest.mark.parametrize(
    ("path", "body", "kind", "missing"),
    [
        ("/recommend", {"user_id": "ghost"}, "user", "ghost"),
        ("/recommend", {"history": ["i1", "nope"]}, "item", "nope"),
        ("/similar-items", {"item_id": "nope"}, "item", "nope"),
        ("/explain", {"user_id": "ghost", "item_id": "i1"}, "user", "ghost"),
        ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"user_id": "ghost"}]}, "user", "ghost"),
    ],
)
def test_unknown_ids_are_404_naming_the_id(client, path, body, kind, missing):
    r = client.post(path, json=body)
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["kind"] == kind and err["id"] == missing and repr(missing) in err["message"]


def test_unknown_item_get_is_404(client):
    r = client.get("/items/nope")
    assert r.status_code == 404 and r.json()["error"]["id"] == "nope"


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"user_id": "u1", "k": "ten"}',
        b'{"user_id": "u1", "k": 2.5}',
        b'{"user_id": true}',
        b'{"user_id": "u1", "history": ["i1"]}',  # both
        b"{}",  # neither
        b'{"user_id": "u1", "colour": 1}',  # unknown field
        b'{"user_id": ""}',
        b"[1, 2]",
    ],
)
def test_malformed_requests_are_422(client, body):
    r = client.post("/recommend", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"]["type"] == "invalid_request"


def test_user_features_are_refused_clearly(client):
    r = client.post("/recommend", json={"history": ["i1"], "user_features": {"age": 30}})
    assert r.status_code == 422 and "user_features" in r.json()["error"]["message"]


def test_500_never_echoes_internals(client, service, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("secret-token at /srv/private/config.yaml")

    monkeypatch.setattr(service, "recommend", boom)
    r = client.post("/recommend", json={"user_id": "u1"})
    assert r.status_code == 500
    assert "secret" not in r.text and "/srv" not in r.text and "RuntimeError" not in r.text
    assert r.json()["error"]["type"] == "internal_error"

    def corrupt(*args, **kwargs):
        raise IntegrityError("checksum mismatch in /srv/private/index.faiss")

    monkeypatch.setattr(service, "recommend", corrupt)
    r = client.post("/recommend", json={"user_id": "u1"})
    assert r.status_code == 500 and "/srv" not in r.text


def test_overload_is_429_before_any_work_and_health_stays_up(service, monkeypatch):
    """max_concurrency=1, max_queue=0: a second request while one computes is refused at once."""
    from twotower.serving import ServiceSettings, create_app

    release, entered = threading.Event(), threading.Event()
    calls = []
    real = service.recommend

    def slow(req):
        calls.append(req.user_id)
        entered.set()
        release.wait(5)
        return real(req)

    monkeypatch.setattr(service, "recommend", slow)
    app = create_app(service=service, settings=ServiceSettings(max_concurrency=1, max_queue=0))

    async def scenario():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                first = asyncio.create_task(c.post("/recommend", json={"user_id": "u1"}))
                for _ in range(500):
                    if entered.is_set():
                        break
                    await asyncio.sleep(0.01)
                second = await c.post("/recommend", json={"user_id": "u2"})
                health = await c.get("/healthz")
                metrics = (await c.get("/metrics")).text
                release.set()
                return await first, second, health, metrics

    try:
        first, second, health, metrics = asyncio.run(scenario())
    finally:
        release.set()
    assert first.status_code == 200
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert second.json()["error"]["type"] == "overloaded"
    assert calls == ["u1"]  # the refused request did no work
    assert health.status_code == 200
    assert "twotower_overload_rejections_total 1" in metrics and "twotower_in_flight_requests 1" in metrics
    assert 'twotower_overload_rejections_by_reason_total{reason="queue_full"} 1' in metrics
    assert 'twotower_overload_rejections_by_reason_total{reason="wait"} 0' in metrics


def test_a_client_stalling_its_body_holds_no_slot_of_the_gate(service):
    """max_concurrency=1, max_queue=0: a client that sends its headers and stalls its body (slow or hostile) was
    admitted before its body was read, so it held the only slot and every other request was a 429 until it hung
    up; the body is now read before the gate admits a request."""
    from twotower.serving import ServiceSettings, create_app

    app = create_app(service=service, settings=ServiceSettings(max_concurrency=1, max_queue=0))
    stall = asyncio.Event()

    async def stalled_receive():  # the body never comes; the client leaves when the test is done
        await stall.wait()
        return {"type": "http.disconnect"}

    async def discard(message):
        pass

    scope = _post_recommend_scope(content_length=100)

    async def scenario():
        async with app.router.lifespan_context(app):
            stalled = asyncio.create_task(app(scope, stalled_receive, discard))
            await asyncio.sleep(0.05)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                answer = await c.post("/recommend", json={"user_id": "u1"})
            stall.set()
            await stalled
            return answer

    answer = asyncio.run(scenario())
    assert answer.status_code == 200, answer.text


def test_a_body_that_trickles_in_past_the_body_timeout_is_answered_408(service):
    """A client that sent its headers and then a byte now and then held its connection and buffer for as long as
    it liked (there was no read deadline); the whole body must now arrive within body_timeout_s."""
    from twotower.serving import ServiceSettings, create_app

    app = create_app(service=service, settings=ServiceSettings(body_timeout_s=0.3))
    answers: list[dict] = []

    async def trickle():  # one byte every 0.1 s: no single wait is long, the body as a whole is
        await asyncio.sleep(0.1)
        return {"type": "http.request", "body": b" ", "more_body": True}

    async def keep(message):
        answers.append(message)

    async def scenario():
        async with app.router.lifespan_context(app):
            start = time.monotonic()
            await app(_post_recommend_scope(content_length=100), trickle, keep)
            took = time.monotonic() - start
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                ok = await c.post("/recommend", json={"user_id": "u1"})
                metrics = (await c.get("/metrics")).text
            return took, ok, metrics

    took, ok, metrics = asyncio.run(scenario())
    assert took < 1.0
    assert answers[0]["status"] == 408
    body = b"".join(m.get("body", b"") for m in answers if m["type"] == "http.response.body")
    assert b"request_timeout" in body
    assert re.search(rb"request body not received in full within 0\.3 s \(\d bytes arrived; the server's --body-timeout\)", body)
    assert ok.status_code == 200  # a prompt client is served as before
    assert "twotower_body_timeouts_total 1" in metrics
    assert 'twotower_requests_total{route="/recommend",method="POST",status="408"} 1' in metrics


def test_the_body_timeout_must_be_positive_seconds():
    from twotower.serving import ServiceSettings

    with pytest.raises(ConfigError, match=r"body_timeout_s must be seconds in \(0, 3600\], got 0"):
        ServiceSettings(body_timeout_s=0)


@pytest.mark.parametrize("max_wait_ms", [10.0, None])
def test_a_queue_longer_than_the_wait_budget_is_refused_in_time_not_only_in_count(service, monkeypatch, max_wait_ms):
    """max_concurrency=1, room for 5 in the queue, requests of ~60 ms: with a 10 ms wait budget the request that
    would queue behind a running one is refused at once (its wait would be ~60 ms); without one it waits and is served."""
    from twotower.serving import ServiceSettings, create_app

    release, entered = threading.Event(), threading.Event()
    calls = []
    real = service.recommend

    def slow(req):
        calls.append(req.user_id)
        if req.user_id == "u2":  # the one that holds the only compute slot
            entered.set()
            release.wait(5)
        else:
            time.sleep(0.06)
        return real(req)

    monkeypatch.setattr(service, "recommend", slow)
    settings = ServiceSettings(max_concurrency=1, max_queue=5, max_wait_ms=max_wait_ms)
    app = create_app(service=service, settings=settings)

    async def scenario():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                for _ in range(8):  # teaches the gate ~60 ms a request (it trusts the estimate after 8)
                    warm = await c.post("/recommend", json={"user_id": "u1"})
                holder = asyncio.create_task(c.post("/recommend", json={"user_id": "u2"}))
                for _ in range(500):
                    if entered.is_set():
                        break
                    await asyncio.sleep(0.01)
                queued = asyncio.create_task(c.post("/recommend", json={"user_id": "u3"}))
                await asyncio.sleep(0.05)
                release.set()
                result = warm, await holder, await queued
                return *result, (await c.get("/metrics")).text

    try:
        warm, holder, queued, metrics = asyncio.run(scenario())
    finally:
        release.set()
    assert warm.status_code == 200 and holder.status_code == 200
    if max_wait_ms is None:
        assert queued.status_code == 200 and calls == ["u1"] * 8 + ["u2", "u3"]
        assert 'twotower_overload_rejections_by_reason_total{reason="wait"} 0' in metrics
    else:
        assert queued.status_code == 429 and "expected wait" in queued.json()["error"]["message"]
        assert calls == ["u1"] * 8 + ["u2"]  # refused before any work
        assert 'twotower_overload_rejections_by_reason_total{reason="wait"} 1' in metrics
        assert 'twotower_overload_rejections_by_reason_total{reason="queue_full"} 0' in metrics


def test_settings_are_validated():
    from twotower.serving import ServiceSettings

    with pytest.raises(ConfigError, match="max_k"):
        ServiceSettings(max_k=0)
    with pytest.raises(ConfigError, match="max_concurrency"):
        ServiceSettings(max_concurrency=True)
    with pytest.raises(ConfigError, match="max_wait_ms"):
        ServiceSettings(max_wait_ms=0)
    assert ServiceSettings(max_wait_ms=None).max_wait_ms is None
    assert ServiceSettings().host == "127.0.0.1"


def test_startup_refuses_an_index_of_another_model(run_dir, tmp_path):
    from fastapi.testclient import TestClient

    from twotower.index import ExactIndex
    from twotower.serving import RecommenderService, create_app

    ExactIndex().build(np.eye(16, dtype=np.float32), np.arange(16)).save(tmp_path / "idx", model_fingerprint="other")
    with pytest.raises(IntegrityError, match="rebuild"):
        RecommenderService.load(run_dir, tmp_path / "idx")
    app = create_app(run_dir, index_dir=tmp_path / "idx")
    with pytest.raises(IntegrityError):
        with TestClient(app):
            pass


def test_unknown_route_is_json_404(client):
    r = client.get("/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == 404
