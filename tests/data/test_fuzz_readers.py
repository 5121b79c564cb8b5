"""Fuzzing the interaction and feature readers (issue 7).

Random tables (mixed types, NaN/inf, huge numbers, unicode, empty cells,
nested JSON values) written as CSV, TSV, Parquet, JSON lines or JSON arrays,
plus raw bytes under every suffix. ``read_interactions`` / ``read_feature_table``
either return a canonical frame or raise a TwoTowerError naming the file;
never another exception, never a silently wrong value (timestamps that
overflowed int64, ratings that became inf).
"""
from __future__ import annotations

import csv
import json
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twotower.data import FeatureSpec, read_feature_table, read_interactions
from twotower.errors import TwoTowerError

SLOW_EXAMPLES = 1000
SUFFIXES = [".csv", ".tsv", ".txt", ".parquet", ".jsonl", ".json", ".ndjson", ".pq"]

cells = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["", " ", "NaN", "nan", "inf", "-inf", "1e400", "2024-05-01", "2024-05-01T12:30:00",
                       "9999-12-31", "0001-01-01", "10000-01-01", "u1", "i1", "007", "1,5", "a\tb", '"q"', "\n"])
)
json_only_cells = cells | st.lists(cells, max_size=3) | st.dictionaries(st.text(max_size=3), cells, max_size=2)
COLUMN_NAMES = ["user_id", "item_id", "timestamp", "rating", "title", "genres", "price", " user_id", "USER_ID", "", "x"]


@st.composite
def tables(draw, json_values: bool = False) -> pd.DataFrame:
    # mostly tables with the right id columns, so the value checks (not just the header checks) are reached
    base = draw(st.sampled_from([["user_id", "item_id"], ["user_id", "item_id", "timestamp", "rating"],
                                 ["item_id", "title", "genres", "price"], []]))
    extra = draw(st.lists(st.sampled_from(COLUMN_NAMES), max_size=3, unique=True))
    cols = list(dict.fromkeys(base + extra)) or ["x"]
    n = draw(st.integers(0, 6))
    strat = json_only_cells if json_values else cells
    return pd.DataFrame({c: [draw(strat) for _ in range(n)] for c in cols}, dtype=object)


def _write(df: pd.DataFrame, path: Path) -> None:
    suffix = path.suffix
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # pandas leaves a field holding a bare "\r" unquoted, and every CSV reader then sees a line break
        # there (more rows than written): quote everything in that case, as a correct CSV writer would
        cr = any(isinstance(v, str) and "\r" in v for c in df.columns for v in df[c])
        quoting = csv.QUOTE_ALL if cr else csv.QUOTE_MINIMAL
        if suffix in (".csv", ".txt"):
            df.to_csv(path, index=False, quoting=quoting)
        elif suffix == ".tsv":
            df.to_csv(path, index=False, sep="\t", quoting=quoting)
        elif suffix in (".parquet", ".pq"):
            # parquet needs one type per column: strings, except all-int / all-float columns
            out = {}
            for c in df.columns:
                vals = list(df[c])
                if all(isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in vals):
                    out[c] = pd.Series(vals, dtype="int64")
                elif all(isinstance(v, float) for v in vals):
                    out[c] = pd.Series(vals, dtype="float64")
                else:
                    out[c] = pd.Series([None if v is None else str(v) for v in vals], dtype=object)
            pd.DataFrame(out).to_parquet(path)
        elif suffix in (".jsonl", ".ndjson"):
            path.write_text("".join(json.dumps(r, default=str) + "\n" for r in df.to_dict(orient="records")))
        else:
            path.write_text(json.dumps(df.to_dict(orient="records"), default=str))


def _check_interactions(df: pd.DataFrame, n_in: int) -> None:
    assert list(df.columns) == ["user_id", "item_id", "timestamp", "rating"]
    assert df["timestamp"].dtype == np.int64 and df["rating"].dtype == np.float32
    assert np.isfinite(df["rating"].to_numpy()).all()
    assert len(df) <= n_in
    for col in ("user_id", "item_id"):
        assert all(isinstance(v, str) and v and v == v.strip() for v in df[col])
    # no silent int64 overflow: a timestamp of 1e30 must be refused, not wrapped around
    assert (df["timestamp"] > np.iinfo(np.int64).min).all()


def _read_both(path: Path, n_in: int) -> None:
    try:
        df = read_interactions(path)
    except TwoTowerError as e:
        assert str(e)
    else:
        _check_interactions(df, n_in)
    spec = FeatureSpec(key="item_id", categorical=("genres",), numeric=("price",), text=("title",))
    try:
        feats = read_feature_table(path, spec)
    except TwoTowerError as e:
        assert str(e)
    else:
        assert feats["item_id"].is_unique
        assert np.isfinite(feats["price"].to_numpy(dtype=float)[feats["price"].notna().to_numpy()]).all()


def _tables_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(df=tables(), suffix=st.sampled_from(SUFFIXES))
    def test(df, suffix):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"t{suffix}"
            _write(df, path)
            _read_both(path, len(df))

    return test


def _json_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(df=tables(json_values=True), suffix=st.sampled_from([".jsonl", ".json"]))
    def test(df, suffix):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"t{suffix}"
            _write(df, path)
            _read_both(path, len(df))

    return test


def _bytes_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(raw=st.binary(max_size=300) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
           suffix=st.sampled_from(SUFFIXES + [".xlsx", ""]))
    def test(raw, suffix):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"t{suffix}"
            path.write_bytes(raw)
            _read_both(path, 10**9)

    return test


def _dataframe_test(n: int | None):
    @settings(max_examples=n) if n else (lambda f: f)
    @given(df=tables(json_values=True))
    def test(df):
        try:
            out = read_interactions(df)
        except TwoTowerError:
            return
        _check_interactions(out, len(df))

    return test


test_fuzz_readers_tables = _tables_test(None)
test_fuzz_readers_json_values = _json_test(None)
test_fuzz_readers_raw_bytes = _bytes_test(None)
test_fuzz_readers_dataframes = _dataframe_test(None)
test_fuzz_readers_tables_slow = pytest.mark.slow(_tables_test(SLOW_EXAMPLES))
test_fuzz_readers_json_values_slow = pytest.mark.slow(_json_test(SLOW_EXAMPLES))
test_fuzz_readers_raw_bytes_slow = pytest.mark.slow(_bytes_test(SLOW_EXAMPLES))
test_fuzz_readers_dataframes_slow = pytest.mark.slow(_dataframe_test(SLOW_EXAMPLES))
