"""Fixtures for index tests: small seeded catalogues with known structure."""
from __future__ import annotations

import numpy as np
import pytest
from index_data import clustered, normalise

faiss = pytest.importorskip("faiss")
faiss.omp_set_num_threads(1)  # 2 shared cores: one FAISS thread keeps tests fast and quiet


@pytest.fixture(scope="session")
def catalogue() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors[2000, 16], ids[2000] non-contiguous, queries[25, 16]) from 20 clusters, seed 0."""
    x, centres = clustered(2000, 16, 20, seed=0)
    rng = np.random.default_rng(1)
    ids = rng.permutation(10_000)[:2000].astype(np.int64) * 7 + 3  # caller ids, not row numbers
    q = normalise(centres[rng.integers(0, 20, 25)] + 0.5 / 4 * rng.standard_normal((25, 16)))
    return x, ids, q
