"""A Ctrl-C that stops `twotower serve --workers N` ends with the line every other command ends with, "interrupted"
(cli.main prints it, the single-process server's included), and 130. The workers' supervisor exited 130 without a
word."""
from __future__ import annotations

import signal
from dataclasses import asdict

import pytest

import twotower.serving.workers as workers
from twotower.serving.settings import ServiceSettings


def _stopped(*_: object, **__: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("run", [lambda *a, **k: signal.SIGINT, _stopped],
                         ids=["once-serving", "before-uvicorn-catches-it"])
def test_ctrl_c_says_interrupted(tmp_path, monkeypatch, capsys, run):
    shared = tmp_path / "twotower-serve-shared"
    shared.mkdir()
    spec = workers.WorkerSpec(shared_dir=str(shared), settings=asdict(ServiceSettings())).write()
    monkeypatch.setattr(workers, "run_workers", run)
    assert workers._supervise_main([str(spec), "2", "warning", "30"]) == 130
    assert capsys.readouterr().err.splitlines()[-1:] == ["interrupted"]
    assert not shared.exists()
