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
