"""``tt.create_app(tt.TrainedRun.load(RUN))`` serves the loaded run as it is (it crashed at startup with pathlib's
"expected str, bytes or os.PathLike object, not TrainedRun"), answering what ``create_app(RUN)`` answers; anything
else than a folder or a loaded run is refused at once with a ConfigError naming ``run_dir``."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import twotower as tt
from twotower.errors import ConfigError


def test_a_loaded_run_is_served_as_the_folder_is(run_dir) -> None:
    run = tt.TrainedRun.load(run_dir)
    body = {"history": [run.item_vocab.ids[0], run.item_vocab.ids[1]], "k": 5}
    with TestClient(tt.create_app(run)) as loaded, TestClient(tt.create_app(run_dir)) as folder:
        got = loaded.post("/recommend", json=body)
        want = folder.post("/recommend", json=body)
        assert got.status_code == 200, got.text
        assert got.json()["items"] == want.json()["items"]
        assert loaded.app.state.service.run is run  # not read again


def test_anything_else_is_refused_naming_run_dir() -> None:
    with pytest.raises(ConfigError, match="run_dir: a run folder .* not dict"):
        tt.create_app({"run": "runs/ml"})


def test_a_client_that_never_started_the_app_is_told_so_not_that_it_is_loading(run_dir) -> None:
    # TestClient(app) outside a `with` block never runs the lifespan: every request said "the service is still
    # loading" (of a run already loaded in memory, too), a wait for a load that would never come
    run = tt.TrainedRun.load(run_dir)
    got = TestClient(tt.create_app(run)).post("/recommend", json={"history": [run.item_vocab.ids[0]], "k": 3})
    assert got.status_code == 503
    assert "has not started" in got.text and "with TestClient(app) as client:" in got.text
    with TestClient(tt.create_app(run)) as started:
        assert started.post("/recommend", json={"history": [run.item_vocab.ids[0]], "k": 3}).status_code == 200
