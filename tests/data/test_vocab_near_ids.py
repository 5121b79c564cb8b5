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
