"""load_index(mmap=True): the stored vectors / FAISS codes are mapped read-only, and search is unchanged."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twotower.index import ExactIndex, FaissIndex, load_index


def _vectors(n: int = 500, d: int = 16) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("make, stored", [(lambda: ExactIndex(), "vectors.npy"),
                                          (lambda: FaissIndex("Flat"), "index.faiss"),
                                          (lambda: FaissIndex("IVF4,Flat", nprobe=4), "index.faiss")])
def test_mmap_load_maps_the_file_and_searches_the_same(tmp_path, make, stored):
    x = _vectors()
    ids = np.arange(1000, 1000 + len(x))
    make().build(x, ids).save(tmp_path / "ix", model_fingerprint="fp")
    plain = load_index(tmp_path / "ix", expected_fingerprint="fp")
    mapped = load_index(tmp_path / "ix", expected_fingerprint="fp", mmap=True)
    maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").is_file() else None
    if maps is not None:
        assert str(tmp_path / "ix" / stored) in maps
    q = x[:7] + 0.01
    exclude = [np.asarray([1000 + i]) for i in range(7)]
    a, b = plain.search(q, 10, exclude=exclude), mapped.search(q, 10, exclude=exclude)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.scores, b.scores)


def test_exact_over_shares_the_caller_arrays():
    x = _vectors()
    ids = np.arange(len(x))
    index = ExactIndex.over(x, ids)
    assert np.shares_memory(index.vectors, x)
    built = ExactIndex().build(x, ids)
    np.testing.assert_array_equal(index.search(x[:3], 5).ids, built.search(x[:3], 5).ids)
