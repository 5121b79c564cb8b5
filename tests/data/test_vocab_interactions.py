from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from twotower.data import Histories, Vocabulary, encode_interactions, read_interactions, to_csr
from twotower.errors import ConfigError, IntegrityError, NotFoundError


def test_from_ids_sorted_unique_numeric_when_all_ints():
    v = Vocabulary.from_ids(["10", "2", "1", "2", 3])
    assert v.ids == ["1", "2", "3", "10"]
    assert len(v) == 4 and "10" in v and 3 in v and "4" not in v
    assert Vocabulary.from_ids(["b", "10", "a", "2"]).ids == ["10", "2", "a", "b"]


def test_index_encode_decode_and_unknowns():
    v = Vocabulary.from_ids(["a", "b", "c"], kind="user")
    assert v.index("b") == 1
    with pytest.raises(NotFoundError) as e:
        v.index("zz")
    assert e.value.kind == "user" and e.value.id == "zz"
    enc = v.encode(["c", "zz", "a"])
    assert enc.dtype == np.int64 and enc.tolist() == [2, -1, 0]
    assert v.decode(np.array([2, 0])) == ["c", "a"]
    with pytest.raises(NotFoundError):
        v.decode([3])


def test_save_load_round_trip_and_corruption(tmp_path):
    v = Vocabulary.from_ids(["x", "y"], kind="item")
    v.save(tmp_path / "v.json")
    w = Vocabulary.load(tmp_path / "v.json")
    assert w == v and w.kind == "item"
    assert Vocabulary.from_dict(v.to_dict()) == v
    (tmp_path / "bad.json").write_text('{"ids": ["a", ', encoding="utf-8")
    with pytest.raises(IntegrityError):
        Vocabulary.load(tmp_path / "bad.json")
    (tmp_path / "dup.json").write_text('{"ids": ["a", "a"]}', encoding="utf-8")
    with pytest.raises(IntegrityError):
        Vocabulary.load(tmp_path / "dup.json")
    with pytest.raises(NotFoundError):
        Vocabulary.load(tmp_path / "missing.json")


@pytest.fixture()
def frame():
    return read_interactions(
        pd.DataFrame(
            {
                "user_id": ["u1", "u1", "u1", "u2", "u3", "u1"],
                "item_id": ["b", "a", "c", "a", "zz", "a"],
                "timestamp": [5, 5, 1, 3, 2, 9],
            }
        )
    )


def test_encode_interactions_drops_and_counts_unknowns(frame):
    users = Vocabulary.from_ids(["u1", "u2"], kind="user")
    items = Vocabulary.from_ids(["a", "b", "c"])
    enc, rep = encode_interactions(frame, users, items, name="valid")
    assert len(enc) == 5
    assert rep["rows_dropped"] == 1 and rep["unknown_users"] == 1 and rep["unknown_items"] == 1
    assert rep["unknown_user_examples"] == ["u3"] and rep["unknown_item_examples"] == ["zz"]
    assert enc.n_users == 2 and enc.n_items == 3
    assert enc.users.dtype == np.int64 and enc.ratings.dtype == np.float32


def test_csr_is_binary_and_histories_sorted(frame):
    users = Vocabulary.from_ids(["u1", "u2", "u9"], kind="user")
    items = Vocabulary.from_ids(["a", "b", "c"])
    enc, _ = encode_interactions(frame, users, items)
    m = to_csr(enc)
    assert m.shape == (3, 3)
    assert m.toarray().tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]  # u1 saw "a" twice: collapsed to 1
    h = Histories.from_interactions(enc)
    its, ts = h.of(0)
    # u1: c@1, then a@5 and b@5 (tie broken by item row), then a@9
    assert its.tolist() == [2, 0, 1, 0] and ts.tolist() == [1, 5, 5, 9]
    assert h.lengths().tolist() == [4, 1, 0]
    assert h.of(2)[0].tolist() == []


@pytest.mark.parametrize("rows", [["a"], [2.7]])
def test_decode_of_ids_or_fractional_rows_says_it_takes_integer_rows(rows):
    # ids gave numpy's "invalid literal for int() with base 10: 'a'", and 2.7 decoded as row 2
    v = Vocabulary.from_ids(["a", "b", "c"], kind="item")
    with pytest.raises(ConfigError, match=r"item vocabulary: decode takes integer rows, got .* ids map to rows with index\(\)"):
        v.decode(rows)
    assert v.decode(np.array([2, 0])) == ["c", "a"] and v.decode([]) == []


def test_decode_of_a_search_result_keeps_one_list_per_query():
    # Results.ids is [B, k]: decode flattened it into one list of B * k ids, the queries' lists run together
    v = Vocabulary(["a", "b", "c"])
    assert v.decode(np.array([[2, 0], [1, 2]])) == [["c", "a"], ["b", "c"]]
    assert v.decode([[0], [1]]) == [["a"], ["b"]]
    assert v.decode(np.array([2, 0])) == ["c", "a"]
    assert v.decode(np.zeros((0, 3), np.int64)) == []
    with pytest.raises(NotFoundError):
        v.decode(np.array([[0, -1]]))  # the pad of a k above the catalogue is no item


@pytest.mark.parametrize("row", [1, np.int64(1), "a"])
def test_decode_of_one_row_names_id_at(row):
    # decode(1) was Python's "'int' object is not iterable"; decode("a") read the string as a list of letters
    with pytest.raises(ConfigError, match=r"decode takes a sequence of rows, got .*; one row's id is id_at\(row\)"):
        Vocabulary(["a", "b", "c"]).decode(row)


def test_a_vocabulary_built_without_a_kind_calls_an_unknown_id_an_id_not_an_item():
    # Vocabulary.from_ids(user_ids) said "unknown item 'u9' (not among the 3 known items)" of a user id
    users = Vocabulary.from_ids(["u1", "u2", "u3"])
    with pytest.raises(NotFoundError) as e:
        users.index("u9")
    assert str(e.value) == "unknown id 'u9' (not among the 3 known ids)"
    for call in (lambda: users.id_at(7), lambda: users.decode([0, 9])):
        with pytest.raises(NotFoundError) as e:
            call()
        assert str(e.value) == f"unknown row {e.value.id} (rows run 0..2)"
    with pytest.raises(ConfigError, match=r"^vocabulary: decode takes a sequence of rows"):
        users.decode(1)
    # the attribute, saved files and equality read "item" as before; a kind given is named as before
    assert users.kind == "item" and users == Vocabulary.from_ids(["u1", "u2", "u3"], kind="item")
    assert users.to_dict()["kind"] == "item"
    with pytest.raises(NotFoundError, match=r"^unknown user 'u9' \(not among the 3 known users\)$"):
        Vocabulary.from_ids(["u1", "u2", "u3"], kind="user").index("u9")
