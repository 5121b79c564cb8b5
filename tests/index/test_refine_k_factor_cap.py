"""A refine index's k_factor, set for one k, is capped per search so the base index never fetches more candidates
than the index holds: `set_search_params(k_factor=)` cannot know k, and a k_factor tuned at k=10 searched at k=100
(300 vectors, k_factor 500) asked IVF for 50,000 candidates per query (0.14 s for 5 queries; 0.001 s capped)."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.index import FaissIndex

N = 300


@pytest.mark.parametrize("factory", ["IVF4,PQ4x4,RFlat", "HNSW8,RFlat", "PQ4x4,RFlat"])
def test_k_factor_is_capped_at_the_index_size_and_answers_as_the_whole_index_would(factory, monkeypatch):
    import faiss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 16)).astype(np.float32)
    q = rng.standard_normal((5, 16)).astype(np.float32)
    idx = FaissIndex(factory).build(x, np.arange(N))
    asked = []
    real = faiss.IndexRefineSearchParameters

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        asked.append(kwargs.get("k_factor"))
        return real(*args, **kwargs)

    monkeypatch.setattr(faiss, "IndexRefineSearchParameters", spy)
    idx.set_search_params(k_factor=N / 10)  # k=10 fetches exactly the whole index
    whole = idx.search(q, 10)
    idx.set_search_params(k_factor=10)  # 10 * 10 <= N: the index's own k_factor (HNSW passes it on, deeper)
    asked.clear()
    idx.search(q, 10)
    assert all(f == 10 for f in asked), asked
    idx.set_search_params(k_factor=500)  # tuned for k=10, searched at k=10 and k=100: past the index's size
    asked.clear()
    capped = idx.search(q, 10)
    assert asked and max(asked) <= (N + 0.5) / 10, asked  # 10 * k_factor candidates: the whole index, no more
    asked.clear()
    idx.search(q, 100)
    assert asked and max(asked) <= (N + 0.5) / 100, asked
    assert np.array_equal(capped.ids, whole.ids) and np.array_equal(capped.scores, whole.scores)
