"""Column errors point at what the user types (issue 13, items 2 and 5)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from twotower.errors import DataError


def test_missing_item_column_names_the_setting_and_never_suggests_the_user_column(tmp_path):
    from twotower.data.readers import read_interactions

    f = tmp_path / "x.csv"
    pd.DataFrame({"user_id": ["u1"], "itm": ["i1"], "timestamp": [1]}).to_csv(f, index=False)
    with pytest.raises(DataError) as e:
        read_interactions(f)
    msg = str(e.value)
    assert "data.item_col=" in msg and "ColumnMap" not in msg
    assert "did you mean 'itm'?" in msg and "'user_id'?" not in msg


def test_a_misnamed_title_column_is_refused_with_a_suggestion(tmp_path):
    from twotower.config import load_config
    from twotower.pipeline.sources import load_sources

    pd.DataFrame({"user_id": ["u1", "u1", "u2"], "item_id": ["i1", "i2", "i1"], "timestamp": [1, 2, 3]}).to_csv(
        tmp_path / "t.csv", index=False)
    pd.DataFrame({"item_id": ["i1", "i2"], "title": ["A", "B"]}).to_csv(tmp_path / "items.csv", index=False)
    cfg = load_config(overrides=[f"data.train={json.dumps(str(tmp_path / 't.csv'))}",
                                 f"data.valid={json.dumps(str(tmp_path / 't.csv'))}",
                                 f"data.items={json.dumps(str(tmp_path / 'items.csv'))}", "data.title_col=name"])
    with pytest.raises(DataError) as e:
        load_sources(cfg.data)
    msg = str(e.value)
    assert "'name'" in msg and "data.title_col=" in msg and "items.csv" in msg


@pytest.mark.parametrize("dtype", ["string[pyarrow]", "object"])
def test_text_ids_take_the_same_strip_as_any_other_id(dtype):
    """A text column (how CSV ids are read) has its own fast path; it must give what the general one gives."""
    from twotower.data.columns import _one_id_to_str, ids_to_str

    texts = ["007", " 42 ", "a\u00a0", "\u2003b", "x\x1c", "日本", "1.0", "nan"]
    got = ids_to_str(pd.Series(texts, dtype=dtype), file="f.csv", column="item_id").tolist()
    assert got == [_one_id_to_str(t) for t in texts] == ["007", "42", "a", "b", "x", "日本", "1.0", "nan"]
    with pytest.raises(DataError, match=r"row 3, column 'item_id': empty id"):
        ids_to_str(pd.Series(["a", "  "], dtype=dtype), file="f.csv", column="item_id")


def test_a_file_without_a_header_row_is_said_to_have_none(tmp_path):
    """Before: MovieLens' u.data saved as u.tsv was refused with "column 'user_id' (the user column) not found;
    columns present: ['196', '242', '3', '881250949']. Set data.user_col=NAME to the right column", as if one of
    those numbers could be named; the file lacks a header row."""
    from twotower.data.readers import read_interactions

    f = tmp_path / "u.tsv"
    f.write_text("196\t242\t3\t881250949\n186\t302\t3\t891717742\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(f)
    msg = str(e.value)
    assert msg.startswith(f"file {f}, line 1: the first line (196, 242, 3, 881250949) holds numbers, not column "
                          "names: the file has no header row; add a first line naming its columns")
    assert "data.user_col=NAME to the right column" not in msg
    g = tmp_path / "named.csv"  # named columns, just not the expected ones: the column advice stays
    g.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"columns present: \['a', 'b'\]\. Set data.user_col=NAME"):
        read_interactions(g)


def test_a_headerless_file_with_text_ids_is_said_to_have_no_header(tmp_path, caplog):
    """Before: 'c196,sku-00242,881250949,3' as the first line was not all numbers, so the message only said to
    "Set data.user_col=NAME to the right column" among those values; following it (data.user_col=c196
    data.item_col=sku-00242) read the first interaction as the header, dropped it and left the times unread,
    without a word."""
    from twotower.data.readers import ColumnMap, read_interactions

    f = tmp_path / "export.csv"
    f.write_text("c196,sku-00242,881250949,3\nc186,sku-00302,891717742,3\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(f)
    assert str(e.value).endswith(
        "The first line holds numbers where column names go (881250949, 3): if it is the first row of data, the "
        "file has no header row; add a first line naming its columns with the file's separator (e.g. user_id, "
        "item_id, timestamp, rating) rather than naming its values in data.user_col and the like.")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(f, ColumnMap(user="c196", item="sku-00242"))
    assert f"{f}: column names ['c196', 'sku-00242', '881250949', '3'] are read from the first line. The first line " \
        "holds numbers where column names go (881250949, 3)" in caplog.text
    caplog.clear()
    named = tmp_path / "named.csv"  # a header of names: no such hint
    named.write_text("customer,product,ts\nc1,p1,5\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(named)
    assert "holds numbers" not in str(e.value)
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(named, ColumnMap(user="customer", item="product", timestamp="ts"))
    assert "holds numbers" not in caplog.text


def test_a_frame_holding_the_ids_in_its_index_is_told_to_reset_it():
    # df.set_index("user_id") (or a groupby's result) was refused with "column 'user_id' not found; columns present:
    # ['item_id', 'timestamp']. Set data.user_col=NAME": the ids were there, in the index, which no setting reads
    from twotower.data.features import FeatureSpec, read_feature_table
    from twotower.data.readers import read_interactions

    df = pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["i1", "i2"], "timestamp": [1, 2]})
    with pytest.raises(DataError, match=r"column 'user_id' \(the user column\) not found; columns present: "
                                        r"\['item_id', 'timestamp'\], but the DataFrame's index is named 'user_id': "
                                        r"call df\.reset_index\(\) to make it a column\.$"):
        read_interactions(df.set_index("user_id"))
    with pytest.raises(DataError, match=r"MultiIndex has a level named 'item_id' \(levels \['user_id', 'item_id'\]\): "
                                        r"call df\.reset_index\(\)"):
        read_interactions(df.set_index(["user_id", "item_id"]))
    with pytest.raises(DataError, match=r"index is named 'item_id': call df\.reset_index\(\)"):
        read_feature_table(pd.DataFrame({"item_id": ["i1"], "brand": ["b"]}).set_index("item_id"),
                           FeatureSpec(key="item_id", categorical=("brand",)))
    # an index named otherwise changes nothing: the usual suggestion of a setting
    with pytest.raises(DataError, match=r"Set data\.user_col=NAME") as e:
        read_interactions(df.rename(columns={"user_id": "uid"}).set_index("timestamp"))
    assert "reset_index" not in str(e.value)


def test_float_ids_of_2_to_the_53_or_more_are_warned_about(tmp_path, caplog):
    # a 19-digit id through a float column (a JSON lines file with a null beside it) lost digits in silence, and
    # two users whose ids round to one float became one user
    from twotower.data.readers import read_interactions

    f = tmp_path / "x.jsonl"
    rows = [{"user_id": 12345678901234567890, "item_id": "i1", "timestamp": 1},
            {"user_id": 12345678901234567891, "item_id": "i2", "timestamp": 2},
            {"user_id": 7, "item_id": "i1", "timestamp": 3}, {"user_id": None, "item_id": "i1", "timestamp": 4}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    df = pd.read_json(f, lines=True)
    assert df["user_id"].dtype.kind == "f"  # the premise: pandas made the column float
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read = read_interactions(df.dropna(subset=["user_id"]))  # the frame as the user has it, float column
    assert read["user_id"].nunique() == 2  # the two long ids are one float: what the warning is about
    said = caplog.text
    assert "column 'user_id': id 1.2345678901234567e+19 is a float of 2**53 or more (2 such ids)" in said
    assert "different ids may have become one" in said


def test_float_ids_below_2_to_the_53_read_without_a_word(caplog):
    from twotower.data.columns import ids_to_str

    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        assert ids_to_str(pd.Series([1.0, 9007199254740991.0]), file="f", column="u").tolist() == [
            "1", "9007199254740991"]
    assert caplog.text == ""


def test_a_frame_with_two_levels_of_columns_is_refused_with_the_way_to_flatten_them():
    # a groupby's .agg({...: [...]}) or a pivot gives columns of two levels: read_interactions crashed with
    # AttributeError "'tuple' object has no attribute 'lower'" (train_run(frames=...) alike), a feature table likewise
    from twotower.data.features import FeatureSpec, read_feature_table
    from twotower.data.readers import read_interactions

    df = pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["i1", "i2"], "timestamp": [1, 2]})
    two = df.set_axis(pd.MultiIndex.from_tuples([("events", c) for c in df.columns]), axis=1)
    with pytest.raises(DataError, match=r"file <DataFrame>: the DataFrame's columns are a MultiIndex \(2 levels, "
                                        r"e\.g\. \('events', 'user_id'\)\).*flatten them first \(df\.columns = "):
        read_interactions(two)
    items = pd.DataFrame({"item_id": ["i1"], "brand": ["b"]})
    with pytest.raises(DataError, match=r"columns are a MultiIndex"):
        read_feature_table(items.set_axis(pd.MultiIndex.from_tuples([("x", "item_id"), ("x", "brand")]), axis=1),
                           FeatureSpec(key="item_id", categorical=("brand",)))
