"""A run without item titles: explanation records carry no invented title, as every other item record.

The explanation's ``item`` and ``history`` records had ``"title": "<item id>"`` while ``/recommend``, ``/items``
and ``/users`` gave the same item without a title (``display_name`` "item i5" says how it is named)."""
from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tiny_run import build_tiny_run  # noqa: I001 - helper next to this file


@pytest.fixture(scope="module")
def untitled_client(tmp_path_factory: pytest.TempPathFactory):
    from twotower.serving import RecommenderService, create_app

    service = RecommenderService.load(build_tiny_run(Path(tmp_path_factory.mktemp("untitled")), titles=False))
    with TestClient(create_app(service=service)) as client:
        yield client


def test_explanation_records_are_the_item_records_of_a_run_without_titles(untitled_client) -> None:
    client = untitled_client
    recs = client.post("/recommend", json={"user_id": "u3", "k": 3, "explain": True}).json()["items"]
    assert recs and all("title" not in r for r in recs)
    for rec in recs:
        expl = rec["explanation"]
        item = client.get(f"/items/{rec['item_id']}").json()
        assert expl["item"] == {k: v for k, v in item.items() if k != "in_index"}
        assert expl["item"]["display_name"] == f"item {rec['item_id']}"
        for h in expl["history"]:
            assert "title" not in h, h
            assert h["display_name"] == f"item {h['item_id']}"
        assert "item i" in expl["text"]  # named as items, not as bare ids
    one = client.post("/explain", json={"history": ["i0", "i1", "i7"], "item_id": "i5"}).json()["explanation"]
    assert "title" not in one["item"] and all("title" not in h for h in one["history"])


def test_the_cli_table_has_no_empty_title_column_without_titles() -> None:
    from twotower.cli.explain_cmd import format_explanation

    e = {"text": "Because you watched item a.", "item_id": "x", "item": {"item_id": "x"}, "score": 0.5,
         "history_total": 0.1, "basis": "history", "method": "loo",
         "history": [{"item_id": "a", "contribution": 0.2}], "shared_metadata": {"history_items": 1}}
    lines = format_explanation(e).splitlines()
    assert lines[2].startswith("item x  score 0.5000")
    assert lines[4].split() == ["contribution", "item_id"] and lines[5].split() == ["+0.2000", "a"]
