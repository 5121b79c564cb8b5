"""A number flag's value that is no number (`explain --top 1.5`, `serve --port abc`) is refused in one line, in the
words of `recommend --k 5.5` (``--k: must be an integer from 1 to 10000, got '5.5'``), status 2: argparse said
"argument --top: invalid int value: '1.5'" after the usage lines."""
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
