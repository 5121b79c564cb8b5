"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) stops the commands that only read and print as it stops
those that write files: one line, "terminated (SIGTERM)", and the shell's status for death by the signal (143),
no traceback.

Walk: `kill -TERM` of `twotower explain ...`, `twotower index info ...` or `twotower search query ...` while it
loaded ended Python on the spot, without a word (status -15), where `recommend` and `evaluate` said
"terminated (SIGTERM)" and exited 143. `serve` stopped while it loaded the run did the same.
"""
from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.real_sigterm import send_sigterm
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("read_only_sigterm"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stopped_as_the_others(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(argv) == 143  # the shell's status for death by SIGTERM, which schedulers read
    err = capsys.readouterr().err
    assert err.splitlines()[-1:] == ["terminated (SIGTERM)"], err
    assert "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


@pytest.mark.parametrize("command", [
    ["explain", "--run", "RUN", "--user", "1", "--item", "1", "--threads", "1"],
    ["index", "info", "--run", "RUN"],
    ["recommend", "--run", "RUN", "--user", "1", "--threads", "1"],  # these two said it already
    ["similar", "--run", "RUN", "--item", "1", "--threads", "1"],
])
def test_sigterm_while_a_read_only_command_loads_the_run(run_dir, monkeypatch, capsys, command):
    monkeypatch.setattr(TrainedRun, "load", send_sigterm)
    _stopped_as_the_others(["-q", *(str(run_dir) if a == "RUN" else a for a in command)], capsys)


def test_sigterm_while_search_query_loads_its_index(tmp_path, monkeypatch, capsys):
    from twotower.search.pipeline import SearchIndex

    monkeypatch.setattr(SearchIndex, "load", send_sigterm)
    _stopped_as_the_others(["-q", "search", "query", "--index", str(tmp_path), "a query"], capsys)


def test_sigterm_while_serve_loads_the_run(run_dir, monkeypatch, capsys):
    from twotower.serving import RecommenderService

    monkeypatch.setattr(RecommenderService, "load", send_sigterm)
    _stopped_as_the_others(["-q", "serve", "--run", str(run_dir), "--port", str(_free_port())], capsys)
