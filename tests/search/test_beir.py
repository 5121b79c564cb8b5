from __future__ import annotations

import json

import pytest

from twotower.errors import ConfigError, DataError
from twotower.search.beir import (
    load_beir,
    load_pairs,
    load_qrels,
    load_queries,
    relevant_rows,
    resolve_beir_dir,
    validation_split_by_group,
)

from search_data import DOCS, QUERIES, write_beir


def test_load_beir_reads_split_and_rows(beir_dir):
    data = load_beir(beir_dir, "test")
    assert data.corpus.ids == ["d1", "d2", "d3", "d4", "d5"]
    assert set(data.queries) == {"4", "5"}
    assert data.corpus.doc_texts()[0] == "Aspirin Aspirin reduces the risk of heart attack."
    rel = relevant_rows(["4", "5"], data.qrels, data.corpus)
    assert [r.tolist() for r in rel] == [[3], [2]]


def test_parent_directory_with_beir_subdir_is_accepted(beir_dir):
    assert resolve_beir_dir(beir_dir.parent) == beir_dir


def test_unknown_split_lists_available(beir_dir):
    with pytest.raises(DataError, match="available splits: \\['test', 'train'\\]"):
        load_beir(beir_dir, "dev")


def test_dangling_corpus_id_names_file_row_and_column(tmp_path):
    root = write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n4\td4\t1\n5\tnope\t1\n"})
    with pytest.raises(DataError) as e:
        load_beir(root, "test")
    assert e.value.row == 3 and e.value.column == "corpus-id" and "test.tsv" in e.value.file


def test_dangling_query_id(tmp_path):
    root = write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n99\td4\t1\n"})
    with pytest.raises(DataError, match="query id '99'"):
        load_beir(root, "test")


