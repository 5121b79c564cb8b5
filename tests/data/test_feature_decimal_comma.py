"""A numeric feature written with a decimal comma is told so, as a rating is.

Before, ``year`` = ``1995,0`` in a ';'-separated items file (Excel in a comma-decimal locale) was refused as
"'1995,0' is not a number; numeric features need numbers", which left the user looking for text in a column of
numbers; the interactions' rating already said "write decimals with a point".
"""
from __future__ import annotations

import pandas as pd
import pytest

from twotower.data import FeatureSpec, read_feature_table
from twotower.errors import DataError

SPEC = FeatureSpec(key="item_id", numeric=("year", "price"))


def test_a_decimal_comma_in_a_semicolon_table_says_to_write_a_point(tmp_path):
    (tmp_path / "items.csv").write_text("item_id;year;price\n1;1995,0;3.5\n2;1996,5;4\n")
    with pytest.raises(DataError) as e:
        read_feature_table(tmp_path / "items.csv", SPEC, key_role="item key")
    assert str(e.value) == (f"file {tmp_path / 'items.csv'}, row 2, column 'year': '1995,0' is not a number: write "
                            "decimals with a point ('1995.0'); the separator (comma, ';', tab or '|') is taken from "
                            "the header, but the decimal mark is always '.'; leave the cell empty when unknown; the "
                            "same holds for row 3")


def test_a_comma_that_may_separate_thousands_names_both_readings():
    df = pd.DataFrame({"item_id": ["1"], "year": ["2001"], "price": ["1,299"]})
    with pytest.raises(DataError, match=r"'1,299' is not a number: write decimals with a point \('1\.299'\) \(or, if "
                                        r"the comma separates thousands, leave it out: '1299'\)"):
        read_feature_table(df, SPEC)


def test_other_text_keeps_its_message():
    df = pd.DataFrame({"item_id": ["1"], "year": ["unknown"], "price": ["1"]})
    with pytest.raises(DataError, match=r"'unknown' is not a number; numeric features need numbers \(leave empty "
                                        r"when unknown\)"):
        read_feature_table(df, SPEC)
