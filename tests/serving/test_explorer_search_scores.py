"""The explorer page's search box: scores that differ read differently, and the answer's notes are shown.

Search scores were printed with 3 decimals, so RRF's 0.016393 (1/61) and 0.016129 (1/62) both read "0.016"; and
the box showed neither ``shortfall`` nor ``query_cut``, which the recommend panels (shortfall) and
`twotower search query` (both) state. The page's functions run in Node (the Chromium tests are skipped without a
browser); skipped when Node is not installed.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from twotower.serving.app import STATIC_DIR

NODE = shutil.which("node") or shutil.which("nodejs")


def _function(js: str, name: str) -> str:
    found = re.search(rf"^(?:async )?function {name}\(.*?^\}}\n", js, flags=re.S | re.M)
    assert found, f"app.js has no function {name}"
    return found.group(0)


def _run(expr: str):
    if NODE is None:
        pytest.skip("Node.js not found")
    js = (STATIC_DIR / "app.js").read_text()
    src = "".join(_function(js, n) for n in ("answerNotes", "scoreText", "searchNotes"))
    out = subprocess.run([NODE, "-e", f"{src}\nconsole.log(JSON.stringify({expr}));"], capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_search_scores_show_four_significant_digits() -> None:
    shown = _run("[0.016393, 0.016129, 0.032787, 12.3456, -3.25, 0, 123456.7, null].map(scoreText)")
    assert shown == ["0.01639", "0.01613", "0.03279", "12.35", "-3.25", "0", "123500", "–"]


def test_search_box_states_shortfall_and_query_cut() -> None:
    res = {"items": [], "shortfall": {"reason": "only 1 document matches the query's words"},
           "query_cut": {"word_pieces": 300, "read": 128}}
    assert _run(f"searchNotes({json.dumps(res)})") == [
        "only 1 document matches the query's words",
        "the query is 300 word pieces long; dense search read only the first 128"]
    assert _run('searchNotes({"items": []})') == []


def test_search_box_renders_its_notes() -> None:
    js = (STATIC_DIR / "app.js").read_text()
    assert 'renderNotes($("search-warnings"), searchNotes(res))' in _function(js, "search")
    assert 'id="search-warnings"' in (STATIC_DIR / "index.html").read_text()