def test_bad_qrels_header_and_rows(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("qid\tdid\tscore\n1\td1\t1\n")
    with pytest.raises(DataError, match="header"):
        load_qrels(p)
    p.write_text("query-id\tcorpus-id\tscore\n1\td1\n")
    with pytest.raises(DataError, match="3 tab-separated") as e:
        load_qrels(p)
    assert e.value.row == 2
    p.write_text("query-id\tcorpus-id\tscore\n1\td1\thigh\n")
    with pytest.raises(DataError) as e:
        load_qrels(p)
    assert e.value.column == "score"


def test_empty_document_and_query_text(tmp_path):
    docs = DOCS + [{"_id": "d6", "title": "", "text": "  "}]
    # an empty document is indexed with a warning (issue 13; tests/search/test_empty_documents.py), an empty query is not
    assert "d6" in load_beir(write_beir(tmp_path / "a", docs=docs), "test").corpus.ids
    queries = QUERIES + [{"_id": "6", "text": ""}]
    with pytest.raises(DataError, match="query text is empty"):  # a queries file read alone (search train's)
        load_queries(write_beir(tmp_path / "b", queries=queries) / "queries.jsonl")


def test_broken_json_line(tmp_path):
    root = write_beir(tmp_path / "b")
    (root / "queries.jsonl").write_text('{"_id": "1", "text": "x"}\n{oops\n')
    with pytest.raises(DataError) as e:
        load_beir(root, "test")
    assert e.value.row == 2


def test_a_broken_json_line_says_where_in_the_line():
    # it said "not valid JSON (Invalid control character at)", the decoder's words cut before the place
    from twotower.utils.wording import json_error

    for text, said in (('{"_id": "d3", "title": "x", "text": "broken\n', "Invalid control character at character 44"),
                       ('{"_id": "d3" "text": "x"}', "Expecting ',' delimiter at character 14")):
        with pytest.raises(json.JSONDecodeError) as e:
            json.loads(text)
        assert json_error(e.value) == said


def test_a_control_character_in_a_corpus_line_is_named_with_its_character(tmp_path):
    root = write_beir(tmp_path / "b")
    (root / "corpus.jsonl").write_text('{"_id": "d1", "title": "t", "text": "broken\t"}\n')
    with pytest.raises(DataError, match=r"not valid JSON \(Invalid control character at character 44\)"):
        load_beir(root, "test")


def test_pairs_tsv_and_jsonl(beir_dir, tmp_path):
    corpus = load_beir(beir_dir, "test").corpus
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("query\tpositive_id\tnegative_ids\naspirin\td1\td2,d3\nsleep\td3\n")
    pairs = load_pairs(tsv, corpus)
    assert pairs[0].negative_ids == ("d2", "d3") and pairs[1].negative_ids == ()
    jl = tmp_path / "pairs.jsonl"
    jl.write_text(json.dumps({"query": "a", "positive_id": "d1", "negative_ids": ["zz"]}) + "\n")
    with pytest.raises(DataError, match="negative id 'zz'") as e:
        load_pairs(jl, corpus)
    assert e.value.row == 1


def test_group_split_keeps_shared_documents_on_one_side():
    # q1,q2 share d1; q2,q3 share d2 -> {q1,q2,q3} is one group; q4..q9 are singletons
    qrels = {"1": {"d1": 1}, "2": {"d1": 1, "d2": 1}, "3": {"d2": 1}}
    qrels.update({str(i): {f"x{i}": 1} for i in range(4, 10)})
    for seed in range(10):
        train, valid = validation_split_by_group(qrels, 0.3, seed)
        assert set(train) | set(valid) == set(qrels) and not set(train) & set(valid)
        train_docs = {d for q in train.values() for d in q}
        valid_docs = {d for q in valid.values() for d in q}
        assert not train_docs & valid_docs
        assert {"1", "2", "3"} <= set(train) or {"1", "2", "3"} <= set(valid)
    assert validation_split_by_group(qrels, 0.3, 1) == validation_split_by_group(qrels, 0.3, 1)


def test_group_split_rejects_bad_fraction():
    with pytest.raises(ConfigError, match="frac"):
        validation_split_by_group({"1": {"d": 1}}, 1.5, 0)


def test_object_or_list_ids_are_refused(tmp_path):
    import json

    import pytest

    from twotower.errors import DataError
    from twotower.search.beir import load_corpus

    p = tmp_path / "corpus.jsonl"
    p.write_text(json.dumps({"_id": {"a": 1}, "title": "t", "text": "x"}) + "\n")
    with pytest.raises(DataError, match="must be a string or number"):
        load_corpus(p)


def test_an_empty_beir_path_says_so_and_names_the_variable():
    """`--beir "$BEIR_DIR"` with BEIR_DIR unset must not search the current folder."""
    for empty in ("", "  "):
        with pytest.raises(DataError, match=r"^--beir is empty.*BEIR_DIR"):
            resolve_beir_dir(empty, arg="--beir")


def _qrels(tmp_path, rows: str):
    return write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n" + rows})


def test_infinite_qrels_score_names_file_row_and_column(tmp_path):
    root = _qrels(tmp_path, "4\td4\t1\n5\td3\tinf\n")
    with pytest.raises(DataError, match=r"test.tsv, row 3, column 'score': score 'inf' is not a finite number"):
        load_beir(root, "test")


@pytest.mark.parametrize("score", ["0.5", "1.5", "2.7"])
def test_a_fractional_qrels_score_is_refused_naming_file_row_and_column(tmp_path, score):
    # int() cut 0.5 to 0: query 5 was silently skipped by `search evaluate` as having no relevant document
    root = _qrels(tmp_path, f"4\td4\t1\n5\td3\t{score}\n")
    with pytest.raises(DataError, match=rf"test.tsv, row 3, column 'score': score '{score}' is not a whole number"):
        load_beir(root, "test")


def test_a_whole_qrels_score_written_as_a_float_is_read_as_its_integer(tmp_path):
    data = load_beir(_qrels(tmp_path, "4\td4\t1.0\n5\td3\t2\n5\td1\t0.0\n"), "test")
    assert data.qrels == {"4": {"d4": 1}, "5": {"d3": 2, "d1": 0}}


def test_conflicting_duplicate_judgements_name_both_rows(tmp_path):
    root = _qrels(tmp_path, "4\td4\t1\n5\td3\t1\n4\td4\t0\n")
    with pytest.raises(DataError, match=r"test.tsv, row 4: .*'4'.*'d4'.*row 2: 1, row 4: 0"):
        load_beir(root, "test")


def test_identical_duplicate_judgements_are_counted_once_with_a_warning(tmp_path, caplog):
    root = _qrels(tmp_path, "4\td4\t1\n5\td3\t1\n4\td4\t1\n")
    with caplog.at_level("WARNING"):
        data = load_beir(root, "test")
    assert data.qrels == {"4": {"d4": 1}, "5": {"d3": 1}}
    assert "row 4 repeats row 2" in caplog.text


@pytest.mark.parametrize("doc, column", [
    ({"_id": None, "title": "t", "text": "x"}, "_id"),
    ({"_id": "", "title": "t", "text": "x"}, "_id"),
    ({"_id": True, "title": "t", "text": "x"}, "_id"),
    ({"_id": "d9", "title": "t", "text": 5}, "text"),
    ({"_id": "d9", "title": False, "text": "x"}, "title"),
])
def test_corpus_field_of_the_wrong_type_names_the_row(tmp_path, doc, column):
    from search_data import DOCS

    root = write_beir(tmp_path / "b", docs=[*DOCS, doc])
    with pytest.raises(DataError, match=rf"corpus.jsonl, row 6, column '{column}'"):
        load_beir(root, "test")


def test_integer_ids_are_still_accepted(tmp_path):
    from search_data import DOCS

    root = write_beir(tmp_path / "b", docs=[*DOCS, {"_id": 7, "title": "t", "text": None}])
    assert "7" in load_beir(root, "test").corpus.row_of


def test_empty_queries_file_is_named(tmp_path):
    root = write_beir(tmp_path / "b", queries=[])
    with pytest.raises(DataError, match="queries.jsonl is empty"):
        load_beir(root, "test")


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    root = write_beir(tmp_path / "b")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        p = root / name
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    data = load_beir(root, "test")
    assert data.corpus.ids[0] == "d1" and data.qrels == {"4": {"d4": 1}, "5": {"d3": 1}}


def test_a_pairs_tsv_without_its_header_is_refused_not_missing_its_first_pair(beir_dir, tmp_path):
    # row 1 was always taken as the header: "aspirin<TAB>d1" was dropped and the other pairs loaded silently
    corpus = load_beir(beir_dir, "test").corpus
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("aspirin\td1\nsleep\td3\n")
    with pytest.raises(DataError, match=r"pairs.tsv, row 1: row 1 names the corpus document 'd1': it is a pair, "
                                        r"not the header"):
        load_pairs(tsv, corpus)


@pytest.mark.parametrize("text, hint", [
    ("4\td4\t1\n5\td3\t1\n", "this is a judgement, not the header: add the header line"),
    ("query-id corpus-id score\n4 d4 1\n", "the fields must be separated by tabs, not spaces"),
])
def test_a_qrels_file_without_the_header_says_why_it_is_refused(tmp_path, text, hint):
    root = write_beir(tmp_path / "b", qrels={"test": text})
    with pytest.raises(DataError, match=r"test.tsv, row 1: header must be 'query-id<TAB>corpus-id<TAB>score', got .*; "
                                        + hint):
        load_beir(root, "test")


def test_an_empty_qrels_file_says_it_is_empty(tmp_path):
    """It said "header must be 'query-id<TAB>corpus-id<TAB>score', got None"."""
    root = write_beir(tmp_path / "b", qrels={"test": ""})
    with pytest.raises(DataError, match=r"test.tsv: file is empty; expected the header") as e:
        load_beir(root, "test")
    assert "None" not in str(e.value)


def test_ids_with_spaces_around_them_match_the_qrels_that_name_them(tmp_path):
    """Before: a corpus `_id` of " d4" (or a query `_id` of "4 ") kept its spaces while the qrels' ids are trimmed,
    so loading the qrels said "corpus id 'd4' is not in corpus.jsonl" although it is there."""
    from tests.search.search_data import DOCS, QUERIES, write_beir
    from twotower.search.beir import load_corpus, load_qrels, load_queries

    docs = [dict(d, _id=f" {d['_id']}") if d["_id"] == "d4" else d for d in DOCS]
    queries = [dict(q, _id=f"{q['_id']} ") if q["_id"] == "4" else q for q in QUERIES]
    root = write_beir(tmp_path / "beir", docs=docs, queries=queries)
    corpus, qs = load_corpus(root / "corpus.jsonl"), load_queries(root / "queries.jsonl")
    qrels = load_qrels(root / "qrels" / "test.tsv", corpus=corpus, queries=qs)
    assert qrels["4"] == {"d4": 1} and "d4" in corpus.row_of and "4" in qs


def test_an_empty_query_refuses_only_the_split_that_judges_it(tmp_path):
    # an empty text anywhere in queries.jsonl refused `search evaluate` of a split that never uses that query, and
    # hid a mistyped --split behind it
    queries = [*QUERIES, {"_id": "9", "text": ""}]
    root = write_beir(tmp_path / "b", queries=queries)
    assert sorted(load_beir(root, "test").queries) == ["4", "5"]  # query 9 is judged nowhere: evaluated without it
    with pytest.raises(DataError, match="no qrels for split 'nope'"):
        load_beir(root, "nope")
    judged = write_beir(tmp_path / "c", queries=queries,
                        qrels={"test": "query-id\tcorpus-id\tscore\n4\td4\t1\n9\td3\t1\n"})
    with pytest.raises(DataError, match=r"queries.jsonl, row 6, column 'text'.*query text is empty \(query '9', judged "
                                        r"in qrels/test.tsv\)"):
        load_beir(judged, "test")
