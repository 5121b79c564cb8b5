"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `twotower data fetch` stops it as Ctrl-C does: the
new copy's temporary folder is removed, one line says what --dest holds, status 143, as `export` has it.

Walk: `kill -TERM` of `twotower data fetch movielens-100k --source ... --dest mlcopy` while it copied and verified ended
on the spot without a word, status -15 (a download is minutes of it, with its temporary folder beside --dest).
"""
from __future__ import annotations

import signal

import twotower.data.movielens as movielens
from tests.real_sigterm import send_sigterm
from twotower.cli.main import main


def test_sigterm_mid_fetch_keeps_the_previous_copy_and_says_so(tmp_path, monkeypatch, capsys):
    source = tmp_path / "source"
    source.mkdir()
    for name in movielens.RECBOLE_FILES:  # what is copied; verifying it gets the signal
        (source / name).write_text("x\n")
    dest = tmp_path / "ml"
    dest.mkdir()
    (dest / movielens.MANIFEST).write_text("{}")  # an earlier copy
    monkeypatch.setattr(movielens, "_verify_folder", send_sigterm)
    argv = ["-q", "data", "fetch", "movielens-100k", "--source", str(source), "--dest", str(dest)]
    assert main(argv) == 143  # the shell's status for death by SIGTERM, which schedulers read
    assert (f"terminated (SIGTERM): it stopped before {dest} was written; the previous output there is kept, intact, "
            "as it was; run the command again to replace it") in capsys.readouterr().err
    assert [p.name for p in dest.iterdir()] == [movielens.MANIFEST]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["ml", "source"]  # no .tmp
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command
