"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `recommend --users all --out FILE` or
`similar --items all --out FILE` stops it as Ctrl-C does, and one line says what FILE holds, as `twotower train`
and `twotower index build` say of their folders.

Walk: `kill -TERM` of `twotower recommend --run RUN --users all --k 1500 --out recs.csv` (ML-100K) while it wrote
kept the earlier recs.csv, but the command ended on the spot without a word (status -15) and left
`.recs.csv.tmp-...` (the half-written rows) beside it.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import twotower.pipeline.results_csv as rc
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("bulk_sigterm"))


def _sigterm_mid_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real signal, to this (main) thread, after the first rows reached the temporary file; without a handler
    it would end pytest itself, so that is said instead."""
    real = rc.write_results_csv

    def write_then_term(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        write = args[3]

        def first_block_then_signal(text: str) -> None:
            write(text)
            assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, "SIGTERM would end the process on the spot"
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM did not stop the command")

        return real(*args[:3], first_block_then_signal, **kwargs)

    monkeypatch.setattr(rc, "write_results_csv", write_then_term)


@pytest.mark.parametrize("command", [["recommend", "--users", "all"], ["similar", "--items", "all"]])
def test_sigterm_mid_write_keeps_the_previous_file_and_says_so(run_dir, tmp_path, monkeypatch, capsys, command):
    out = tmp_path / "lists.csv"
    argv = ["-q", *command, "--run", str(run_dir), "--k", "5", "--threads", "1", "--out", str(out)]
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(before) == {"lists.csv", "lists.csv.json"}
    _sigterm_mid_write(monkeypatch)
    capsys.readouterr()
    assert main(argv) == 143  # the shell's status for death by SIGTERM, which schedulers read
    err = capsys.readouterr().err
    assert (f"terminated (SIGTERM): it stopped before {out} was written; the previous {out} and its record "
            "lists.csv.json are kept, intact, as they were") in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file left beside it
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


def test_sigterm_mid_a_first_write_says_no_file_was_saved(run_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "recs.csv"
    _sigterm_mid_write(monkeypatch)
    rc_ = main(["-q", "recommend", "--run", str(run_dir), "--users", "all", "--threads", "1", "--out", str(out)])
    assert rc_ == 143
    assert f"terminated (SIGTERM): it stopped before {out} was written, so no file was saved" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
