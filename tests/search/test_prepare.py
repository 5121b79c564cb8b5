"""`twotower search prepare`: your own passages and query-passage pairs, with your column names, to a BEIR folder.

Before: every search command read only the BEIR layout (corpus.jsonl, queries.jsonl, qrels/*.tsv), so a CSV of
query-passage pairs could not be evaluated or trained on without writing a converter first.
"""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError, DataError
from twotower.search.beir import load_beir
from twotower.config import PrepareConfig
from twotower.search.prepare import prepare_beir

from tests.extras import needs_text

PASSAGES = ("\ufeffpid,heading,body\r\n007,Aspirin,Aspirin lowers the risk of heart attack.\r\n"
            "7,Vitamin D,Vitamin D and bone fractures in the elderly.\r\n"
            'NA,Statins,"Statins, cholesterol and the heart."\r\n'
            "de1,Knochen,Vitamin D verhindert Knochenbrüche nicht.\r\nempty,,\r\n")
PAIRS = ("question,pid\n"
         "does aspirin prevent heart attacks,007\n"
         "vitamin d and fractures,7\n"
         "vitamin d and fractures,de1\n"
         "statins and cholesterol,NA\n"
         "Knochenbrüche Vitamin D,de1\n")
COLS = dict(passage_id="pid", passage_text="body", passage_title="heading", query="question")


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "passages.csv").write_bytes(PASSAGES.encode("utf-8"))
    (tmp_path / "pairs.csv").write_text(PAIRS, encoding="utf-8")
    return tmp_path


def test_own_columns_become_a_beir_folder_the_loaders_read(files):
    rep = prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out", PrepareConfig(**COLS, test_share=0))
    assert rep["passages"] == 5 and rep["empty_passages"] == 1 and rep["queries"] == 4
    data = load_beir(files / "out", "test")
    assert data.corpus.ids == ["007", "7", "NA", "de1", "empty"]  # "007" and "7" stay apart, "NA" is an id
    assert data.corpus.titles[0] == "Aspirin" and data.corpus.texts[2] == "Statins, cholesterol and the heart."
    by_text = {text: data.qrels[qid] for qid, text in data.queries.items()}
    assert by_text["vitamin d and fractures"] == {"7": 1, "de1": 1}  # one query, two relevant passages
    assert json.loads((files / "out" / "prepare.json").read_text())["pairs_read"] == 5


def test_queries_sharing_a_passage_stay_in_one_split(files):
    prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out", PrepareConfig(**COLS, test_share=0.3))
    train, test = load_beir(files / "out", "train"), load_beir(files / "out", "test")
    assert train.queries and test.queries and not set(train.queries) & set(test.queries)
    judged = [{d for j in part.qrels.values() for d in j} for part in (train, test)]
    assert not judged[0] & judged[1]  # de1 is judged for two queries: both are on the same side


def test_a_pair_whose_passage_is_not_in_the_table_is_named_or_dropped_with_a_count(files):
    with open(files / "pairs.csv", "a", encoding="utf-8") as fh:
        fh.write("who knows,8\n")
    with pytest.raises(DataError, match=r"pairs.csv, row 7, column 'pid'.*1 of 6 pairs names a passage id that is "
                                        r"not in the passages table \(row 7 \('8'\)\).*--drop-unknown"):
        prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out", PrepareConfig(**COLS, test_share=0))
    rep = prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out", PrepareConfig(**COLS, test_share=0, drop_unknown=True))
    assert rep["unknown_passages_dropped"] == 1 and rep["queries"] == 4


def test_generated_query_ids_have_no_gap_where_a_query_s_pairs_were_all_dropped(files):
    # "who knows" (row 3) names only an unknown passage: numbered before the drop it took q2 and queries.jsonl
    # held q1, q3, q4, q5
    (files / "pairs.csv").write_text("question,pid\ndoes aspirin prevent heart attacks,007\nwho knows,8\n"
                                     "vitamin d and fractures,7\nstatins and cholesterol,NA\n"
                                     "vitamin d and fractures,de1\nKnochenbrüche Vitamin D,de1\n", encoding="utf-8")
    prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out",
                 PrepareConfig(**COLS, test_share=0, drop_unknown=True))
    data = load_beir(files / "out", "test")
    assert list(data.queries) == ["q1", "q2", "q3", "q4"]
    assert [data.queries[q] for q in ("q2", "q4")] == ["vitamin d and fractures", "Knochenbrüche Vitamin D"]
    assert data.qrels["q2"] == {"7": 1, "de1": 1}


