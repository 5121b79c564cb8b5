"""index build --seed seeds FAISS's own draws (k-means, PQ codebooks, HNSW levels), not only the query sample."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from twotower.index import FaissIndex, IndexPolicy, autotune

faiss = pytest.importorskip("faiss")


def _digest(index: FaissIndex) -> str:
    return hashlib.sha256(faiss.serialize_index(index._index).tobytes()).hexdigest()


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1500, 16)).astype(np.float32)


@pytest.mark.parametrize("spec", ["IVF16,Flat", "IVF16,PQ4x4", "HNSW8"])
def test_the_seed_chooses_the_index_and_the_same_seed_gives_the_same_bytes(vectors, spec):
    ids = np.arange(len(vectors), dtype=np.int64)

    def build(seed: int) -> str:
        return _digest(FaissIndex(spec, seed=seed).build(vectors, ids))

    # before: FAISS's constant seeds (k-means 1234, HNSW 12345) made every seed build the same index
    assert build(0) == build(0)
    assert build(0) != build(1)


@pytest.mark.parametrize("spec", ["IVF16,Flat", "IVF16,PQ4x4", "HNSW8"])
def test_the_default_seed_builds_the_index_faiss_built_before_it_was_seeded(vectors, spec):
    # indexes (and the benchmark record) built before --seed reached FAISS rebuild byte for byte at seed 0
    ids = np.arange(len(vectors), dtype=np.int64)
    plain = faiss.index_factory(vectors.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
    plain.train(vectors)
    plain.add(vectors)
    ours = FaissIndex(spec, seed=0).build(vectors, ids)
    query = vectors[:20]
    want, got = plain.search(query, 10)[1], ours.search(query, 10).ids
    assert np.array_equal(want, got)


def test_autotune_builds_with_the_policys_seed_and_records_it(vectors):
    ids = np.arange(len(vectors), dtype=np.int64)
    queries = vectors[:50]
    report = autotune(vectors, ids, queries, index="ivf", policy=IndexPolicy(seed=7, exact_p99_ms=0.0, k=5))
    # before: the candidates were built with seed 0 whatever --seed said, and meta.json recorded 0
    assert report.index.seed == 7
    assert report.index._build_params["seed"] == 7


@pytest.mark.parametrize("spec", ["IVF16,Flat", "IVF16,PQ4x4"])
def test_the_distributed_build_is_seeded_as_the_one_process_build(vectors, spec):
    from twotower.index.distributed_build import build_index_distributed

    ids = np.arange(len(vectors), dtype=np.int64)

    def build(seed: int) -> str:  # one rank, no process group: rank 0's training and the plain streaming add
        chunks = lambda rank, world: [(ids[s:s + 500], vectors[s:s + 500]) for s in range(0, len(ids), 500)]
        return _digest(build_index_distributed(chunks, spec, vectors, seed=seed))

    # before: train_empty_index left FAISS's constant k-means seed, so `index build --seed` under torchrun chose
    # nothing but the query sample
    assert build(3) == build(3)
    assert build(3) != build(0)
    for seed in (0, 3):  # the same trained quantizer and codes as one process with the same seed
        assert build(seed) == _digest(FaissIndex(spec, seed=seed).build(vectors, ids))
