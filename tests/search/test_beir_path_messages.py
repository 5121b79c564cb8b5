"""A wrong BEIR folder is named as the caller gave it: the argument from Python, the flag from the CLI."""

from __future__ import annotations

import pytest

from twotower.cli.main import main
from twotower.errors import DataError
from twotower.search import load_beir, resolve_beir_dir, search_evaluate


@pytest.mark.parametrize("call", [load_beir, resolve_beir_dir, search_evaluate])
def test_python_callers_are_told_the_argument_not_a_flag(tmp_path, call):
    # load_beir("") said "--beir/--data is empty", and a missing folder "point --beir/--data at a BEIR directory"
    with pytest.raises(DataError) as empty:
        call("")
    assert str(empty.value).startswith("beir_dir is empty") and "--" not in str(empty.value)
    with pytest.raises(DataError) as missing:
        call(tmp_path / "nope")
    assert "point beir_dir at a BEIR directory" in str(missing.value) and "--" not in str(missing.value)


@pytest.mark.parametrize(
    "cmd",
    [
        ["search", "evaluate"],
        ["search", "index", "--out", "OUT"],
        ["search", "train", "--out", "OUT"],
        ["rerank", "train", "--out", "OUT"],
    ],
)
def test_the_commands_name_their_flag(tmp_path, capsys, cmd):
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in cmd]
    assert main(["-q", *argv, "--beir", str(tmp_path / "nope")]) != 0
    err = capsys.readouterr().err
    assert "point --beir at a BEIR directory" in err and "beir_dir" not in err
    assert main(["-q", *argv, "--beir", ""]) != 0
    assert "--beir is empty" in capsys.readouterr().err


def test_a_passages_table_given_as_beir_points_to_search_prepare(tmp_path, capsys):
    """`search index --beir passages.csv` said "no corpus.jsonl in passages.csv or passages.csv/beir": a newcomer's
    own table is made into a BEIR folder by `search prepare`, which the refusal now names."""
    table = tmp_path / "passages.csv"
    table.write_text("pid,body\n1,some text\n")
    assert main(["-q", "search", "index", "--beir", str(table), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "point --beir at a BEIR directory" in err and "is a file" in err
    assert f"twotower search prepare --passages {table} --pairs PAIRS --out DIR" in err
    with pytest.raises(DataError) as python:
        resolve_beir_dir(table)
    assert "is a file" in str(python.value) and "prepare_beir(" in str(python.value)
    assert "--" not in str(python.value)
