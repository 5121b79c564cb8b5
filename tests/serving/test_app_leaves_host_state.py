"""An app served inside a host's process (``TestClient``, a notebook, the host's own uvicorn) leaves that process
as it found it once it stops.

Its startup froze every object then alive (``gc.freeze``: a full collection no longer walks the loaded run
mid-request) and never thawed them: the host's own garbage from before the start was never collected again (a
200 MB self-referencing object outlived ``gc.collect()``), nor the stopped apps' cycles (RSS +8 MB a start/stop).
"""
from __future__ import annotations

import gc
import weakref

from fastapi.testclient import TestClient

from twotower.serving import create_app


class _Host:
    """A host's object in a reference cycle: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_the_hosts_garbage_from_before_the_start_is_collected_after_the_stop(run_dir) -> None:
    assert gc.get_freeze_count() == 0
    host = _Host()
    gone = weakref.ref(host)
    with TestClient(create_app(run_dir)) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 0  # while serving, the loaded run is out of the collector's reach
    assert gc.get_freeze_count() == 0
    del host
    gc.collect()
    assert gone() is None


def test_the_objects_stay_frozen_while_another_app_still_serves(run_dir, service) -> None:
    with TestClient(create_app(service=service)) as second:
        with TestClient(create_app(run_dir)):
            pass
        assert gc.get_freeze_count() > 0
        assert second.get("/healthz").status_code == 200
    assert gc.get_freeze_count() == 0


def test_a_stopped_app_holds_no_run_it_loaded_and_loads_it_again_at_a_restart(run_dir, service) -> None:
    app = create_app(run_dir)
    with TestClient(app):
        loaded = weakref.ref(app.state.service)
    assert app.state.service is None
    gc.collect()
    assert loaded() is None
    with TestClient(app) as client:
        got = client.post("/recommend", json={"history": [service.run.item_vocab.ids[0]], "k": 3})
        assert got.status_code == 200, got.text
    given = create_app(service=service)  # a service the host loaded stays the host's
    with TestClient(given):
        pass
    assert given.state.service is service
