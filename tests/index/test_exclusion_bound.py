"""500 exclusions (``ServiceSettings.max_exclude``) cost one backend search of about ``k + 500`` candidates.

The worst case of ``exclude_items``: each query's own top-500, every one of them fetched and dropped. The answer
must be ranks 501..510, from one search, exact indexes and IVF alike (bench/exclusions.py measures the time).
"""
from __future__ import annotations

import numpy as np
import pytest

from twotower.index import ExactIndex, FaissIndex
from twotower.serving.settings import ServiceSettings

K = 10


def _counting(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[int]:
    """The fetch of every backend search ``cls`` makes (``_search_deeper``: every filtered search goes through it)."""
    calls: list[int] = []
    real = cls._search_deeper

    def counting(self, queries, fetch, depth, allow=None):  # noqa: ANN001, ANN202
        calls.append(int(fetch))
        return real(self, queries, fetch, depth, allow)

    monkeypatch.setattr(cls, "_search_deeper", counting)
    return calls


def _data() -> tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4000, 16)).astype(np.float32)
    q = rng.standard_normal((8, 16)).astype(np.float32)
    scores = (q.astype(np.float64) @ x.T.astype(np.float64)).astype(np.float32)  # [Q, N]
    order = np.lexsort((np.broadcast_to(np.arange(4000), scores.shape), -scores), axis=1)  # [Q, N], ties by id
    e = ServiceSettings().max_exclude
    excl = [rng.permutation(row[:e]) for row in order]  # each query's own top-500, shuffled
    return x, q, excl, order[:, e : e + K]


def test_500_exclusions_are_one_exact_search(monkeypatch: pytest.MonkeyPatch) -> None:
    x, q, excl, want = _data()
    index = ExactIndex().build(x, np.arange(len(x)))
    calls = _counting(monkeypatch, ExactIndex)
    got = index.search(q, K, exclude=excl)
    assert len(calls) == 1 and calls[0] <= 2 * (K + len(excl[0])), calls
    assert np.array_equal(got.ids, want)
    one = index.search(q[:1], K, exclude=excl[:1])  # a single query too
    assert len(calls) == 2 and np.array_equal(one.ids[0], want[0])


def test_500_exclusions_are_one_ivf_search(monkeypatch: pytest.MonkeyPatch) -> None:
    x, q, excl, _ = _data()
    index = FaissIndex("IVF16,Flat", nprobe=4).build(x, np.arange(len(x)))  # ~1,000 vectors probed: enough for 510
    calls = _counting(monkeypatch, FaissIndex)
    got = index.search(q, K, exclude=excl)
    assert len(calls) == 1 and calls[0] <= 2 * (K + len(excl[0])), calls
    own = index.search(q, calls[0])  # the same search without exclusions, filtered by hand
    for row, e in enumerate(excl):
        keep = own.ids[row][~np.isin(own.ids[row], e)]
        assert np.array_equal(got.ids[row], keep[:K])


def test_500_exclusions_on_a_shallow_ivf_answer_as_a_search_that_deep() -> None:
    """An IVF whose probed lists hold fewer than k + 500 vectors: the answer is the plain search of k + 500 (which
    probes more lists until it holds them) minus the excluded, not the first 10 leftovers of the shallow probe.

    On 1M x 64, IVF16384 at nprobe 6 (~370 vectors probed), the shallow leftovers had recall@10 0.05 against exact."""
    x, q, excl, want = _data()
    index = FaissIndex("IVF64,Flat", nprobe=2).build(x, np.arange(len(x)))  # ~125 vectors probed per search
    got = index.search(q, K, exclude=excl)
    deep = index.search(q, K + len(excl[0]))  # deepens until it holds 510
    for row, e in enumerate(excl):
        assert np.array_equal(got.ids[row], deep.ids[row][~np.isin(deep.ids[row], e)][:K])
    assert np.isin(got.ids, want).mean() > 0.25  # ranks 501-510 found: 0.40, against 0.09 in the 2-list leftovers
