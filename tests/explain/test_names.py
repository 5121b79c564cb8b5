"""A title that several items share is named apart in explanation sentences (by year, else by id).

MovieLens-100K has 18 titles held by two ids each ("Kull the Conqueror (1997)" is 266 and 680); explaining
680 to a user who watched 266 said "The score of Kull the Conqueror (1997) rests on ...; your history lowers it
overall (-0.1333), though Kull the Conqueror (1997) raises it": which one, and it read as if the item explained
itself.
"""
from __future__ import annotations

import json

import pandas as pd

from twotower.explain import explain_recommendation
from twotower.explain.explainer import run_item_names
from twotower.explain.metadata import MetadataColumns
from twotower.explain.names import distinct_names
from twotower.explain.text import explanation_text

# a tiny catalogue: titles with and without the year in them, one held by three items, one title missing
CATALOGUE = [
    ("1", "Ghost", 1990), ("2", "Ghost", 1937), ("3", "Heat", 1995),
    ("266", "Kull the Conqueror (1997)", 1997), ("680", "Kull the Conqueror (1997)", 1997),
    ("878", "That Darn Cat!", 1997), ("1003", "That Darn Cat!", 1997), ("1444", "That Darn Cat!", 1965),
    ("9", None, None), ("10", None, None), ("11", "Sabrina", None), ("12", "Sabrina", 1954),
]


def _names(rows=CATALOGUE) -> dict[str, str]:
    ids = [r[0] for r in rows]
    return distinct_names([r[1] for r in rows], ids.__getitem__, [r[2] for r in rows])


def test_shared_titles_get_the_year_that_tells_them_apart_else_the_id() -> None:
    assert _names() == {
        "1": "Ghost (1990)", "2": "Ghost (1937)",
        # the year is already in the title: only the id tells them apart
        "266": "Kull the Conqueror (1997) [item 266]", "680": "Kull the Conqueror (1997) [item 680]",
        # two of three share a year: they get the id, the third its year
        "878": "That Darn Cat! [item 878]", "1003": "That Darn Cat! [item 1003]", "1444": "That Darn Cat! (1965)",
        "11": "Sabrina [item 11]", "12": "Sabrina (1954)",  # no year for one: its id
    }
    names = list(_names().values())
    assert len(set(names)) == len(names)


def test_a_name_by_year_that_is_another_items_title_falls_back_to_the_id() -> None:
    rows = [("1", "Ghost", 1990), ("2", "Ghost", 1937), ("3", "Ghost (1990)", 1990)]
    assert _names(rows) == {"1": "Ghost [item 1]", "2": "Ghost (1937)"}
    # a title that ends in a parenthesis is not given a second one: "Twin (1990) (1997)" reads as two years
    rows = [("1", "Twin (1990)", 1997), ("2", "Twin (1990)", 1985)]
    assert _names(rows) == {"1": "Twin (1990) [item 1]", "2": "Twin (1990) [item 2]"}
    assert distinct_names(["Ghost", "Ghost"], ["a", "b"].__getitem__) == {"a": "Ghost [item a]", "b": "Ghost [item b]"}


def _expl(item_id: str, title: str) -> dict:
    return {"item_id": item_id, "item": {"title": title, "genres": "Action"}, "already_seen": False,
            "basis": "history", "reads_history": True, "profile": "popularity", "method": "loo", "history": [],
            "shared_metadata": {}}


def test_a_sentence_names_items_that_share_a_title_apart_and_others_as_before() -> None:
    cols, names = MetadataColumns(multi=("genres",)), _names()
    table = [{"item_id": "266", "title": "Kull the Conqueror (1997)", "genres": "Action", "contribution": 0.2},
             {"item_id": "3", "title": "Heat", "genres": "Action", "contribution": 0.1}]
    expl = _expl("680", "Kull the Conqueror (1997)")
    assert explanation_text(expl, cols, table, names=names) == (
        "Because you watched Kull the Conqueror (1997) [item 266] and Heat (both Action).")
    said = explanation_text({**expl, "history_total": -0.1}, cols, table, names=names)
    assert said.startswith("The score of Kull the Conqueror (1997) [item 680] rests on")
    assert "though Kull the Conqueror (1997) [item 266] and Heat raise it" in said
    assert explanation_text({**expl, "already_seen": True}, cols, table, names=names).startswith(
        "You already watched Kull the Conqueror (1997) [item 680]:")
    assert explanation_text({**expl, "basis": "popularity"}, cols, table, names=names).startswith(
        "You have no history yet, so the score of Kull the Conqueror (1997) [item 680] rests")
    # titles no other item has: byte for byte the sentence without names
    unique = [{"item_id": "3", "title": "Heat", "genres": "Action", "contribution": 0.2}]
    for e in (_expl("1444x", "Point Break"), {**_expl("1444x", "Point Break"), "history_total": -0.1}):
        assert explanation_text(e, cols, unique, names=names) == explanation_text(e, cols, unique)


