"""Id columns read as text (CSV, Parquet and JSON strings: Arrow-backed in pandas 3) are handled column-wise;
what comes out must be what the row-by-row rules give."""
from __future__ import annotations

import logging
import sys

import pandas as pd
import pytest

from twotower.data.columns import _one_id_to_str, ids_to_str
from twotower.data.readers import _warn_float_spelled_ids
from twotower.errors import DataError

SPACES = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


@pytest.mark.parametrize("dtype", ["str", "string[pyarrow]", "string[python]", "object"])
def test_every_white_space_str_strip_knows_is_stripped_at_either_end_and_no_other(dtype):
    texts = [f"{c}a{c}" for c in SPACES] + [f"x{c}y" for c in SPACES] + ["\u200bz", "z\ufeff", "007", "日本"]
    got = ids_to_str(pd.Series(texts, dtype=dtype), file="f.csv", column="item_id")
    assert got.tolist() == [_one_id_to_str(t) for t in texts]
    assert got.tolist()[:len(SPACES)] == ["a"] * len(SPACES)
    assert str(got.dtype) == str(pd.Series(["a"]).astype(str).dtype)


@pytest.mark.parametrize("dtype", ["str", "object"])
def test_an_id_of_white_space_only_is_empty_and_named(dtype):
    with pytest.raises(DataError, match=r"row 4, column 'user_id': empty id \(2 row\(s\) in total"):
        ids_to_str(pd.Series(["u", "v", "\u3000\t", " "], dtype=dtype), file="f.csv", column="user_id")
    got = ids_to_str(pd.Series(["u", "\u3000", " v"], dtype=dtype), file="f.csv", column="user_id", allow_empty=True)
    assert got.tolist() == ["u", "", "v"]


@pytest.mark.parametrize("dtype", ["str", "object"])
def test_the_float_spelled_id_warning_names_the_first_twin_in_file_order(dtype, caplog):
    ids = pd.Series(["7.0", "a", "12", "7", "12.0", "12", "007.00"], dtype=dtype)
    with caplog.at_level(logging.WARNING, logger="twotower.data.readers"):
        _warn_float_spelled_ids("f.csv", "user_id", ids)
    assert "2 id(s) are written both as an integer and with a trailing .0 (e.g. '7' and '7.0')" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower.data.readers"):
        _warn_float_spelled_ids("f.csv", "user_id", pd.Series(["7.0", "12.0", "a"], dtype=dtype))
    assert caplog.text == ""
