"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `twotower data split` stops it as Ctrl-C does: the
temporaries of the new split are removed, one line says what --out holds, status 143, as `index build` has it.

Walk: `kill -TERM` of `twotower data split --dataset movielens-100k --out sp` while it wrote ended on the spot without
a word, status -15, and could leave `.train.csv.tmp-...` and its siblings (the new split, in full) beside the earlier one.
"""
from __future__ import annotations

import contextlib
import os
import signal

import twotower.utils.atomic as atomic
from tests.synthetic import write_dataset
from twotower.cli.main import main


@contextlib.contextmanager
def _sigterm_before_the_moves():
    # the real signal, to this (main) thread, once every file of the new split is written to its temporary; without
    # a handler it would end pytest itself, so that is said instead
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, "SIGTERM would end the process on the spot"
    os.kill(os.getpid(), signal.SIGTERM)
    raise AssertionError("SIGTERM did not stop the command")
    yield  # a generator, for contextmanager


def _files(folder) -> dict[str, bytes]:  # noqa: ANN001
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != ".twotower.lock"}


def test_sigterm_mid_split_keeps_the_previous_split_and_says_so(tmp_path, monkeypatch, capsys):
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    argv = ["-q", "data", "split", "--input", str(paths["all"]), "--out", str(out)]
    assert main([*argv, "--ratios", "0.6,0.2,0.2"]) == 0
    before = _files(out)
    monkeypatch.setattr(atomic, "signals_deferred", _sigterm_before_the_moves)
    capsys.readouterr()
    assert main([*argv, "--ratios", "0.8,0.1,0.1"]) == 143  # the shell's status for death by SIGTERM
    assert (f"terminated (SIGTERM): it stopped before the split was written into {out}; the previous split there is "
            "kept, intact, as it was; run the command again to replace it") in capsys.readouterr().err
    assert _files(out) == before  # and no temporary file is left beside it
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


def test_sigterm_mid_a_first_split_says_no_file_was_saved(tmp_path, monkeypatch, capsys):
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    monkeypatch.setattr(atomic, "signals_deferred", _sigterm_before_the_moves)
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(out)]) == 143
    assert (f"terminated (SIGTERM): it stopped before the split was written into {out}, so no file was saved"
            in capsys.readouterr().err)
    assert not out.exists()  # nor a temporary file of the split
