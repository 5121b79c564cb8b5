"""Every FAISS search sets the brute-force path for its own batch, not the one the previous search left."""
import faiss
import numpy as np
import pytest

from twotower.index.exact import BLAS_MIN_QUERIES, ExactIndex
from twotower.index.faiss_index import FaissIndex


@pytest.mark.parametrize("factory", ["Flat", "IVF4,Flat"])
def test_a_batch_after_a_single_query_takes_sgemm(factory):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, 8)).astype(np.float32)
    ids = np.arange(400)
    exact = ExactIndex().build(vectors, ids)
    index = FaissIndex(factory).build(vectors, ids)
    batch = vectors[:BLAS_MIN_QUERIES]

    exact.search(vectors[:1], 5)  # one query: the SIMD loop, a process-wide setting
    single = faiss.cvar.distance_compute_blas_threshold
    index.search(batch, 5)
    assert faiss.cvar.distance_compute_blas_threshold <= BLAS_MIN_QUERIES < single
    index.search(vectors[:1], 5)  # and a single query after a batch goes back to the SIMD loop
    assert faiss.cvar.distance_compute_blas_threshold == single


def test_ivf_training_and_adding_take_sgemm_after_a_single_query(monkeypatch):
    """k-means and list assignment are flat searches too: 2.7x slower on the SIMD loop (IVF1024, 200K x 64)."""
    seen: dict[str, int] = {}
    for name in ("train", "add_with_ids"):
        original = getattr(faiss.IndexIVFFlat, name)

        def spy(self, *args, _name=name, _original=original):
            seen[_name] = faiss.cvar.distance_compute_blas_threshold
            return _original(self, *args)

        monkeypatch.setattr(faiss.IndexIVFFlat, name, spy)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, 8)).astype(np.float32)
    ExactIndex().build(vectors, np.arange(400)).search(vectors[:1], 5)  # leaves the SIMD setting
    FaissIndex("IVF4,Flat").build(vectors, np.arange(400))
    assert seen["train"] <= BLAS_MIN_QUERIES and seen["add_with_ids"] <= BLAS_MIN_QUERIES
