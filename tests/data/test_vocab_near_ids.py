"""An unknown id that differs from a known one only in leading zeros or case (a SKU sent as the JSON integer 480,
a customer typed in lower case) is refused with the known spelling named; ids stay text, nothing is remapped."""
from __future__ import annotations

import pytest

from twotower.data.vocab import Vocabulary
from twotower.errors import NotFoundError


def test_an_id_without_its_leading_zeros_names_the_known_one():
    vocab = Vocabulary(["000480", "0480", "100001", "C-000123"], kind="item")
    with pytest.raises(NotFoundError) as e:
        vocab.index(480)  # what a JSON integer or a spreadsheet's number column gives
    msg = str(e.value)
    assert msg.startswith("unknown item '480' (not among the 4 known items; ")
    assert "'000480', '0480' are known" in msg and "leading zeros" in msg
    with pytest.raises(NotFoundError, match="'C-000123' is known"):
        vocab.index("c-000123")
    assert vocab.index("000480") == 0  # still exact: "480" is not read as "000480"


def test_an_id_with_no_near_spelling_keeps_the_plain_message():
    vocab = Vocabulary(["000480", "a"], kind="item")
    with pytest.raises(NotFoundError) as e:
        vocab.index("481")
    assert str(e.value) == "unknown item '481' (not among the 2 known items)"


def test_the_unknown_ids_of_a_file_are_told_the_known_spelling_of_the_first_that_has_one():
    """Rows a file gave with ids that lost their zeros (`pd.read_csv` then `to_csv`, a Parquet of integers) were
    dropped naming the unknown ids alone, where a typed id is told "'002' is known"."""
    vocab = Vocabulary(["002", "010", "b"], kind="user")
    assert vocab.zeros_note(["zz", 10, "2"]) == (" ('010' is known for '10': ids are text, so leading zeros and case "
                                                  "count)")
    assert vocab.zeros_note(["zz", "c"]) == ""
    assert vocab.zeros_note(["zz", "2"], limit=1) == ""  # only the first `limit` looked at


def test_a_test_file_whose_ids_lost_their_zeros_is_told_the_known_spelling(caplog):
    import pandas as pd

    from twotower.data.interactions import encode_interactions

    users, items = Vocabulary(["002", "010"], kind="user"), Vocabulary(["0057", "0001"], kind="item")
    frame = pd.DataFrame({"user_id": ["2", "010"], "item_id": ["0057", "1"], "timestamp": [1, 2]})
    with caplog.at_level("WARNING", logger="twotower.data.interactions"):
        encode_interactions(frame, users, items, name="test.parquet")
    assert "e.g. ['2'] ('002' is known for '2'" in caplog.text and "e.g. ['1'] ('0001' is known for '1'" in caplog.text
