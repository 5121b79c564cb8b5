"""`search prepare` with a passages or pairs table that holds its header and no data rows.

Regression for a user walkthrough: a header-only pairs file was read on as data and answered "--test-share 0.2: 0
query cannot be split into train and test", or, with --test-share 0, wrote a BEIR folder without a single pair and
exited 0 (`search train` then refused its qrels); a header-only passages file said "all 0 passages have an empty
text". Each is now refused naming the file and what a row should hold, before anything is written.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from twotower.config import PrepareConfig
from twotower.errors import DataError
from twotower.search.prepare import prepare_beir

COLS = PrepareConfig(passage_id="pid", passage_text="body", query="question")


@pytest.fixture
def tables(tmp_path):
    (tmp_path / "passages.csv").write_text("pid,body\n1,hello world\n2,foo bar\n3,baz\n")
    (tmp_path / "pairs.csv").write_text("question,pid\nwhat hello,1\nwhat foo,2\nwhat baz,3\n")
    (tmp_path / "passages_header.csv").write_text("pid,body\n")
    (tmp_path / "pairs_header.csv").write_text("question,pid\n")
    return tmp_path


@pytest.mark.parametrize("test_share", [COLS.test_share, 0.0])
def test_a_header_only_pairs_file_is_refused_naming_it(tables, test_share):
    out = tables / "beir"
    cfg = replace(COLS, test_share=test_share)
    with pytest.raises(DataError, match=r"header and no data rows; expected one row per \(query, relevant passage "
                                        r"id\) pair") as e:
        prepare_beir(tables / "passages.csv", tables / "pairs_header.csv", out, cfg)
    assert e.value.file == str(tables / "pairs_header.csv")
    assert not out.exists()


def test_a_header_only_passages_file_is_refused_naming_it(tables):
    with pytest.raises(DataError, match=r"header and no data rows; expected one row per passage") as e:
        prepare_beir(tables / "passages_header.csv", tables / "pairs.csv", tables / "beir", COLS)
    assert e.value.file == str(tables / "passages_header.csv")
