"""The explorer page in a real headless Chromium against the real app on a tiny trained run.

Starts ``create_app`` under uvicorn on 127.0.0.1 (a free port) over the
serving tests' tiny run, opens
``/?user=<id>&item=<id>`` (deep links), lets the page's JavaScript run
(``--virtual-time-budget``), then checks the rendered DOM: recommendations
with scores, an explanation sentence for each, the history, similar items.
A screenshot is saved (``tmp_path``, or ``$TWOTOWER_TEST_ARTIFACTS`` when set)
and its path printed. Skipped when Chromium is not installed
(``apt-get install chromium``).
"""
from __future__ import annotations

import html
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

CHROMIUM = next((p for p in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium not found (apt-get install chromium, or set CHROMIUM=path)")
STATIC = Path(__file__).resolve().parents[2] / "src" / "twotower" / "serving" / "static"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(run_dir):
    """The real app over the serving tests' tiny run (``run_dir`` from tests/serving/conftest.py)."""
    yield from _serve(run_dir)


@pytest.fixture(scope="module")
def unplaced_server(unplaced_run_dir):
    """The real app over the tiny run with items x0..x3 the model cannot place (``unplaced_run_dir``)."""
    yield from _serve(unplaced_run_dir)


@pytest.fixture(scope="module")
def dup_server(dup_run_dir):
    """The real app over the tiny run with three items titled "Movie 0" (``dup_run_dir``)."""
    yield from _serve(dup_run_dir)


def _serve(run_dir):
    pytest.importorskip("uvicorn")
    serving = pytest.importorskip("twotower.serving")
    import uvicorn

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(serving.create_app(run_dir), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the app did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


def _chromium(url: str, tmp: Path, *extra: str) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
           f"--user-data-dir={tmp / 'profile'}", "--window-size=1400,1100", "--virtual-time-budget=10000", *extra, url]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def _texts(dom: str, cls: str) -> list[str]:
    """Text of the elements whose class attribute is exactly ``cls`` (a small regex over the dumped DOM)."""
    found = re.findall(rf'<(\w+) class="{cls}"[^>]*>(.*?)</\1>', dom, flags=re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", inner)).strip() for _, inner in found]


@needs_chromium
def test_explorer_shows_recommendations_explanations_and_similar_items(server, tmp_path) -> None:
    url = f"{server}/?user=u1&item=i4"
    dom = _chromium(url, tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    recs = re.search(r'<ol id="recs-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert recs.count('class="rec"') == 10
    whys = _texts(recs, "why")
    assert len(whys) == 10 and all(w.endswith(".") for w in whys)
    # a named history item, credited as the cause, or as raising a score the history lowers as a whole
    assert any(w.startswith("Because you watched Movie") or ", though Movie" in w for w in whys), whys
    assert all(s.startswith("score ") for s in _texts(recs, "score"))
    history = re.search(r'<ol id="history-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert "Movie " in history
    similar = re.search(r'<ol id="similar-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert similar.count("<li") == 10
    assert 'id="search-form" class="hidden"' in dom  # not a search run
    assert 'class="error"' not in dom

    out_dir = Path(os.environ.get("TWOTOWER_TEST_ARTIFACTS") or tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    shot = out_dir / "explorer.png"
    _chromium(url, tmp_path, f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000
    print(f"explorer screenshot: {shot}")


@needs_chromium
def test_explorer_names_items_of_one_title_apart(dup_server, tmp_path) -> None:
    """Three items titled "Movie 0" were three identical rows; the page shows each by its display_name, the
    name the explanation sentences give it (by year where that tells it apart, else by id)."""
    from tiny_run import DUP_NAMES

    dom = _chromium(f"{dup_server}/?history=i0,i1,i20&item=i0", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom and 'class="error"' not in dom

    def titles(list_id: str) -> list[str]:
        inner = re.search(rf'<ol id="{list_id}"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
        return [html.unescape(re.sub(r"<[^>]+>", "", t)).strip()
                for t in re.findall(r'class="title"[^>]*>(.*?)</a>', inner)]

    assert titles("history-list") == [DUP_NAMES["i20"], DUP_NAMES["i1"], DUP_NAMES["i0"]]  # newest first
    head = re.search(r'<div id="similar-item"[^>]*>(.*?)</div>', dom, flags=re.S)
    assert head is not None and f"like {DUP_NAMES['i0']}" in html.unescape(head.group(1))
    recs = re.search(r'<ol id="recs-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    cells = [html.unescape(c).strip() for c in re.findall(r"<td>([^<]*)</td>", recs)]
    named = [c for c in cells if c.startswith("Movie 0")]  # the explanation tables' history items
    assert named and set(named) <= set(DUP_NAMES.values()), named


@needs_chromium
def test_explorer_says_why_an_item_has_no_similar_items_and_a_list_holds_unplaced_items(unplaced_server,
                                                                                      tmp_path) -> None:
    """/similar-items of x0 answers no items, query_space "none" and a warning: the page showed an empty panel
    under "like New 0"; and /recommend's warning that its list holds x0..x3 was not shown either."""
    from test_unplaced_items import LIST_NOTE, NOTE

    dom = _chromium(f"{unplaced_server}/?user=u0&k=60&item=x0", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom and 'class="error"' not in dom
    box = re.search(r'<div id="similar-warnings"[^>]*>(.*?)</div>', dom, flags=re.S)
    assert box and _texts(box.group(1), "warning") == [NOTE]
    similar = re.search(r'<ol id="similar-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert _texts(similar, "muted") == ["no similar items"]
    recs = re.search(r'<div id="recs-warnings"[^>]*>(.*?)</div>', dom, flags=re.S)
    assert recs and LIST_NOTE in _texts(recs.group(1), "warning")


@needs_chromium
def test_explorer_says_why_a_similar_list_is_short(tmp_path) -> None:
    """A /similar-items answer's shortfall (fewer than k items left after the filters) was not shown."""
    reason = "fewer than k=10 items are left in the index after the filters; all 1 eligible items are returned"
    answer = {**_similar_answer("Heat"), "shortfall": {"missing": 9, "reason": reason}}
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 2},
               "/items/a": {"item_id": "a", "title": "Ronin"}, "/similar-items": answer}
    dom = _chromium(_canned_page(tmp_path, answers) + "?item=a", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    box = re.search(r'<div id="similar-warnings"[^>]*>(.*?)</div>', dom, flags=re.S)
    assert box and _texts(box.group(1), "warning") == [reason]


@needs_chromium
def test_unknown_user_shows_the_error(server, tmp_path) -> None:
    dom = _chromium(f"{server}/?user=ghost", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom
    status = re.search(r'<p id="status"[^>]*>(.*?)</p>', dom, flags=re.S).group(1)
    assert "ghost" in html.unescape(status)


@needs_chromium
def test_bare_page_lists_example_users_from_the_run(server, tmp_path) -> None:
    dom = _chromium(f"{server}/", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom
    users = _texts(dom, "example-user")
    assert 1 <= len(users) <= 5 and all(re.fullmatch(r"u\d+", u) for u in users)  # the tiny run's ids
    assert len(_texts(dom, "example-history")) == 1
    assert 'id="howto" class="muted"' in dom  # still shown: nothing asked yet


def test_page_and_assets_are_served_and_local(client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for asset in ("/static/app.js", "/static/style.css"):
        assert asset in page.text
        assert client.get(asset).status_code == 200
    for f in STATIC.iterdir():  # no CDN, no external fonts: everything comes from the app
        assert not re.search(r"(src|href)=[\"']https?://|url\(\s*['\"]?https?://|@import", f.read_text()), f.name


def test_page_assets_and_answers_carry_a_strict_csp(client) -> None:
    """The explorer was served with no Content-Security-Policy (nor nosniff, Referrer-Policy, framing rule):
    any script an injection placed in it would run, and any site could frame it."""
    from twotower.serving.middleware import DOCS_CSP

    for path in ("/", "/static/app.js", "/static/style.css", "/healthz", "/nope"):
        h = client.get(path).headers
        csp = h["content-security-policy"]
        assert "script-src 'self';" in csp and "default-src 'none'" in csp and "unsafe" not in csp, (path, csp)
        assert "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
        assert h["x-content-type-options"] == "nosniff" and h["referrer-policy"] == "no-referrer"
        assert h["x-frame-options"] == "DENY"
    # the docs pages have their own policies (test_docs_pages.py); framing is refused on them all the same
    assert "frame-ancestors 'none'" in client.get("/docs").headers["content-security-policy"]
    assert "frame-ancestors 'none'" in DOCS_CSP
    # what lets the page live under script-src/style-src 'self': no inline script, style or handler in it
    page = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page) and "<style" not in page
    assert not re.search(r"\s(style|on[a-z]+)=", page)
    assert not re.search(r"innerHTML|setAttribute\(\s*[\"'](style|on)|\beval\(|new Function", (STATIC / "app.js").read_text())


@needs_chromium
def test_the_page_runs_under_its_csp_without_a_violation(server, tmp_path) -> None:
    """The real page in Chromium under the served policy: it renders, and the console reports nothing blocked."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--enable-logging=stderr",
           "--v=0", "--dump-dom", f"{server}/?user=u1&item=i4"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and 'data-ready="1"' in res.stdout
    assert res.stdout.count('class="rec"') == 10 and 'class="error"' not in res.stdout
    blocked = [line for line in res.stderr.splitlines() if "Content Security Policy" in line]
    assert not blocked, blocked


# ------------------------------------------------------------------ the page over canned answers
# The page's rendering of answers the tiny run does not produce (another metadata column, hostile titles):
# index.html and app.js load from a folder with a stand-in `fetch` answering from a table, so no server runs.

def _canned_page(tmp: Path, answers: dict[str, object], delays: dict[str, int] | None = None,
                 driver: str | None = None) -> str:
    """``file://`` URL of the explorer page whose ``fetch`` answers ``answers[path]`` (404 for any other), after
    resolving the path as a browser does (``/items/..`` is ``/``, which answers the page itself: not JSON).

    A POST body's ``user_id`` or ``item_id`` picks ``answers["<path> <id>"]`` first, and ``delays`` (same keys, ms)
    hold an answer back; ``driver``: a script run after app.js (it may call the page's functions)."""
    import json

    page = (STATIC / "index.html").read_text(encoding="utf-8")
    stub = ("<script>const ANSWERS = " + json.dumps(answers).replace("</", "<\\/") + ";\n"
            "const DELAYS = " + json.dumps(delays or {}) + ";\n"
            "window.fetch = async (path, opts) => { const at = new URL(String(path), 'http://page.test/').pathname;\n"
            "  if (at === '/') return { ok: true, status: 200, statusText: 'OK', json: async () => JSON.parse('<!doctype') };\n"
            "  const sent = opts && opts.body ? JSON.parse(opts.body) : {};\n"
            "  const key = `${at} ${sent.user_id || sent.item_id}`;\n"
            "  await new Promise((r) => setTimeout(r, DELAYS[key] || DELAYS[at] || 0));\n"
            "  const body = key in ANSWERS ? ANSWERS[key] : ANSWERS[at];\n"
            "  const ok = body !== undefined;\n"
            "  return { ok, status: ok ? 200 : 404, statusText: ok ? 'OK' : 'Not Found',\n"
            "           json: async () => ok ? body : { error: { message: 'unknown ' + path } } }; };</script>\n")
    page = page.replace('<script src="/static/app.js">', stub + '<script src="app.js">')
    if driver is not None:
        page = page.replace("</body>", f"<script>{driver}</script>\n</body>")
    page = page.replace('href="/static/style.css"', 'href="style.css"')
    assert 'src="app.js"' in page
    for name in ("app.js", "style.css"):
        (tmp / name).write_text((STATIC / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp / "page.html").write_text(page, encoding="utf-8")
    return (tmp / "page.html").as_uri()


def _explained(title: str, shared: dict, history: list[dict]) -> dict:
    """A ``POST /recommend`` answer of one item with its explanation."""
    expl = {"text": f"Because you watched {history[0]['title']}.", "method": "loo", "basis": "history",
            "history": history, "shared_metadata": shared, "score": 0.5, "history_total": 0.1}
    return {"items": [{"item_id": "i1", "title": title, "score": 0.5, "rank": 1, "explanation": expl}],
            "user_id": "u1", "k": 10}


_ROUTES = {"paths": {"/recommend": {"post": {}}, "/explain": {"post": {}}, "/items/{item_id}": {"get": {}}}}


@needs_chromium
def test_explorer_says_which_history_items_a_year_range_spans(tmp_path) -> None:
    # 50 history items compared, 13 of them share a genre with the item: the range spans those 13, not the 50
    shared = {"history_items": 50, "genres": [{"value": "Drama", "count": 13}],
              "year_range": {"min": 1985, "max": 1995, "count": 13, "item": 1994,
                             "among": "history items sharing a genres value"}}
    hist = [{"item_id": "i2", "title": "Heat", "contribution": 0.1, "genres": "Drama"}]
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 2},
               "/recommend": _explained("Casino", shared, hist)}
    dom = _chromium(_canned_page(tmp_path, answers) + "?user=u1", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    assert _texts(dom, "muted shared") == ["shared with the last 50 history items: genres: Drama (13)"]
    assert _texts(dom, "muted range") == [
        "year 1985–1995 across the 13 history items sharing a genres value (this item: 1994)"]


@needs_chromium
def test_explorer_heads_its_chips_with_the_runs_own_column_and_inserts_values_as_text(tmp_path) -> None:
    # a shop's catalogue: its multi-valued column is "tags", and titles / tags hold markup, inserted as text
    title = '<img src=x onerror="document.title=1">Lamp'
    shared = {"history_items": 3, "tags": [{"value": "<b>home</b>", "count": 2}]}
    hist = [{"item_id": "i2", "title": "Desk </script><script>document.title=2</script>", "contribution": 0.1,
             "tags": "<b>home</b>|office"}]
    answer = _explained(title, shared, hist)
    answer["items"][0]["tags"] = "<b>home</b>|light"
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 2},
               "/recommend": answer}
    dom = _chromium(_canned_page(tmp_path, answers) + "?user=u1", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    head = re.search(r'<table class="contrib">\s*<tr>(.*?)</tr>', dom, flags=re.S).group(1)
    assert [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", head)] == ["contribution", "history item", "tags"]
    recs = re.search(r'<ol id="recs-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    # the item's own tags on its line, then its history item's in the table
    assert _texts(recs, "chip") == ["<b>home</b>", "light", "<b>home</b>", "office"]
    main = re.search(r"<main>(.*)</main>", dom, flags=re.S).group(1)
    assert "<img" not in main and "<b>" not in main and "<script" not in main
    assert "<title>twotower explorer</title>" in dom  # no injected handler ran
    assert title in html.unescape(re.sub(r"<[^>]+>", "", recs))  # shown as the text it is


@needs_chromium
def test_explorer_lists_a_shared_categorical_value(tmp_path) -> None:
    # data.item_categorical=[decade]: shared_metadata holds {"value", "count"} for it, which the page left out
    shared = {"history_items": 4, "genres": [{"value": "Drama", "count": 2}],
              "decade": {"value": "1990s", "count": 3}}
    hist = [{"item_id": "i2", "title": "Heat", "contribution": 0.1, "genres": "Drama", "decade": "1990s"}]
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 2},
               "/recommend": _explained("Casino", shared, hist)}
    dom = _chromium(_canned_page(tmp_path, answers) + "?user=u1", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    assert _texts(dom, "muted shared") == ["shared with the last 4 history items: genres: Drama (2); decade: 1990s (3)"]


@needs_chromium
def test_explorer_does_not_give_a_tower_that_reads_no_history_a_window(tmp_path) -> None:
    # model.user.history=none: the items compared are the whole history, which the tower does not read ("shared
    # with the last 147 history items" said it read the last 147)
    shared = {"history_items": 147, "genres": [{"value": "Drama", "count": 60}]}
    answer = _explained("Casino", shared, [{"item_id": "i2", "title": "Heat", "contribution": 0.0, "genres": "Drama"}])
    answer["items"][0]["explanation"].update(reads_history=False, history=[], basis="features",
                                             text="This model does not read your history, so ...")
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 2}, "/recommend": answer}
    dom = _chromium(_canned_page(tmp_path, answers) + "?user=u1", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    assert _texts(dom, "muted shared") == [
        "shared with your 147 history items (this model does not read them): genres: Drama (60)"]


@needs_chromium
def test_explorer_shows_a_history_holding_the_item_id_dot_dot(tmp_path) -> None:
    # GET /items/.. is GET / to a browser: the page itself came back as a 200 that is not JSON, was taken for an
    # item (null), and the history panel failed with "Cannot read properties of null"
    hist = [{"item_id": "i2", "title": "Heat", "contribution": 0.1, "genres": "Drama"}]
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 3},
               "/items/i2": {"item_id": "i2", "title": "Heat", "genres": "Drama", "in_index": True},
               "/recommend": _explained("Casino", {"history_items": 2, "genres": []}, hist)}
    dom = _chromium(_canned_page(tmp_path, answers) + "?history=..,i2", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    status = re.search(r'<p id="status"[^>]*>(.*?)</p>', dom, flags=re.S).group(1)
    assert status == ""
    history = re.search(r'<ol id="history-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert [html.unescape(re.sub(r"<[^>]+>", "", t)).strip() for t in re.findall(r'class="title"[^>]*>(.*?)</a>', history)] == ["Heat", ".."]


def _titles(dom: str) -> list[str]:
    """The item titles (links) in ``dom``, in order."""
    return [html.unescape(re.sub(r"<[^>]+>", "", t)).strip() for t in re.findall(r'class="title"[^>]*>(.*?)</a>', dom)]


def _similar_answer(*titles: str) -> dict:
    return {"items": [{"item_id": f"{t}-{j}", "title": t, "score": 0.5, "rank": j + 1} for j, t in enumerate(titles)]}


#: after the page is ready, run these two requests at once and mark the body data-driven="1"
_TWO_AT_ONCE = ("(async () => {{ while (document.body.dataset.ready !== '1') await new Promise((r) => setTimeout(r, 10));"
                " await Promise.all([{first}, {second}]); document.body.dataset.driven = '1'; }})();")


@needs_chromium
def test_explorer_shows_the_answer_to_the_latest_click_only(tmp_path) -> None:
    """Two titles clicked in a row: the list was cleared twice, then both answers appended (20 items under the
    second title), and the slower first answer's title became the heading; only the latest click's answer shows."""
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 1, "n_items": 4},
               "/items/a": {"item_id": "a", "title": "Slow"}, "/items/b": {"item_id": "b", "title": "Fast"},
               "/similar-items a": _similar_answer("FromSlow", "FromSlow"),
               "/similar-items b": _similar_answer("FromFast", "FromFast")}
    delays = {"/items/a": 300, "/similar-items a": 300}
    driver = _TWO_AT_ONCE.format(first="showSimilar('a')", second="showSimilar('b')")
    dom = _chromium(_canned_page(tmp_path, answers, delays, driver), tmp_path, "--dump-dom")
    assert 'data-driven="1"' in dom, "the driver did not finish"
    head = re.search(r'<div id="similar-item"[^>]*>(.*?)</div>', dom, flags=re.S).group(1)
    assert "like Fast" in html.unescape(head)
    similar = re.search(r'<ol id="similar-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert _titles(similar) == ["FromFast", "FromFast"]


@needs_chromium
def test_explorer_drops_a_slower_earlier_recommendation(tmp_path) -> None:
    """Recommend for u-slow, then at once for u-fast: u-slow's later answer replaced u-fast's under the heading
    'for user u-fast' (or its error wiped them); the page keeps the latest request's answer."""
    answers = {"/openapi.json": _ROUTES, "/readyz": {"ready": True, "n_users": 2, "n_items": 2},
               "/recommend u-slow": {"items": [{"item_id": "s", "title": "ForSlow", "score": 0.1, "rank": 1}]},
               "/recommend u-fast": {"items": [{"item_id": "f", "title": "ForFast", "score": 0.2, "rank": 1}]}}
    delays = {"/recommend u-slow": 300}
    ask = "(async () => {{ document.getElementById('user-input').value = '{u}'; await submitUser(); }})()"
    driver = _TWO_AT_ONCE.format(first=ask.format(u="u-slow"), second=ask.format(u="u-fast"))
    dom = _chromium(_canned_page(tmp_path, answers, delays, driver), tmp_path, "--dump-dom")
    assert 'data-driven="1"' in dom, "the driver did not finish"
    recs = re.search(r'<ol id="recs-list"[^>]*>(.*?)</ol>', dom, flags=re.S).group(1)
    assert _titles(recs) == ["ForFast"]
    note = re.search(r'<span id="recs-note"[^>]*>(.*?)</span>', dom, flags=re.S).group(1)
    assert note == "for user u-fast"


@needs_chromium
def test_search_only_page_tells_how_to_search_not_how_to_recommend(tmp_path) -> None:
    """`serve --search-index` alone: the page hid the user form but its how-to still said to type a user id and
    click titles for similar items, under an empty 'Similar items (click a title)' panel with nothing to click."""
    answers = {"/openapi.json": {"paths": {"/search": {"post": {}}, "/readyz": {"get": {}}}},
               "/readyz": {"ready": True},
               "/search": {"items": [{"doc_id": "d1", "title": "Aspirin", "text": "Aspirin helps.", "score": 0.5,
                                      "rank": 1}]}}
    dom = _chromium(_canned_page(tmp_path, answers) + "?q=aspirin&item=d1", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    shown = re.sub(r'<(\w+) id="[^"]*" class="[^"]*\bhidden\b[^"]*".*?</\1>', "", dom, flags=re.S)  # what is shown
    text = html.unescape(re.sub(r"<[^>]+>", " ", shown))
    assert "user id" not in text and "Similar items" not in text and "history item" not in text, text
    assert "type a query and press Search" in text
    assert "Aspirin helps." in text and 'class="error"' not in dom


@needs_chromium
def test_explorer_address_keeps_k_and_the_query(tmp_path) -> None:
    """The page reads ?k= and ?q= on load but never wrote them: after asking for k=3 and searching, the address
    (reloaded, bookmarked, shared) asked for 10 items and no search."""
    routes = {"paths": {**_ROUTES["paths"], "/search": {"post": {}}}}
    answers = {"/openapi.json": routes, "/readyz": {"ready": True, "n_users": 1, "n_items": 2},
               "/recommend": {"items": [{"item_id": "f", "title": "Casino", "score": 0.2, "rank": 1}]},
               "/search": {"items": []}}
    driver = ("(async () => { while (document.body.dataset.ready !== '1') await new Promise((r) => setTimeout(r, 10));"
              " document.getElementById('user-input').value = 'u1'; document.getElementById('k-input').value = '3';"
              " await submitUser(); await search('heist films');"
              " document.body.dataset.address = location.search; })();")
    dom = _chromium(_canned_page(tmp_path, answers, driver=driver), tmp_path, "--dump-dom")
    found = re.search(r'data-address="([^"]*)"', dom)
    assert found, "the driver did not finish"
    params = dict(urllib.parse.parse_qsl(html.unescape(found.group(1)).lstrip("?")))
    assert params == {"user": "u1", "k": "3", "q": "heist films"}


def test_page_names_its_icon_so_the_browser_does_not_ask_for_favicon_ico(client) -> None:
    """Every load of the page asked for /favicon.ico, a 404 logged as an error in the browser's console."""
    icon = re.search(r'<link rel="icon" href="([^"]+)"', client.get("/").text)
    assert icon and icon.group(1).startswith("/static/"), "no icon link"
    got = client.get(icon.group(1))
    assert got.status_code == 200 and got.headers["content-type"].startswith("image/svg+xml")


@needs_chromium
def test_explorer_says_when_it_lists_part_of_a_long_history(tmp_path) -> None:
    """GET /users lists a user's newest 50 items; the page headed them '(218 items, newest first)'."""
    routes = {"paths": {**_ROUTES["paths"], "/users/{user_id}": {"get": {}}}}
    answers = {"/openapi.json": routes, "/readyz": {"ready": True, "n_users": 1, "n_items": 300},
               "/recommend": {"items": [{"item_id": "f", "title": "Casino", "score": 0.2, "rank": 1}]},
               "/users/u1": {"user_id": "u1", "n_history": 218,
                             "history": [{"item_id": "a", "title": "Heat"}, {"item_id": "b", "title": "Ronin"}]}}
    dom = _chromium(_canned_page(tmp_path, answers) + "?user=u1", tmp_path, "--dump-dom")
    assert 'data-ready="1"' in dom, "the page's script did not finish"
    note = re.search(r'<span id="history-note"[^>]*>(.*?)</span>', dom, flags=re.S).group(1)
    assert note == "(the newest 2 of 218 items)"
