"""Fixtures: one tiny trained run per session, its loaded service, and clients over the real app."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from tiny_run import DUP_TITLES, build_tiny_run  # noqa: I001 - helper next to this file


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def dup_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run with three items titled "Movie 0" (:data:`DUP_TITLES`), as MovieLens has 18 shared titles."""
    return build_tiny_run(tmp_path_factory.mktemp("tiny_dup"), retitle=DUP_TITLES)


@pytest.fixture(scope="session")
def unplaced_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run with 4 more items ``x0..x3`` never in training: its ID-only item tower gives them a zero vector."""
    return build_tiny_run(tmp_path_factory.mktemp("tiny_unplaced"), unplaced=4)


@pytest.fixture(scope="session")
def service(run_dir: Path):
    from twotower.serving import RecommenderService

    return RecommenderService.load(run_dir)


@pytest.fixture()
def make_client(service):
    """``make_client(**settings)`` -> a TestClient over a fresh app (lifespan run) sharing the loaded service."""
    from twotower.serving import ServiceSettings, create_app

    stack = contextlib.ExitStack()

    def make(**settings) -> TestClient:
        app = create_app(service=service, settings=ServiceSettings(**settings))
        return stack.enter_context(TestClient(app))

    with stack:
        yield make


@pytest.fixture()
def client(make_client) -> Iterator[TestClient]:
    yield make_client()
