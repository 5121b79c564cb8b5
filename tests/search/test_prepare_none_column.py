"""`search prepare --score-col none`: 'none' names a column (as `data.title_col=none` does), and when the table has
no such column the error says how to read none: leave the flag out (before: only "Set --score-col=NAME")."""
from __future__ import annotations

import pytest

from twotower.cli.main import main

PASSAGES = "pid,heading,body\n1,Aspirin,Aspirin lowers the risk of heart attack.\n2,Vitamin D,Bone fractures.\n"
PAIRS = "question,pid\ndoes aspirin prevent heart attacks,1\nvitamin d and fractures,2\n"


@pytest.fixture()
def argv(tmp_path):
    (tmp_path / "passages.csv").write_text(PASSAGES, encoding="utf-8")
    (tmp_path / "pairs.csv").write_text(PAIRS, encoding="utf-8")
    return ["search", "prepare", "--passages", str(tmp_path / "passages.csv"), "--pairs", str(tmp_path / "pairs.csv"),
            "--out", str(tmp_path / "beir"), "--passage-id-col", "pid", "--passage-text-col", "body",
            "--query-col", "question"]


@pytest.mark.parametrize("flag, default", [
    ("--score-col", "relevance 1 for every pair"), ("--split-col", "queries split by --test-share"),
    ("--passage-title-col", "passages without a title"), ("--query-id-col", "one id per distinct query text"),
    ("--pair-passage-col", "the --passage-id-col name")])
@pytest.mark.parametrize("value", ["none", "null", "None"])
def test_none_for_an_optional_column_says_to_leave_the_flag_out(argv, capsys, flag, default, value):
    assert main(argv + [flag, value]) == 2
    err = capsys.readouterr().err
    assert f"column {value!r}" in err and f"leave {flag} out (its default: {default})" in err
    assert main(argv) == 0  # and left out, the same tables are prepared


def test_none_for_pair_passage_list_says_to_leave_the_flag_out(argv, capsys):
    assert main(argv + ["--pair-passage-list", "none"]) == 2
    assert "leave it out for one id per cell, got 'none'" in capsys.readouterr().err


def test_a_column_really_called_none_is_read(tmp_path, argv, capsys):
    (tmp_path / "pairs.csv").write_text("question,pid,none\nq one,1,2\nq two,2,1\n", encoding="utf-8")
    assert main(argv + ["--score-col", "none", "--test-share", "0"]) == 0
    assert (tmp_path / "beir" / "qrels" / "test.tsv").read_text().splitlines()[1:] == ["q1\t1\t2", "q2\t2\t1"]
