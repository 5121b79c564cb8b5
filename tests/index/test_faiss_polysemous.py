"""Every PQ FaissIndex trains skips FAISS's polysemous training, not only an IVF-PQ's.

index_factory turns it on for each PQ it makes; it only reorders codebooks for Hamming-filtered search, which no index
here uses, and its annealing took `index build --index PQ16` on the 1,682 ML-100K demo items 31.6 s instead of 0.1 s.
"""
from __future__ import annotations

import faiss
import numpy as np
import pytest

from twotower.index import FaissIndex
from twotower.index.distributed_build import train_empty_index
from twotower.index.faiss_index import _nested_indexes

#: a PQ at the top, under OPQ, as HNSW storage, as a refine's base and refine index, as an IVF's quantizer
SPECS = ["PQ8", "OPQ4,PQ8x4", "HNSW8,PQ8x4", "PQ8x4,RFlat", "IVF8,PQ8x4,Refine(PQ4x4)", "IVF16(PQ2x4),Flat"]


def _polysemous(index) -> list[str]:
    return [type(one).__name__ for one in _nested_indexes(index) if getattr(one, "do_polysemous_training", False)]


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((600, 32)).astype(np.float32)


@pytest.mark.parametrize("spec", SPECS)
def test_no_pq_inside_a_built_index_trains_for_polysemous_search(vectors, spec):
    assert _polysemous(faiss.index_factory(32, spec, faiss.METRIC_INNER_PRODUCT))  # FAISS's factory turns it on
    built = FaissIndex(spec).build(vectors, np.arange(len(vectors), dtype=np.int64))
    assert _polysemous(built.cpu_index()) == []


def test_the_torchrun_build_skips_it_too(vectors):
    # its index comes back through serialize/deserialize, which drops the flag: compare the trained quantizer's
    # codebook with FAISS's own training of it without polysemous training (with it: the same centroids reordered)
    spec = "IVF16(PQ2x4),Flat"
    plain = faiss.index_factory(32, spec, faiss.METRIC_INNER_PRODUCT)
    for part in _nested_indexes(plain):
        if hasattr(part, "do_polysemous_training"):
            part.do_polysemous_training = False
    plain.train(vectors)
    index, _ = train_empty_index(spec, vectors)

    def codebook(ivf) -> np.ndarray:
        return faiss.vector_to_array(faiss.downcast_index(faiss.extract_index_ivf(ivf).quantizer).pq.centroids)

    assert np.array_equal(codebook(index), codebook(plain))
