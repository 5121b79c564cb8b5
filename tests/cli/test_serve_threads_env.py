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
