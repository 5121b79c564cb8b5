"""A saved BM25 index whose meta.json has a field of the wrong JSON type is refused naming the file and the field.

Before, a ``config`` that was a list, a string or null (hand-edited, corrupted) failed BM25Retriever.load with a bare
TypeError ("'list' object is not a mapping") that named neither the file nor the field.
"""
from __future__ import annotations

import json

import pytest

from tests.extras import needs_text
from twotower.errors import IntegrityError
from twotower.search.bm25 import BM25Retriever

pytestmark = needs_text


@pytest.fixture
def saved(tmp_path):
    BM25Retriever().fit(["vitamin D and bones", "coffee and liver"], ["a", "b"]).save(tmp_path / "bm25")
    return tmp_path / "bm25"


def _edit(folder, **fields):
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(fields)
    for key in [k for k, v in fields.items() if v is ...]:
        del meta[key]
    (folder / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(("field", "value", "got"), [
    ("config", [1.2, 0.75], "got a JSON array"),
    ("config", "k1=1.2", "got a JSON string"),
    ("config", None, "got null"),
    ("config", ..., "got nothing: the field is missing"),
    ("doc_ids", "ab", "got a JSON string"),
])
def test_a_field_of_the_wrong_type_is_named(saved, field, value, got):
    _edit(saved, **{field: value})
    with pytest.raises(IntegrityError) as e:
        BM25Retriever.load(saved)
    msg = str(e.value)
    assert str(saved / "meta.json") in msg and f'field "{field}" must be a JSON' in msg and got in msg
    assert "rebuild" in msg


def test_meta_json_that_is_not_an_object_is_not_a_bm25_index(saved):
    (saved / "meta.json").write_text("[1, 2]")
    with pytest.raises(IntegrityError, match="is not a BM25 index"):
        BM25Retriever.load(saved)


def test_an_intact_index_still_loads(saved):
    assert BM25Retriever.load(saved).doc_ids == ["a", "b"]
