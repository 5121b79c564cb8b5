from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from twotower.data import FeatureEncoder, FeatureSpec, Vocabulary, read_feature_table
from twotower.errors import ConfigError, DataError, IntegrityError

SPEC = FeatureSpec(key="item_id", categorical=("color",), numeric=("price",), multi=("tags",), text=("title",))


def table(tmp_path, text):
    p = tmp_path / "items.csv"
    p.write_text(text, encoding="utf-8")
    return p


def test_spec_validation():
    with pytest.raises(ConfigError, match="key"):
        FeatureSpec(key="")
    with pytest.raises(ConfigError, match="already listed"):
        FeatureSpec(key="k", categorical=("a",), numeric=("a",))
    with pytest.raises(ConfigError, match="tuple"):
        FeatureSpec(key="k", categorical="abc")
    assert FeatureSpec.from_dict(SPEC.to_dict()) == SPEC


def test_read_feature_table_errors_name_file_row_column(tmp_path):
    p = table(tmp_path, "item_id,colour,price,tags,title\n1,red,2,a,x\n")
    with pytest.raises(DataError) as e:
        read_feature_table(p, SPEC)
    assert "items.csv" in str(e.value) and e.value.column == "color" and "colour" in str(e.value)
    p = table(tmp_path, "item_id,color,price,tags,title\n1,red,2,a,x\n2,red,2,a,x\n1,blue,3,b,y\n")
    with pytest.raises(DataError) as e:
        read_feature_table(p, SPEC)
    assert e.value.row == 4 and "'1'" in str(e.value) and "row 2" in str(e.value)
    p = table(tmp_path, "item_id,color,price,tags,title\n1,red,cheap,a,x\n")
    with pytest.raises(DataError) as e:
        read_feature_table(p, SPEC)
    assert e.value.row == 2 and e.value.column == "price"


def test_encoding_missing_unknown_standardisation_padding(tmp_path):
    p = table(
        tmp_path,
        "item_id,color,price,tags,title\n"
        "1,red,10,a|b,One\n"
        "2,blue,20,b,Two\n"
        "3,,,,\n"
        "4,green,30,a|b|c,Four\n",
    )
    df = read_feature_table(p, SPEC)
    assert df["item_id"].tolist() == ["1", "2", "3", "4"]
    train_vocab = Vocabulary.from_ids(["1", "2", "3"])  # item 4 is not a training item
    enc = FeatureEncoder(SPEC).fit(df, train_vocab)
    full = Vocabulary.from_ids(["1", "2", "3", "4", "5"])  # 5 has no row at all
    f = enc.transform(df, full)
    assert len(f) == 5
    # categorical: sorted values blue=1, red=2; missing and unseen (green) -> 0
    assert f.categorical_sizes == (3,)
    assert f.categorical[:, 0].tolist() == [2, 1, 0, 0, 0]
    # multi: values a=1, b=2; width = longest training list (2); c unseen; padded with 0
    assert f.multi_sizes == (3,)
    assert f.multi[0].tolist() == [[1, 2], [2, 0], [0, 0], [1, 2], [0, 0]]
    # numeric: train mean 15, std 5; NaN -> 0 + indicator
    assert f.numeric_names == ("price", "price__missing")
    np.testing.assert_allclose(f.numeric[:, 0], [-1.0, 1.0, 0.0, 3.0, 0.0], rtol=1e-6)
    assert f.numeric[:, 1].tolist() == [0, 0, 1, 0, 1]
    assert f.numeric.dtype == np.float32 and f.categorical.dtype == np.int64
    assert f.text["title"] == ["One", "Two", "", "Four", ""]


def test_round_trip_and_encode_new_rows(tmp_path):
    df = pd.DataFrame({"item_id": ["1", "2"], "color": ["red", "blue"], "price": [1.0, 3.0],
                       "tags": ["a|b", "b"], "title": ["x", "y"]})
    enc = FeatureEncoder(SPEC).fit(df, Vocabulary.from_ids(["1", "2"]))
    data = json.loads(json.dumps(enc.to_dict()))
    again = FeatureEncoder.from_dict(data)
    new = pd.DataFrame({"item_id": ["9"], "color": ["blue"], "price": [2.0], "tags": ["b|a"], "title": ["new"]})
    a, b = enc.encode_rows(new), again.encode_rows(new)
    assert a.categorical.tolist() == b.categorical.tolist() == [[1]]
    assert a.multi[0].tolist() == b.multi[0].tolist() == [[2, 1]]
    np.testing.assert_allclose(b.numeric, [[0.0, 0.0]])
    assert b.text == {"title": ["new"]}
    with pytest.raises(IntegrityError):
        FeatureEncoder.from_dict({"format": "twotower.feature_encoder", "spec": SPEC.to_dict()})
    with pytest.raises(ConfigError, match="not fitted"):
        FeatureEncoder(SPEC).encode_rows(new)


