"""Categorical cells reading "nan" / "NaN" / "None" (pandas' astype(str) of a missing value) are warned about.

They became categories without a word: every missing brand of an astype(str) export one trained category. They
are still read as written (a brand may be called "None"; only an empty cell is missing), with one warning a
column naming the file, the column, the count and the first row."""
from __future__ import annotations

import logging

from twotower.data.features import FeatureEncoder, FeatureSpec, read_feature_table
from twotower.data.vocab import Vocabulary


def test_missing_values_written_as_text_are_warned_about_once_a_column(tmp_path, caplog):
    p = tmp_path / "items.csv"
    p.write_text("item_id,brand,tags,year\n1,acme,a|b,1990\n2,nan,nan,\n3,None,a|None,1991\n4,,,1992\n5,NaN,b,1993\n")
    spec = FeatureSpec(key="item_id", categorical=("brand",), multi=("tags",), numeric=("year",))
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        df = read_feature_table(p, spec)
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert msgs[0].startswith(f"{p}, column 'brand': 3 cells hold the text 'nan' / 'NaN' / 'None' (first: row 3, "
                              "'nan'), each read as a category of that name")
    assert "Only an empty cell is missing: if they mean no value, leave them empty" in msgs[0]
    assert msgs[1].startswith(f"{p}, column 'tags': 2 cells hold the text 'nan' / 'None' (first: row 3, 'nan')")
    # the reading is unchanged: they stay categories, the empty cell is the missing one
    enc = FeatureEncoder(spec).fit(df, Vocabulary.from_ids(["1", "2", "3", "4", "5"]))
    assert enc.categories["brand"] == ["NaN", "None", "acme", "nan"]
    assert enc.multi_values["tags"] == ["None", "a", "b", "nan"]


def test_a_table_without_such_cells_is_quiet(tmp_path, caplog):
    p = tmp_path / "items.csv"
    p.write_text("item_id,brand,tags\n1,acme,a|b\n2,,\n3,Nano,nanny\n")
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        read_feature_table(p, FeatureSpec(key="item_id", categorical=("brand",), multi=("tags",)))
    assert caplog.records == []
