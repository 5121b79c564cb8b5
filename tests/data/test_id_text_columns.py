"""Id columns read as text (CSV, Parquet and JSON strings: Arrow-backed in pandas 3) are handled column-wise;
what comes out must be what the row-by-row rules give."""
from __future__ import annotations

import logging

import pandas as pd
import pytest

from twotower.data.readers import _warn_float_spelled_ids


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
