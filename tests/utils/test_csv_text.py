"""frame_to_csv writes the bytes of ``df.to_csv(index=False)``: the run's copy of its split and ``data split``'s
files, whose sha256 a resume and ``train``'s split check compare with files written by earlier versions."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from twotower.data import read_interactions
from twotower.utils.csv_text import _column_strings, frame_to_csv, frame_to_csv_blocks


def _interactions(n: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ratings = rng.choice(np.array([0.1, 1 / 3, 1e-8, 3.5, 5.0, -0.0, 0.0, 1e20, 123456.789], np.float32), n)
    return pd.DataFrame({
        "user_id": pd.array([f"u{i}" for i in rng.integers(0, 50, n)], dtype="string"),
        "item_id": np.array([f"i é{i}" for i in rng.integers(0, 80, n)], dtype=object),
        "timestamp": rng.integers(-(2**62), 2**62, n, dtype=np.int64),
        "rating": ratings,
    })


def test_interactions_written_fast_and_byte_identical():
    df = _interactions()
    assert all(_column_strings(df[c]) is not None for c in df.columns)  # the fast path, not the fallback
    assert frame_to_csv(df) == df.to_csv(index=False)
    assert "".join(frame_to_csv_blocks(df, rows=7)) == df.to_csv(index=False)


def test_read_interactions_frame_byte_identical(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("user_id,item_id,timestamp,rating\n" + "".join(
        f"{u},{i},{1000 + u * 7 + i},{(u * i) % 9 / 2}\n" for u in range(30) for i in range(0, 40, 3)))
    df = read_interactions(path)
    assert all(_column_strings(df[c]) is not None for c in df.columns)
    assert frame_to_csv(df) == df.to_csv(index=False)


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"a": [1.5, np.nan, -0.0, np.inf, -np.inf, 0.0, 1e-300, 2.0**60], "b": np.arange(8, dtype=np.uint8)}),
    pd.DataFrame({"a": ["x,y", "z"], "b": [1, 2]}),          # needs quotes
    pd.DataFrame({"a": ['say "hi"', "z"], "b": [1, 2]}),
    pd.DataFrame({"a": ["line\nbreak", "z"], "b": [1, 2]}),
    pd.DataFrame({"a": ["", "z"], "b": [1, 2]}),               # empty string
    pd.DataFrame({"a": pd.array(["q", None], dtype="string"), "b": [1, 2]}),  # missing
    pd.DataFrame({"a": ["q", 3], "b": [True, False]}),        # mixed objects, booleans
    pd.DataFrame({"a": pd.Categorical(["q", "r"]), "b": pd.array([1, None], dtype="Int64")}),
    pd.DataFrame({"a,b": ["q", "r"], "c": np.array([1.25, 3.0], np.float32)}),  # a header needing quotes
    pd.DataFrame({"only": ["q", "r"]}),
    pd.DataFrame({"a": pd.Series([], dtype=object), "b": pd.Series([], dtype=np.int64)}),
], ids=lambda f: "-".join(map(str, f.dtypes)))
def test_any_frame_byte_identical(frame):
    assert frame_to_csv(frame) == frame.to_csv(index=False)
    # a block of rows at a time (a 16M-row split file's whole text took `data split` to 7.7 GB): the same text
    assert "".join(frame_to_csv_blocks(frame, rows=1)) == frame.to_csv(index=False)
