"""Vocabulary.encode of a pandas column gives each id the row encoding it alone gives, whatever the column holds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from twotower.data.vocab import Vocabulary

VOCAB = Vocabulary(["1", "a", "None", "nan", "NaN", " a", "", "日本", "True", "2"], kind="item")

COLUMNS = {
    "text": ["a", "日本", " a", "", "zz", "a", "1"],
    "text with None": ["a", None, "None", "b"],
    "text with NaN": ["nan", float("nan"), "a"],
    "text with pd.NA": ["a", pd.NA, "NaN"],
    "numpy str": [np.str_("a"), "1", np.str_("日本")],
    "mixed": [1, 1.0, True, "2", 2.5, np.int64(2)],
}


@pytest.mark.parametrize("name", list(COLUMNS))
@pytest.mark.parametrize("dtype", [object, "string[python]", "string[pyarrow]"])
def test_a_column_encodes_as_its_ids_one_by_one(name: str, dtype: object) -> None:
    values = COLUMNS[name]
    if dtype is not object and not all(isinstance(v, str) or v is None or v is pd.NA for v in values):
        pytest.skip("not a text column")
    column = pd.Series(values, dtype=dtype)
    one_by_one = [VOCAB.encode([v])[0] for v in column.tolist()]
    got = VOCAB.encode(column)
    assert got.dtype == np.int64
    assert got.tolist() == one_by_one


def test_a_long_text_column_repeating_ids() -> None:
    rng = np.random.default_rng(0)
    column = pd.Series(rng.choice(["a", "1", "x", "日本", ""], 1000).tolist(), dtype="string[pyarrow]")
    assert VOCAB.encode(column).tolist() == [VOCAB.encode([v])[0] for v in column.tolist()]
