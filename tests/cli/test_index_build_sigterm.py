"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `twotower index build` stops it as Ctrl-C does, and
one line says what the index folder holds, as `twotower train` says what its run folder holds.

Walk: `kill -TERM` of `twotower index build --run RUN --index hnsw` while it built (ML-100K) kept RUN/index byte for
byte, but the command ended on the spot without a word (Python's default for SIGTERM), status -15, so the user could
not tell whether the earlier index was still there or half replaced.
"""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

import twotower.pipeline.index_build as ib
from tests.real_sigterm import send_sigterm, files_of
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("index_sigterm"))


def test_sigterm_during_index_build_says_the_previous_index_is_kept(run_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "idx"
    build = ["-q", "index", "build", "--run", str(run_dir), "--index", "flat", "--threads", "1", "--out", str(out)]
    assert main(build) == 0
    before = files_of(out)
    monkeypatch.setattr(ib, "plot_recall_qps", send_sigterm)
    capsys.readouterr()
    assert main(build) == 143  # the shell's status for death by SIGTERM, which schedulers read
    err = capsys.readouterr().err
    assert f"terminated (SIGTERM): the build stopped before {out} was written; the previous index there is kept" in err
    assert files_of(out) == before
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]  # the new index's temporary folder is gone
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


def test_sigterm_during_a_first_build_says_no_index_was_saved(run_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "idx"
    monkeypatch.setattr(ib, "plot_recall_qps", send_sigterm)
    rc = main(["-q", "index", "build", "--run", str(run_dir), "--index", "flat", "--threads", "1", "--out", str(out)])
    assert rc == 143
    assert f"terminated (SIGTERM): the build stopped before {out} was written, so no index was saved" in (
        capsys.readouterr().err)
    assert not out.exists()
