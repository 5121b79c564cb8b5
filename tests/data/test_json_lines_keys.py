"""A JSON lines record is checked for its keys as a CSV header is for its names: a line naming a key twice
(``{"user_id": "1", ..., "user_id": "2"}``) was read as user 2 without a word (every JSON parser keeps the last
value; the config reader refuses a repeated key), and a line spelling ``item`` for ``item_id`` said "empty id (null,
NaN or empty)" without the "did you mean" a CSV header gets."""
from __future__ import annotations

import json

import pytest

from twotower.data.readers import read_interactions
from twotower.errors import DataError
from tests.data.chunked_reads import read_every_file_in_chunks

REPEATED = ('{"user_id": "1", "item_id": "a", "timestamp": 1700000000}\n\n'
            '{"user_id": "1", "item_id": "b", "timestamp": 1700000001, "user_id": "2"}\n'
            '{"user_id": "1", "item_id": "c", "timestamp": 1700000002}\n')


@pytest.mark.parametrize("chunked", [False, True])
def test_a_line_naming_a_key_twice_is_refused_naming_it(tmp_path, monkeypatch, chunked):
    # the file's first chunk is asked (100,000 lines; 250,000 in a large file's read): a writer repeats a key on
    # every line, and counting every chunk's keys cost 7% of a 1M-line read
    if chunked:
        read_every_file_in_chunks(monkeypatch, rows=5)
    p = tmp_path / "i.jsonl"
    p.write_text(REPEATED, encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert (e.value.row, e.value.unit) == (3, "line")  # the blank line is a line
    assert "names the key 'user_id' twice" in str(e.value)


def test_a_key_s_name_as_a_value_or_a_nested_key_is_no_repeat(tmp_path):
    # the text names "user_id" more often than the records hold it: the lines are parsed again, and read
    p = tmp_path / "i.jsonl"
    rows = [{"user_id": "1", "item_id": "user_id", "timestamp": 1700000000, "meta": {"user_id": 3}},
            {"user_id": "2", "item_id": "b", "timestamp": 1700000001}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert read_interactions(p)["item_id"].tolist() == ["user_id", "b"]


@pytest.mark.parametrize("chunked", [False, True])
def test_a_line_without_the_id_key_names_the_key_it_has(tmp_path, monkeypatch, chunked):
    if chunked:
        read_every_file_in_chunks(monkeypatch, rows=2)
    p = tmp_path / "i.jsonl"
    p.write_text('{"user_id": "1", "item_id": "a", "timestamp": 1}\n{"user_id": "1", "timestamp": 2, "item": "b"}\n'
                 '{"user_id": "1", "item_id": null, "timestamp": 3}\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(p)
    assert e.value.row == 2 and "the line has no key 'item_id'; did you mean 'item'?" in str(e.value)
    # a null is said as before
    p.write_text('{"user_id": "1", "item_id": "a", "timestamp": 1}\n{"user_id": "1", "item_id": null, "timestamp": 2}\n',
                 encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2, column 'item_id': empty id \(1 line\(s\) in total; null, NaN or "
                       r"empty\)"):
        read_interactions(p)
