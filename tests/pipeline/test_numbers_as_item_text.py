"""A number in an item's text column is text, whatever format the item table comes in.

A CSV table is read as text, so its ``year`` cell reads "1995"; the same table as Parquet, JSON lines or a
DataFrame holds the number 1995 (1995.0 in a column with a gap), and the item texts kept only strings: with
``data.item_text='["year"]'`` every item was embedded as the empty string ("1689 of 1689 items have no text"),
with ``["title", "year"]`` the year was left out of every text without a word, and a film titled 1917 in a JSON
lines table lost its title. The rule (utils/whole_numbers.cell_text): an integer, and a float holding a whole
number, read as the integer's digits, as the CSV of the table holds them.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from twotower.config import load_config
from twotower.pipeline.prepare import prepare
from twotower.pipeline.run import item_texts
from twotower.pipeline.sources import load_sources
from twotower.utils.whole_numbers import cell_text

#: one item table, as `twotower data split` writes a CSV (a whole number without ".0", a missing one empty)
ITEMS_CSV = "item_id,title,year,rating\n1,Toy Story,1995,8.5\n2,1917,2019,\n3,300,,7\n"
EXPECTED = ["Toy Story 1995 8.5", "1917 2019", "300 7"]


def _records() -> list[dict]:
    return [{"item_id": "1", "title": "Toy Story", "year": 1995, "rating": 8.5},
            {"item_id": "2", "title": 1917, "year": 2019},  # JSON lines: a title of digits written as a number
            {"item_id": "3", "title": 300, "year": None, "rating": 7}]


def _tables(tmp_path) -> dict[str, object]:
    (tmp_path / "items.csv").write_text(ITEMS_CSV)
    with open(tmp_path / "items.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in _records())
    frame = pd.DataFrame(_records())  # title: object of str and int; year and rating: float with a gap
    # a Parquet column holds one type: the titles as text, the year and rating as float64 with a gap
    frame.astype({"title": str}).to_parquet(tmp_path / "items.parquet")
    return {"csv": str(tmp_path / "items.csv"), "jsonl": str(tmp_path / "items.jsonl"),
            "parquet": str(tmp_path / "items.parquet"), "frame": frame}


def _texts(tmp_path, items: object, cols: list[str]) -> list[str]:
    (tmp_path / "train.csv").write_text("user_id,item_id\nu1,1\nu1,2\nu2,3\n")
    given = [] if isinstance(items, pd.DataFrame) else [f"data.items={items}"]
    cfg = load_config(overrides=[f"data.train={tmp_path / 'train.csv'}", f"data.item_text={json.dumps(cols)}",
                                 "data.title_col=title", *given])
    frames = {"items": items} if isinstance(items, pd.DataFrame) else None
    prep = prepare(load_sources(cfg.data, frames=frames, embeds_titles=True))
    return item_texts(prep.item_meta, cols)


def test_one_item_table_in_every_format_gives_the_same_item_texts(tmp_path) -> None:
    got = {name: _texts(tmp_path, items, ["title", "year", "rating"]) for name, items in _tables(tmp_path).items()}
    assert got == {name: EXPECTED for name in got}


def test_a_column_of_numbers_alone_is_each_items_text(tmp_path) -> None:
    # `data.item_text='["year"]'` over a Parquet table: every item was said to have no text
    assert _texts(tmp_path, _tables(tmp_path)["parquet"], ["year"]) == ["1995", "2019", ""]


@pytest.mark.parametrize(("value", "text"), [
    ("1995", "1995"), (" 1995 ", " 1995 "), (1995, "1995"), (1995.0, "1995"), (8.5, "8.5"), (-0.0, "0"),
    (True, "True"), (None, None), (float("nan"), None), (pd.NA, None), (2.0**60, repr(2.0**60)),
])
def test_a_cell_reads_as_the_text_a_csv_of_it_holds(value, text) -> None:
    import numpy as np

    assert cell_text(value) == text
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert cell_text(np.float64(value)) == cell_text(float(value))


def test_a_numeric_title_names_its_item_in_lists_and_sentences() -> None:
    # the JSON lines film {"title": 1917} was "item 2" in every list, record and explanation
    from twotower.explain.names import distinct_names, name_of
    from twotower.serving import ItemCatalog

    cat = ItemCatalog(["1", "2", "3", "4"], {"title": ["Toy Story", 1917, 300.0, float("nan")]})
    assert [cat.display_name(r) for r in range(4)] == ["Toy Story", "1917", "300", "item 4"]
    assert name_of(1917.0, "2") == "1917" and name_of(float("nan"), "4") == "item 4"
    # two items titled 300 (one read as a number, one as text) are told apart as any shared title is
    assert distinct_names([300, "300"], ["a", "b"].__getitem__) == {"a": "300 [item a]", "b": "300 [item b]"}
