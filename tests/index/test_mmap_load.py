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


_CHILD = """
import sys
import numpy as np
from twotower.index import load_index
index = load_index(sys.argv[1], mmap=True)
assert index.remove(np.arange(1000, 1010)) == 10
rng = np.random.default_rng(1)
index.add(rng.standard_normal((5, 16)).astype(np.float32), np.arange(5000, 5005))
res = index.search(np.load(sys.argv[2]), 10)
print(len(index), ' '.join(map(str, res.ids.ravel().tolist())))
"""


@pytest.mark.parametrize("make", [lambda: ExactIndex(), lambda: FaissIndex("Flat"), lambda: FaissIndex("hnsw"),
                                  lambda: FaissIndex("IVF4,Flat", nprobe=4)], ids=["exact", "flat", "hnsw", "ivf"])
def test_a_mapped_index_takes_add_and_remove_on_a_copy(tmp_path, make):
    """load_index(mmap=True) says add/remove copy the index: a FAISS index's first add or remove killed the process
    (a segfault, or FAISS's abort "This operation cannot be performed on a viewed vector"). In a child process, so
    that a crash fails this test, not the session; the file stays as saved."""
    import subprocess
    import sys

    x = _vectors()
    ids = np.arange(1000, 1000 + len(x))
    make().build(x, ids).save(tmp_path / "ix")
    saved = (tmp_path / "ix" / make().stored_files[0]).read_bytes()
    np.save(tmp_path / "q.npy", x[:3])
    child = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "ix"), str(tmp_path / "q.npy")],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    count, found = child.stdout.split(" ", 1)
    assert int(count) == len(x) - 10 + 5
    hits = np.asarray(found.split(), dtype=np.int64)
    assert not np.isin(hits, np.arange(1000, 1010)).any()
    assert (tmp_path / "ix" / make().stored_files[0]).read_bytes() == saved
    plain = load_index(tmp_path / "ix")
    assert len(plain) == len(x)