def test_an_explanation_of_a_run_names_a_shared_title_apart(tmp_path) -> None:
    """End to end on a tiny run whose catalogue gives two items one title: the sentence names the item and the
    history item apart, the dict's titles stay the catalogue's (no key changes), a unique title is as before."""
    from explain_tiny_run import train_tiny_run, write_tiny_data

    from twotower.pipeline.artifacts import TrainedRun

    data = tmp_path / "run_data"
    write_tiny_data(data)
    items = pd.read_csv(data / "items.csv")
    items.loc[items.item_id.isin(["i0", "i4"]), ["title", "year"]] = ["Twin (1990)", 1990]  # one genre, one year
    items.to_csv(data / "items.csv", index=False)
    run = TrainedRun.load(train_tiny_run(tmp_path / "run", epochs=1, write_data=False))
    assert run_item_names(run) == {"i0": "Twin (1990) [item i0]", "i4": "Twin (1990) [item i4]"}
    i0, i4, i8 = (run.item_vocab.index(i) for i in ("i0", "i4", "i8"))
    e = explain_recommendation(run, history_rows=[i0], item_row=i4)
    assert e["item"]["title"] == e["history"][0]["title"] == "Twin (1990)"
    assert "Twin (1990) [item i0]" in e["text"], e["text"]  # the history item, whatever the sentence's shape
    assert e["text"].replace("Twin (1990) [item i0]", "").replace("Twin (1990) [item i4]", "").count("Twin") == 0
    seen = explain_recommendation(run, history_rows=[i0, i4], item_row=i4)
    assert seen["text"].startswith("You already watched Twin (1990) [item i4]: it is in your history"), seen["text"]
    e8 = explain_recommendation(run, history_rows=[i8], item_row=i4)  # "Film 8 (1988)": no other item has it
    assert "Film 8 (1988)" in e8["text"] and "[item i8]" not in e8["text"]
    json.dumps(e)


def test_titles_that_print_alike_are_named_apart() -> None:
    # "é" as one code point and as "e" + a combining accent: both were named "Title é" in one sentence
    from twotower.explain.names import distinct_names

    names = distinct_names(["Title \u00e9", "Title e\u0301", "Other"], lambda r: f"i{r}", [1990, 1991, 2000])
    assert names == {"i0": "Title \u00e9 (1990)", "i1": "Title e\u0301 (1991)"}


def test_the_title_column_named_by_data_title_col_names_items_beside_a_title_column(tmp_path) -> None:
    """data.title_col=name on a table that also has a title column: the lists' display_name read "Film 22" and the
    sentences "t22"; every reader takes data.title_col's, and the table's own title stays as item_title."""
    from explain_tiny_run import train_tiny_run, write_tiny_data

    from twotower.pipeline.artifacts import TrainedRun

    data = tmp_path / "run_data"
    write_tiny_data(data)
    items = pd.read_csv(data / "items.csv")
    items["name"] = "Name " + items.item_id.str[1:]
    items.to_csv(data / "items.csv", index=False)
    run = TrainedRun.load(train_tiny_run(tmp_path / "run", epochs=1, write_data=False, extra=("data.title_col=name",)))
    i0, i4 = (run.item_vocab.index(i) for i in ("i0", "i4"))
    rec = run.item_record(i4)
    assert rec["title"] == "Name 4" and rec["item_title"] == "Film 4 (1984)" and run.title(i4) == "Name 4"
    e = explain_recommendation(run, history_rows=[i0], item_row=i4)
    assert e["item"]["display_name"] == "Name 4" and "Film" not in e["text"], e["text"]
    assert "Name 0" in e["text"] or "Name 4" in e["text"], e["text"]
