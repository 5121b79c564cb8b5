"""Encoding a feature table per distinct value gives what encoding it cell by cell gave, on awkward cells."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from twotower.data.features import FeatureEncoder, FeatureSpec, _missing_str, _norm_value, _per_distinct
from twotower.data.vocab import Vocabulary

EDGE = ["a", " a", "a ", "", "  ", None, float("nan"), pd.NA, "nan", "None", "日本", "café", "emoji🙂", "\t", "x|y",
        " x | y |x", "|", 1, 1.0, 2.5, True, np.int64(3), np.float64(4.0), np.str_("a"), "1", "a"]


def _reference(encoder: FeatureEncoder, rows: pd.DataFrame) -> dict[str, list]:
    """The old encoder: every cell through _norm_value / _split_multi / _missing_str on its own."""
    spec = encoder.spec
    cat = [[encoder._lookup[c].get(v, 0) if v is not None else 0 for v in map(_norm_value, rows[c].tolist())]
           for c in spec.categorical]
    multi = []
    for c in spec.multi:
        lut, width = encoder._lookup["multi:" + c], encoder.multi_max_len[c]
        out = []
        for value in rows[c].tolist():
            found = [lut[v] for v in encoder._split_multi(value) if v in lut][:width]
            out.append(found + [0] * (width - len(found)))
        multi.append(out)
    text = {c: ["" if _missing_str(v) else str(v) for v in rows[c].tolist()] for c in spec.text}
    return {"cat": cat, "multi": multi, "text": text}


@pytest.mark.parametrize("cells", [EDGE, [v for v in EDGE if isinstance(v, str)],
                                   [v for v in EDGE if isinstance(v, str) or v is None]])
def test_per_distinct_equals_cell_by_cell(cells: list) -> None:
    for fn in (_norm_value, _missing_str, lambda v: "" if _missing_str(v) else str(v)):
        for column in (pd.Series(cells, dtype=object), cells * 3):
            got = _per_distinct(column, fn)
            want = [fn(v) for v in list(column)]
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g == w or (isinstance(w, float) and math.isnan(w)), (g, w)
                assert type(g) is type(w)


@pytest.mark.parametrize("dtype", [object, "string[pyarrow]"])
def test_fit_and_encode_equal_the_cell_by_cell_encoder(dtype: object) -> None:
    strings = [v for v in EDGE if isinstance(v, str)]
    n = len(EDGE)
    cat = EDGE if dtype is object else [v if isinstance(v, str) else None for v in EDGE]
    table = pd.DataFrame({
        "id": [f"i{i}" for i in range(n)],
        "cat": pd.Series(cat, dtype=dtype),
        "tags": pd.Series([strings[i % len(strings)] for i in range(n)], dtype=dtype),
        "title": pd.Series(cat[::-1], dtype=dtype),
    })
    spec = FeatureSpec(key="id", categorical=("cat",), multi=("tags",), text=("title",))
    vocab = Vocabulary.from_ids(list(table["id"])[::2] + ["cold"], kind="item")  # half fitted, one without a row
    enc = FeatureEncoder(spec).fit(table, vocab)
    fitted = table[table["id"].isin(set(vocab.ids))]
    assert enc.categories["cat"] == sorted({v for v in map(_norm_value, fitted["cat"].tolist()) if v is not None})
    lists = [enc._split_multi(v) for v in fitted["tags"].tolist()]
    assert enc.multi_values["tags"] == sorted({v for lst in lists for v in lst})
    assert enc.multi_max_len["tags"] == max([len(lst) for lst in lists] + [1])
    got = enc.encode_rows(table)
    want = _reference(enc, table)
    assert got.categorical.T.tolist() == want["cat"]
    assert [m.tolist() for m in got.multi] == want["multi"]
    assert got.text == want["text"]
    aligned = enc.transform(table, vocab)
    assert len(aligned) == len(vocab)
    assert aligned.categorical[vocab.index("cold")].tolist() == [0]  # "cold" has no row: missing
