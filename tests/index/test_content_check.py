"""The content check of a saved index: a fixed few of its items, read back or searched with the vectors the model
gives them, must agree, so an index of other vectors (another seed's, another checkpoint's) under the run's
fingerprint is refused while every approximate index of the model's own vectors, a coarse PQ too, is not."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.index import ExactIndex, FaissIndex
from twotower.index.content_check import SAMPLE, check_contents, search_k

N, D = 3000, 32


def _embeddings(seed: int) -> np.ndarray:
    """[N, D] unit vectors around 30 centres, as trained item vectors cluster (uniform noise would be no catalogue)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((30, D))
    x = centres[rng.integers(0, 30, N)] + 0.5 * rng.standard_normal((N, D))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _make(kind: str, vectors: np.ndarray):
    ids = np.arange(N)
    if kind == "exact":
        return ExactIndex().build(vectors, ids)
    index = FaissIndex(kind).build(vectors, ids)
    if index.knobs and "nprobe" in index.knobs:
        index.set_search_params(nprobe=1)  # the cheapest setting: recall is not what is checked
    if index.knobs and "efSearch" in index.knobs:
        index.set_search_params(efSearch=16)
    return index


#: every kind of storage: vectors read back (exact, flat, HNSW-flat, a flat refine) or searched (IVF, PQ, SQ)
KINDS = ["exact", "Flat", "HNSW16", "IVF16,PQ8x4,RFlat", "IVF16,Flat", "IVF16,PQ8x4", "PQ4x4", "IVF16,SQ8"]


@pytest.fixture(scope="module")
def own() -> np.ndarray:
    return _embeddings(0)


@pytest.mark.parametrize("kind", KINDS)
def test_an_index_of_the_model_s_own_vectors_agrees(own, kind):
    # PQ4x4 (four 4-bit codes a vector) has recall@10 far below any target, and still finds its items near the top
    assert check_contents(_make(kind, own), lambda rows: own[rows]) is None


@pytest.mark.parametrize("kind", KINDS)
def test_an_index_of_another_seed_s_vectors_is_refused(own, kind):
    why = check_contents(_make(kind, _embeddings(1)), lambda rows: own[rows])
    assert why is not None and f"of {SAMPLE} sampled items" in why


@pytest.mark.parametrize("kind", ["exact", "Flat", "HNSW16", "IVF16,Flat", "IVF16,PQ8x4,RFlat"])
def test_near_vectors_are_refused_where_the_index_keeps_them_exactly(own, kind):
    """Another checkpoint of the same training ranks much alike (its items still find themselves first), but every
    score differs: an index that keeps its vectors (or scores them exactly) is compared on them."""
    rng = np.random.default_rng(2)
    near = own + 0.03 * rng.standard_normal(own.shape).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    why = check_contents(_make(kind, near), lambda rows: own[rows])
    assert why is not None and ("other vectors" in why or "another score" in why), why


def test_the_sample_is_fixed_and_a_subset_index_is_checked_on_its_own_ids(own):
    seen: list[np.ndarray] = []

    def vectors_of(rows: np.ndarray) -> np.ndarray:
        seen.append(np.array(rows))
        return own[rows]

    subset = np.arange(0, N, 3)  # the items in stock, say: an index of some rows is served as it is
    index = ExactIndex().build(own[subset], subset)
    assert check_contents(index, vectors_of) is None and check_contents(index, vectors_of) is None
    assert len(seen) == 2 and np.array_equal(seen[0], seen[1]) and np.isin(seen[0], subset).all()
    assert len(seen[0]) == SAMPLE


def test_a_tiny_index_is_searched_no_deeper_than_a_tenth_of_it():
    assert [search_k(n) for n in (1, 9, 60, 1000, 10**6)] == [1, 1, 6, 50, 50]
