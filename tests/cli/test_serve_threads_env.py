"""`serve --threads` keeps its 1 thread a request when TWOTOWER_THREADS is set, and its --help says so.

Every other command reads TWOTOWER_THREADS when --threads is not given; serve did not, and nothing said it, so a
user who exported TWOTOWER_THREADS=8 for training took the server to be on 8 threads a request. Kept on purpose: one
thread a request is the fastest for single queries computed side by side (--max-concurrency of them).
"""
from __future__ import annotations

from twotower.cli.main import build_parser


def _serve_help() -> str:
    return " ".join(build_parser()._subparsers._group_actions[0].choices["serve"].format_help().split())


def test_serve_help_says_twotower_threads_does_not_apply():
    assert ("--threads THREADS torch/FAISS threads per request (default 1: the fastest for single queries with "
            "--max-concurrency requests computing side by side). TWOTOWER_THREADS, which the other commands read, "
            "does not apply to serve: give --threads N") in _serve_help()


def test_serve_keeps_one_thread_a_request_under_twotower_threads(monkeypatch):
    monkeypatch.setenv("TWOTOWER_THREADS", "3")
    assert build_parser().parse_args(["serve", "--run", "runs/ml"]).threads == 1
    assert build_parser().parse_args(["serve", "--run", "runs/ml", "--threads", "2"]).threads == 2


def _serve_err(capsys, monkeypatch, tmp_path, before: tuple[str, ...] = (), after: tuple[str, ...] = ()) -> str:
    """stderr of `serve` over a run folder that is not there (refused after the start-up lines, before any load)."""
    from twotower.cli import serve_cmd
    from twotower.cli.main import main

    monkeypatch.setattr(serve_cmd, "_bind_port", lambda *a, **k: [])  # no port taken by the test
    assert main([*before, "serve", "--run", str(tmp_path / "nope"), *after]) == 2
    return capsys.readouterr().err


def test_serve_says_it_does_not_read_twotower_threads(capsys, monkeypatch, tmp_path):
    """A user who exported TWOTOWER_THREADS=8 for training saw no sign that serve does not read it."""
    monkeypatch.setenv("TWOTOWER_THREADS", "8")
    err = _serve_err(capsys, monkeypatch, tmp_path)
    assert ("note: TWOTOWER_THREADS=8 is not read by serve; each request computes on --threads 1 "
            "(give --threads N to change it)") in err.splitlines()
    err = _serve_err(capsys, monkeypatch, tmp_path, after=("--threads", "2"))
    assert "note: TWOTOWER_THREADS=8 is not read by serve; each request computes on --threads 2" in err
    assert "TWOTOWER_THREADS" not in _serve_err(capsys, monkeypatch, tmp_path, before=("-q",))  # an information line


def test_serve_says_nothing_of_twotower_threads_when_it_is_unset(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("TWOTOWER_THREADS", raising=False)
    assert "TWOTOWER_THREADS" not in _serve_err(capsys, monkeypatch, tmp_path)
    monkeypatch.setenv("TWOTOWER_THREADS", " ")  # blank counts as unset, as everywhere
    assert "TWOTOWER_THREADS" not in _serve_err(capsys, monkeypatch, tmp_path)


def test_serve_is_not_refused_for_a_twotower_threads_it_does_not_read(capsys, monkeypatch, tmp_path):
    # `TWOTOWER_THREADS=abc twotower serve` was "error: TWOTOWER_THREADS must be an integer ...; unset it or fix it"
    monkeypatch.setenv("TWOTOWER_THREADS", "abc")
    err = _serve_err(capsys, monkeypatch, tmp_path)  # refused for the run folder that is not there, not the variable
    assert "must be an integer" not in err, err
    assert "note: TWOTOWER_THREADS=abc is not read by serve" in err, err
