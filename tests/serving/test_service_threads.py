"""A service computes on its own thread counts (``ServiceSettings.threads``) and gives its host's back: after
``RecommenderService.load``, after each of its calls, and when a ``create_app`` app stops.

Before, the load set torch's, FAISS's and the BLAS pools' counts to the service's for the rest of the host's
process (torch 2 -> 1 after ``RecommenderService.load``; BLAS 2 -> 1 after an app had started and stopped), and
each thread's first request did so again.
"""
from __future__ import annotations

import asyncio

import faiss
import httpx
import pytest
import threadpoolctl
import torch

from twotower.serving import RecommenderService, ServiceSettings, create_app
from twotower.serving.service import RecRequest


def thread_counts() -> dict:
    import scipy.linalg  # noqa: F401  -- its OpenBLAS among the pools compared

    pools = {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}
    return {"torch": torch.get_num_threads(), "faiss": faiss.omp_get_max_threads(), **pools}


@pytest.fixture
def host_threads():
    """The host's own counts, 2 everywhere (the service asks for 1; OpenBLAS set past the cores, 3 on 2, kept 3 where
    another thread then asked for 1); the suite's counts back afterwards."""
    import scipy.linalg  # noqa: F401

    before_torch, before_faiss = torch.get_num_threads(), faiss.omp_get_max_threads()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        torch.set_num_threads(2)
        faiss.omp_set_num_threads(2)
        yield thread_counts()
    faiss.omp_set_num_threads(before_faiss)
    torch.set_num_threads(before_torch)


def seen_while_searching(service: RecommenderService, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The counts in force each time the service's index searches."""
    seen: list[dict] = []
    search = service.index.search

    def counting(*args, **kwargs):
        seen.append(thread_counts())
        return search(*args, **kwargs)

    monkeypatch.setattr(service.index, "search", counting)
    return seen


def test_a_load_and_its_calls_compute_on_the_service_counts_and_give_the_hosts_back(run_dir, host_threads,
                                                                                     monkeypatch) -> None:
    service = RecommenderService.load(run_dir, settings=ServiceSettings(threads=1))
    assert thread_counts() == host_threads
    seen = seen_while_searching(service, monkeypatch)
    service.recommend(RecRequest(user_id=service.run.user_vocab.ids[0], k=3))
    service.similar_items(service.run.item_vocab.ids[0], 3)
    assert thread_counts() == host_threads
    assert seen and all(set(counts.values()) == {1} for counts in seen)


def test_an_app_serves_on_the_service_counts_and_gives_the_hosts_back_when_it_stops(run_dir, host_threads,
                                                                                      monkeypatch) -> None:
    # started and stopped in this (main) thread, as `uvicorn.run(app)` in a host's script runs its lifespan
    app = create_app(run_dir, settings=ServiceSettings(threads=1))
    seen: list[dict] = []

    async def serve() -> None:
        async with app.router.lifespan_context(app):
            seen.extend([thread_counts()])
            requests = seen_while_searching(app.state.service, monkeypatch)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
                for _ in range(2):  # the second request in a worker thread the first one used
                    got = await client.post("/similar-items",
                                            json={"item_id": app.state.service.run.item_vocab.ids[0], "k": 3})
                    assert got.status_code == 200, got.text
            seen.extend(requests)

    asyncio.run(serve())
    assert thread_counts() == host_threads
    assert len(seen) == 3 and set(seen[0].values()) == {1}  # while the app serves, the service's counts
    # the requests' own threads' counts (OpenBLAS keeps a count its process's main thread set, whichever other
    # thread sets another)
    assert [(counts["torch"], counts["faiss"]) for counts in seen[1:]] == [(1, 1), (1, 1)]
