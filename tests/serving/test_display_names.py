"""Every item answer carries ``display_name``: the item as the explanation sentences name it (explain/names.py).

MovieLens has different items with one title (18 pairs in MovieLens-100K); the explorer page listed items by
title, so two of them were two identical rows the user could not tell apart, while the sentences (and the
demo) already named them apart by year or id. The service now gives that name with every item record and the
page shows it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tiny_run import DUP_NAMES  # noqa: I001 - helper next to this file


def test_a_catalogue_names_two_items_of_one_title_apart_as_the_explanations_do() -> None:
    from twotower.explain.names import distinct_names
    from twotower.explain.text import _name
    from twotower.serving import ItemCatalog

    ids = ["a", "b", "c", "d", "e", "f"]
    titles = ["Sabrina", "Sabrina", "Ghost", None, "Heat", "Heat"]
    years = [1954, 1995, 1990, None, 1995, 1995]  # the Heats share their year: named by id
    cat = ItemCatalog(ids, {"title": titles, "year": years, "genres": ["Drama"] * 6})
    names = [cat.record(r)["display_name"] for r in range(len(ids))]
    assert names == ["Sabrina (1954)", "Sabrina (1995)", "Ghost", "item d", "Heat [item e]", "Heat [item f]"]
    shared = distinct_names(titles, ids.__getitem__, years)
    assert {i: n for i, n in zip(ids, names) if i in shared} == shared  # the function the sentences use
    for r, i in enumerate(ids):  # and the sentence's own naming of each item, byte for byte
        assert names[r] == _name({"item_id": i, "title": titles[r] or i}, i, shared)
    # the other fields stay as they were
    assert {k: v for k, v in cat.record(0).items() if k != "display_name"} == {
        "item_id": "a", "title": "Sabrina", "year": 1954, "genres": "Drama"}


def test_a_run_whose_title_column_is_not_called_title_names_by_that_column() -> None:
    from twotower.serving import ItemCatalog

    cat = ItemCatalog(["a", "b"], {"name": ["Lamp", "Lamp"], "title": ["x", "y"]}, title_col="name")
    assert [cat.record(r)["display_name"] for r in range(2)] == ["Lamp [item a]", "Lamp [item b]"]


@pytest.fixture(scope="module")
def dup_service(dup_run_dir: Path):
    from twotower.serving import RecommenderService

    return RecommenderService.load(dup_run_dir)


@pytest.fixture()
def dup_client(dup_service):
    from fastapi.testclient import TestClient

    from twotower.serving import create_app

    with TestClient(create_app(service=dup_service)) as c:
        yield c


def _expected(item: dict) -> str:
    return DUP_NAMES.get(item["item_id"], item["title"])


def test_the_names_are_the_runs_explanation_names(dup_service) -> None:
    from twotower.explain.explainer import run_item_names

    assert run_item_names(dup_service.run) == DUP_NAMES
    assert {i: dup_service.item(i)["display_name"] for i in DUP_NAMES} == DUP_NAMES
    assert dup_service.item("i5")["display_name"] == "Movie 5"  # a title no other item has: as it is


def test_every_endpoint_names_the_items_apart(dup_client) -> None:
    for item_id, name in DUP_NAMES.items():
        body = dup_client.get(f"/items/{item_id}").json()
        assert body["display_name"] == name and body["title"] == "Movie 0"  # the catalogue's title is kept

    rec = dup_client.post("/recommend", json={"history": ["i5"], "k": 60, "exclude_seen": False}).json()
    assert len(rec["items"]) == 60 and all(it["display_name"] == _expected(it) for it in rec["items"])
    shown = [it["display_name"] for it in rec["items"]]
    assert len(set(shown)) == 60  # no two rows read the same

    batch = dup_client.post("/recommend/batch", json={"requests": [{"history": ["i5"], "k": 60,
                                                                    "exclude_seen": False}]}).json()
    assert batch["results"][0]["items"] == rec["items"]

    sim = dup_client.post("/similar-items", json={"item_id": "i5", "k": 59}).json()
    assert {it["item_id"] for it in sim["items"]} >= set(DUP_NAMES)
    assert all(it["display_name"] == _expected(it) for it in sim["items"])

    user = dup_client.get("/users/u0").json()  # u0 watched i0 and i1
    assert {"i0", "i1"} <= {h["item_id"] for h in user["history"]}
    assert all(h["display_name"] == _expected(h) for h in user["history"])


def test_explanations_name_their_items_as_the_sentence_does(dup_client) -> None:
    body = dup_client.post("/explain", json={"history": ["i0", "i1", "i20"], "item_id": "i5"}).json()
    expl = body["explanation"]
    assert expl["item"]["display_name"] == "Movie 5"
    assert sorted(h["display_name"] for h in expl["history"]) == sorted(DUP_NAMES.values())
    assert all(h["title"] == "Movie 0" for h in expl["history"])
    # every "Movie 0" the sentence says is one of the names the rows carry
    assert not re.search(r"Movie 0(?! \[item i0\]| \[item i20\]| \(1991\))", expl["text"]), expl["text"]

    rec = dup_client.post("/recommend", json={"history": ["i0", "i1", "i20"], "k": 3, "explain": True}).json()
    for it in rec["items"]:
        assert it["explanation"]["item"]["display_name"] == it["display_name"]
        assert sorted(h["display_name"] for h in it["explanation"]["history"]) == sorted(DUP_NAMES.values())


def test_the_explorer_lists_items_by_their_display_name() -> None:
    from twotower.serving.app import STATIC_DIR

    js = (STATIC_DIR / "app.js").read_text()
    title_of = re.search(r"function titleOf\(item\) \{(.*?)\n\}", js, flags=re.S).group(1)
    assert "return item.display_name || item.title" in title_of


def test_a_run_without_a_title_setting_keeps_its_title_column_on_the_page() -> None:
    """Without data.title_col the explorer showed the table's "title" column (the records carry it): the
    display name is that title too, not "item i0" for every item."""
    from types import SimpleNamespace

    import pandas as pd

    from twotower.serving import ItemCatalog

    meta = pd.DataFrame({"item_id": ["i0", "i1", "i2"], "title": ["Heat", "Heat", "Ronin"]})
    ids = list(meta["item_id"])
    run = SimpleNamespace(item_meta=meta, n_items=3, title_col=None, item_encoder=None,
                          item_meta_columns=lambda: {c: list(meta[c]) for c in meta.columns},
                          item_vocab=SimpleNamespace(ids=ids, index=ids.index))
    cat = ItemCatalog.from_run(run)
    assert [cat.record(r)["display_name"] for r in range(3)] == ["Heat [item i0]", "Heat [item i1]", "Ronin"]
    run.title_col = "title"
    assert ItemCatalog.from_run(run).record(2)["display_name"] == "Ronin"


def test_a_run_without_a_title_setting_names_items_by_its_title_column_in_explanations_too(tmp_path) -> None:
    """Without data.title_col the item records and the explorer page named items by the table's "title" column,
    while the explanation sentences and their rows said "item i5": two names for one item. All of them now take
    titles from the same column (explain/names.py title_column)."""
    from fastapi.testclient import TestClient

    from tiny_run import DUP_TITLES, build_tiny_run
    from twotower.explain.explainer import run_item_names
    from twotower.serving import RecommenderService, create_app

    service = RecommenderService.load(build_tiny_run(tmp_path, retitle=DUP_TITLES, title_col=None))
    assert service.run.title_col is None
    assert run_item_names(service.run) == DUP_NAMES  # shared titles named apart, as with data.title_col=title
    assert service.item("i5")["display_name"] == "Movie 5" == service.run.title(service.run.item_vocab.index("i5"))
    with TestClient(create_app(service=service)) as client:
        expl = client.post("/explain", json={"history": ["i0", "i1", "i20", "i7"], "item_id": "i5"}).json()[
            "explanation"]
        assert expl["item"]["title"] == expl["item"]["display_name"] == "Movie 5"
        for h in expl["history"]:
            assert h["display_name"] == client.get(f"/items/{h['item_id']}").json()["display_name"]
        assert sorted(h["display_name"] for h in expl["history"]) == sorted([*DUP_NAMES.values(), "Movie 7"])
        # the sentence names its items as the rows do ("Because you watched item i1 and item i7." before)
        said = [h["display_name"] for h in expl["history"] if h["display_name"] in expl["text"]]
        assert said and "item i" not in expl["text"].replace("[item i", ""), expl["text"]