def test_infinite_numeric_feature_is_refused_naming_row_and_column(tmp_path):
    """Regression (issue 7 fuzzing): inf / 1e39 used to pass as a numeric feature and become NaN later."""
    from twotower.data import FeatureSpec, read_feature_table
    from twotower.errors import DataError

    path = tmp_path / "items.csv"
    path.write_text("item_id,price\ni1,3.5\ni2,inf\n")
    with pytest.raises(DataError, match="row 3, column 'price'.*finite"):
        read_feature_table(path, FeatureSpec(key="item_id", numeric=("price",)))
    # a Parquet (or DataFrame) float column named the value as numpy spells it: "np.float64(inf) is not ..."
    frame = pd.DataFrame({"item_id": ["i1", "i2"], "price": [3.5, np.inf]})
    with pytest.raises(DataError, match=r"iloc 1, column 'price': inf is not a finite number \(float32 range\)"):
        read_feature_table(frame, FeatureSpec(key="item_id", numeric=("price",)))


def test_a_text_column_given_as_numeric_is_refused_at_its_first_text_row(tmp_path):
    """A column of titles given as data.item_numeric was refused at the title 'Infinity' in row 1356 (read as a
    number too large), not at its first title in row 2: the refusal names the first cell that is no number."""
    from twotower.data import FeatureSpec, read_feature_table
    from twotower.errors import DataError

    path = tmp_path / "items.csv"
    path.write_text("item_id,title\ni1,10\ni2,Heat\ni3,Infinity\ni4,Up\n")
    # the rows said to hold the same are the other titles, not 'Infinity', a number too large (review 2)
    with pytest.raises(DataError, match=r"row 3, column 'title': 'Heat' is not a number; .*the same holds for "
                       r"row 5$"):
        read_feature_table(path, FeatureSpec(key="item_id", numeric=("title",)))


def test_a_multi_valued_cell_split_by_another_separator_is_named_in_a_warning(tmp_path, caplog):
    """"a;b" in a column split on "|" is the one value "a;b": nothing failed, the lists were embedded as values
    no other cell shares. The warning names the file, column, first row and the setting to change."""
    import logging

    p = tmp_path / "items.csv"
    p.write_text('item_id,tags\ni1,x|y\ni2,a;b\ni3,"c,d"\ni4,solo\n')
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        read_feature_table(p, FeatureSpec(key="item_id", multi=("tags",)))
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert f"{p}, column 'tags'" in msgs[0] and "1 cells hold ';' but no '|' (first: row 3, 'a;b')" in msgs[0]
    assert "data.multi_separator=';'" in msgs[0]
    assert "1 cells hold ',' but no '|' (first: row 4, 'c,d')" in msgs[1]
    caplog.clear()
    p.write_text('item_id,tags\ni1,"x,y|z"\ni2,solo\n')  # every list in the configured separator: quiet
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        read_feature_table(p, FeatureSpec(key="item_id", multi=("tags",)))
    assert caplog.records == []


def test_a_feature_column_with_no_value_is_named_in_a_warning(tmp_path, caplog):
    """An all-empty column listed as a feature was fitted silently ("categorical {'brand': 0}" in the log) and
    trained on as missing for every item; the warning names it and its setting. A column with values is quiet."""
    import logging

    p = tmp_path / "items.csv"
    p.write_text("item_id,brand,tags,price,year,blurb,title\ni1,,,,1990, ,A\ni2,,,,,,\n")
    spec = FeatureSpec(key="item_id", categorical=("brand",), multi=("tags",), numeric=("price", "year"),
                       text=("blurb", "title"))
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        FeatureEncoder(spec).fit(read_feature_table(p, spec), Vocabulary(["i1", "i2"], kind="user"))
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == [f"user features: column {c!r} (data.user_{g}) has no value in any of the 2 users fitted, so "
                    f"it tells the tower nothing; fill it in, or drop it from data.user_{g}"
                    for c, g in (("brand", "categorical"), ("tags", "multi"), ("price", "numeric"), ("blurb", "text"))]


