"""/similar-items of a dual-head run: an item without training interactions is queried by its semantic head.

Its mixed vector is half a collaborative head that read a zero ID vector, the same for every cold item, so
its neighbours were other cold items (bench/cold_similar.py); warm items keep their served vectors.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from tests.serving.cold_runs import dual_head_with_cold

COLD, TWIN = "i7", "i30"  # COLD loses its training rows and gets TWIN's text
COLD_TOO = ("i11", "i12", "i13")  # more cold items, which share COLD's collaborative vector


@pytest.fixture(scope="module")
def dual_run(run_dir: Path):
    """The tiny run with a dual-head item tower (random text) whose COLD and COLD_TOO items have no training rows."""
    return dual_head_with_cold(run_dir, (COLD, *COLD_TOO), same_text=(COLD, TWIN))


def _service(run, **settings):
    from twotower.index.exact import ExactIndex
    from twotower.serving import RecommenderService, ServiceSettings

    vectors = run.item_embeddings()
    index = ExactIndex().build(vectors, np.arange(run.n_items))
    return RecommenderService(run, index, settings=ServiceSettings(**settings))


def _ranking(run, query: np.ndarray, item: str, k: int) -> list[str]:
    """The ``k`` items of the largest inner product with ``query``, ``item`` left out, by id."""
    s = run.item_embeddings() @ query
    s[run.item_vocab.index(item)] = -np.inf
    return [run.item_vocab.id_at(int(j)) for j in np.argsort(-s, kind="stable")[:k]]


def _vector(run, item: str) -> np.ndarray:
    return run.item_embeddings()[run.item_vocab.index(item)]


def test_a_cold_item_is_queried_by_its_semantic_head(dual_run) -> None:
    service = _service(dual_run)
    got = service.similar_items(COLD, 10)
    assert got["query_space"] == "semantic"
    with torch.no_grad():
        rows = torch.tensor([dual_run.item_vocab.index(COLD)])
        sem = dual_run.model.item_tower.forward_heads(rows)[1].semantic.numpy()[0]
    assert [it["item_id"] for it in got["items"]] == _ranking(dual_run, sem, COLD, 10)
    # what the mixed vector gave (the behaviour before) is another list: the test tells the two apart
    assert _ranking(dual_run, _vector(dual_run, COLD), COLD, 10) != [it["item_id"] for it in got["items"]]
    assert got["items"][0]["item_id"] == TWIN  # the item of the same text


def test_the_old_behaviour_is_a_setting(dual_run) -> None:
    got = _service(dual_run, cold_similar="item").similar_items(COLD, 10)
    assert got["query_space"] == "item"
    assert [it["item_id"] for it in got["items"]] == _ranking(dual_run, _vector(dual_run, COLD), COLD, 10)


@pytest.mark.parametrize("item", ["i0", TWIN, "i59"])
def test_warm_items_are_unchanged(dual_run, item: str) -> None:
    new = _service(dual_run).similar_items(item, 10)
    old = _service(dual_run, cold_similar="item").similar_items(item, 10)
    assert new == old and new["query_space"] == "item"
    assert [it["item_id"] for it in new["items"]] == _ranking(dual_run, _vector(dual_run, item), item, 10)


def test_http_says_which_space(dual_run) -> None:
    from twotower.serving import create_app

    service = _service(dual_run)
    with TestClient(create_app(service=service, settings=service.settings)) as client:
        cold = client.post("/similar-items", json={"item_id": COLD, "k": 5}).json()
        warm = client.post("/similar-items", json={"item_id": "i0", "k": 5}).json()
    assert cold["query_space"] == "semantic" and warm["query_space"] == "item"
    assert [it["item_id"] for it in cold["items"]] == [it["item_id"] for it in service.similar_items(COLD, 5)["items"]]


def test_a_single_head_run_queries_every_item_by_its_vector(service) -> None:
    assert service.cold_items is None
    assert service.similar_items("i0", 3)["query_space"] == "item"


def test_the_setting_is_checked() -> None:
    from twotower.errors import ConfigError
    from twotower.serving import ServiceSettings

    with pytest.raises(ConfigError, match="cold_similar must be one of semantic, item, got 'mixed'"):
        ServiceSettings(cold_similar="mixed")


def test_a_dual_head_without_an_id_embedding_queries_cold_items_by_their_mixed_vector(dual_run) -> None:
    """With model.item.use_id=false the collaborative head reads a cold item's features as a warm one's (no zero ID
    vector shared by every cold item), so the reason to query by the semantic head does not hold, and the mixed
    vector keeps what the features say."""
    from types import SimpleNamespace

    from twotower.pipeline.similar import cold_item_mask

    assert cold_item_mask(dual_run) is not None  # with an ID embedding: the semantic head for cold items
    tower = dual_run.model.item_tower
    no_id = SimpleNamespace(model=SimpleNamespace(item_tower=SimpleNamespace(semantic=tower.semantic, id_emb=None)))
    assert cold_item_mask(no_id) is None  # every item queried by its served (mixed) vector