def test_bad_tables_are_refused_naming_file_row_and_column(files):
    (files / "dup.csv").write_text("pid,body\na,x\nb,y\na,z\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dup.csv, row 4, column 'pid'.*duplicate passage id 'a' \(first at row 2\)"):
        prepare_beir(files / "dup.csv", files / "pairs.csv", files / "out",
                     PrepareConfig(passage_id="pid", passage_text="body", query="question"))
    with pytest.raises(DataError, match=r"'heading' \(the passage title column\) not found; columns present: "
                                        r"\['pid', 'body'\]\. Set --passage-title-col=NAME"):
        prepare_beir(files / "dup.csv", files / "pairs.csv", files / "out", PrepareConfig(**COLS))
    with pytest.raises(DataError, match=r"column 'query' \(the query column\) not found.*'question'.*--query-col"):
        prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out",
                     PrepareConfig(passage_id="pid", passage_text="body"))
    (files / "blank.csv").write_text("question,pid\n ,007\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"blank.csv, row 2, column 'question'.*query text is empty"):
        prepare_beir(files / "passages.csv", files / "blank.csv", files / "out", PrepareConfig(**COLS))
    # an id the qrels TSV cannot carry: the one refusal that named no file or column
    (files / "tab.csv").write_text('pid,body\n"a\tb",x\n', encoding="utf-8")
    (files / "tab_pairs.csv").write_text('question,pid\nwhat,"a\tb"\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"tab.csv, column 'pid'.*passage id 'a\\tb' holds a tab or a line break"):
        prepare_beir(files / "tab.csv", files / "tab_pairs.csv", files / "out",
                     PrepareConfig(passage_id="pid", passage_text="body", query="question"))
    (files / "qid_pairs.csv").write_text('question,qid,pid\nwhat,"q\n1",007\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"qid_pairs.csv, column 'qid'.*query id 'q\\n1' holds a tab or a line break"):
        prepare_beir(files / "passages.csv", files / "qid_pairs.csv", files / "out", PrepareConfig(**COLS, query_id="qid"))


@needs_text
def test_cli_with_a_split_column_then_bm25_evaluates_it(files, capsys):
    (files / "pairs.tsv").write_text("q\tdoc\tgrade\tpart\n"
                                     "does aspirin prevent heart attacks\t007\t2\ttrain\n"
                                     "vitamin d and fractures\t7\t1\ttest\n"
                                     "statins and cholesterol\tNA\t1\ttest\n", encoding="utf-8")
    out = files / "beir"
    assert main(["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "pairs.tsv"),
                 "--out", str(out), "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "q",
                 "--pair-passage-col", "doc", "--score-col", "grade", "--split-col", "part"]) == 0
    assert "3 queries; train 1 query / 1 pair, test 2 queries / 2 pairs" in capsys.readouterr().out
    assert (out / "qrels" / "train.tsv").read_text().splitlines()[1] == "q1\t007\t2"
    assert main(["search", "evaluate", "--beir", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["Recall@10"] == 1.0


def test_cut_flags_with_a_split_column_are_said_to_have_no_effect(files, caplog):
    """`--split-col part --test-share 0.5` wrote the column's splits and dropped the 0.5 without a word."""
    (files / "parts.csv").write_text("question,pid,part\nwhat,007,train\nwho,7,test\n", encoding="utf-8")
    argv = ["-q", "search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "parts.csv"),
            "--out", str(files / "beir"), "--passage-id-col", "pid", "--passage-text-col", "body",
            "--query-col", "question", "--split-col", "part"]
    with caplog.at_level("WARNING"):
        assert main(argv + ["--test-share", "0.5", "--seed", "3"]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [f"{flag} has no effect with --split-col part (each pair's split is read from that column); "
                      "leave --split-col out to cut the queries by --test-share" for flag in ("--test-share 0.5",
                                                                                              "--seed 3")]
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert main(argv) == 0
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.parametrize("flag", ["--query-id-col", "--score-col", "--split-col", "--passage-title-col",
                                  "--pair-passage-col", "--query-col", "--passage-id-col"])
def test_an_empty_column_name_is_refused_naming_the_flag(flag, files, capsys):
    # "" was read as "no such column" when the table was read and as a column named "" later: KeyError: ''
    out = files / "beir"
    argv = ["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "pairs.csv"),
            "--out", str(out), "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "question"]
    assert main(argv + [flag, ""]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {flag}: empty column name; give the column's name in the "
                                               "file, or leave it out")
    assert not out.exists()


def test_cli_defaults_are_the_config_s():
    from twotower.cli.main import build_parser

    a, cfg = build_parser().parse_args(["search", "prepare", "--passages", "p", "--pairs", "q", "--out", "o"]), PrepareConfig()
    assert (a.passage_id_col, a.passage_text_col, a.query_col, a.test_share, a.seed, a.drop_unknown, a.encoding) == (
        cfg.passage_id, cfg.passage_text, cfg.query, cfg.test_share, cfg.seed, cfg.drop_unknown, cfg.encoding)


def test_windows_encoded_tables_are_read_with_encoding(files, capsys):
    """A cp1252 export (Excel's "CSV" on Windows) was refused as not UTF-8 with no way to say otherwise; the BEIR
    folder written from it is UTF-8, as the other search commands read it."""
    (files / "p1252.csv").write_bytes(PASSAGES.replace("\ufeff", "").encode("cp1252"))
    (files / "q1252.csv").write_bytes(PAIRS.encode("cp1252"))
    argv = ["search", "prepare", "--passages", str(files / "p1252.csv"), "--pairs", str(files / "q1252.csv"),
            "--passage-id-col", "pid", "--passage-text-col", "body", "--passage-title-col", "heading",
            "--query-col", "question", "--test-share", "0", "--out", str(files / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not UTF-8 text" in err and "set --encoding to the file's encoding" in err and "data.encoding" not in err
    assert main([*argv, "--encoding", "cp1252"]) == 0
    data = load_beir(files / "out", "test")
    assert "Knochenbrüche" in data.corpus.texts[3] and "Knochenbrüche Vitamin D" in data.queries.values()
    assert main([*argv, "--encoding", "utf-9"]) == 2
    assert "--encoding: 'utf-9' is not a text encoding" in capsys.readouterr().err


def test_an_excel_utf8_table_beside_a_cp1252_one_names_the_encoding_not_a_mojibake_column(files, capsys):
    """--encoding cp1252 for a Windows pairs export, beside passages saved as Excel's "CSV UTF-8" (a byte-order
    mark): the passages' id column was "not found; did you mean 'ï»¿pid'? Set --passage-id-col=NAME", advice that
    would have read every accent of the file wrong as well."""
    (files / "q1252.csv").write_bytes(PAIRS.encode("cp1252"))
    argv = ["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "q1252.csv"),
            "--passage-id-col", "pid", "--passage-text-col", "body", "--passage-title-col", "heading",
            "--query-col", "question", "--test-share", "0", "--out", str(files / "out"), "--encoding", "cp1252"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "column 'pid' (the passage id column) not found" in err
    assert "did you mean" not in err and "--passage-id-col=NAME" not in err
    assert "UTF-8 byte-order mark read in another encoding" in err and "Set --encoding=utf-8" in err


def test_a_utf8_table_read_as_cp1252_is_warned_about_naming_the_encoding_flag(files, caplog):
    """The warning named data.encoding, a setting search prepare does not take (its flag is --encoding)."""
    (files / "p1252.csv").write_bytes(PASSAGES.replace("\ufeff", "").encode("cp1252"))
    cfg = PrepareConfig(**COLS, test_share=0, encoding="cp1252")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        prepare_beir(files / "p1252.csv", files / "pairs.csv", files / "out", cfg)  # pairs.csv is UTF-8
    assert "read as cp1252 (--encoding), but it is UTF-8 text: 'Knochenbrüche' comes out as" in caplog.text
    assert "--encoding applies to every file" in caplog.text and "data.encoding" not in caplog.text


def test_a_pair_graded_twice_or_a_query_in_two_splits_is_named_by_file_rows_and_column(files):
    """Both were one line naming a generated id ("query 'q4' and passage ... are paired twice"; "query 'q6' is in two
    splits"), with no file, row or column: the user's file holds the query text, not q4."""
    (files / "graded.csv").write_text("question,pid,grade\n"
                                      "who knows,8,1\n"  # dropped with --drop-unknown: the row numbers still count it
                                      "vitamin d and fractures,7,1\n"
                                      "statins and cholesterol,NA,1\n"
                                      "vitamin d and fractures,7,0\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^file \S+graded.csv, row 5, column 'grade': query 'vitamin d and fractures' "
                                        r"and passage '7' are paired again with another score \(0; 1 at row 3\); "
                                        r"keep one row$"):
        prepare_beir(files / "passages.csv", files / "graded.csv", files / "out",
                     PrepareConfig(**COLS, score="grade", drop_unknown=True))
    (files / "split.csv").write_text("question,pid,part\n"
                                     "vitamin d and fractures,7,train\n"
                                     "statins and cholesterol,NA,test\n"
                                     "vitamin d and fractures,de1,test\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^file \S+split.csv, row 4, column 'part': query 'vitamin d and fractures' "
                                        r"is in split 'test' here and 'train' at row 2: a query is scored in one "
                                        r"split only$"):
        prepare_beir(files / "passages.csv", files / "split.csv", files / "out", PrepareConfig(**COLS, split="part"))
    assert not (files / "out").exists()


def test_query_ids_that_are_digits_to_python_but_not_numbers_are_split_without_a_crash(files):
    # "①" and "²" pass str.isdigit() but int() refuses them: the grouped train/test cut sorted the ids with int()
    # and `search prepare --query-id-col` died with a ValueError traceback
    (files / "circled.csv").write_text("qid,question,pid\n①,does aspirin prevent heart attacks,007\n"
                                       "②,vitamin d and fractures,7\n²,statins and cholesterol,NA\n"
                                       "10,Knochenbrüche Vitamin D,de1\n", encoding="utf-8")
    cfg = PrepareConfig(**COLS, query_id="qid", test_share=0.5)
    rep = prepare_beir(files / "passages.csv", files / "circled.csv", files / "out", cfg)
    train, test = load_beir(files / "out", "train"), load_beir(files / "out", "test")
    assert set(train.queries) | set(test.queries) == {"①", "②", "²", "10"}
    assert rep["splits"]["train"]["queries"] + rep["splits"]["test"]["queries"] == 4
    # the same seed gives the same split (sorting is deterministic)
    prepare_beir(files / "passages.csv", files / "circled.csv", files / "out2", cfg)
    assert set(load_beir(files / "out2", "test").queries) == set(test.queries)


def test_a_test_share_that_leaves_no_training_query_names_the_flag(files):
    # the error named the internal parameter: "frac=0.99 leaves no training queries"
    with pytest.raises(ConfigError, match=r"^--test-share 0.99: leaves no training queries.*\(4 queries\); pass a "
                                          r"smaller --test-share, or --test-share 0"):
        prepare_beir(files / "passages.csv", files / "pairs.csv", files / "out", PrepareConfig(**COLS, test_share=0.99))
    assert not (files / "out").exists()


def test_duplicate_pairs_are_counted_in_prepare_json_and_the_summary(files, capsys):
    """A pair given twice was dropped without a word: prepare.json said pairs_read 340 beside 339 judgements."""
    with open(files / "pairs.csv", "a", encoding="utf-8") as fh:
        fh.write("statins and cholesterol,NA\n")  # row 5 again
    argv = ["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "pairs.csv"),
            "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "question", "--test-share", "0",
            "--out", str(files / "out")]
    assert main(argv) == 0
    assert capsys.readouterr().out.rstrip().endswith("test 4 queries / 5 pairs, 1 duplicate pair dropped")
    rep = json.loads((files / "out" / "prepare.json").read_text())
    assert rep["pairs_read"] == 6 and rep["duplicate_pairs_dropped"] == 1
    assert rep["pairs_read"] - rep["duplicate_pairs_dropped"] == rep["splits"]["test"]["judgements"] == 5
    (files / "pairs.csv").write_text(PAIRS, encoding="utf-8")  # none repeated: 0, and nothing said
    assert main(argv) == 0
    assert "dropped" not in capsys.readouterr().out
    assert json.loads((files / "out" / "prepare.json").read_text())["duplicate_pairs_dropped"] == 0


def test_split_values_differing_from_train_test_only_by_case_are_warned_about_not_renamed(files, caplog):
    """A split value "Test" wrote qrels/Test.tsv, and the default `search evaluate --split test` then failed."""
    (files / "cased.csv").write_text("question,pid,part\n"
                                     "does aspirin prevent heart attacks,007,TRAIN\n"
                                     "vitamin d and fractures,7,Test\n"
                                     "statins and cholesterol,NA,holdout\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.search.prepare"):
        prepare_beir(files / "passages.csv", files / "cased.csv", files / "out", PrepareConfig(**COLS, split="part"))
    assert ("column 'part': split values 'TRAIN', 'Test' differ from train/dev/test only by case; split names are "
            "case-sensitive, so they are written as qrels/TRAIN.tsv, qrels/Test.tsv and read only as --split TRAIN, "
            "--split Test (search evaluate reads --split test and search train --split train by default); rename "
            "them in the file if you meant train/dev/test") in caplog.text
    assert "holdout" not in caplog.text  # another name is the user's own choice
    assert sorted(p.name for p in (files / "out" / "qrels").iterdir()) == ["TRAIN.tsv", "Test.tsv", "holdout.tsv"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.search.prepare"):  # the usual names: nothing to say
        (files / "plain.csv").write_text("question,pid,part\nvitamin d and fractures,7,test\n"
                                         "statins and cholesterol,NA,train\n", encoding="utf-8")
        prepare_beir(files / "passages.csv", files / "plain.csv", files / "out2", PrepareConfig(**COLS, split="part"))
    assert "only by case" not in caplog.text


def test_a_pair_with_an_empty_passage_id_is_dropped_with_drop_unknown_and_counted_apart(files, capsys, caplog):
    """SciFact's raw claims files hold claims without evidence (112 of claims_validation.csv's 450 rows have an
    empty evidence_doc_id): refused as "empty id (112 row(s) ...)" even with --drop-unknown, and the error did not say
    how to get past it."""
    (files / "claims.csv").write_text("id,claim,evidence_doc_id\n"
                                      "1,does aspirin prevent heart attacks,007\n"
                                      "2,a claim without evidence,\n"
                                      "3,vitamin d and fractures,7\n"
                                      "4,who knows,8\n"
                                      "5,another claim without evidence,\n", encoding="utf-8")
    argv = ["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "claims.csv"),
            "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "claim", "--query-id-col", "id",
            "--pair-passage-col", "evidence_doc_id", "--test-share", "0", "--out", str(files / "out")]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: file {files / 'claims.csv'}, row 3, column 'evidence_doc_id': 2 of 5 pairs have an empty passage id "
        "(row 3, row 6); such a pair can never be retrieved: pass --drop-unknown to leave those pairs out, counted")
    assert not (files / "out").exists()
    with caplog.at_level("WARNING", logger="twotower.search.prepare"):
        assert main([*argv, "--drop-unknown"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(
        "test 2 queries / 2 pairs, 2 pairs with an empty passage id dropped, 1 pair with an unknown passage dropped")
    assert "2 of 5 pairs have an empty passage id (row 3, row 6); dropped (--drop-unknown)" in caplog.text
    assert "1 of 5 pairs names a passage id that is not in the passages table (row 5 ('8'))" in caplog.text
    rep = json.loads((files / "out" / "prepare.json").read_text())
    assert (rep["pairs_read"], rep["empty_passage_ids_dropped"], rep["unknown_passages_dropped"]) == (5, 2, 1)
    assert load_beir(files / "out", "test").qrels == {"1": {"007": 1}, "3": {"7": 1}}


def test_a_null_passage_id_in_jsonl_is_an_empty_one_and_pairs_with_no_passage_at_all_are_refused(files):
    (files / "pairs.jsonl").write_text('{"question": "vitamin d and fractures", "pid": "7"}\n'
                                       '{"question": "no evidence", "pid": null}\n', encoding="utf-8")
    cfg = PrepareConfig(**COLS, test_share=0, drop_unknown=True)
    rep = prepare_beir(files / "passages.csv", files / "pairs.jsonl", files / "out", cfg)
    assert rep["empty_passage_ids_dropped"] == 1 and rep["queries"] == 1
    with pytest.raises(DataError, match=r"pairs.jsonl, line 2, column 'pid': 1 of 2 pairs has an empty passage id "
                                        r"\(line 2\); .*pass --drop-unknown"):
        prepare_beir(files / "passages.csv", files / "pairs.jsonl", files / "out2", PrepareConfig(**COLS, test_share=0))
    # nothing left to keep (SciFact's claims_test.csv: no evidence at all): the id column is likely the wrong one
    (files / "none.csv").write_text("question,pid\nno evidence,\nnone either,\n", encoding="utf-8")
    # "so no pair would be left" before the hint: said since that error also names unknown ids beside empty ones
    with pytest.raises(DataError, match=r"2 of 2 pairs have an empty passage id \(row 2, row 3\), so no pair would be "
                                        r"left; check the id column \(--pair-passage-col\)"):
        prepare_beir(files / "passages.csv", files / "none.csv", files / "out3", cfg)


@pytest.mark.parametrize("drop_unknown", [False, True])
def test_pairs_with_no_passage_left_name_the_empty_and_the_unknown_ids_alike(files, capsys, drop_unknown):
    """A pandas export of an integer id column with a blank writes 7.0 and an empty cell: the refusal named the empty
    cell alone ("1 of 3 pairs has an empty passage id"), with or without --drop-unknown, and hid the 7.0s to fix."""
    (files / "floats.csv").write_text("question,pid\nvitamin d and fractures,7.0\nno evidence,\n"
                                      "Knochenbrüche Vitamin D,de1.0\n", encoding="utf-8")
    argv = ["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "floats.csv"),
            "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "question", "--test-share", "0",
            "--out", str(files / "out")] + (["--drop-unknown"] if drop_unknown else [])
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: file {files / 'floats.csv'}, row 2, column 'pid': 1 of 3 pairs has an empty passage id (row 3) and 2 "
        "of 3 pairs name a passage id that is not in the passages table (row 2 ('7.0'), row 4 ('de1.0')), so no pair "
        "would be left; check the id column (--pair-passage-col) and the passages file; the unknown ids look like "
        "integers written as floats ('7.0' where the passages table has '7'; pandas writes an integer id column that "
        "holds a blank so): write them as integers")
    assert not (files / "out").exists()


def test_the_float_hint_is_given_only_for_a_passage_id_with_a_trailing_zero(files):
    (files / "other.csv").write_text("question,pid\nvitamin d and fractures,7\nwho knows,8.0\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"not in the passages table \(row 3 \('8.0'\)\); such a pair can never be "
                                        r"retrieved: pass --drop-unknown to leave those pairs out, counted$"):
        prepare_beir(files / "passages.csv", files / "other.csv", files / "out", PrepareConfig(**COLS, test_share=0))


@pytest.mark.parametrize("query_id", [None, "qid"])
def test_queries_jsonl_holds_the_stripped_text_queries_are_matched_on(files, query_id):
    """"  vitamin d and fractures " and "vitamin d and fractures" are one query (matched on the stripped text), but
    queries.jsonl kept the first raw text, spaces and all."""
    (files / "spaced.csv").write_text("qid,question,pid\n"
                                      "a,  vitamin d and fractures ,7\n"
                                      "a,vitamin d and fractures,de1\n"
                                      "b,\tstatins and cholesterol\t,NA\n", encoding="utf-8")
    cfg = PrepareConfig(**{**COLS, "query_id": query_id}, test_share=0)
    prepare_beir(files / "passages.csv", files / "spaced.csv", files / "out", cfg)
    data = load_beir(files / "out", "test")
    ids = ["a", "b"] if query_id else ["q1", "q2"]
    assert data.queries == dict(zip(ids, ["vitamin d and fractures", "statins and cholesterol"]))
    assert data.qrels == {ids[0]: {"7": 1, "de1": 1}, ids[1]: {"NA": 1}}


def test_a_list_cell_is_refused_as_the_beir_loader_refuses_it(tmp_path, capsys):
    """A JSON array of sentences (SciFact's abstracts come so) was written as Python's "['a', 'b']", brackets and
    quotes indexed, without a word; the BEIR loader refuses the same cell in a corpus.jsonl."""
    (tmp_path / "p.jsonl").write_text('{"passage_id": "p1", "text": "one"}\n{"passage_id": "p2", "text": ["a", "b"]}\n')
    (tmp_path / "q.csv").write_text("query,passage_id\nhello,p1\nfoo,p2\n")
    assert main(["-q", "search", "prepare", "--passages", str(tmp_path / "p.jsonl"), "--pairs", str(tmp_path / "q.csv"),
                 "--out", str(tmp_path / "o"), "--test-share", "0"]) == 2
    assert "line 2, column 'text': must be a string or number, not an object or list" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_title_column_left_unread_is_warned_of(tmp_path, caplog):
    """A table of id, title and text with no --passage-title-col: the text column is found by its default name, the
    title has none, so every title was written "" and neither BM25 nor the encoder read them, without a word."""
    (tmp_path / "p.csv").write_text("passage_id,Title,text\n1,Aspirin,lowers risk\n2,Statins,and cholesterol\n")
    (tmp_path / "q.csv").write_text("query,passage_id\naspirin risk,1\n")
    with caplog.at_level("WARNING"):
        prepare_beir(tmp_path / "p.csv", tmp_path / "q.csv", tmp_path / "o", PrepareConfig(test_share=0))
    said = [r.getMessage() for r in caplog.records if "is not read" in r.getMessage()]
    assert len(said) == 1 and "its column 'Title' is not read" in said[0] and "--passage-title-col Title" in said[0]
    assert load_beir(tmp_path / "o", "test").corpus.titles == ["", ""]  # read as asked: the warning changes nothing
    caplog.clear()
    with caplog.at_level("WARNING"):
        prepare_beir(tmp_path / "p.csv", tmp_path / "q.csv", tmp_path / "o2", PrepareConfig(passage_title="Title",
                                                                                             test_share=0))
    assert not [r for r in caplog.records if "is not read" in r.getMessage()]


def test_a_number_in_a_parquet_text_column_is_written_as_the_csv_of_it_reads(tmp_path):
    """A title column of numbers with a gap is float64 in Parquet: the film 1917 was indexed as "1917.0", where the
    CSV of the same table gives "1917" (utils/whole_numbers.cell_text, the item texts' rule)."""
    import pandas as pd

    pd.DataFrame({"passage_id": ["p1", "p2", "p3"], "title": [1917.0, None, 8.5],
                  "text": ["a war film", "an empty title", "a rating"]}).to_parquet(tmp_path / "p.parquet")
    (tmp_path / "q.csv").write_text("query,passage_id\nwar,p1\n")
    prepare_beir(tmp_path / "p.parquet", tmp_path / "q.csv", tmp_path / "o",
                 PrepareConfig(passage_title="title", test_share=0))
    assert load_beir(tmp_path / "o", "test").corpus.titles == ["1917", "", "8.5"]


def test_cli_over_an_earlier_prepared_folder_holding_the_users_files_refuses_and_keeps_them(files, capsys):
    """Review: `search prepare --out X` over an earlier prepared folder deleted the user's own files in it without
    a word (`twotower export` refuses the same case); it refuses now naming them, and --force goes ahead."""
    out = files / "beir"
    argv = ["search", "prepare", "--passages", str(files / "passages.csv"), "--pairs", str(files / "pairs.csv"),
            "--out", str(out), "--passage-id-col", "pid", "--passage-text-col", "body", "--query-col", "question"]
    assert main(argv) == 0
    (out / "NOTES.txt").write_text("my notes")
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --out {out}: an earlier prepared BEIR folder with files it did not write (NOTES.txt); the new "
        "prepared BEIR folder replaces the whole folder, so they would be lost: choose a new or empty folder, move "
        "them out, or pass --force to replace it anyway")
    assert (out / "NOTES.txt").read_text() == "my notes"
    assert main([*argv, "--force"]) == 0
    assert not (out / "NOTES.txt").exists()
    assert main(argv) == 0  # its own files alone are replaced as before


def test_dataframes_are_named_by_their_role_not_by_their_printed_rows(tmp_path):
    # a DataFrame was "named" by its repr: the error read "file    passage_id text\n0  1  a b\n...", and
    # prepare.json's "passages_file" held the frame's printed rows
    import pandas as pd

    passages = pd.DataFrame({"passage_id": [1, 2, 3], "text": ["a b", "c d", "e f"]})
    pairs = pd.DataFrame({"query": ["a", "c", "e"], "passage_id": [1, 2, 3]})
    report = prepare_beir(passages, pairs, tmp_path / "out")
    assert (report["passages_file"], report["pairs_file"]) == ("<DataFrame passages>", "<DataFrame pairs>")
    marker = json.loads((tmp_path / "out" / "prepare.json").read_text(encoding="utf-8"))
    assert marker["passages_file"] == "<DataFrame passages>"
    twice = passages.assign(passage_id=[1, 2, 2])
    with pytest.raises(DataError, match=r"^file <DataFrame passages>, iloc 2, column 'passage_id': duplicate"):
        prepare_beir(twice, pairs, tmp_path / "out2")
    with pytest.raises(DataError, match=r"^file <DataFrame pairs>, iloc 0, column 'query': query text is empty"):
        prepare_beir(passages, pairs.assign(query=["", "c", "e"]), tmp_path / "out3")
