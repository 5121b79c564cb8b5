from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from twotower.data import ColumnMap, FeatureSpec, read_feature_table, read_interactions, read_table
from twotower.errors import ConfigError, DataError


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_canonical_columns_and_dtypes(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp,rating\n1,42,100,4\n2,7,101,5.5\n")
    df = read_interactions(p)
    assert list(df.columns) == ["user_id", "item_id", "timestamp", "rating"]
    assert df["user_id"].tolist() == ["1", "2"]
    assert df["item_id"].tolist() == ["42", "7"]
    assert df["timestamp"].dtype == np.int64
    assert df["rating"].dtype == np.float32
    rep = df.attrs["report"]
    assert rep["rows_read"] == 2 and rep["users"] == 2 and rep["items"] == 2
    assert rep["duplicates_dropped"] == 0


def test_tsv_sniffed_and_ids_keep_leading_zeros(tmp_path):
    p = write(tmp_path / "i.tsv", "u\ti\tts\n007\tA\t5\n")
    df = read_interactions(p, ColumnMap(user="u", item="i", timestamp="ts", rating=None))
    assert df["user_id"].tolist() == ["007"]
    assert df["rating"].tolist() == [1.0]


def test_semicolon_separated_csv_is_sniffed(tmp_path):
    # a spreadsheet's ';' export used to be read as one column named 'user_id;item_id;timestamp'
    p = write(tmp_path / "i.csv", "user_id;item_id;timestamp\nu1;it,em;5\n")
    df = read_interactions(p)
    assert df["item_id"].tolist() == ["it,em"] and df["timestamp"].tolist() == [5]


def test_txt_with_tabs(tmp_path):
    p = write(tmp_path / "i.txt", "user_id\titem_id\n1\t2\n")
    assert read_interactions(p)["item_id"].tolist() == ["2"]


def test_semicolon_csv_sniffed_with_quoted_header_and_commas_in_values(tmp_path):
    # Book-Crossing's BX-Book-Ratings.csv layout: quoted header, ';' between fields, ids with letters; read with
    # commas it was one column, failing on the first value holding a comma
    p = write(tmp_path / "bx.csv", '"User-ID";"ISBN";"Book-Rating"\n"276725";"034545104X";"0"\n'
                                    '"276726";"0155061224";"5"\n"276727";"a,b";"3"\n')
    df = read_interactions(p, ColumnMap(user="User-ID", item="ISBN", timestamp=None, rating="Book-Rating"))
    assert df["item_id"].tolist() == ["034545104X", "0155061224", "a,b"]
    assert df["rating"].tolist() == [0.0, 5.0, 3.0]


def test_pipe_separated_and_comma_wins_a_tie(tmp_path):
    assert read_table(write(tmp_path / "p.csv", "u|i\n1|2\n")).columns.tolist() == ["u", "i"]
    # one comma and one semicolon in the header: comma, as before
    assert read_table(write(tmp_path / "t.csv", "u,i;x\n1,2\n")).columns.tolist() == ["u", "i;x"]


def test_float_ids_from_dataframe_never_render_with_dot_zero():
    df = pd.DataFrame({"user_id": [1.0, 2.0], "item_id": [np.int64(42), np.int64(43)]})
    out = read_interactions(df)
    assert out["user_id"].tolist() == ["1", "2"]
    assert out["item_id"].tolist() == ["42", "43"]


def test_missing_timestamp_and_rating_fall_back_and_are_reported(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id\nu1,a\nu1,b\nu2,a\n")
    df = read_interactions(p)
    assert df["timestamp"].tolist() == [0, 1, 2]
    assert df["rating"].tolist() == [1.0, 1.0, 1.0]
    assert "row order" in df.attrs["report"]["timestamp_source"]
    assert "1.0" in df.attrs["report"]["rating_source"]


def test_explicitly_mapped_absent_column_is_an_error(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,time\nu1,a,1\n")
    with pytest.raises(DataError) as e:
        read_interactions(p, ColumnMap(timestamp="ts"))
    assert "i.csv" in str(e.value) and "'ts'" in str(e.value)


def test_misnamed_column_names_file_column_present_and_close_match(tmp_path):
    p = write(tmp_path / "inter.csv", "userid,item_id\nu1,a\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    msg = str(e.value)
    assert "inter.csv" in msg and "'user_id'" in msg and "userid" in msg and "did you mean" in msg
    assert e.value.column == "user_id"


def test_iso_dates_become_epoch_seconds(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nu,a,1970-01-02\nu,b,1970-01-01T00:01:00Z\n")
    assert read_interactions(p)["timestamp"].tolist() == [86400, 60]


def test_float_timestamps_are_floored(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nu,a,10.7\n")
    assert read_interactions(p)["timestamp"].tolist() == [10]


@pytest.mark.parametrize("times, time_unit", [(("100.25", "100.75"), "auto"),
                                              (("2024-05-01T12:00:00.25", "2024-05-01T12:00:00.75"), "s")])
def test_rows_apart_by_a_floored_fraction_are_not_dropped_as_duplicates(tmp_path, times, time_unit):
    # both floor to one second: they were dropped as an "exact duplicate" of each other
    first, second = times
    p = write(tmp_path / "i.csv", f"user_id,item_id,timestamp\nu,a,{first}\nu,a,{second}\nu,b,{first}\nu,b,{first}\n")
    df = read_interactions(p, time_unit=time_unit)
    assert df["item_id"].tolist() == ["a", "a", "b"]
    report = df.attrs["report"]
    assert (report["rows"], report["duplicates_dropped"]) == (3, 1)  # the repeat as written is still one


def test_bad_timestamp_names_row_and_column(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nu,a,5\nu,b,yesterday\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 3 and e.value.column == "timestamp" and "i.csv" in str(e.value)
    assert "yesterday" in str(e.value)


def test_short_row_is_named_in_plain_words(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,rating,timestamp\nu,a,5,100\nu,b\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 3 and e.value.column == "timestamp"
    assert "fewer fields than the header" in str(e.value) and "np." not in str(e.value)


def test_empty_id_names_row_and_column(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id\nu,a\nu,b\n,c\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 4 and e.value.column == "user_id"


def test_bad_rating_names_row(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,rating\nu,a,good\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 2 and e.value.column == "rating"


@pytest.mark.parametrize("value", ["true", "false"])
def test_a_json_boolean_rating_is_refused_as_a_csvs_is(tmp_path, value):
    # a JSON lines file's `"watch_frac": true` was read as 1.0 (false as 0) and written into the split without a
    # word, while a CSV's `true` is refused as no number: both name the line and column
    p = write(tmp_path / "i.jsonl", '{"user_id": "u", "item_id": "a", "rating": 0.5}\n'
                                    f'{{"user_id": "u", "item_id": "b", "rating": {value}}}\n')
    with pytest.raises(DataError, match=rf"line 2, column 'rating': rating {value} is true or false, not a number"):
        read_interactions(p)
    csv = write(tmp_path / "i.csv", f"user_id,item_id,rating\nu,a,0.5\nu,b,{value}\n")
    with pytest.raises(DataError, match=r"row 3, column 'rating'"):
        read_interactions(csv)


def test_exact_duplicates_dropped_and_counted(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nu,a,1\nu,a,1\nu,a,2\nu,a,1\n")
    df = read_interactions(p)
    assert len(df) == 2
    assert df.attrs["report"]["duplicates_dropped"] == 2
    assert df.attrs["report"]["rows_read"] == 4


def test_missing_file_empty_file_unknown_format(tmp_path):
    with pytest.raises(DataError, match="nope.csv.*not found"):
        read_table(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="empty.csv.*empty"):
        read_table(write(tmp_path / "empty.csv", ""))
    with pytest.raises(DataError, match="data.xlsx.*unknown table format"):
        read_table(write(tmp_path / "data.xlsx", "x"))
    with pytest.raises(DataError, match="bad.parquet"):
        read_table(write(tmp_path / "bad.parquet", "not parquet"))
    # README: "Compressed files (.csv.gz) are not read: unpack them first" -- the error said "unknown table
    # format '.gz'" and listed .json as JSON lines only (an array of records is read too)
    with pytest.raises(DataError, match=r"i\.csv\.gz.*compressed.*unpack it first.*one array of records"):
        read_table(write(tmp_path / "i.csv.gz", "x"))
    with pytest.raises(DataError, match="header.csv.*no data rows"):
        read_interactions(write(tmp_path / "header.csv", "user_id,item_id\n"))


def test_parquet_and_jsonl(tmp_path):
    pd.DataFrame({"user_id": [1, 2], "item_id": ["a", "b"], "timestamp": [3, 4]}).to_parquet(tmp_path / "i.parquet")
    assert read_interactions(tmp_path / "i.parquet")["user_id"].tolist() == ["1", "2"]
    lines = "\n".join(json.dumps({"user_id": u, "item_id": i}) for u, i in [("u", 1), ("v", 2)])
    for suffix in ("jsonl", "ndjson", "json"):
        p = write(tmp_path / f"i.{suffix}", lines + "\n")
        assert read_interactions(p)["item_id"].tolist() == ["1", "2"]


def test_a_json_array_file_is_read_as_records_compact_or_indented(tmp_path):
    # DataFrame.to_json(orient="records") writes the array on one line: it was read as one JSON line, a table
    # of N columns '0', '1', ..., and refused as missing 'user_id'
    recs = [{"user_id": "007", "item_id": "a", "timestamp": 3}, {"user_id": "7", "item_id": "b", "timestamp": 4}]
    for name, text in (("compact.json", json.dumps(recs)), ("indented.json", "\ufeff" + json.dumps(recs, indent=2))):
        df = read_interactions(write(tmp_path / name, text))
        assert df["user_id"].tolist() == ["007", "7"] and df["timestamp"].tolist() == [3, 4], name
    # JSON lines behind a byte-order mark: "could not read as jsonl (Expected object or value at position 0)"
    df = read_interactions(write(tmp_path / "bom.jsonl", "\ufeff" + "\n".join(json.dumps(r) for r in recs) + "\n"))
    assert df["user_id"].tolist() == ["007", "7"]


def test_column_map_validation():
    with pytest.raises(ConfigError, match="user"):
        ColumnMap(user="")
    with pytest.raises(ConfigError, match="two roles"):
        ColumnMap(user="x", item="x")


# ---------------------------------------------------------------- regressions found by fuzzing (issue 7)


def test_timestamp_beyond_int64_is_refused_not_wrapped(tmp_path):
    path = write(tmp_path / "a.csv", "user_id,item_id,timestamp\nu1,i1,5\nu2,i2,1e30\n")
    with pytest.raises(DataError, match=r"row 3, column 'timestamp': timestamp 1e\+30 is out of range"):
        read_interactions(path)


def test_rating_beyond_float32_is_refused_not_inf(tmp_path):
    path = write(tmp_path / "a.csv", "user_id,item_id,rating\nu1,i1,1e39\n")
    with pytest.raises(DataError, match="row 2, column 'rating'.*finite"):
        read_interactions(path)


def test_nested_json_id_is_refused_naming_row_and_column(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"user_id": "u1", "item_id": "i1"}\n{"user_id": {"a": 1}, "item_id": "i2"}\n')
    with pytest.raises(DataError, match="line 2, column 'user_id'.*not a string or a number"):  # the file's line 2
        read_interactions(path)


def test_columns_equal_after_stripping_are_refused(tmp_path):
    path = write(tmp_path / "a.csv", "user_id,item_id, user_id\nu1,i1,u2\n")
    with pytest.raises(DataError, match=r"duplicate column name\(s\) \['user_id'\]"):
        read_interactions(path)


@pytest.mark.parametrize("header", ["user_id,item_id,item_id,timestamp", "user_id;item_id;item_id;timestamp"])
def test_a_column_named_twice_in_a_header_is_refused(tmp_path, header):
    # pandas renamed the second 'item_id' to 'item_id.1' and the first was read as the items, the other silently
    # left out: a joined export with two id columns trained on whichever came first
    sep = header[7]
    path = write(tmp_path / "a.csv", f"{header}\nu1{sep}i1{sep}i9{sep}1\n")
    with pytest.raises(DataError, match=r"a.csv, row 1: duplicate column name\(s\) \['item_id'\]"):
        read_interactions(path)
    assert read_interactions(write(tmp_path / "b.csv", "user_id,item_id,item_id.1\nu1,i1,i9\n"))["item_id"].tolist() == ["i1"]


def test_a_dataframe_with_a_repeated_column_is_refused_naming_it():
    # read like a file's header: the frame used to fail inside pandas ("'DataFrame' object has no attribute 'dtype'")
    df = pd.DataFrame([["u1", "i1", 1, "u2"]], columns=["user_id", "item_id", "timestamp", "user_id"])
    with pytest.raises(DataError, match=r"<DataFrame train>: duplicate column name\(s\) \['user_id'\]"):
        read_interactions(df, name="<DataFrame train>")
    # a feature table's repeat was reported as another column missing ("column 'tags' not found")
    items = pd.DataFrame([["i1", "a", 1.0, "b"]], columns=["item_id", "brand", "price", "brand"])
    with pytest.raises(DataError, match=r"duplicate column name\(s\) \['brand'\]"):
        read_feature_table(items, FeatureSpec(key="item_id", categorical=("brand",), numeric=("price",)))


def test_dataframe_column_names_are_read_like_a_files_header():
    df = pd.DataFrame({" user_id": ["u1"], "item_id ": ["i1"], 0: [5]})  # spaces stripped, names as text
    assert read_interactions(df, ColumnMap(rating="0"))[["user_id", "item_id", "rating"]].values.tolist() == [["u1", "i1", 5.0]]
    assert list(df.columns) == [" user_id", "item_id ", 0]  # the caller's frame is left as it was


@pytest.mark.parametrize(("column", "message"), [
    (pd.to_timedelta([1, 2], unit="s"), r"durations \(timedelta64\[\w+\]\), not points in time"),  # was read as 1000000
    (pd.period_range("2024-01", periods=2, freq="M"), r"periods \(period\[M\]\).*to_timestamp"),  # was read as 648
])
def test_dataframe_timestamps_of_another_kind_are_refused_not_read_in_another_unit(column, message):
    df = pd.DataFrame({"user_id": ["a", "b"], "item_id": ["x", "y"], "timestamp": column})
    with pytest.raises(DataError, match=rf"column 'timestamp': timestamps are {message}"):
        read_interactions(df)


@pytest.mark.parametrize("dtype", ["timestamp[ns][pyarrow]", "timestamp[ns, tz=Asia/Kolkata][pyarrow]",
                                   "timestamp[us][pyarrow]", "timestamp[ms, tz=UTC][pyarrow]"])
def test_arrow_datetimes_of_a_dataframe_read_as_the_numpy_ones(dtype):
    # df.astype("timestamp[ns][pyarrow]") / pd.read_parquet(..., dtype_backend="pyarrow"): a nanosecond column
    # crashed in pandas' arithmetic with NotImplementedError "mod not implemented."
    times = pd.Series(pd.to_datetime([874965478, 874965479, 874965478], unit="s", utc=True))
    df = pd.DataFrame({"user_id": ["a", "a", "b"], "item_id": ["x", "y", "x"], "timestamp": times})
    expected = read_interactions(df)
    arrow = df.assign(timestamp=(times if "tz=" in dtype else times.dt.tz_localize(None)).astype(dtype))
    got = read_interactions(arrow)
    assert got["timestamp"].tolist() == expected["timestamp"].tolist() == [874965478, 874965479, 874965478]
    with pytest.raises(DataError, match=r"iloc 1, column 'timestamp': missing timestamp"):
        read_interactions(arrow.assign(timestamp=arrow["timestamp"].where(arrow.index != 1)), name="x")


@pytest.mark.parametrize("dtype", ["date32[pyarrow]", "date64[pyarrow]"])
def test_arrow_dates_of_a_dataframe_read_as_the_parquet_file_holding_them(tmp_path, dtype):
    # pd.read_parquet(..., dtype_backend="pyarrow") of a date column crashed ("'pyarrow.lib.DataType' object has no
    # attribute 'unit'"), while the same Parquet file given by its path read as epoch seconds
    days = pd.Series(pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-03"]).date, dtype=dtype)
    df = pd.DataFrame({"user_id": ["a", "a", "b"], "item_id": ["x", "y", "x"], "timestamp": days})
    df.to_parquet(tmp_path / "dates.parquet")
    assert read_interactions(df)["timestamp"].tolist() == [1577836800, 1577923200, 1578009600]
    assert read_interactions(tmp_path / "dates.parquet")["timestamp"].tolist() == [1577836800, 1577923200, 1578009600]
    with pytest.raises(DataError, match=r"iloc 1, column 'timestamp': missing timestamp"):
        read_interactions(df.assign(timestamp=df["timestamp"].where(df.index != 1)))


def test_an_arrow_duration_column_is_refused_as_durations():
    # it passed the check for timedelta64 and was read as epoch nanoseconds (1 s as 1000000000)
    df = pd.DataFrame({"user_id": ["a", "b"], "item_id": ["x", "y"],
                       "timestamp": pd.Series(pd.to_timedelta([1, 2], unit="s")).astype("duration[ns][pyarrow]")})
    with pytest.raises(DataError, match=r"column 'timestamp': timestamps are durations \(timedelta64\[ns\]\), not "
                                        r"points in time"):
        read_interactions(df)


def test_a_missing_rating_is_named_as_missing_with_the_way_out(tmp_path):
    # it read "rating nan is not a finite number (float32 range)", though training never reads ratings
    fix = r"fill or drop those rows, or set data.rating_col=null: training treats every row as a positive"
    with pytest.raises(DataError, match=rf"row 3, column 'rating': missing rating \(1 row\(s\) in total\); {fix}"):
        read_interactions(write(tmp_path / "a.csv", "user_id,item_id,rating\nu1,i1,4\nu1,i2,\n"))
    df = pd.DataFrame({"user_id": ["u1", "u1", "u2"], "item_id": ["i1", "i2", "i3"], "rating": [np.nan, 3.0, None]})
    with pytest.raises(DataError, match=r"iloc 0, column 'rating': missing rating \(2 row\(s\) in total\)"):
        read_interactions(df)
    with pytest.raises(DataError, match=r"iloc 0, column 'rating': rating inf is not a finite number"):
        read_interactions(df.assign(rating=[np.inf, 3.0, 1.0]))


def test_a_decimal_comma_rating_is_named_with_the_decimal_point(tmp_path):
    # Excel in comma-decimal locales writes "5,0" beside ';' separators: it read "rating '5,0' is not a finite
    # number (float32 range)", as if the number were out of range
    p = write(tmp_path / "a.csv", "user_id;item_id;rating\nu1;i1;5,0\nu1;i2;4,5\nu2;i1;3\n")
    with pytest.raises(DataError, match=r"row 2, column 'rating': rating '5,0' is not a number: write decimals "
                                        r"with a point \('5\.0'\); .*the decimal mark is always '\.'.*same holds for row 3"):
        read_interactions(p)
    # other values keep their message
    with pytest.raises(DataError, match=r"rating 'abc' is not a finite number \(float32 range\)"):
        read_interactions(write(tmp_path / "b.csv", "user_id;item_id;rating\nu1;i1;abc\n"))


# ---------------------------------------------------------------- SASRec format ("user item" lines, no header)

def test_sasrec_txt_detected_and_file_order_is_time_order(tmp_path):
    # user 1's lines are interleaved with user 2's: the order within each user is the file order
    p = write(tmp_path / "seq.txt", "1 10\n1 11\n2 10\n1 9\n2 13\n2 3\n1 13\n")
    df = read_interactions(p)
    assert df["user_id"].tolist() == ["1", "1", "2", "1", "2", "2", "1"]
    assert df["item_id"].tolist() == ["10", "11", "10", "9", "13", "3", "13"]
    assert df["timestamp"].tolist() == [0, 1, 0, 2, 1, 2, 3]  # ordinal within the user
    assert df["rating"].tolist() == [1.0] * 7
    assert df.attrs["report"]["format"] == "sasrec"
    assert "line order" in df.attrs["report"]["timestamp_source"]


def test_sasrec_leave_last_split_follows_file_order(tmp_path):
    from twotower.data import leave_last_n_out

    # item ids decrease over time, so a sort by item id would give a different split
    p = write(tmp_path / "seq.txt", "1 50\n1 40\n1 30\n1 20\n2 9\n2 8\n2 7\n")
    train, valid, test = leave_last_n_out(read_interactions(p), 1)
    assert train.groupby("user_id")["item_id"].apply(list).to_dict() == {"1": ["50", "40"], "2": ["9"]}
    assert valid.set_index("user_id")["item_id"].to_dict() == {"1": "30", "2": "8"}
    assert test.set_index("user_id")["item_id"].to_dict() == {"1": "20", "2": "7"}


def test_sasrec_forced_format_and_table_txt_unchanged(tmp_path):
    p = write(tmp_path / "seq.dat", "3 4\n3 5\n")
    assert read_interactions(p, format="sasrec")["item_id"].tolist() == ["4", "5"]
    # a .txt with a header row is still a table
    t = write(tmp_path / "t.txt", "user_id item_id\n1 2\n")
    with pytest.raises(DataError):  # a space-separated table is not a supported table
        read_interactions(t)
    with pytest.raises(ConfigError, match="format"):
        read_interactions(p, format="csv")


@pytest.mark.parametrize("text", ["u1 i1\nu1 i2\n", "user_id item_id\n1 2\n", "1 1 978300760\n1 2 978300761\n",
                                  "user_id item_id timestamp\nu1 i1 5\n"])
def test_space_separated_pairs_name_both_formats_not_a_missing_column(tmp_path, text):
    # string ids in 'user item' lines (or a space-separated table) read as one column named after line 1;
    # the error was "column 'user_id' not found; columns present: ['u1 i1']" -- and, for three fields (a time
    # column too), still was, with "Set data.user_col=NAME to the right column", which no setting satisfies
    p = write(tmp_path / "pairs.txt", text)
    with pytest.raises(DataError, match="separated by white space") as e:
        read_interactions(p)
    assert e.value.row == 1 and "integer ids" in str(e.value) and "header row" in str(e.value)
    fields = len(text.splitlines()[0].split())
    assert f"is {'two' if fields == 2 else fields} fields separated" in str(e.value)


@pytest.mark.parametrize("text", ["1::1193::5::978300760\n1::661::3::978302109\n",
                                  "user_id::item_id::rating::timestamp\n1::1193::5::978300760\n"])
def test_double_colon_fields_are_named_not_a_missing_column(tmp_path, text):
    # MovieLens-1M's ratings.dat renamed to .csv: one column named after line 1, and the error said
    # "Set data.user_col=NAME to the right column", which no setting satisfies
    p = write(tmp_path / "ratings.csv", text)
    with pytest.raises(DataError) as e:
        read_interactions(p)
    first = text.splitlines()[0]
    assert str(e.value) == (
        f"file {p}, line 1: {first!r} is 4 fields separated by '::' (as MovieLens' .dat files are): a table needs "
        "comma, tab, ';' or '|' between fields and a header row naming them; convert the file first (a first "
        "line naming its columns, and every '::' replaced by ',')")


@pytest.mark.parametrize(
    "text, line, needle",
    [
        ("1 2\n1 x\n", 2, "not an integer"),
        ("1 2\n1\n", 2, "item id missing;"),
        ("1 2\n\n1 3\n", 2, "user id missing \\(a blank line\\)"),
        ("1 2 3\n", 1, "line 1: 3 fields"),
        # a later line with more fields: pandas' "Error tokenizing data. C error: ..." with a line break, no row
        ("1 2\n1 3\n1 4 5\n", 3, "line 3: 3 fields; SASRec format is exactly 'user item'"),
    ],
)
def test_sasrec_bad_lines_name_the_line(tmp_path, text, line, needle):
    # the file has no header: its errors said "row 900000", the word the docs keep for a table's rows (header =
    # row 1), where a JSON lines file says "line"; the number is the line an editor shows
    p = write(tmp_path / "bad.txt", text)
    with pytest.raises(DataError, match=needle) as e:
        read_interactions(p, format="sasrec")
    assert e.value.row == line and e.value.unit == "line" and f"line {line}" in str(e.value)
    assert "row" not in str(e.value)


def test_sasrec_more_fields_later_is_an_error(tmp_path):
    p = write(tmp_path / "bad.txt", "1 2\n1 3\n1 4 5\n")
    with pytest.raises(DataError, match="SASRec"):
        read_interactions(p)


@pytest.mark.parametrize("word", ["NA", "nan", "None", "null", "N/A"])
def test_csv_ids_that_look_like_missing_values_are_ids_as_in_jsonl(tmp_path, word):
    csv = write(tmp_path / "i.csv", f"user_id,item_id,timestamp,rating\n{word},1,1,5\nu2,{word},2,4\n")
    jsonl = write(tmp_path / "i.jsonl", json.dumps({"user_id": word, "item_id": "1", "timestamp": 1, "rating": 5})
                  + "\n" + json.dumps({"user_id": "u2", "item_id": word, "timestamp": 2, "rating": 4}) + "\n")
    a, b = read_interactions(csv), read_interactions(jsonl)
    assert a["user_id"].tolist() == b["user_id"].tolist() == [word, "u2"]
    assert a["item_id"].tolist() == b["item_id"].tolist() == ["1", word]


def test_csv_truly_empty_id_and_na_timestamp_keep_their_errors(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nNA,1,1\n,2,2\n")
    with pytest.raises(DataError, match="empty id") as e:
        read_interactions(p)
    assert e.value.row == 3 and e.value.column == "user_id"
    p = write(tmp_path / "t.csv", "user_id,item_id,timestamp\nu,1,1\nu,2,NA\n")
    with pytest.raises(DataError, match="missing timestamp") as e:
        read_interactions(p)
    assert e.value.row == 3


def test_jsonl_errors_name_the_line_and_parquet_the_record(tmp_path):
    lines = [{"user_id": "u", "item_id": str(i), "timestamp": i} for i in range(4)]
    lines[2]["timestamp"] = "not a time"
    p = tmp_path / "i.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[2:]) + "\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 4 and e.value.unit == "line"  # the blank line 3 counts
    assert "line 4, column 'timestamp'" in str(e.value)
    pq = tmp_path / "i.parquet"
    pd.DataFrame({"user_id": ["a", None, "c"], "item_id": ["1", "2", "3"]}).to_parquet(pq)
    with pytest.raises(DataError, match="record 2, column 'user_id'") as e:
        read_interactions(pq)
    assert e.value.row == 2


def test_a_true_among_timestamps_is_refused_naming_its_line(tmp_path):
    # a JSON true beside epoch numbers was read as 1 (1970-01-01 00:00:01) without a word
    lines = [{"user_id": "u", "item_id": str(i), "timestamp": 1_700_000_000 + i} for i in range(4)]
    lines[2]["timestamp"] = True
    p = tmp_path / "i.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(DataError, match=r"line 3, column 'timestamp': timestamp True is a true/false value"):
        read_interactions(p)
    df = pd.DataFrame({"user_id": ["u", "u"], "item_id": ["1", "2"], "timestamp": pd.Series([5, np.False_], dtype=object)})
    with pytest.raises(DataError, match=r"iloc 1, column 'timestamp': timestamp False is a true/false"):
        read_interactions(df)


def test_csv_rows_still_count_the_header(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nu,1,1\nu,2,x\n")
    with pytest.raises(DataError, match="row 3, column 'timestamp'"):
        read_interactions(p)


def test_ragged_csv_row_is_one_line_naming_the_line(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp\nu,1,1\nu,2,2,9,9\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert "\n" not in str(e.value) and e.value.row == 3 and "line 3" in str(e.value)


def test_non_utf8_names_the_line_and_byte(tmp_path):
    p = tmp_path / "i.csv"
    p.write_bytes(b"user_id,item_id\n" + b"u,1\n" * 5000 + b"u,caf\xe9\n")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 5002 and "0xe9" in str(e.value) and "position 0" not in str(e.value)


def test_broken_jsonl_line_is_named(tmp_path):
    p = write(tmp_path / "i.jsonl", '{"user_id": "u", "item_id": "1"}\n{"user_id": "u", "item_id": \n')
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 2 and e.value.unit == "line" and "position" not in str(e.value)


@pytest.mark.parametrize("line", ["[1, 2, 3]", '"hello"', "3", "null"])
def test_a_jsonl_line_that_is_no_object_is_named(tmp_path, line):
    # valid JSON but no record: "could not read as jsonl (TypeError: cannot convert dictionary update sequence
    # element #0 to a sequence); check the format and the file suffix", with no line named
    p = write(tmp_path / "i.jsonl", '{"user_id": "u", "item_id": "1"}\n\n' + line + '\n{"user_id": "v", "item_id": "2"}\n')
    with pytest.raises(DataError, match=r"line 3: .*is not a JSON object.*every line must be one JSON object") as e:
        read_interactions(p)
    assert e.value.row == 3 and e.value.unit == "line"


def test_a_json_array_record_that_is_no_object_is_named(tmp_path):
    p = write(tmp_path / "i.json", '[\n {"user_id": "u", "item_id": "1"},\n {"user_id": "v", "item_id": "2"},\n 3\n]\n')
    with pytest.raises(DataError, match=r"record 3: 3 is not a JSON object; every record of the array") as e:
        read_interactions(p)
    assert e.value.row == 3 and e.value.unit == "record"


def test_repeats_with_another_rating_are_counted_apart_and_warned(tmp_path, caplog):
    p = write(tmp_path / "i.csv", "user_id,item_id,timestamp,rating\nu,a,1,5\nu,a,1,5\nu,a,1,1\nu,b,2,3\n")
    with caplog.at_level("INFO", logger="twotower.data.readers"):
        df = read_interactions(p)
    rep = df.attrs["report"]
    assert len(df) == 2 and df["rating"].tolist() == [5.0, 3.0]  # one row per (user, item, time), the first kept
    assert rep["duplicates_dropped"] == 1 and rep["conflicting_duplicates_dropped"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "i.csv" in warnings[0] and "row 4 repeats row 2" in warnings[0]


def test_a_dataframe_error_names_the_iloc_position_of_the_bad_row():
    # a CSV counts its header as row 1; a DataFrame has no header row, and its index labels need not be
    # positions (here: filtered from a larger frame), so "row 5" named a row two further on than the bad one
    df = pd.DataFrame({"user_id": ["a", "b", "c", None, "e"], "item_id": ["x", "y", "z", "x", "y"],
                       "timestamp": [1, 2, 3, 4, 5]}, index=[10, 11, 12, 13, 14])
    with pytest.raises(DataError, match=r"file <DataFrame>, iloc 3, column 'user_id': empty id") as got:
        read_interactions(df)
    assert (got.value.row, got.value.unit) == (3, "iloc") and pd.isna(df.iloc[got.value.row]["user_id"])
    items = pd.DataFrame({"item_id": ["x", "y", "x"], "brand": ["p", "q", "r"]})
    with pytest.raises(DataError, match=r"iloc 2, column 'item_id': duplicate key 'x' \(first at iloc 0\)"):
        read_feature_table(items, FeatureSpec(key="item_id", categorical=("brand",)), name=None)


@pytest.mark.parametrize(("text", "where"), [
    ("user_id,item_id,timestamp\n1,2,3\n\n\n1,3,x\n", "row 5"),  # blank lines are rows (pandas skips them)
    # a quoted field over two lines is one row, and the editor's line the row is on is said beside it (this pinned
    # "row 4" alone, where an editor shows the bad value on line 5)
    ("user_id,item_id,timestamp\n1,2,3\n1,\"a\nb\",4\n1,3,x\n", "row 4 (line 5)"),
])
def test_a_bad_csv_row_is_named_as_the_file_numbers_it(tmp_path, text, where):
    # the row used to be the data position + 2, which named another row after a blank line
    path = tmp_path / "events.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=rf"{re.escape(where)}, column 'timestamp'"):
        read_interactions(path)


@pytest.mark.parametrize("table", ["interactions", "items"])
def test_a_value_error_after_a_quoted_line_break_names_the_editor_s_line(tmp_path, table):
    """A value error counted records: after an id over three lines it said "row 4" of a bad value on line 6, where
    an editor finds another row. The row stays (a spreadsheet's count, e.row) and the line is said beside it."""
    path = tmp_path / "t.csv"
    if table == "interactions":
        path.write_text('user_id,item_id,timestamp\n1,"multi\nline\nid",1700000000\n1,b,1700000001\n1,c,bad\n')
        with pytest.raises(DataError) as e:
            read_interactions(path)
    else:
        path.write_text('item_id,price\n"multi\nline\nid",1\nb,2\nc,\nb,3\n')
        with pytest.raises(DataError) as e:
            read_feature_table(path, FeatureSpec(key="item_id", numeric=("price",)))
    assert (e.value.row, e.value.line) == (4 if table == "interactions" else 5, 6 if table == "interactions" else 7)
    assert f"row {e.value.row} (line {e.value.line}), column" in str(e.value)


def test_a_time_column_under_another_name_is_pointed_at_when_row_order_stands_in(tmp_path, caplog):
    # 'ts' was passed over without a word: the rows' file order silently became their time order
    p = write(tmp_path / "i.csv", "customer,product,ts\nu1,a,30\nu1,b,10\n")
    cols = ColumnMap(user="customer", item="product")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p, cols)
    assert df["timestamp"].tolist() == [0, 1]
    assert "no 'timestamp' column" in caplog.text and "set data.timestamp_col=ts" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(p, ColumnMap(user="customer", item="product", timestamp=None))  # said on purpose
        read_interactions(write(tmp_path / "j.csv", "customer,product,weight\nu1,a,1\n"), cols)  # nothing like a time
    assert "timestamp" not in caplog.text


def test_a_weight_column_under_another_name_is_pointed_at_when_every_row_gets_1(tmp_path, caplog):
    # 'weight' beside data.rating_col's default 'rating' was replaced by 1.0 in the split files without a word
    p = write(tmp_path / "i.csv", "customer,product,timestamp,playCount\nu1,a,30,3\nu1,b,10,5\n")
    cols = ColumnMap(user="customer", item="product")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p, cols)
    assert df["rating"].tolist() == [1.0, 1.0]
    assert ("no 'rating' column, so every row is given the rating 1.0" in caplog.text
            and "'playCount' looks like ratings or weights: set data.rating_col=playCount" in caplog.text)
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(p, ColumnMap(user="customer", item="product", rating=None))  # said on purpose
        assert read_interactions(p, ColumnMap(user="customer", item="product", rating="playCount"))["rating"].tolist() \
            == [3.0, 5.0]
        read_interactions(write(tmp_path / "j.csv", "customer,product,timestamp,genre\nu1,a,1,x\n"), cols)
    assert "rating" not in caplog.text


def _rows(sorted_ids: bool) -> list[tuple[int, int]]:
    rng = np.random.default_rng(0)
    rows = []
    for u in range(25):
        items = np.sort(rng.choice(500, 6, replace=False)) if sorted_ids else rng.permutation(500)[:6]
        rows += [(u, int(i)) for i in items]
    return rows


@pytest.mark.parametrize("fmt", ["csv", "sasrec"])
def test_a_file_sorted_by_item_id_is_not_taken_for_time_order_in_silence(tmp_path, caplog, fmt):
    # Book-Crossing lists each user's books by ISBN: leave-last held out the largest ISBN, without a word
    def write_rows(path, rows):
        lines = ["user_id,item_id"] + [f"{u},{i}" for u, i in rows] if fmt == "csv" else [f"{u} {i}" for u, i in rows]
        path.write_text("\n".join(lines) + "\n")
        return path

    suffix = ".csv" if fmt == "csv" else ".txt"
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(write_rows(tmp_path / f"sorted{suffix}", _rows(True)))
    assert "25 of 25 users with 5+ rows list their items in increasing id order" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(write_rows(tmp_path / f"shuffled{suffix}", _rows(False)))
    assert "increasing id order" not in caplog.text


def test_a_timestamp_column_is_trusted_even_when_ids_rise(tmp_path, caplog):
    path = tmp_path / "t.csv"
    path.write_text("user_id,item_id,timestamp\n" + "".join(f"{u},{i},{n}\n" for n, (u, i) in enumerate(_rows(True))))
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(path)
    assert "increasing id order" not in caplog.text


def test_a_trailing_separator_on_every_row_keeps_the_columns_in_place(tmp_path):
    """Rows one field longer than the header made pandas take the first column as the index: user_id held
    the items, item_id the times, and a stray fourth value became the timestamp, with no error."""
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id,timestamp\nu1,i1,1714521600,\nu2,i2,1714521700,\n", encoding="utf-8")
    df = read_interactions(p)
    assert df[["user_id", "item_id"]].values.tolist() == [["u1", "i1"], ["u2", "i2"]]
    assert df["timestamp"].tolist() == [1714521600, 1714521700]


def test_values_beyond_the_header_are_refused_naming_the_row(tmp_path):
    p = tmp_path / "i.csv"  # the header lacks the rating column's name
    p.write_text("user_id,item_id,timestamp\nu1,i1,1714521600,5\nu2,i2,1714521700,4\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 2 and "4 fields, but the header names 3 columns" in str(e.value)


@pytest.mark.parametrize(("before", "line"), [("", 4), ('u0,"i\n0",1714521500\n', 6), ("\n", 5)])
def test_a_later_row_with_values_beyond_the_header_names_its_line_and_values(tmp_path, before, line):
    """A row after the first with an extra value read "line 4: could not read as csv (ParserError: Error tokenizing
    data. C error: Expected 3 fields in line 4, saw 4); check the format and the file suffix": pandas' words, and
    after a quoted line break its "line" was the row (the spreadsheet's count), one above the editor's line."""
    p = tmp_path / "i.csv"
    p.write_text(f"user_id,item_id,timestamp\n{before}u1,i1,1714521600\nu2,i2,1714521700\nu3,i3,1714521800,5\n",
                 encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == line and e.value.unit == "line"
    assert str(e.value).endswith(f"line {line}: 4 fields, but the header names 3 columns: the value(s) ['5'] belong "
                                 "to no column; give every column a name in the header, or quote a value that holds "
                                 "the separator")


def test_a_later_row_with_an_empty_extra_field_says_so(tmp_path):
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id\nu1,i1\nu2,i2,\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 3: 3 fields, but the header names 2 columns: the extra field is empty"):
        read_interactions(p)


def test_uint64_ids_keep_their_digits(tmp_path):
    """Above 2**63 an id went through int64 and wrapped to a negative number: another id, silently."""
    big = 12345678901234567890
    js = tmp_path / "i.jsonl"
    js.write_text(f'{{"user_id": 1, "item_id": {big}}}\n{{"user_id": 2, "item_id": 7}}\n', encoding="utf-8")
    pq = tmp_path / "i.parquet"
    pd.DataFrame({"user_id": np.array([big, 7], dtype=np.uint64), "item_id": ["a", "b"]}).to_parquet(pq)
    assert read_interactions(js)["item_id"].tolist() == [str(big), "7"]
    assert read_interactions(pq)["user_id"].tolist() == [str(big), "7"]


def test_an_id_written_as_12_and_12_0_in_one_column_is_warned_about(tmp_path, caplog):
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id\n12,a\n12.0,b\n7,c\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p)
    assert df["user_id"].nunique() == 3  # ids are text: still two users, but said
    assert "'12' and '12.0'" in caplog.text and "column 'user_id'" in caplog.text
    caplog.clear()
    q = tmp_path / "j.csv"
    q.write_text("user_id,item_id\n12.0,a\n7.0,b\n", encoding="utf-8")  # one spelling throughout: nothing to say
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(q)
    assert "trailing .0" not in caplog.text


def test_a_blank_timestamp_beside_dates_is_called_missing(tmp_path):
    p = tmp_path / "i.csv"  # was: "cannot read timestamp nan"
    p.write_text("user_id,item_id,timestamp\nu1,i1,2024-05-01 10:00\nu1,i2,\nu1,i3,May 1st\n", encoding="utf-8")
    with pytest.raises(DataError, match="missing timestamp") as e:
        read_interactions(p)
    assert e.value.row == 3 and "nan" not in str(e.value)
    p.write_text("user_id,item_id,timestamp\nu1,i1,2024-05-01 10:00\nu1,i3,May 1st\nu1,i2,\n", encoding="utf-8")
    with pytest.raises(DataError, match="cannot read timestamp 'May 1st'") as e:  # the first bad row, whichever
        read_interactions(p)
    assert e.value.row == 3


def test_excels_separator_hint_line_is_named(tmp_path):
    p = tmp_path / "i.csv"
    p.write_text("sep=;\nuser_id;item_id\nu1;i1\n", encoding="utf-8")
    with pytest.raises(DataError, match="Excel's separator hint") as e:
        read_interactions(p)
    assert e.value.row == 1


def test_a_parquet_files_named_index_is_read_as_its_columns(tmp_path):
    """pandas writes df.set_index("user_id").to_parquet(...) with the ids as the index: the user column was
    "not found" in a file that holds it."""
    df = pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["a", "b"], "timestamp": [1, 2]})
    df.set_index("user_id").to_parquet(tmp_path / "one.parquet")
    df.set_index(["user_id", "item_id"]).to_parquet(tmp_path / "two.parquet")
    for name in ("one.parquet", "two.parquet"):
        got = read_interactions(tmp_path / name)
        assert got[["user_id", "item_id", "timestamp"]].values.tolist() == [["u1", "a", 1], ["u2", "b", 2]]
    df.to_parquet(tmp_path / "plain.parquet")  # a default RangeIndex stays out of the columns
    assert list(read_table(tmp_path / "plain.parquet").columns) == ["user_id", "item_id", "timestamp"]


def test_a_null_id_in_parquet_is_named_as_null_not_as_a_short_row(tmp_path):
    p = tmp_path / "i.parquet"
    pd.DataFrame({"user_id": [1.0, 2.0, np.nan], "item_id": ["a", "b", "c"]}).to_parquet(p)
    with pytest.raises(DataError, match=r"record 3, column 'user_id': empty id \(1 record\(s\) in total; null") as e:
        read_interactions(p)
    assert "fewer fields" not in str(e.value)


def test_a_timestamp_column_that_orders_nothing_is_said(tmp_path, caplog):
    # audit: every row at one time (a snapshot's export date) ordered each user's rows by item id, in silence:
    # leave-last held out the largest ids, and histories were read in id order
    rows = _rows(False)
    one_time = tmp_path / "one_time.csv"
    one_time.write_text("user_id,item_id,timestamp\n" + "".join(f"{u},{i},2024-05-01\n" for u, i in rows))
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(one_time)
    assert "25 of 25 users with 5+ rows have one 'timestamp' value for all their rows" in caplog.text
    assert "data.timestamp_col=null" in caplog.text
    caplog.clear()
    # times that order each user's rows, even with ties among them (several rows in one second), say nothing
    path = tmp_path / "timed.csv"
    path.write_text("user_id,item_id,timestamp\n" + "".join(f"{u},{i},{1000 + n // 2}\n" for n, (u, i) in enumerate(rows)))
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(path)
    assert "one 'timestamp' value" not in caplog.text


def test_a_missing_timestamp_is_said_in_the_files_words_with_the_ways_out(tmp_path):
    # a Parquet record read "(an empty field, or a row with fewer fields than the header); expected epoch seconds"
    way_out = r"fill or drop such {unit}s, or set data.timestamp_col=null to take each user's rows in file order"
    pq = tmp_path / "i.parquet"
    pd.DataFrame({"user_id": ["a", "a", "b"], "item_id": ["1", "2", "3"], "timestamp": [5.0, np.nan, 7.0]}).to_parquet(pq)
    with pytest.raises(DataError, match=r"record 2, column 'timestamp': missing timestamp \(null, NaN or NaT\); "
                                        + way_out.format(unit="record") + "$"):
        read_interactions(pq)
    frame = pd.DataFrame({"user_id": ["a", "b"], "item_id": ["1", "2"],
                          "timestamp": pd.to_datetime(["2024-05-01", None])})
    with pytest.raises(DataError, match=r"iloc 1, column 'timestamp': missing timestamp \(null, NaN or NaT\); "
                                        + way_out.format(unit="row")):
        read_interactions(frame)
    p = write(tmp_path / "t.csv", "user_id,item_id,timestamp\nu,1,1\nu,2,\n")
    with pytest.raises(DataError, match=r"row 3, column 'timestamp': missing timestamp \(an empty field, or a row with "
                                        r"fewer fields than the header\); " + way_out.format(unit="row")):
        read_interactions(p)


def test_missing_rating_is_counted_in_the_files_words(tmp_path):
    """A Parquet file's missing rating said "2 row(s) in total; fill or drop those rows", its empty id "record(s)"."""
    df = pd.DataFrame({"user_id": ["u1", "u2", "u3"], "item_id": ["i1", "i2", "i3"], "timestamp": [1, 2, 3],
                       "rating": [4.0, None, None]})
    path = tmp_path / "i.parquet"
    df.to_parquet(path)
    with pytest.raises(DataError, match=r"record 2, column 'rating': missing rating \(2 record\(s\) in total\); "
                                        r"fill or drop those records"):
        read_interactions(path)
    path = tmp_path / "i.jsonl"
    df.to_json(path, orient="records", lines=True)
    with pytest.raises(DataError, match=r"line 2, column 'rating': missing rating \(2 line\(s\) in total\); "
                                        r"fill or drop those lines"):
        read_interactions(path)


@pytest.mark.parametrize(("name", "wanted"), [("x.csv", "a header row and data rows"),
                                              ("x.jsonl", "one JSON record a line"),
                                              ("x.json", r"JSON records \(an array, or one a line\)")])
def test_an_empty_file_is_told_what_its_format_expects(tmp_path, name, wanted):
    # an empty .jsonl was told "expected a header row and data rows", which JSON lines do not have
    (tmp_path / name).write_text("")
    with pytest.raises(DataError, match=rf"{name}: file is empty; expected {wanted}$"):
        read_interactions(tmp_path / name)


def test_timestamps_that_are_all_yyyymmdd_dates_are_warned_about(tmp_path, caplog):
    # 20200101 was read as epoch seconds (1970-08-22) without a word; order-based splits were right, a date
    # cut-off was refused only later, naming no cause
    p = write(tmp_path / "d.csv", "user_id,item_id,timestamp\nu1,a,20200101\nu2,b,20200215\nu1,b,20191231\n")
    with caplog.at_level("WARNING"):
        df = read_interactions(p)
    assert df["timestamp"].tolist() == [20200101, 20200215, 20191231]  # read as written: nothing guessed
    assert ("every timestamp in column 'timestamp' is an 8-digit number that spells a date as YYYYMMDD (20200101: "
            "2020-01-01), and is read as epoch seconds (1970-08-22" in caplog.text)
    caplog.clear()
    with caplog.at_level("WARNING"):
        read_interactions(write(tmp_path / "e.csv", "user_id,item_id,timestamp\nu1,a,20200101\nu2,b,20200145\n"))
        read_interactions(write(tmp_path / "f.csv", "user_id,item_id,timestamp\nu1,a,1600000000\nu2,b,20200101\n"))
    assert "YYYYMMDD" not in caplog.text  # day 45, or one such number among epoch seconds: no date column


@pytest.mark.parametrize("reader", [read_table, read_interactions])
def test_a_pipe_is_refused_as_one_not_called_empty(tmp_path, reader):
    # `--users /dev/stdin`, `--users <(...)` or a named FIFO: a pipe's size is 0, and it was "file is empty" however
    # much was written to it; a table is read more than once, which a pipe cannot be
    import os

    fifo = tmp_path / "users.csv"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match=rf"{fifo}: is a pipe, not a file: .*; write it to a file first"):
        reader(fifo)
