"""An empty id says why it is empty: a blank field, or a row that ends before the column.

Before: every empty id in a CSV read "a row with fewer fields than the header reads as empty", which sent the
user counting commas in a row that had all its fields and one of them blank.
"""
from __future__ import annotations

import pandas as pd
import pytest

from twotower.data.readers import ids_to_str, read_interactions
from twotower.errors import DataError


def _error(tmp_path, text: str) -> str:
    path = tmp_path / "i.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(path)
    return str(e.value)


def test_a_blank_field_is_named_as_blank_not_as_a_short_row(tmp_path):
    got = _error(tmp_path, "user_id,item_id,rating\nu,a,5\n  ,b,4\n")
    assert got.endswith("row 3, column 'user_id': empty id (1 row(s) in total; the field is blank); every row "
                        "needs a 'user_id' value")
    assert "fewer fields" not in got


def test_a_short_row_is_named_with_its_field_count(tmp_path):
    # a quoted field over two lines is one record: the short row is the file's row 3 (on line 4, now said beside
    # it), and its fields are counted from that record
    got = _error(tmp_path, 'item_id,title,user_id\na,"two\nlines",u\nb,c\nc,d,u\n')
    assert got.endswith("row 3 (line 4), column 'user_id': empty id (1 row(s) in total; the row has 2 fields where the "
                        "header has 3); every row needs a 'user_id' value")


def test_without_the_file_both_causes_are_named():
    with pytest.raises(DataError, match=r"row 3, column 'user_id': empty id \(1 row\(s\) in total; a blank field, "
                                        r"or a row with fewer fields than the header\)"):
        ids_to_str(pd.Series(["u", None]), file="f.csv", column="user_id")
