"""The API docs pages (/docs, /redoc) are served from this machine, under a strict policy, and work offline.

They loaded Swagger UI and ReDoc from a CDN: without internet /docs was blank ("SwaggerUIBundle is not defined"),
and their policy let them run any script. The browser tests map every host name but 127.0.0.1 to "not found"
(``--host-resolver-rules``), so a page that still needed the CDN fails them on a machine with internet too.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_browser import CHROMIUM, needs_chromium, server  # noqa: F401 - server: the shared fixture

from twotower.serving.docs import ASSETS_URL, docs_note, inline_hashes, local_assets

needs_local = pytest.mark.skipif(local_assets() is None, reason="fastapi-offline not installed (pip install fastapi-offline)")
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def _directives(csp: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in csp.split(";")) if d}


@needs_local
def test_docs_pages_reference_only_local_assets(client) -> None:
    for path, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")), ("/redoc", ("redoc.standalone.js",))):
        page = client.get(path)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        refs = re.findall(r"(?:src|href)=[\"']([^\"']+)", page.text)
        assert refs and all(r.startswith("/") and not r.startswith("//") for r in refs), (path, refs)
        assert "https://" not in page.text and "fonts.googleapis" not in page.text, path
        for asset in assets:
            assert f"{ASSETS_URL}/{asset}" in refs, (path, asset)


@needs_local
def test_docs_assets_answer_with_their_types(client) -> None:
    for name, kind in (("swagger-ui-bundle.js", "javascript"), ("swagger-ui.css", "text/css"),
                       ("redoc.standalone.js", "javascript"), ("favicon.png", "image/png")):
        r = client.get(f"{ASSETS_URL}/{name}")
        assert r.status_code == 200 and kind in r.headers["content-type"], (name, r.status_code, r.headers)
        assert r.headers["x-content-type-options"] == "nosniff"
    assert "SwaggerUIBundle" in client.get(f"{ASSETS_URL}/swagger-ui-bundle.js").text
    assert client.get(f"{ASSETS_URL}/nope.js").status_code == 404


@needs_local
def test_docs_pages_carry_a_strict_csp(client) -> None:
    page = client.get("/docs")
    d = _directives(page.headers["content-security-policy"])
    # its one inline script (Swagger UI's start-up) is allowed by the hash of the text actually served
    assert d["script-src"] == ["'self'", *inline_hashes(page.text, "script")] and len(d["script-src"]) == 2
    assert d["style-src"] == ["'self'"] and d["connect-src"] == ["'self'"] and d["img-src"] == ["'self'", "data:"]
    assert d["default-src"] == ["'none'"] and d["frame-ancestors"] == ["'none'"] and d["base-uri"] == ["'none'"]
    assert d["object-src"] == ["'none'"]
    redoc = _directives(client.get("/redoc").headers["content-security-policy"])
    assert redoc["script-src"] == ["'self'"] and redoc["connect-src"] == ["'self'"]
    assert redoc["default-src"] == ["'none'"] and redoc["frame-ancestors"] == ["'none'"]
    for csp in (d, redoc):
        assert not any("unsafe" in s or s.startswith("http") for s in csp["script-src"]), csp
    assert docs_note() == "docs at /docs and /redoc"


def test_without_the_local_files_the_cdn_pages_stay_and_the_start_up_line_says_so(monkeypatch, service) -> None:
    from fastapi.testclient import TestClient

    import twotower.serving.app as app_module
    import twotower.serving.docs as docs_module
    from twotower.serving.middleware import DOCS_CSP

    monkeypatch.setattr(app_module, "local_assets", lambda: None)
    monkeypatch.setattr(docs_module, "local_assets", lambda: None)
    with TestClient(app_module.create_app(service=service)) as client:
        page = client.get("/docs")
        assert page.status_code == 200 and "cdn.jsdelivr.net" in page.text
        assert page.headers["content-security-policy"] == DOCS_CSP
        assert client.get(f"{ASSETS_URL}/swagger-ui.css").status_code == 404
    note = docs_note()
    assert "need internet" in note and "pip install fastapi-offline" in note


# ------------------------------------------------------------------ in Chromium, offline

def _chromium_log(url: str, tmp: Path) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", OFFLINE,
           f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0",
           "--dump-dom", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _blocked(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Content Security Policy" in line]


@needs_chromium
@needs_local
def test_docs_page_renders_offline_under_its_csp(server, tmp_path) -> None:  # noqa: F811
    res = _chromium_log(f"{server}/docs", tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    paths = set(re.findall(r'data-path="([^"]+)"', res.stdout))
    assert {"/recommend", "/healthz", "/similar-items"} <= paths, sorted(paths)
    assert "Unable to render" not in res.stdout
    assert not _blocked(res.stderr), _blocked(res.stderr)


@needs_chromium
@needs_local
def test_redoc_page_renders_offline(server, tmp_path) -> None:  # noqa: F811
    res = _chromium_log(f"{server}/redoc", tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    operations = set(re.findall(r'href="#tag/[^/"]+/operation/([^"]+)"', res.stdout))
    assert {"recommend_recommend_post", "healthz_healthz_get"} <= operations, sorted(operations)
    # ReDoc's "API docs by Redocly" logo is an image on its CDN: blocked, as it should be, and the only thing
    assert all("cdn.redoc.ly" in line for line in _blocked(res.stderr)), _blocked(res.stderr)


_TRY_IT_OUT = r"""(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const until = async f => { for (let i = 0; i < 400; i++) { const v = f(); if (v) return v; await sleep(50); } };
  const q = s => document.querySelector('#operations-ops-healthz_healthz_get ' + s);
  (await until(() => q('.opblock-summary-control'))).click();
  (await until(() => q('.try-out__btn'))).click();
  (await until(() => q('.execute'))).click();
  const body = await until(() => q('.live-responses-table .response .microlight'));
  return body ? body.textContent : null;
})()"""


#: "Try it out" then "Execute" on a POST route with the body Swagger UI filled in: {"body", "status"}
_TRY_POST = r"""(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const until = async f => { for (let i = 0; i < 400; i++) { const v = f(); if (v) return v; await sleep(50); } };
  const q = s => document.querySelector('#operations-TAG-OPERATION ' + s);
  (await until(() => q('.opblock-summary-control'))).click();
  (await until(() => q('.try-out__btn'))).click();
  const body = (await until(() => q('textarea.body-param__text'))).value;
  (await until(() => q('.execute'))).click();
  const status = await until(() => q('.live-responses-table .response .response-col_status'));
  return JSON.stringify({body, status: status ? status.textContent.trim() : null});
})()"""


def _cdp(url: str, expression: str, tmp: Path) -> tuple[object, list[str]]:
    """Evaluate ``expression`` (a promise) in ``url`` through Chromium's DevTools protocol over a pipe
    (``--remote-debugging-pipe``: fd 3 in, fd 4 out, NUL-separated JSON), which needs no websocket client.
    Returns its value and the page's log entries."""
    to_chrome, from_chrome = os.pipe(), os.pipe()
    # the pipe ends become fds 3 and 4 in a small Python that then exec's Chromium (same process): a preexec_fn
    # that dup2'ed onto 3 and 4 could overwrite subprocess's own error pipe (when it had one of those numbers),
    # and Popen then failed with "Bad file descriptor" now and then; sh cannot name fds above 9
    move = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])"
    proc = subprocess.Popen([sys.executable, "-c", move, str(to_chrome[0]), str(from_chrome[1]), CHROMIUM,
                             "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", OFFLINE,
                             f"--user-data-dir={tmp / 'cdp-profile'}", "--remote-debugging-pipe"],
                            pass_fds=(to_chrome[0], from_chrome[1]), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(to_chrome[0])
    os.close(from_chrome[1])
    events: list[dict] = []
    ids = itertools.count(1)
    buf = b""

    def call(method: str, params: dict | None = None, session: str | None = None) -> dict:
        nonlocal buf
        msg_id = next(ids)
        os.write(to_chrome[1], json.dumps({"id": msg_id, "method": method, "params": params or {},
                                           **({"sessionId": session} if session else {})}).encode() + b"\0")
        while True:
            while b"\0" not in buf:
                chunk = os.read(from_chrome[0], 1 << 16)
                assert chunk, "Chromium closed its debugging pipe"
                buf += chunk
            raw, buf = buf.split(b"\0", 1)
            msg = json.loads(raw)
            if msg.get("id") == msg_id:
                assert "error" not in msg, msg
                return msg["result"]
            events.append(msg)

    try:
        target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        call("Log.enable", session=session)
        call("Page.navigate", {"url": url}, session=session)
        res = call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                   session=session)
    finally:
        proc.kill()
        proc.wait()
        os.close(to_chrome[1])
        os.close(from_chrome[0])
    logs = [e["params"]["entry"]["text"] for e in events if e.get("method") == "Log.entryAdded"]
    if "exceptionDetails" in res:  # the page script threw (an element never came): say what, with the log
        return None, [*logs, res["exceptionDetails"].get("exception", {}).get("description", "")]
    return res["result"].get("value"), logs


