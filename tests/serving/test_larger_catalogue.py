"""A service over a catalogue larger than the run's items, as bench/serve_load.py and bench/soak.py build it (a
synthetic catalogue around the run's item vectors): every /recommend answered 500 with "IndexError: index 4015 is
out of bounds for axis 0 with size 500", since the mask of the items the model cannot place was sized to the run."""
from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient


def test_recommend_and_items_past_the_runs_rows(service) -> None:
    from twotower.index import ExactIndex
    from twotower.serving import ItemCatalog, RecommenderService, create_app

    run = service.run
    extra = 3 * run.n_items
    rng = np.random.default_rng(0)
    vectors = np.concatenate([service.item_vectors, rng.normal(size=(extra, service.item_vectors.shape[1]))]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    n = len(vectors)
    catalog = ItemCatalog([f"s{r}" for r in range(n)], {"title": [f"Synthetic item {r}" for r in range(n)]})
    svc = RecommenderService(run, ExactIndex().build(vectors, np.arange(n)), catalog=catalog, item_vectors=vectors,
                             user_vectors=service.user_vectors)
    user = run.user_vocab.id_at(0)
    with TestClient(create_app(service=svc)) as client:
        r = client.post("/recommend", json={"user_id": user, "k": n // 2})
        assert r.status_code == 200, r.text
        rows = [int(it["item_id"][1:]) for it in r.json()["items"]]
        assert max(rows) >= run.n_items and "warnings" not in r.json()  # the synthetic rows are ranked, unflagged
        item = client.get(f"/items/s{n - 1}")
        assert item.status_code == 200 and "warnings" not in item.json()
