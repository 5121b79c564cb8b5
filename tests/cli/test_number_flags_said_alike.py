"""A number flag's value that is no number (`explain --top 1.5`, `serve --port abc`) is refused in one line, in the
words of `recommend --k 5.5` (``--k: must be an integer from 1 to 10000, got '5.5'``), status 2: argparse said
"argument --top: invalid int value: '1.5'" after the usage lines. And `search query --k 0` is refused in the words of
`recommend --k 0`, where it said "--k must be >= 1, got 0"."""
from __future__ import annotations

import pytest

from twotower.cli.main import main


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The refused command's stderr: one line, no usage lines, status 2."""
    capsys.readouterr()
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "usage:" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


RUN = ["--run", "/nonexistent-run"]


@pytest.mark.parametrize("argv, flag, typed", [
    (["explain", *RUN, "--user", "u1", "--item", "i3", "--top"], "--top", "1.5"),
    (["recommend", *RUN, "--user", "u1", "--filter-exact-max"], "--filter-exact-max", "x"),
    (["similar", *RUN, "--item", "i1", "--filter-exact-max"], "--filter-exact-max", "1e3"),
    (["similar", *RUN, "--item", "i1", "--threads"], "--threads", "1.5"),
    (["serve", *RUN, "--port"], "--port", "abc"),
    (["serve", *RUN, "--max-k"], "--max-k", "5.5"),
    (["search", "query", "--index", "/nonexistent", "q", "--rerank-top"], "--rerank-top", "2.5"),
    (["search", "evaluate", "--beir", "/nonexistent", "--max-length"], "--max-length", "x"),
    (["train", "--epochs"], "--epochs", "2.5"),
], ids=["explain-top", "recommend-filter-exact-max", "similar-filter-exact-max", "similar-threads", "serve-port",
        "serve-max-k", "search-query-rerank-top", "search-evaluate-max-length", "train-epochs"])
def test_an_integer_flag_that_is_no_integer_is_said_as_k_is(capsys, argv, flag, typed) -> None:
    assert _refusal(capsys, *argv, typed) == f"error: {flag}: must be an integer, got {typed!r}"


def test_the_form_flag_value_and_a_long_value_are_said_alike(capsys) -> None:
    base = ["explain", *RUN, "--user", "u1", "--item", "i3"]
    assert _refusal(capsys, *base, "--top=1.5") == "error: --top: must be an integer, got '1.5'"
    assert _refusal(capsys, *base, "--top", "x" * 30) == "error: --top: must be an integer, got a value of 30 characters"


def test_a_number_flag_that_is_no_number_is_said_alike(capsys) -> None:
    assert _refusal(capsys, "serve", *RUN, "--max-wait-ms", "soon") == "error: --max-wait-ms: must be a number, got 'soon'"


@pytest.mark.parametrize("typed", ["0", "-3", "20000", "5.5"])
def test_search_query_k_is_refused_in_the_words_of_recommend(capsys, typed) -> None:
    recommend = _refusal(capsys, "recommend", *RUN, "--user", "u1", "--k", typed)
    assert recommend.startswith("error: --k: must be ")
    assert _refusal(capsys, "search", "query", "--index", "/nonexistent", "--k", typed, "q") == recommend


def test_search_evaluate_says_a_bad_number_in_those_words(capsys, tmp_path) -> None:
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": "coffee"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "coffee"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert _refusal(capsys, "search", "evaluate", "--beir", str(beir), "--rerank-top", "0") == (
        "error: --rerank-top: must be at least 1, got 0")
