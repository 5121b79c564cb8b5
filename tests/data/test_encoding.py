"""data.encoding: a Windows (cp1252 / latin-1) or UTF-16 export is read with the codec the user names.

Before: every text file was read as UTF-8 only; a cp1252 CSV from Excel stopped with "re-save the file as UTF-8"
and there was no setting to read it as it is.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from twotower.cli.main import main
from twotower.config import DataConfig
from twotower.data import read_interactions
from twotower.data.features import FeatureSpec, read_feature_table
from twotower.errors import ConfigError, DataError
from twotower.pipeline.sources import load_sources

ROWS = [("u1", "Café", 1_714_521_600), ("u1", "Crème", 1_714_521_700), ("u2", "Café", 1_714_521_800)]


def write(path, text: str, encoding: str):
    path.write_bytes(text.encode(encoding))
    return path


def table_text(suffix: str) -> str:
    if suffix in (".csv", ".tsv"):
        sep = "," if suffix == ".csv" else "\t"
        return "\n".join([sep.join(("user_id", "item_id", "timestamp"))]
                         + [sep.join(map(str, r)) for r in ROWS]) + "\n"
    records = [dict(zip(("user_id", "item_id", "timestamp"), r)) for r in ROWS]
    if suffix == ".json":
        return json.dumps(records, ensure_ascii=False)
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".json"])
def test_a_cp1252_file_reads_with_data_encoding_and_is_named_without_it(tmp_path, suffix):
    p = write(tmp_path / f"inter{suffix}", table_text(suffix), "cp1252")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert "not UTF-8 text" in str(e.value) and "data.encoding" in str(e.value)  # the setting that fixes it
    df = read_interactions(p, encoding="cp1252")
    assert df["item_id"].tolist() == ["Café", "Crème", "Café"]
    assert df["item_id"].nunique() == 2


def test_the_decode_error_names_the_line_of_the_first_bad_byte(tmp_path):
    p = write(tmp_path / "i.csv", "user_id,item_id\nu1,plain\nu2,Café\n", "cp1252")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 3 and e.value.unit == "line" and "0xe9" in str(e.value)


def test_a_utf16_sasrec_file_reads_with_its_encoding(tmp_path):
    p = write(tmp_path / "seq.txt", "1 5\n1 7\n2 5\n", "utf-16")  # Windows "Unicode" text: a BOM, two bytes a char
    df = read_interactions(p, encoding="utf-16")
    assert df["item_id"].tolist() == ["5", "7", "5"] and df.attrs["report"]["format"] == "sasrec"


def test_a_utf8_bom_is_still_skipped_whatever_the_spelling(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbfuser_id,item_id\nu1,Caf\xc3\xa9\n")
    for enc in ("utf-8", "UTF8", "utf_8"):
        assert read_interactions(p, encoding=enc)["item_id"].tolist() == ["Café"]


@pytest.mark.parametrize("name", ["utf-9", "base64", "rot13"])
def test_an_unknown_or_non_text_codec_is_refused_at_construction(name):
    with pytest.raises(ConfigError, match="data.encoding"):
        DataConfig(encoding=name)
    with pytest.raises(ConfigError, match="data.encoding"):
        read_interactions(pd.DataFrame({"user_id": ["u"], "item_id": ["i"]}), encoding=name)


def test_config_reads_interactions_and_feature_tables_in_the_encoding(tmp_path):
    inter = write(tmp_path / "inter.csv", table_text(".csv"), "cp1252")
    items = write(tmp_path / "items.csv", "item_id,title,genre\nCafé,Café au lait,Drame\nCrème,Crème brûlée,Comédie\n",
                  "cp1252")
    cfg = DataConfig(path=str(inter), items=str(items), encoding="cp1252", item_categorical=("genre",),
                     title_col="title", split="random", ratios=(0.5, 0.5, 0.0))
    src = load_sources(cfg)
    assert set(src.items["item_id"]) == {"Café", "Crème"}
    assert set(src.items["genre"]) == {"Drame", "Comédie"}
    assert set(pd.concat([src.train, src.valid])["item_id"]) <= set(src.items["item_id"])  # the ids agree


def test_a_feature_table_alone_takes_the_encoding(tmp_path):
    p = write(tmp_path / "users.csv", "user_id,city\nu1,Zürich\n", "latin-1")
    df = read_feature_table(p, FeatureSpec(key="user_id", categorical=("city",)), encoding="latin-1")
    assert df["city"].tolist() == ["Zürich"]


def test_data_split_reads_the_encoding_and_writes_utf8(tmp_path):
    inter = write(tmp_path / "inter.csv", table_text(".csv"), "cp1252")
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(inter), "--method", "random", "--ratios", "0.5,0.5,0",
                 "--out", str(out), "data.encoding=cp1252"]) == 0
    written = pd.concat([pd.read_csv(out / f"{n}.csv", encoding="utf-8") for n in ("train", "valid")])
    assert sorted(written["item_id"]) == ["Café", "Café", "Crème"]


@pytest.mark.parametrize("given", ["utf-8", "cp1252"])
def test_excels_unicode_text_read_in_another_encoding_names_utf16(tmp_path, given):
    """Excel's "Unicode Text" (UTF-16, tabs): as UTF-8 the advice was cp1252, and as cp1252 every name came
    out as 'u\\x00s\\x00e\\x00r...', reported only as a missing column."""
    p = write(tmp_path / "export.txt", "user_id\titem_id\ttitle\nu1\ti1\tCafé\n", "utf-16")
    with pytest.raises(DataError, match="UTF-16 byte-order mark.*set data.encoding=utf-16") as e:
        read_interactions(p, encoding=given)
    assert e.value.row == 1
    assert read_interactions(p, encoding="utf-16")["item_id"].tolist() == ["i1"]


def test_a_utf8_file_read_as_cp1252_is_warned_about_with_what_it_becomes(tmp_path, caplog):
    """data.encoding is one setting for every file: a UTF-8 item table beside cp1252 interactions read as
    'CafÃ©', a key no interaction has, with no word."""
    utf8 = write(tmp_path / "utf8.csv", "user_id,item_id\nu1,Café\n", "utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(utf8, encoding="cp1252")
    assert "it is UTF-8 text: 'Café' comes out as 'CafÃ©'" in caplog.text
    caplog.clear()
    cp = write(tmp_path / "cp.csv", "user_id,item_id\nu1,Café\n", "cp1252")  # the right setting: nothing to say
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        assert read_interactions(cp, encoding="cp1252")["item_id"].tolist() == ["Café"]
    assert "UTF-8" not in caplog.text


def test_the_decode_error_counts_from_the_line_start_after_a_byte_order_mark(tmp_path):
    p = tmp_path / "i.csv"
    p.write_bytes(b"\xef\xbb\xbfuser_id,item_id\nu1,ab\xe9\n")  # UTF-8 with a BOM, then one cp1252 byte
    with pytest.raises(DataError, match="byte 0xe9 at character 6") as e:
        read_interactions(p)
    assert e.value.row == 2


@pytest.mark.parametrize("given, wide", [("utf-16", "UTF-16"), ("UTF_32", "UTF-32")])
@pytest.mark.parametrize("name, fmt", [("seq.txt", "auto"), ("seq.txt", "sasrec"), ("rows.csv", "auto")])
def test_a_file_without_a_byte_order_mark_read_as_utf16_names_the_setting(tmp_path, given, wide, name, fmt):
    """data.encoding=utf-16 (or utf-32) needs the byte-order mark to tell the byte order: on a UTF-8 file without
    one a SASRec .txt failed with a traceback ("UnicodeError: UTF-16 stream does not start with BOM"), and a CSV with
    "could not read as csv (UnicodeError: ...); check the format and the file suffix", naming neither setting nor fix."""
    text = "1 5\n1 7\n2 5\n" if name.endswith(".txt") else "user_id,item_id\n1,5\n1,7\n"
    p = write(tmp_path / name, text, "utf-8")
    with pytest.raises(DataError, match=f"no byte-order mark.*data.encoding={given}.*{wide.lower()}-le") as e:
        read_interactions(p, format=fmt, encoding=given)
    assert e.value.file == str(p) and e.value.row == 1
    little = write(tmp_path / f"le-{name}", text, f"{wide.lower()}-le")  # the same text, no BOM, its codec named
    assert read_interactions(little, format=fmt, encoding=f"{wide.lower()}-le")["item_id"].tolist()[:2] == ["5", "7"]
