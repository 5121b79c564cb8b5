"""index build --seed seeds FAISS's own draws (k-means, PQ codebooks, HNSW levels), not only the query sample."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from twotower.index import FaissIndex, IndexPolicy, autotune
from twotower.index.faiss_index import _nested_indexes

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


#: indexes whose random draws sit inside another index or a transform: a pre-transform's PQ / HNSW, a refine
#: stage's base, an IVF's coarse quantizer (an HNSW graph, a PQ), an HNSW graph's PQ storage, a residual or
#: local-search quantizer, a random rotation, OPQ's start and its PQ
NESTED = ["OPQ4,PQ4x4", "OPQ4,IVF16,PQ4x4", "PCAR8,PQ4x4", "RR16,PQ4x4", "HNSW8,Refine(Flat)", "PCA8,HNSW8",
          "IVF16_HNSW8,Flat", "IVF16(PQ2x4),Flat", "HNSW8,PQ4x4", "RQ2x4", "LSQ2x4", "IVF16,PQ4x4,Refine(PQ8x4)"]
#: those of them with no seeded outer index or IVF, which every seed built alike
UNSEEDED_BEFORE = ["OPQ4,PQ4x4", "PCAR8,PQ4x4", "RR16,PQ4x4", "HNSW8,Refine(Flat)", "PCA8,HNSW8", "RQ2x4", "LSQ2x4"]


@pytest.mark.parametrize("spec", UNSEEDED_BEFORE)
def test_the_seed_reaches_the_indexes_and_transforms_nested_inside(vectors, spec):
    ids = np.arange(len(vectors), dtype=np.int64)

    def build(seed: int) -> str:
        return _digest(FaissIndex(spec, seed=seed).build(vectors, ids))

    # before: only the outer index and its IVF were seeded, so `OPQ4,PQ4x4`, `HNSW8,Refine(Flat)`, `PCA8,HNSW8`, an
    # HNSW coarse quantizer's graph... were the same index whatever --seed said
    assert build(2) == build(2)
    assert build(2) != build(3)


def test_the_seed_chooses_opqs_starting_rotation(vectors):
    ids = np.arange(len(vectors), dtype=np.int64)

    def rotation(seed: int) -> np.ndarray:
        index = FaissIndex("OPQ4,IVF16,Flat", seed=seed).build(vectors, ids).cpu_index()
        opq = faiss.downcast_VectorTransform(faiss.downcast_index(index.index).chain.at(0))
        return faiss.vector_to_array(opq.A)

    # before: OPQ always started from FAISS's rotation drawn with its constant seed 1234
    assert not np.array_equal(rotation(2), rotation(3))
    assert np.array_equal(rotation(2), rotation(2))


def test_the_seed_draws_the_levels_of_an_hnsw_coarse_quantizer(vectors):
    # the `ivf` shortcut's quantizer from 200,000 vectors (IVF{nlist}_HNSW32): its graph's levels were drawn with
    # FAISS's constant whatever the seed; now they differ from that constant's draw for the same centroids
    ids = np.arange(len(vectors), dtype=np.int64)
    index = FaissIndex("IVF64_HNSW8,Flat", seed=5).build(vectors, ids).cpu_index()
    quantizer = faiss.downcast_index(index.quantizer)
    centroids = quantizer.reconstruct_n(0, quantizer.ntotal)
    constant = faiss.IndexHNSWFlat(vectors.shape[1], 8, faiss.METRIC_INNER_PRODUCT)  # FAISS's own level seed
    constant.add(centroids)
    levels = faiss.vector_to_array(quantizer.hnsw.levels)
    assert not np.array_equal(levels, faiss.vector_to_array(constant.hnsw.levels))


@pytest.mark.parametrize("spec", NESTED)
def test_the_default_seed_builds_the_nested_index_faiss_builds(vectors, spec):
    # seed 0 keeps every one of FAISS's constants: the same index as FAISS's own, byte for byte
    ids = np.arange(len(vectors), dtype=np.int64)
    empty = faiss.index_factory(vectors.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
    for part in _nested_indexes(empty):
        if hasattr(part, "do_polysemous_training"):
            part.do_polysemous_training = False  # as FaissIndex.build trains every PQ
    plain = faiss.IndexIDMap2(empty)
    plain.train(vectors)
    plain.add_with_ids(vectors, ids)
    ours = FaissIndex(spec, seed=0).build(vectors, ids)
    if not isinstance(ours.cpu_index(), faiss.IndexIVF):
        assert hashlib.sha256(faiss.serialize_index(plain).tobytes()).hexdigest() == _digest(ours)
    else:
        assert np.array_equal(plain.search(vectors[:20], 10)[1], ours.search(vectors[:20], 10).ids)


def test_an_index_saved_with_a_seed_now_refused_still_loads(vectors, tmp_path):
    # FaissIndex(seed=-1) is refused now (NumPy's generators take none); one built before, whose seed played no
    # part in its build, loads as saved: loading draws nothing
    from twotower.index import load_index

    index = FaissIndex("IVF16,Flat").build(vectors, np.arange(len(vectors), dtype=np.int64))
    index.seed = -1
    index.save(tmp_path / "ix")
    loaded = load_index(tmp_path / "ix")
    assert loaded.seed == -1 and loaded.search(vectors[:2], 3).ids.shape == (2, 3)
