"""`twotower recommend --user/--users`: an unknown user is refused before the index is opened, as --history's and
--exclude-items' ids are (and as POST /recommend and tt.recommend refuse it, before any work)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("idsfirst"))


def _refused(capsys, run_dir: Path, *who: str) -> str:
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", *who]) == 2
    err = capsys.readouterr().err
    assert "ranking with" not in err  # the index was not opened
    return err


def test_an_unknown_id_of_users_is_refused_before_the_index(run_dir, capsys) -> None:
    err = _refused(capsys, run_dir, "--users", "u1,nope")
    assert "error: --users: user 2 of 2: unknown user 'nope' (not among the 40 known users)" in err


def test_an_unknown_user_of_a_users_file_is_refused_before_the_index(run_dir, tmp_path, capsys) -> None:
    f = tmp_path / "users.csv"
    f.write_text("user_id\nu1\nnope\n")
    err = _refused(capsys, run_dir, "--users", str(f))
    assert f"error: file {f}, row 3, column 'user_id': unknown user 'nope'" in err


def test_an_unknown_user_is_refused_before_the_index(run_dir, capsys) -> None:
    err = _refused(capsys, run_dir, "--user", "nope")
    assert "error: --user: unknown user 'nope' (not among the 40 known users)" in err


def test_known_users_are_still_ranked(run_dir, capsys) -> None:
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", "--users", "u1,u2", "--k", "2"]) == 0
    out, err = capsys.readouterr()
    assert "ranking with" in err and [ln.split(",")[0] for ln in out.splitlines()[1:]] == ["u1", "u1", "u2", "u2"]
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", "--user", "u1", "--k", "2"]) == 0
    assert "top 2 for user u1" in capsys.readouterr().out
