"""Another command's flag typed on a command that lacks it is refused, saying whose flag it is, and not read as the
abbreviation of one of the command's own flags: `search evaluate --k 0` said "unrecognized arguments: 0" (argparse
took --k for --keep-unknown) and `search evaluate --k 10` turned on --keep-unknown without a word."""
from __future__ import annotations

import argparse

import pytest

from twotower.cli.main import _commands, build_parser, main


def test_search_evaluate_k_says_it_reports_fixed_cut_offs(capsys):
    """search evaluate refuses --k itself (its hidden flag); no other command's message names it as --k's owner."""
    for value in (["--k", "0"], ["--k", "10"], ["--k=10"]):
        assert main(["search", "evaluate", "--beir", "b", *value]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "--k: search evaluate measures fixed depths" in err and "keep-unknown" not in err, err
    assert main(["evaluate", "--run", "r", "--k", "10"]) == 2
    assert "search evaluate" not in capsys.readouterr().err  # its hidden --k is a refusal, not a flag to point to


@pytest.mark.parametrize("argv, said", [
    (["evaluate", "--run", "r", "--k", "10"], "--k: not a flag of evaluate (--k is a flag of recommend, similar, index "
                                             "build and search query); evaluate takes its cut-offs as --ks"),
    (["train", "--user", "42"], "--user: not a flag of train (--user is a flag of demo, recommend and explain); to "
                                "mean --users, write it in full"),
    (["search", "train", "--beir", "b", "--out", "o", "--train", "t.csv"],  # turned on --train-doc-tower
     "--train: not a flag of search train (--train is a flag of train); to mean --train-doc-tower, write it in full"),
    (["data", "split", "--input", "x.csv", "--out", "o", "--test", "t.csv"], "--test: not a flag of data split"),
    (["serve", "--run", "r", "--filter", "genres=Comedy"], "--filter: not a flag of serve"),
])
def test_a_sibling_commands_flag_is_named_as_theirs(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert said in err and "unrecognized" not in err, err


def _traps() -> list[tuple[tuple[str, ...], str]]:
    """Every (command, another command's full flag name) that argparse would read as short for the command's own."""
    found = []
    for path, parser in _commands(build_parser()).items():
        own = [o for a in parser._actions for o in a.option_strings]
        found += [(path, flag) for flag in parser.foreign_flags if any(o.startswith(flag) for o in own)]
    return found


def test_every_such_flag_is_refused_by_the_same_rule(capsys):
    traps = _traps()
    assert (("evaluate",), "--k") in traps and (("search", "train"), "--train") in traps and len(traps) > 10
    for path, flag in traps:
        with pytest.raises(SystemExit) as e:
            build_parser().parse_known_args([*path, flag, "1"])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"error: {flag}: not a flag of {' '.join(path)} ({flag} is a flag of " in err, err


def test_abbreviations_of_a_commands_own_flags_still_work():
    parser = build_parser()
    args = parser.parse_args(["search", "evaluate", "--beir", "b", "--thread", "2", "--keep"])
    assert args.threads == 2 and args.keep_unknown is True
    args = parser.parse_args(["recommend", "--run", "r", "--user", "42", "--k", "5", "--exclude-i", "i1"])
    assert (args.user, args.k, args.exclude_items) == ("42", 5, "i1")
    assert isinstance(parser, argparse.ArgumentParser)