@needs_chromium
@needs_local
def test_try_it_out_on_the_docs_page_reaches_the_api(server, tmp_path) -> None:  # noqa: F811
    """Swagger UI's "Try it out" / "Execute" on GET /healthz shows the server's answer (connect-src 'self')."""
    shown, logs = _cdp(f"{server}/docs", _TRY_IT_OUT, tmp_path)
    assert shown is not None and json.loads(shown)["status"] == "ok", (shown, logs)
    assert not [m for m in logs if "Content Security Policy" in m], logs


@needs_chromium
@needs_local
@pytest.mark.parametrize("tag, operation", [("recommend", "recommend_recommend_post"),
                                            ("items", "similar_items_similar_items_post")])
def test_try_it_out_with_the_filled_in_body_answers_200(server, tmp_path, tag, operation) -> None:  # noqa: F811
    """The body Swagger UI fills in is the route's first example, with the served run's ids: "Execute" answers
    200 (Swagger's own made-up body, every field set, was refused with 422)."""
    script = _TRY_POST.replace("TAG", tag).replace("OPERATION", operation)
    shown, logs = _cdp(f"{server}/docs", script, tmp_path)
    assert shown is not None, logs
    got = json.loads(shown)
    assert got["status"] == "200", (got, logs)
    assert "string" not in got["body"], got  # an example, not a body made up from the schema