def test_a_feature_column_with_values_only_on_untrained_rows_is_not_called_empty(tmp_path, caplog):
    """Values held only by items without training interactions were warned about as "no value in any of the 3
    items fitted ... fill it in", beside the note that they occur only on items without training interactions."""
    import logging

    p = tmp_path / "items.csv"
    p.write_text("item_id,brand,tags\ni1,,\ni2,,\ni3,acme,x|y\n")
    spec = FeatureSpec(key="item_id", categorical=("brand",), multi=("tags",))
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        FeatureEncoder(spec).fit(read_feature_table(p, spec), Vocabulary(["i1", "i2", "i3"], kind="item"),
                                 trained=["i1", "i2"])
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == [f"item features: column {c!r} (data.item_{g}) has values only on items without training "
                    "interactions, so no training example reads them and it tells the tower nothing (do the table's "
                    f"ids match the interactions'?); drop it from data.item_{g}, or give values for trained items too"
                    for c, g in (("brand", "categorical"), ("tags", "multi"))]



def test_a_numeric_column_that_standardises_to_one_value_is_named_in_a_warning(tmp_path, caplog):
    """A price of 1e15 among prices of 10-60 set the standard deviation to ~3e14, so every other price standardised
    to the same number and the column said nothing, without a word; a column with one value in every row likewise
    encodes to 0 everywhere. Both are named, with the item holding the extreme value; a spread column is quiet."""
    import logging

    n = 200
    prices = [10 + (i % 50) for i in range(n)]
    prices[7] = 1e15
    rows = "".join(f"i{i},{p},7,{1950 + i % 40}\n" for i, p in enumerate(prices))
    p = table(tmp_path, "item_id,price,const,year\n" + rows)
    spec = FeatureSpec(key="item_id", numeric=("price", "const", "year"))
    with caplog.at_level(logging.WARNING, logger="twotower.data.features"):
        FeatureEncoder(spec).fit(read_feature_table(p, spec), Vocabulary([f"i{i}" for i in range(n)], kind="item"))
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2, msgs
    assert msgs[0].startswith("item features: column 'price' (data.item_numeric): a few extreme values (item 'i7' "
                              "has 1e+15)")
    assert "reads as nearly constant" in msgs[0]
    assert msgs[1] == ("item features: column 'const' (data.item_numeric) holds the one value 7 in every one of the "
                       "200 items fitted, so it tells the tower nothing; drop it from data.item_numeric")

def test_an_item_table_of_only_a_header_is_refused_like_empty_interactions(tmp_path):
    # it was read as "no item has features", and the run trained on all-missing features without a word
    p = table(tmp_path, "item_id,color,price,tags,title\n")
    with pytest.raises(DataError, match=r"items.csv: no data rows \(only a header\); the item table is empty"):
        read_feature_table(p, SPEC, key_role="item key")
    empty = pd.DataFrame(columns=["user_id", "age"])
    with pytest.raises(DataError, match=r"<DataFrame users>: no data rows .*the user table is empty"):
        read_feature_table(empty, FeatureSpec(key="user_id", numeric=("age",)), name="<DataFrame users>",
                           key_role="user key")


def test_list_cells_of_a_multi_valued_column_read_as_their_values(tmp_path):
    """A Parquet list column or JSON arrays: each list was read as the one value "['x' 'y']", shared by no
    other item, so the tags taught the tower nothing and no error said so."""
    spec = FeatureSpec(key="item_id", multi=("tags",))
    pq = tmp_path / "items.parquet"
    pd.DataFrame({"item_id": ["a", "b", "c"], "tags": [["x", "y"], ["y"], []]}).to_parquet(pq)
    js = tmp_path / "items.jsonl"
    js.write_text('{"item_id": "a", "tags": ["x", "y"]}\n{"item_id": "b", "tags": ["y"]}\n{"item_id": "c"}\n',
                  encoding="utf-8")
    csv = tmp_path / "items.csv"
    csv.write_text("item_id,tags\na,x|y\nb,y\nc,\n", encoding="utf-8")
    vocab = Vocabulary.from_ids(["a", "b", "c"], kind="item")
    codes = []
    for path in (pq, js, csv):
        enc = FeatureEncoder(spec).fit(read_feature_table(path, spec), vocab)
        assert sorted(enc.multi_values["tags"]) == ["x", "y"]
        codes.append(enc.transform(read_feature_table(path, spec), vocab).multi[0].tolist())
    assert codes[0] == codes[1] == codes[2]  # a list reads exactly as the CSV cell "x|y"


