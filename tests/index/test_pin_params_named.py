"""A pinned setting's errors name the entry of ``params`` (``params['efSearch']``), as `twotower index build` names
its flag, and values FAISS cannot hold are refused before anything is built."""

from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.index import autotune
from twotower.index.faiss_index import FaissIndex


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, np.arange(400, dtype=np.int64), x[:20]


@pytest.mark.parametrize(
    ("index", "params", "said"),
    [
        # Python's OverflowError / ValueError from int() before
        ("HNSW32", {"efSearch": float("inf")}, r"^params\['efSearch'\]: must be an integer >= 1, got inf$"),
        ("HNSW32", {"efSearch": float("nan")}, r"^params\['efSearch'\]: must be an integer >= 1, got nan$"),
        # FAISS stored it as -2147483648 and the build went on
        ("HNSW32", {"efSearch": 2**31}, r"^params\['efSearch'\]: must be at most 2,147,483,647 .*got 2147483648$"),
        # FAISS's own "'k_base >= k' failed" (or std::bad_alloc) at the first search
        ("IVF4,Flat,RFlat", {"k_factor": 1e12}, r"^params\['k_factor'\] 1000000000000.0: the refine stage would fetch "
                                                  r"k x k_factor = 10 x 1e\+12 candidates a query, more than the 400 "),
        # the cap was the vector count: k x 400 candidates a query (80 GB of ids for 1M vectors, 1,000 queries, k=10)
        ("IVF4,Flat,RFlat", {"k_factor": 41}, r"^params\['k_factor'\] 41: .*at params\['k_factor'\] 40 \(400 / k\) it "
                                              r"already asks for every vector, so params\['k_factor'\] must be at most 40$"),
        ("HNSW32", {"nprobe": 4}, r"^params\['nprobe'\]: 'HNSW32' \(HNSW32\) has no nprobe to pin"),
        ("IVF4,Flat", {"nprobe": 9}, r"^params\['nprobe'\] 9 is more than the 4 lists .*; params\['nprobe'\] 4 already"),
    ],
)
def test_a_bad_pin_names_its_params_entry_before_the_build(data, monkeypatch, index, params, said):
    x, ids, queries = data
    monkeypatch.setattr(FaissIndex, "build", lambda *a: pytest.fail("built before the pin was checked"))
    with pytest.raises(ConfigError, match=said):
        autotune(x, ids, queries, index=index, params=params)


def test_a_k_factor_that_fetches_the_whole_catalogue_is_still_taken(data):
    # k x k_factor = 10 x 40 = the 400 vectors: the largest k_factor that can change the result
    x, ids, queries = data
    report = autotune(x, ids, queries, index="IVF4,Flat,RFlat", params={"k_factor": 40})
    assert report.chosen.params == {"k_factor": 40.0}
