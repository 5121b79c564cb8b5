"""What a Python user plausibly does wrong with the index API, and the error that names the argument."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError, DataError
from twotower.index import ExactIndex, FaissIndex, VectorIndex

rng = np.random.default_rng(0)
V = rng.normal(size=(40, 8)).astype(np.float32)
IDS = np.arange(40, dtype=np.int64)
BACKENDS = [pytest.param(FaissIndex, "FaissIndex('flat')", id="faiss"), pytest.param(ExactIndex, "ExactIndex()", id="exact")]


@pytest.mark.parametrize("cls, make", BACKENDS)
@pytest.mark.parametrize("method, args, first", [
    ("build", (V, IDS), "vectors"), ("add", (V, IDS), "vectors"), ("search", (V[:2], 5), "queries"),
    ("remove", (IDS[:2],), "ids"), ("save", ("somewhere",), "directory"),
])
def test_a_method_called_on_the_class_says_to_make_an_index(cls, make, method, args, first):
    # FaissIndex.build(vectors, ids) failed with "missing 1 required positional argument: 'ids'"
    with pytest.raises(ConfigError) as e:
        getattr(cls, method)(*args)
    msg = str(e.value)
    assert f"{cls.__name__}.{method}() was called on the class" in msg
    assert f"its first argument, {first} (a " in msg and f"index = {make}; index.{method}(" in msg


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_the_class_methods_still_work_with_an_index_and_on_instances(cls, make, tmp_path):
    index = cls()
    assert cls.build(index, V, IDS) is index  # an explicit index first: the plain unbound call
    res = cls.search(index, V[:2], 3)
    assert index.search(V[:2], 3).ids.tolist() == res.ids.tolist()
    assert VectorIndex.search(index, V[:2], 3).ids.tolist() == res.ids.tolist()
    index.save(tmp_path / "ix")
    assert len(cls.load(tmp_path / "ix")) == len(V)


def test_the_constructor_is_not_where_the_vectors_go():
    with pytest.raises(ConfigError, match=r"FaissIndex\(factory\): the index type.*got a ndarray of shape \(40, 8\); "
                                          r"the vectors go to build"):
        FaissIndex(V)
    with pytest.raises(ConfigError, match=r"ExactIndex\(\) takes no vectors \(got a ndarray of shape \(40, 8\)\)"):
        ExactIndex(V, IDS)


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_bad_vectors_and_ids_name_the_argument(cls, make):
    with pytest.raises(DataError, match="ids holds 10 ids for 40 vectors; give one id per row of vectors"):
        cls().build(V, IDS[:10])
    with pytest.raises(DataError, match=r"vectors must be a 2-D array \[N, D\], got shape \(40,\); this looks like "
                                        r"ids: the order is build\(vectors, ids\)"):
        cls().build(IDS, V)
    with pytest.raises(DataError, match=r"got shape \(8,\); one vector is vectors\[None, :\]"):
        cls().build(V[0], IDS[:1])
    with pytest.raises(DataError, match="vectors must be floating point"):
        cls().build(V.astype(np.int32), IDS)
    with pytest.raises(DataError, match="ids must be integers .*map external ids to integer rows"):
        cls().build(V, [f"i{i}" for i in IDS])
    index = cls().build(V, IDS)
    with pytest.raises(DataError, match="queries have dimension 4 but the index holds dimension 8"):
        index.search(V[:2, :4], 3)
    with pytest.raises(ConfigError, match="^k: must be a positive integer, got 0"):
        index.search(V[:2], 0)


@pytest.mark.parametrize("cls, make", BACKENDS)
@pytest.mark.parametrize("k", [0, -3, 2.0, True, np.bool_(True), "10"])
@pytest.mark.parametrize("exclude", [None, "one"])
def test_k_that_is_not_a_positive_integer_is_refused(cls, make, k, exclude):
    index = cls().build(V, IDS)
    excl = None if exclude is None else [IDS[:1], None]
    with pytest.raises(ConfigError, match=r"^k: must be a positive integer, got "):
        index.search(V[:2], k, exclude=excl)


@pytest.mark.parametrize("cls, make", BACKENDS)
@pytest.mark.parametrize("exclude", [None, "one"])
def test_k_far_above_the_catalogue_is_refused_before_padding_it(cls, make, exclude):
    # 10**9 on a 40-item index tried to allocate [2, 10**9] ids and scores (15 GiB); 2**70 was a numpy TypeError
    from twotower.config import MAX_K

    index = cls().build(V, IDS)
    excl = None if exclude is None else [IDS[:1], None]
    for k in (10**9, 2**70, np.int64(MAX_K + 1)):
        with pytest.raises(ConfigError, match=rf"^k: must be at most {MAX_K} \(the larger of twotower.config.MAX_K, "
                                              rf"{MAX_K}, and the 40 ids in the index: rows are padded to k\)"):
            index.search(V[:2], k, exclude=excl)
    res = index.search(V[:2], np.int64(MAX_K), exclude=excl)  # up to MAX_K: padded to k, as documented
    assert res.ids.shape == (2, MAX_K) and (res.ids[:, 40:] == -1).all() and np.isneginf(res.scores[:, 40:]).all()
    eligible = [39 if exclude else 40, 40]  # exclude leaves one id out of the first query
    assert [int((row != -1).sum()) for row in res.ids] == eligible


def test_k_the_catalogue_can_fill_may_pass_max_k():
    # a deep candidate list over a large corpus (search.depth) is not capped: the catalogue fills it
    from twotower.config import MAX_K

    n = MAX_K + 5
    vectors = np.random.default_rng(2).normal(size=(n, 4)).astype(np.float32)
    index = ExactIndex().build(vectors, np.arange(n))
    res = index.search(vectors[:1], n, exclude=[np.arange(3)])
    assert res.ids.shape == (1, n) and (res.ids[0, : n - 3] != -1).all() and (res.ids[0, n - 3 :] == -1).all()
    with pytest.raises(ConfigError, match=f"^k: must be at most {n} "):
        index.search(vectors[:1], n + 1)


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_search_before_build_says_build_first(cls, make):
    with pytest.raises(ConfigError, match=f"this {cls.__name__} is empty: nothing was built yet.*"
                                          r"call index.build\(vectors, ids\) before search"):
        cls().search(V[:1], 3)


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_an_index_not_built_yet_has_a_repr(cls, make):
    # a notebook cell ending in `tt.FaissIndex("flat")` displayed the "nothing was built yet" traceback
    index = cls()
    assert repr(index) == f"{cls.__name__}(n=0, dim=None (not built), exact={index.is_exact})"
    assert repr(index.build(V, IDS)) == f"{cls.__name__}(n=40, dim=8, exact={index.is_exact})"


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_a_flat_exclude_array_is_refused_not_read_as_one_id_per_query(cls, make):
    index = cls().build(V, IDS)
    # two queries and np.array([0, 1]): query 0 lost id 0 and query 1 id 1, without a word
    with pytest.raises(DataError, match=r"exclude takes one id array per query \(a list of 2\), got one flat array "
                                        r"of 2 ids; for the same ids on every query pass \[ids\] \* 2"):
        index.search(V[:2], 3, exclude=np.array([0, 1]))
    shared = index.search(V[:2], 3, exclude=[np.array([0, 1])] * 2)
    assert not np.isin(shared.ids, [0, 1]).any()


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_torch_tensors_and_k_above_the_catalogue(cls, make):
    import torch

    index = cls().build(torch.from_numpy(V), torch.from_numpy(IDS))
    q = torch.from_numpy(V[:2]).requires_grad_(True)  # a model's output: np.asarray refused it
    assert index.search(q, 3).ids.tolist() == index.search(V[:2], 3).ids.tolist()
    # k above the catalogue is the documented padding (the service reports the shortfall), not an error
    res = index.search(V[:2], 50)
    assert res.ids.shape == (2, 50) and (res.ids[:, 40:] == -1).all() and np.isneginf(res.scores[:, 40:]).all()


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_a_flat_exclude_list_is_refused_and_a_flat_allow_list_is_shared(cls, make):
    index = cls().build(V, IDS)
    # exclude=[0, 1] for two queries: query 0 lost id 0 and query 1 id 1, without a word (a list, unlike an array,
    # got through)
    with pytest.raises(DataError, match=r"exclude takes one id array per query \(a list of 2\), got one flat list "
                                        r"of 2 ids; for the same ids on every query pass \[ids\] \* 2"):
        index.search(V[:2], 3, exclude=[0, 1])
    # allow=[5, 7] for two queries allowed only 5 to the first and only 7 to the second; it is one list for both,
    # as np.array([5, 7]) always was
    got = index.search(V[:2], 2, allow=[5, 7])
    assert got.ids.tolist() == index.search(V[:2], 2, allow=np.array([5, 7])).ids.tolist()
    assert all(sorted(row) == [5, 7] for row in got.ids.tolist())


@pytest.mark.parametrize("cls, make", BACKENDS)
def test_per_query_exclude_and_allow_name_the_query_holding_bad_ids(cls, make):
    index = cls().build(V, IDS)
    # external string ids: numpy's "invalid literal for int() with base 10: 'a'"; a float id 1.5 was cut to 1
    with pytest.raises(DataError, match=r"exclude\[1\] must hold integer ids \(the rows the index was built with\), "
                                        r"got dtype <U1"):
        index.search(V[:2], 3, exclude=[np.array([0]), ["a"]])
    with pytest.raises(DataError, match=r"exclude\[0\] must hold integer ids .*got dtype float64"):
        index.search(V[:1], 3, exclude=[[1.5]])
    with pytest.raises(DataError, match=r"allow\[0\] must hold integer ids .*got dtype float64"):
        index.search(V[:2], 3, allow=[[1.5], None])
    # None for one query excludes nothing there, as None in allow allows everything (it was a TypeError from int())
    mixed = index.search(V[:2], 3, exclude=[None, np.array([1])])
    assert mixed.ids[0].tolist() == index.search(V[:1], 3).ids[0].tolist()
    assert 1 not in mixed.ids[1].tolist()
