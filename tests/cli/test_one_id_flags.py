"""A flag naming one id, given twice with two values, is refused naming both (argparse kept the last one).

`twotower similar --item 50 --item 181` printed 181's list alone, 50 dropped without a word. The HTTP routes
(POST /similar-items, /recommend, /explain) take one id each, and the lists of several are `--items` / `--users`,
so the refusal points there rather than printing several lists in the one-id formats.
"""
from __future__ import annotations

import pytest

from twotower.cli.main import main


@pytest.mark.parametrize("argv, flag, hint", [
    (["similar", "--item", "50", "--item", "181"], "--item", "write --items 50,181"),
    (["recommend", "--user", "1", "--user", "2"], "--user", "write --users 1,2"),
    (["explain", "--user", "1", "--user", "2", "--item", "50"], "--user", "once for each"),
    (["explain", "--user", "1", "--item", "50", "--item", "181"], "--item", "once for each"),
])
def test_one_id_flag_given_twice_is_refused_naming_both_values(tmp_path, capsys, argv, flag, hint):
    # the run need not exist: the flags are read first
    assert main([argv[0], "--run", str(tmp_path / "run"), *argv[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {flag}: given 2 times with different values" in err
    values = ("'1' and '2'" if flag == "--user" else "'50' and '181'")
    assert values in err and hint in err


def test_an_id_holding_a_comma_is_suggested_as_a_json_array(tmp_path, capsys):
    assert main(["similar", "--run", str(tmp_path / "run"), "--item", "it,em", "--item", "42"]) == 2
    assert """write --items '["it,em", "42"]'""" in capsys.readouterr().err


def test_the_same_id_twice_is_no_clash(tmp_path, capsys):
    # read as one: the command goes on (and stops at the missing run, past the flags)
    assert main(["similar", "--run", str(tmp_path / "run"), "--item", "50", "--item", "50"]) == 2
    err = capsys.readouterr().err
    assert "given 2 times" not in err and "unknown run" in err
