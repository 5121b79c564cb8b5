"""A run's items.jsonl reads back as the user's metadata: digit strings and date-like columns untouched."""
import pandas as pd
import pytest

from twotower.errors import IntegrityError
from twotower.pipeline.artifacts import read_item_meta, write_item_meta


def test_item_metadata_round_trips_with_its_types(tmp_path):
    meta = pd.DataFrame({"item_id": ["007", "12"], "isbn": ["0012", "345"], "date": ["2001-01-02", "2001-01-03"],
                         "modified": ["2001-01-02", "2001-01-02"], "year": [1994.0, None], "title": ["Café", "b"]})
    write_item_meta(tmp_path / "items.jsonl", meta)
    back = read_item_meta(tmp_path / "items.jsonl")
    assert list(back.columns) == list(meta.columns)
    assert back["item_id"].tolist() == ["007", "12"]
    assert back["isbn"].tolist() == ["0012", "345"]  # pd.read_json made these the integers 12 and 345
    assert back["date"].tolist() == ["2001-01-02", "2001-01-03"]  # and these timestamps
    assert back["modified"].tolist() == ["2001-01-02", "2001-01-02"]
    assert back["year"].iloc[0] == 1994.0 and pd.isna(back["year"].iloc[1])
    assert back["title"].tolist() == ["Café", "b"]


def test_a_line_that_is_not_an_object_is_an_integrity_error(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"item_id": "1"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(IntegrityError, match=r"items\.jsonl: a line is not a JSON object"):
        read_item_meta(path)
