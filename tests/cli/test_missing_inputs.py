"""A missing input file is refused under its flag before the run loads (it was found only after the run, and for
evaluate the held-out file, had been read)."""
from __future__ import annotations

import pytest

from twotower.cli.main import main


@pytest.mark.parametrize(("argv", "flag"), [
    (["evaluate", "--history-from", "{tmp}/train.csv", "{tmp}/nope.csv"], "--history-from"),
    (["recommend", "--users", "all", "--out", "{tmp}/r.csv", "--history-from", "{tmp}/nope.csv"], "--history-from"),
    (["recommend", "--user", "1", "--exclude", "{tmp}/nope.csv"], "--exclude"),
    (["explain", "--user", "1", "--item", "5", "--history-from", "{tmp}/nope.csv"], "--history-from"),
    (["serve", "--history-from", "{tmp}/nope.csv", "--port", "0"], "--history-from"),
])
def test_a_missing_input_file_is_named_under_its_flag_before_the_run_loads(tmp_path, capsys, argv, flag):
    (tmp_path / "train.csv").write_text("user_id,item_id\n1,5\n")
    # the run does not exist: the missing file must be what is said, so it is checked first
    argv = [a.format(tmp=tmp_path) for a in argv]
    code = main([argv[0], "--run", str(tmp_path / "no-run"), *argv[1:]])
    err = capsys.readouterr().err
    assert code != 0
    assert f"file {tmp_path}/nope.csv: {flag}: file not found" in err, err


def test_a_folder_given_as_an_input_file_is_named(tmp_path, capsys):
    assert main(["evaluate", "--run", str(tmp_path / "no-run"), "--history-from", str(tmp_path)]) != 0
    assert f"file {tmp_path}: --history-from: is a folder, not a file" in capsys.readouterr().err


def test_a_pipe_given_as_an_input_file_is_named_as_one_not_as_missing(tmp_path, capsys):
    import os

    fifo = tmp_path / "valid.csv"
    os.mkfifo(fifo)  # what `--exclude <(cat valid.csv)` and `--exclude /dev/stdin` pass: a pipe, which exists
    assert main(["recommend", "--run", str(tmp_path / "no-run"), "--user", "1", "--exclude", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert f"file {fifo}: --exclude: is a pipe, not a file" in err and "write it to a file first" in err, err


def test_a_dash_for_standard_input_is_refused_under_its_flag_before_the_run_loads(tmp_path, capsys):
    # `cat valid.csv | twotower recommend ... --exclude -` passed the early check and was refused once the run had
    # loaded, as "file -: file not found"
    assert main(["recommend", "--run", str(tmp_path / "no-run"), "--user", "1", "--exclude", "-"]) == 2
    err = capsys.readouterr().err
    assert "--exclude -: standard input is not read" in err and "write it to a file first" in err, err