def test_a_list_in_a_single_valued_or_separator_holding_column_is_refused(tmp_path):
    p = tmp_path / "items.jsonl"
    p.write_text('{"item_id": "a", "genre": "g1", "tags": ["x|y"]}\n{"item_id": "b", "genre": ["g2", "g3"]}\n',
                 encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_feature_table(p, FeatureSpec(key="item_id", categorical=("genre",)))
    assert e.value.row == 2 and e.value.column == "genre" and "data.item_multi" in str(e.value)
    with pytest.raises(DataError, match="holds the separator") as e:
        read_feature_table(p, FeatureSpec(key="item_id", multi=("tags",)))
    assert e.value.row == 1 and e.value.column == "tags"


def test_a_double_colon_item_table_is_named_not_a_missing_key(tmp_path):
    """MovieLens-1M's movies.dat renamed to .csv was one column named after its first line, and the error said
    "Set data.item_key=NAME to the right column", which no setting satisfies."""
    p = tmp_path / "movies.csv"
    p.write_text("item_id::title::genres\n1::Toy Story (1995)::Animation|Comedy\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_feature_table(p, FeatureSpec(key="item_id", multi=("genres",)), key_role="item key")
    assert str(e.value) == (
        f"file {p}, line 1: 'item_id::title::genres' is 3 fields separated by '::' (as MovieLens' .dat files are): "
        "a table needs comma, tab, ';' or '|' between fields and a header row naming them; convert the file first "
        "(a first line naming its columns, and every '::' replaced by ',')")


def test_na_like_text_in_a_feature_table_is_a_value_only_empty_cells_are_missing(tmp_path):
    # a film titled "NA", a brand "None": read with pandas' NA strings they were missing values
    p = table(tmp_path, "item_id,color,price,tags,title,name\n"
                        "1,None,NA,NA|null,N/A,NA\n"
                        "2,,,,,\n")
    df = read_feature_table(p, SPEC)
    first = df.iloc[0]
    assert (first["color"], first["tags"], first["title"], first["name"]) == ("None", "NA|null", "N/A", "NA")
    assert np.isnan(first["price"])  # a numeric column's "NA" stays unknown, as before
    assert df.iloc[1][["color", "tags", "title", "name"]].isna().all()  # empty cells are missing
    enc = FeatureEncoder(SPEC).fit(df)
    assert enc.categories["color"] == ["None"] and enc.multi_values["tags"] == ["NA", "null"]


def test_a_new_rows_longer_list_than_the_tables_is_read_whole():
    """Every user of the table had one tag: a new user's `{"tags": ["a", "b"]}` was cut to its first value, so it
    scored exactly as `["a"]` (and `["b", "a"]` as `["b"]`), while the ONNX export's tower averaged both."""
    table = pd.DataFrame({"user_id": ["u1", "u2"], "tags": ["a", "b"]})
    enc = FeatureEncoder(FeatureSpec(key="user_id", multi=("tags",))).fit(table)
    assert enc.multi_max_len["tags"] == 1
    rows = enc.encode_rows(pd.DataFrame({"tags": ["a|b", "b", None]}))
    a, b = enc.encode_rows(pd.DataFrame({"tags": ["a", "b"]})).multi[0][:, 0]
    np.testing.assert_array_equal(rows.multi[0], [[a, b], [b, 0], [0, 0]])  # widened to the longest, 0-padded
    assert enc.encode_rows(pd.DataFrame({"tags": ["a"]})).multi[0].shape == (1, 1)  # the table's width otherwise


def test_a_numeric_column_of_true_false_reads_as_1_0_and_a_stray_one_among_numbers_is_refused(tmp_path):
    """`"year": true` in one row of a JSON-lines item table became the year 1.0 in silence (the year's spread went
    from 14 to 51); a column of true/false alone is a 0/1 feature, which the service now reads as 1/0 too."""
    flags = tmp_path / "users.jsonl"
    flags.write_text('{"user_id": "u1", "student": true}\n{"user_id": "u2", "student": false}\n'
                     '{"user_id": "u3", "student": null}\n')
    table = read_feature_table(flags, FeatureSpec(key="user_id", numeric=("student",)))
    assert table["student"].tolist()[:2] == [1.0, 0.0] and np.isnan(table["student"].iloc[2])
    stray = tmp_path / "items.jsonl"
    stray.write_text('{"item_id": "i1", "year": 1995}\n{"item_id": "i2", "year": true}\n')
    with pytest.raises(DataError, match=r"line 2, column 'year'.*True is a true/false value among numbers \(first "
                                        r"number at line 1\)"):
        read_feature_table(stray, FeatureSpec(key="item_id", numeric=("year",)))


def test_a_number_sent_for_a_category_the_table_spells_with_a_decimal_point_is_named_as_looked_up(tmp_path):
    """A numeric category column with a gap is written by pandas as "8.0", which a CSV table keeps as that text;
    a new user's {"zip_region": 8.0} is looked up as '8' (a number reads without '.0', as training reads a
    JSON-lines or Parquet number), so it reads as unknown. The warning said "8.0 never occurs in training" of a
    value the vocabulary holds, and gave no hint ('8' and '8.0' are too far apart for the spelling match)."""
    spec = FeatureSpec(key="user_id", categorical=("zip_region",))
    p = tmp_path / "users.csv"
    p.write_text("user_id,zip_region\nu1,8.0\nu2,9.0\nu3,\n", encoding="utf-8")
    enc = FeatureEncoder(spec).fit(read_feature_table(p, spec))
    assert enc.categories["zip_region"] == ["8.0", "9.0"]
    assert enc.encode_rows(pd.DataFrame({"zip_region": [8.0]}, dtype=object)).categorical[0, 0] == 0
    unknown = "never occurs in training, so it reads as unknown"
    assert enc.value_notes({"zip_region": 8.0}) == [
        f"""zip_region: 8.0 (looked up as '8') {unknown} (did you mean '8.0'? send it as the string "8.0")"""]
    assert enc.value_notes({"zip_region": 8}) == [
        f"""zip_region: 8 {unknown} (did you mean '8.0'? send it as the string "8.0")"""]
    assert enc.value_notes({"zip_region": "8"}) == [f"zip_region: '8' {unknown} (did you mean '8.0'?)"]
    assert enc.value_notes({"zip_region": "8.0"}) == []
    parquet = tmp_path / "users.parquet"  # a number column: its 8.0 is the category '8'
    pd.DataFrame({"user_id": ["u1", "u2"], "zip_region": [8.0, None]}).to_parquet(parquet)
    enc = FeatureEncoder(spec).fit(read_feature_table(parquet, spec))
    assert enc.categories["zip_region"] == ["8"] and enc.value_notes({"zip_region": 8.0}) == []
    assert enc.value_notes({"zip_region": "8.00"}) == [f"zip_region: '8.00' {unknown} (did you mean '8'?)"]


def test_a_nested_list_in_a_multi_valued_cell_is_refused_naming_line_and_column(tmp_path):
    """`"genres": [["a"], ["b"]]` was read as the made-up categories "['a']" and "['b']" in silence (the item's
    record read "['a']|['b']"), where a nested value in an interaction id column is refused."""
    spec = FeatureSpec(key="item_id", multi=("tags",))
    js = tmp_path / "items.jsonl"
    js.write_text('{"item_id": "a", "tags": ["x"]}\n{"item_id": "b", "tags": [["a"], ["b"]]}\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_feature_table(js, spec)
    assert e.value.row == 2 and e.value.column == "tags"
    assert str(e.value) == (f"file {js}, line 2, column 'tags': list value ['a'] is not a string or a number (a "
                            "nested list or object); a multi-valued cell is a list of values or '|'-separated text")
    js.write_text('{"item_id": "a", "tags": ["x", {"k": 1}]}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1, column 'tags': list value \{'k': 1\} is not a string or a number"):
        read_feature_table(js, spec)
    pq = tmp_path / "items.parquet"
    pd.DataFrame({"item_id": ["a", "b"], "tags": [[["x"]], [["y"], ["z"]]]}).to_parquet(pq)
    with pytest.raises(DataError, match=r"list value \['x'\] is not a string or a number") as e:
        read_feature_table(pq, spec)
    assert e.value.row == 1 and e.value.column == "tags"


@pytest.mark.parametrize("group", ["categorical", "numeric", "text"])
def test_an_object_in_a_single_valued_column_is_called_an_object_not_a_list(tmp_path, group):
    """`"decade": {"name": "1990s"}` was said to hold "a list ({'name': '1990s'})" and to be multi-valued (list it
    under data.item_multi), where it is then refused again: a multi-valued cell is a list of values."""
    p = tmp_path / "items.jsonl"
    p.write_text('{"item_id": "a", "decade": "1980s"}\n{"item_id": "b", "decade": {"name": "1990s"}}\n',
                 encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_feature_table(p, FeatureSpec(key="item_id", **{group: ("decade",)}), key_role="item key")
    assert e.value.row == 2 and e.value.column == "decade"
    assert str(e.value) == (f"file {p}, line 2, column 'decade': holds a JSON object ({{'name': '1990s'}}), not one "
                            "value; give the cell the value itself (a string or a number)")


@pytest.mark.parametrize("column, numbers", [
    (pd.to_datetime(["1995-01-01", None, "2001-05-05"], utc=True), [788918400e9, None, 989020800e9]),
    (pd.to_datetime(["1995-01-01", None, "2001-05-05"]), [788918400e9, None, 989020800e9]),
    (pd.Series(pd.to_datetime(["1995-01-01", "1996-01-01", "2001-05-05"])).astype("timestamp[ms][pyarrow]"),
     [788918400e3, 820454400e3, 989020800e3]),
    (pd.to_timedelta([1, None, 3], unit="D"), [86400e9, None, 3 * 86400e9]),
])
def test_a_datetime_column_given_as_numeric_reads_its_missing_cells_as_missing(tmp_path, column, numbers):
    # a DataFrame's (or Parquet's) release dates read as epoch numbers in the column's unit (as runs trained on them
    # read them), but a missing date (NaT) as -9.2e18, a value rather than a missing one, which standardising
    # squeezed the real dates into one value around; refusing the column instead broke those runs' resume
    frame = pd.DataFrame({"item_id": ["i1", "i2", "i3"], "released": column})
    spec = FeatureSpec(key="item_id", numeric=("released",))
    frame.to_parquet(tmp_path / "items.parquet")
    for source in (frame, tmp_path / "items.parquet"):
        got = read_feature_table(source, spec)["released"].to_numpy()
        assert got.dtype == np.float64
        missing = np.array([n is None for n in numbers])
        assert np.isnan(got).tolist() == missing.tolist()  # NaT: missing, not -9.2e18
        # the dates themselves, in whatever unit the column holds (a Parquet file's own): proportional to epoch values
        want = np.array([n for n in numbers if n is not None])
        ratio = got[~missing] / want
        assert np.allclose(ratio, ratio[0]) and ratio[0] > 0


def test_a_missing_datetime_in_a_categorical_column_is_missing_not_the_category_nat(tmp_path):
    # a DataFrame's (or Parquet's) datetime column as a category gave its missing cells (NaT) the category 'NaT',
    # where the same table as a CSV holds an empty, missing cell
    frame = pd.DataFrame({"item_id": ["i1", "i2", "i3"],
                          "released": pd.to_datetime(["1995-01-01", None, "2001-05-05"], utc=True)})
    spec = FeatureSpec(key="item_id", categorical=("released",))
    frame.to_csv(tmp_path / "items.csv", index=False)
    for source in (frame, tmp_path / "items.csv"):
        table = read_feature_table(source, spec)
        enc = FeatureEncoder(spec).fit(table, Vocabulary(["i1", "i2", "i3"], kind="item"))
        assert enc.categories["released"] == ["1995-01-01 00:00:00+00:00", "2001-05-05 00:00:00+00:00"]
        assert enc.transform(table, Vocabulary(["i1", "i2", "i3"], kind="item")).categorical[:, 0].tolist() == [1, 0, 2]
