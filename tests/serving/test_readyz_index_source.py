"""GET /readyz says which index it serves: its folder (relative to the run, or its name: never the server's file
system layout), whether it is the run's own, its kind, and what tells one build from another (meta.json's created,
meta_sha256, twotower_version). It named the model only, so two servers of one model (a rebuilt index, another
`serve --index`) could not be told apart. Keys are only added: those of before are all still there."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.utils.version import installed_version

BEFORE = {"backend", "factory", "params", "count", "dim", "is_exact", "model_fingerprint", "recall"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = build_tiny_run(tmp_path_factory.mktemp("readyz_source"))
    assert main(["-q", "index", "build", "--run", str(run), "--index", "exact"]) == 0
    return run


def _readyz_index(service) -> dict:  # noqa: ANN001 - RecommenderService
    from twotower.serving import create_app

    with TestClient(create_app(service=service)) as client:
        r = client.get("/readyz")
    assert r.status_code == 200
    return r.json()["index"]


def test_the_runs_own_index_is_named_with_its_build(run_dir) -> None:
    from twotower.serving import RecommenderService

    index = _readyz_index(RecommenderService.load(run_dir))
    meta = json.loads((run_dir / "index" / "meta.json").read_text())
    assert BEFORE <= set(index)
    assert index["path"] == "index" and index["in_run"] is True and index["kind"] == "exact"
    assert index["created"] == meta["created"] and index["meta_sha256"] == meta["meta_sha256"]
    assert index["twotower_version"] == installed_version()
    assert str(run_dir) not in json.dumps(index)  # no server path to an unauthenticated client


def test_an_index_elsewhere_is_named_by_its_folder_and_exact_search_by_none(run_dir, tmp_path) -> None:
    from twotower.serving import RecommenderService

    elsewhere = tmp_path / "idx_v2"
    assert main(["-q", "index", "build", "--run", str(run_dir), "--index", "exact", "--out", str(elsewhere)]) == 0
    index = _readyz_index(RecommenderService.load(run_dir, elsewhere))
    assert index["path"] == "idx_v2" and index["in_run"] is False
    assert index["meta_sha256"] == json.loads((elsewhere / "meta.json").read_text())["meta_sha256"]
    assert str(tmp_path) not in json.dumps(index)
    exact = _readyz_index(RecommenderService.load(run_dir, exact=True))
    assert exact["path"] is None and exact["in_run"] is False and exact["kind"] == "exact"
    assert exact["meta_sha256"] is None and BEFORE <= set(exact)


def test_a_worker_says_what_the_parent_says(run_dir, tmp_path) -> None:
    from twotower.serving import RecommenderService, ServiceSettings
    from twotower.serving.workers import WorkerSpec, index_digest, open_shared_service, share_arrays

    service = RecommenderService.load(run_dir)
    share_arrays(service, tmp_path)
    spec = WorkerSpec(shared_dir=str(tmp_path), settings=asdict(ServiceSettings()), run_dir=str(run_dir),
                      fingerprint=service.fingerprint, index_dir=str(run_dir / "index"),
                      index_digest=index_digest(run_dir / "index"))
    assert open_shared_service(spec).readiness()["index"] == service.readiness()["index"]
