"""`search prepare --pair-passage-list`: a pairs cell that lists several relevant passage ids.

Before: a cell was one id, so SciFact's cited_doc_ids (the column BEIR's qrels come from, written as printed NumPy
arrays such as ``[ 5152028 11705328]``) read as one unknown id per row, and only evidence_doc_id could be used:
188 of the 300 test queries, 209 of the 339 pairs.
"""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import build_parser, main
from twotower.config import PrepareConfig
from twotower.errors import ConfigError, DataError
from twotower.search.beir import load_beir
from twotower.search.prepare import prepare_beir

PASSAGES = "pid,body\n007,Aspirin.\n7,Vitamin D.\nNA,Statins.\nde1,Knochen.\n"
COLS = dict(passage_id="pid", passage_text="body", query="question", test_share=0)


@pytest.fixture()
def passages(tmp_path):
    (tmp_path / "passages.csv").write_text(PASSAGES, encoding="utf-8")
    return tmp_path / "passages.csv"


def test_bracketed_cells_json_python_and_numpy_are_one_pair_per_id(tmp_path, passages):
    (tmp_path / "pairs.csv").write_text('question,pid,grade,part\n'
                                        'aspirin,"[""007"", 7]",2,test\n'  # JSON: 007 quoted keeps its zeros
                                        "vitamin d,[ 7 NA],1,test\n"  # NumPy's print, padded
                                        "knochen,\"['de1', 'NA']\",1,train\n"  # Python's repr
                                        "statins,[],1,test\n", encoding="utf-8")  # no relevant passage
    cfg = PrepareConfig(**COLS, score="grade", split="part", pair_passage_list="brackets", drop_unknown=True)
    rep = prepare_beir(passages, tmp_path / "pairs.csv", tmp_path / "out", cfg)
    assert (rep["pair_rows_read"], rep["pairs_read"], rep["empty_passage_ids_dropped"]) == (4, 7, 1)
    by_text = {t: q for q, t in load_beir(tmp_path / "out", "test").queries.items()}
    qrels = load_beir(tmp_path / "out", "test").qrels
    assert qrels[by_text["aspirin"]] == {"007": 2, "7": 2}  # the row's score for each listed id
    assert qrels[by_text["vitamin d"]] == {"7": 1, "NA": 1}
    assert list(load_beir(tmp_path / "out", "train").qrels.values()) == [{"de1": 1, "NA": 1}]  # the row's split


def test_a_separator_splits_cells_and_an_unknown_listed_id_names_its_row(tmp_path, passages, capsys):
    (tmp_path / "pairs.csv").write_text("question,pid\naspirin,007;7;\nvitamin d,7\nknochen,de1; x9\n",
                                        encoding="utf-8")
    argv = ["search", "prepare", "--passages", str(passages), "--pairs", str(tmp_path / "pairs.csv"),
            "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "question", "--test-share", "0",
            "--pair-passage-list", ";", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: file {tmp_path / 'pairs.csv'}, row 4, column 'pid': 1 of 5 pairs names a passage id that is not in "
        "the passages table (row 4 ('x9')); such a pair can never be retrieved: pass --drop-unknown to leave those "
        "pairs out, counted")
    assert main([*argv, "--drop-unknown"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("test 3 queries / 4 pairs, 1 pair with an unknown passage dropped")
    rep = json.loads((tmp_path / "out" / "prepare.json").read_text())
    assert (rep["pair_rows_read"], rep["pairs_read"], rep["settings"]["pair_passage_list"]) == (3, 5, ";")


def test_a_cell_that_is_not_a_bracketed_list_is_named_and_lists_in_jsonl_are_read(tmp_path, passages):
    (tmp_path / "pairs.csv").write_text("question,pid\naspirin,[007]\nvitamin d,7\nknochen,\"[de1, 'NA]\"\n",
                                        encoding="utf-8")
    cfg = PrepareConfig(**COLS, pair_passage_list="brackets")
    with pytest.raises(DataError, match=r"pairs.csv, row 3, column 'pid': '7' is not a list in brackets "
                                        r"\(--pair-passage-list brackets: .*; the same holds for row 4$"):
        prepare_beir(passages, tmp_path / "pairs.csv", tmp_path / "out", cfg)
    (tmp_path / "pairs.jsonl").write_text('{"question": "aspirin", "pid": ["007", 7]}\n'
                                          '{"question": "knochen", "pid": "[de1]"}\n', encoding="utf-8")
    prepare_beir(passages, tmp_path / "pairs.jsonl", tmp_path / "out", cfg)
    assert sorted(load_beir(tmp_path / "out", "test").qrels.values(), key=len) == [{"de1": 1}, {"007": 1, "7": 1}]


def test_list_cells_read_as_one_id_say_the_flag_and_the_setting_is_checked(tmp_path, passages):
    (tmp_path / "pairs.csv").write_text("question,pid\naspirin,[ 007 7]\nvitamin d,[7]\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"; the cells look like lists of ids \('\[ 007 7\]'\): pass "
                                        r"--pair-passage-list brackets to read each listed id as its own pair$"):
        prepare_beir(passages, tmp_path / "pairs.csv", tmp_path / "out", PrepareConfig(**COLS))
    for bad in ("", "ab", "x", "json"):
        # named as the other configs name their fields: "--pair-passage-list ''" named a flag not typed here
        with pytest.raises(ConfigError, match=rf"^PrepareConfig\.pair_passage_list: give 'brackets' .*, got '{bad}'$"):
            PrepareConfig(pair_passage_list=bad)
    parsed = build_parser().parse_args(["search", "prepare", "--passages", "p", "--pairs", "q", "--out", "o"])
    assert parsed.pair_passage_list == PrepareConfig().pair_passage_list is None  # off: a cell is one id
