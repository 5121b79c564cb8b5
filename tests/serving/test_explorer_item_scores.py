"""The explorer page shows recommendation and similar-item scores to 4 significant digits, as search scores.

Fixed 3 decimals read two close cosines (0.98123, 0.98149) both "0.981" in the similar-items list, and the
recommendation list the same, while the search box (scoreText) told them apart. renderRecs runs in Node with
the page's DOM helpers stubbed; skipped when Node is not installed.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from twotower.serving.app import STATIC_DIR

NODE = shutil.which("node") or shutil.which("nodejs")

STUBS = """
function el(tag, attrs, ...children) {
  return { tag, attrs, children, append(...c) { this.children.push(...c); }, replaceChildren() { this.children = []; } };
}
const lists = {};
function $(id) { return lists[id] || (lists[id] = el("ul", {})); }
function itemLine(it, score) { return score; }
function explanationBlock() { return null; }
"""


def _function(js: str, name: str) -> str:
    found = re.search(rf"^(?:async )?function {name}\(.*?^\}}\n", js, flags=re.S | re.M)
    assert found, f"app.js has no function {name}"
    return found.group(0)


def test_recommendation_scores_show_four_significant_digits() -> None:
    if NODE is None:
        pytest.skip("Node.js not found")
    js = (STATIC_DIR / "app.js").read_text()
    src = STUBS + "".join(_function(js, n) for n in ("fmt", "scoreText", "renderRecs"))
    expr = ('(renderRecs("u1", [{score: 0.98123}, {score: 0.98149}, {score: 12.3456}]), '
            'lists["recs-list"].children.map((li) => li.children[0].children.join("")))')
    out = subprocess.run([NODE, "-e", f"{src}\nconsole.log(JSON.stringify({expr}));"], capture_output=True,
                         text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == ["score 0.9812", "score 0.9815", "score 12.35"]


def test_similar_item_scores_use_the_same_text() -> None:
    js = (STATIC_DIR / "app.js").read_text()
    similar = _function(js, "showSimilar")
    assert "scoreText(it.score)" in similar and "fmt(it.score)" not in similar
