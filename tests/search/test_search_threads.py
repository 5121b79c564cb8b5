"""POST /search computes on ``--threads`` (``ServiceSettings.threads``) torch threads, as `twotower search query
--threads` does. A search-only server set no thread count at all: torch used every core, so `serve --search-index`
ignored its ``--threads 1`` default and its dense scores differed from `search query`'s in the 6th decimal
(0.521469 against 0.521468 on 2 cores)."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from twotower.serving import ServiceSettings, create_app
from twotower.utils.runtime import restored_threads


class _Index:
    """Stands in for a loaded SearchIndex: records torch's thread count when it is searched."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def search(self, *args, **kwargs):
        import torch

        self.threads.append(torch.get_num_threads())
        raise _Searched


class _Searched(Exception):
    pass


@pytest.mark.parametrize("threads", [1, 2])
def test_post_search_computes_on_the_settings_threads(tmp_path, threads):
    import torch

    from twotower.serving.search_service import SearchService

    index = _Index()
    service = SearchService(index=index, reranker=None, index_dir=tmp_path)  # type: ignore[arg-type]
    app = create_app(search_service=service, settings=ServiceSettings(threads=threads))
    with restored_threads():
        torch.set_num_threads(3)  # the count torch picks by itself on a 3-core machine
        with TestClient(app, raise_server_exceptions=False) as client:
            client.post("/search", json={"query": "vitamin d", "mode": "bm25"})
    assert index.threads == [threads]


def test_serve_loads_the_search_index_on_its_threads(tmp_path, monkeypatch):
    """`serve --search-index` warms the index up (one search, reranked with --rerank) on ``--threads``, the count its
    requests compute on: the warm-up measured the cross-encoder on every core."""
    import torch

    from twotower.cli import serve_cmd
    from twotower.cli.main import build_parser
    from twotower.serving import search_service

    class Stop(Exception):
        pass

    seen: list[int] = []

    def fake_load(index_dir, rerank_dir=None, *, rerank_settings=None):
        seen.append(torch.get_num_threads())
        raise Stop

    monkeypatch.setattr(search_service.SearchService, "load", staticmethod(fake_load))
    monkeypatch.setattr(serve_cmd, "_bind_port", lambda *a, **k: [])
    args = build_parser().parse_args(["serve", "--search-index", str(tmp_path), "--threads", "2"])
    with restored_threads():
        torch.set_num_threads(3)
        with pytest.raises(Stop):
            serve_cmd.cmd_serve(args)
    assert seen == [2]
