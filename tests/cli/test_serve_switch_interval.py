"""`twotower serve` hands the interpreter lock round quickly (serving/settings.SWITCH_INTERVAL_S), in its own process
and in each worker: /healthz runs on the event loop's thread beside requests computing on worker threads, and at
Python's default 5 ms interval it waited up to 409-431 ms behind a 256-batch of k=1000 explained answers (65 ms
now; `python bench/bounded_work.py`).
"""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

import twotower.serving
from twotower.cli import serve_cmd
from twotower.cli.main import main
from twotower.errors import ConfigError
from twotower.serving import search_service, workers
from twotower.serving.settings import SWITCH_INTERVAL_S


@pytest.fixture
def intervals(monkeypatch) -> list[float]:
    said: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", said.append)  # the test process's own interval untouched
    return said


def test_serve_sets_the_switch_interval_before_serving(monkeypatch, tmp_path, intervals):
    served: list[float] = []
    monkeypatch.setattr(search_service.SearchService, "load",
                        staticmethod(lambda *a, **k: SimpleNamespace(reranker=None)))
    monkeypatch.setattr(twotower.serving, "create_app", lambda **kwargs: object())
    monkeypatch.setattr(serve_cmd, "_serve_on", lambda *a, **k: served.append(list(intervals)))
    monkeypatch.setattr(serve_cmd, "_bind_port", lambda *a, **k: [])
    assert main(["-q", "serve", "--search-index", str(tmp_path), "--port", "8123"]) == 0
    assert served == [[SWITCH_INTERVAL_S]] and SWITCH_INTERVAL_S < 0.005  # below Python's default


def test_each_worker_sets_it_too(monkeypatch, intervals):
    monkeypatch.setattr(workers, "exit_with_parent", lambda **kw: None)
    monkeypatch.delenv(workers.SPEC_ENV, raising=False)
    with pytest.raises(ConfigError, match="worker processes are started by"):
        workers.worker_app()
    assert intervals == [SWITCH_INTERVAL_S]

