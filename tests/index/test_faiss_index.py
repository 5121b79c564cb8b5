"""FaissIndex backends, each checked against brute force through IndexContract."""
from __future__ import annotations

import re

import numpy as np
import pytest

from twotower.errors import ConfigError, DataError
from twotower.index import FaissIndex, resolve_factory

from index_data import brute_force, canonical_top
from index_contract import IndexContract


class TestFlat(IndexContract):
    def make_index(self) -> FaissIndex:
        return FaissIndex("flat")

    def test_is_exact_and_tie_correct(self):
        rng = np.random.default_rng(3)
        x = np.repeat(rng.standard_normal((4, 8)).astype(np.float32), 40, axis=0)
        ids = rng.permutation(160).astype(np.int64)
        q = rng.standard_normal((3, 8)).astype(np.float32)
        index = self.make_index().build(x, ids)
        assert index.is_exact
        np.testing.assert_array_equal(index.search(q, 50).ids, brute_force(x, ids, q, 50)[0])


class TestIVF(IndexContract):
    def make_index(self) -> FaissIndex:
        return FaissIndex("ivf", nprobe=1 << 16)  # all lists: exact on small data

    def test_knobs_and_low_nprobe_is_approximate(self, catalogue):
        x, ids, q = catalogue
        index = FaissIndex("ivf").build(x, ids)
        assert index.factory == "IVF51,Flat" and index.knobs == ("nprobe",) and not index.is_exact
        index.set_search_params(nprobe=4)
        assert index.search_params == {"nprobe": 4}
        with pytest.raises(ConfigError, match="no 'efSearch' knob"):
            index.set_search_params(efSearch=64)


class TestHNSW(IndexContract):
    def make_index(self) -> FaissIndex:
        return FaissIndex("hnsw", efSearch=1024)

    def test_remove_hides_ids_and_reuse_is_refused(self, catalogue):
        x, ids, _ = catalogue
        index = self.built(catalogue)
        index.remove(ids[:3])  # HNSW cannot delete: the ids are hidden
        with pytest.raises(DataError, match="rebuild"):
            index.add(x[:1], ids[:1])

    @pytest.mark.parametrize("factory", ["hnsw", "HNSW32,RFlat"])
    def test_a_list_deeper_than_efsearch_is_still_full(self, catalogue, factory):
        """FAISS returns at most about efSearch hits from the graph (k=1000 at efSearch 16: 184 of 1,682 on
        MovieLens-100K), so `serve` with an HNSW index answered k=1000, or k=10 for a user with 600 seen items,
        with a short list and a shortfall claiming nothing more was eligible."""
        x, ids, q = catalogue
        index = FaissIndex(factory, efSearch=16).build(x, ids)  # FAISS's default depth
        assert index.search(q, 500).ids.min() >= 0  # 500 of 2,000 stored: every row full
        ref_ids, _ = brute_force(x, ids, q, 600)
        exclude = [ref_ids[r] for r in range(len(q))]  # a heavy user: the 600 nearest seen
        res = index.search(q, 10, exclude=exclude)
        assert res.ids.min() >= 0 and not any(np.isin(res.ids[r], exclude[r]).any() for r in range(len(q)))


class TestIVFPQRefineFlat(IndexContract):
    def make_index(self) -> FaissIndex:
        # exact re-scoring of k_factor*k PQ candidates from all lists: exact here
        return FaissIndex("ivfpq,RFlat", nprobe=1 << 16, k_factor_rf=200)


def test_plain_ivfpq_is_lossy_but_keeps_the_contract(catalogue, tmp_path):
    # PQ codes without refine cannot be exact; exclusions, padding and persistence still hold.
    x, ids, q = catalogue
    index = FaissIndex("ivfpq", nprobe=1 << 16).build(x, ids)
    ref_ids, _ = brute_force(x, ids, q, 10)
    overlap = np.mean([len(np.intersect1d(a, b)) / 10 for a, b in zip(index.search(q, 10).ids, ref_ids)])
    assert overlap > 0.5  # 16-d, 4 sub-quantisers of 8 bits on 2,000 points
    exclude = [ref_ids[r, :5] for r in range(len(q))]
    res = index.search(q, 10, exclude=exclude)
    assert (res.ids != -1).all() and not any(np.isin(res.ids[r], exclude[r]).any() for r in range(len(q)))
    index.save(tmp_path / "pq")
    from twotower.index import load_index

    np.testing.assert_array_equal(load_index(tmp_path / "pq").search(q, 10, exclude=exclude).ids, res.ids)


def test_shortcuts_resolve_from_size_and_dim():
    assert resolve_factory("flat", 10**6, 64) == "Flat"
    assert resolve_factory("ivf", 10**5, 64) == "IVF1265,Flat"  # ~4*sqrt(N) lists, flat quantizer
    # from 200k vectors: ~16*sqrt(N) lists (power of two) behind an HNSW quantizer, per FAISS's guidelines
    assert resolve_factory("ivf", 10**6, 64) == "IVF16384_HNSW32,Flat"
    assert resolve_factory("ivf", 10**7, 64) == "IVF65536_HNSW32,Flat"
    assert resolve_factory("hnsw", 10**6, 64) == "HNSW32"
    assert resolve_factory("ivfpq", 10**6, 64) == "IVF4000,PQ16x8"
    assert resolve_factory("ivfpq,Refine(SQ8)", 10**6, 64) == "IVF4000,PQ16x8,Refine(SQ8)"
    assert resolve_factory("IVF{nlist},SQ8", 10**6, 64) == "IVF4000,SQ8"
    assert resolve_factory("ivf", 100, 64) == "IVF2,Flat"  # never fewer than 39 points per list
    assert resolve_factory("ivfpq", 10**6, 30) == "IVF4000,PQ6x8"  # D divisible by m
    # below 39 * 256 = 9,984 vectors: fewer bits (2**nbits * 39 <= N), more sub-quantisers for as long a code
    assert resolve_factory("ivfpq", 9984, 64) == "IVF256,PQ16x8"
    assert resolve_factory("ivfpq", 9983, 64) == "IVF255,PQ32x7"
    assert resolve_factory("ivfpq", 1682, 128) == "IVF43,PQ64x5"  # MovieLens-100K at dim 128 (was PQ32x8)
    assert resolve_factory("IVF{nlist},PQ32x8", 1682, 128) == "IVF43,PQ32x8"  # the user's own PQ is never changed


def test_the_ivfpq_shortcut_trains_every_codebook_fully(capfd, caplog, tmp_path):
    """1,682 items (MovieLens-100K): PQ32x5 trains on 1,248 of them, no warning from FAISS or from us; the build
    says why 5 bits, and 5-bit codes search the same after a save and load."""
    from twotower.index import load_index
    from twotower.index.faiss_index import min_training_points

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1682, 64)).astype(np.float32)
    ids = np.arange(1682, dtype=np.int64)
    capfd.readouterr()
    with caplog.at_level("INFO", logger="twotower"):
        index = FaissIndex("ivfpq", nprobe=8).build(x, ids)
    assert index.factory == "IVF43,PQ32x5"
    assert min_training_points(index.cpu_index()) <= 1682
    assert "training points" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert "5 bits per sub-quantiser" in caplog.text and "9,984" in caplog.text
    before = index.search(x[:20], 10)
    index.save(tmp_path / "ix")
    after = load_index(tmp_path / "ix").search(x[:20], 10)
    assert np.array_equal(before.ids, after.ids) and np.array_equal(before.scores, after.scores)


def test_unknown_factory_lists_choices(catalogue):
    x, ids, _ = catalogue
    with pytest.raises(ConfigError, match="flat, ivf, hnsw, ivfpq") as e:
        FaissIndex("IVF8,Bogus")  # refused as it is named, not at build() after the vectors are ready
    assert "index_factory.cpp" not in str(e.value)
    with pytest.raises(ConfigError, match="could not parse index string zzz"):
        FaissIndex("zzz")
    FaissIndex("PQ7")  # parses: whether 7 divides the dimension is build()'s to say, which knows it
    with pytest.raises(ConfigError, match="no suffix"):
        FaissIndex("hnsw,Flat")
    with pytest.raises(ConfigError, match="unknown search parameter"):
        FaissIndex("flat").build(x, ids).set_search_params(nlist=3)
    with pytest.raises(ConfigError, match="faiss-gpu"):
        if hasattr(__import__("faiss"), "StandardGpuResources"):
            pytest.skip("faiss-gpu installed")
        FaissIndex("flat", device="cuda")


def test_constructor_knob_the_index_lacks_is_an_error(catalogue):
    x, ids, _ = catalogue
    with pytest.raises(ConfigError, match="no 'nprobe' knob"):
        FaissIndex("hnsw", nprobe=8).build(x, ids)


def test_ivf_remove_is_real_and_survives_save(catalogue, tmp_path):
    x, ids, q = catalogue
    index = FaissIndex("ivf", nprobe=64).build(x, ids)
    index.remove(ids[:100])
    assert index.cpu_index().ntotal == len(x) - 100
    index.add(x[:100], ids[:100])  # ids removed for real can be reused
    index.save(tmp_path / "i")
    from twotower.index import load_index

    assert len(load_index(tmp_path / "i")) == len(x)


@pytest.mark.parametrize("factory", ["ivf", "ivfpq,RFlat", "PCA16,IVF50,Flat", "OPQ4,IVF50,PQ4x4"])
def test_exclusions_widen_nprobe_when_the_probed_lists_run_dry(catalogue, factory):
    # nprobe=1 sees one list (~40 vectors); excluding all but 10 ids forces deepening beyond it
    x, ids, q = catalogue
    index = FaissIndex(factory, nprobe=1).build(x, ids)
    survivors = ids[-10:]
    res = index.search(q[:3], 10, exclude=[ids[:-10]] * 3)
    for row in res.ids:
        assert sorted(row.tolist()) == sorted(survivors.tolist())
    assert index.search_params == {"nprobe": 1}  # widening is per call, the setting is untouched


@pytest.mark.parametrize("factory", ["IVF50,Flat", "PCA16,IVF50,Flat"])
def test_ivf_returns_k_without_exclusions_when_probed_lists_are_short(catalogue, factory):
    # nprobe=1 sees one list of ~40 vectors; k=100 must still come back full (deepened, not padded), an IVF behind a
    # pre-transform (in the id map FaissIndex wraps it in) too: rows came back padded, up to 75 of the 100 missing
    x, ids, q = catalogue
    index = FaissIndex(factory, nprobe=1).build(x, ids)
    res = index.search(q[:4], 100)
    assert (res.ids != -1).all()
    assert all(len(set(row.tolist())) == 100 for row in res.ids)
    assert index.search_params == {"nprobe": 1}


@pytest.mark.parametrize("factory", ["IVF50,Flat", "PCA16,IVF50,Flat", "OPQ4,IVF50,PQ4x4"])
def test_an_allow_list_outside_the_probed_lists_is_filled(catalogue, factory):
    # 10 allowed ids spread over the catalogue, scored within the search (exact_subset_max=0): each row holds all 10,
    # an IVF behind a pre-transform (PCA, OPQ) too, whose nprobe was never widened (rows came back nearly empty)
    x, ids, q = catalogue
    index = FaissIndex(factory, nprobe=1).build(x, ids)
    allowed = ids[::200]
    res = index.search(q[:5], 10, allow=allowed, exact_subset_max=0)
    for row in res.ids:
        assert sorted(row.tolist()) == sorted(allowed.tolist())


def test_training_sample_is_sized_to_the_list_count(catalogue, caplog):
    # 32 lists need 39 * 32 = 1248 training vectors: a smaller max_train is raised, so FAISS never warns
    x, ids, _ = catalogue
    with caplog.at_level("INFO", logger="twotower.index.faiss_index"):
        index = FaissIndex("IVF32,Flat", max_train=200).build(x, ids)
    assert index._build_params["n_train"] == 1248
    assert "raising max_train 200 to 1248" in caplog.text


def test_too_small_a_training_set_is_said_once_not_once_per_sub_quantiser(capfd, caplog):
    """MovieLens-100K's 1,682 items under a factory string the user wrote (PQ16x8 wants 9,984 points): kept as
    written, and one line of ours naming the training size it wants."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1682, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    capfd.readouterr()
    with caplog.at_level("WARNING", logger="twotower"):
        index = FaissIndex("IVF43,PQ16x8").build(x, np.arange(1682, dtype=np.int64))
    assert index.factory == "IVF43,PQ16x8" and index.search(x[:3], 5).ids.shape == (3, 5)
    assert "training points" not in capfd.readouterr().err  # FAISS printed it 16 times before
    ours = [r.getMessage() for r in caplog.records if "training vectors" in r.getMessage()]
    assert len(ours) == 1 and "9984" in ours[0] and "1682" in ours[0]


def test_hnsw_coarse_quantizer_searches_deeper_than_nprobe(tmp_path):
    """IVF with an HNSW quantizer (the `ivf` shortcut from 200k vectors): nprobe sets the quantizer's depth too,
    before and after a save, so the lists searched are the nearest ones and recall keeps rising with nprobe."""
    import faiss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6000, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    index = FaissIndex("IVF64_HNSW32,Flat", nprobe=40).build(x, np.arange(6000))

    def depth(ix: FaissIndex) -> int:
        return faiss.downcast_index(faiss.extract_index_ivf(ix._inner()).quantizer).hnsw.efSearch

    assert depth(index) == 80
    index.set_search_params(nprobe=4)
    assert depth(index) == 32
    index.set_search_params(nprobe=64)  # every list: the exact result
    q = x[:50]
    got = index.search(q, 10)
    want = brute_force(x, np.arange(6000), q, 10)
    assert np.array_equal(got.ids, want[0] if isinstance(want, tuple) else want.ids)
    index.save(tmp_path / "ix")
    from twotower.index import load_index

    assert depth(load_index(tmp_path / "ix")) == 128


def test_the_torchrun_training_sample_holds_39_vectors_per_centroid():
    from twotower.index.faiss_index import training_sample_size

    assert training_sample_size("IVF64,Flat", 10_000, 8, 1_000) == 39 * 64  # raised: FAISS wants 2,496
    assert training_sample_size("IVF64,Flat", 10_000, 8, 5_000) == 5_000  # a cap above the need is kept
    assert training_sample_size("IVF64,Flat", 2_000, 8, 1_000) == 2_000  # never more than the catalogue
    assert training_sample_size("IVF16,PQ4x8", 50_000, 8, 1_000) == 39 * 256  # PQ codebooks: 256 centroids


def test_training_says_when_it_ends_and_how_long_it_took(caplog):
    import logging

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, 8)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="twotower.index.faiss_index"):
        FaissIndex("IVF4,Flat").build(vectors, np.arange(400))
    lines = [r.getMessage() for r in caplog.records]
    start = next(i for i, m in enumerate(lines) if m.startswith("training IVF4,Flat on 400 vectors"))
    assert re.fullmatch(r"trained IVF4,Flat in \d+\.\ds", lines[start + 1])


def test_a_misspelt_shortcut_is_named_with_the_shortcut_it_resembles():
    # `twotower index build --index hnws` said only that FAISS could not parse 'hnws'
    x = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    with pytest.raises(ConfigError, match=r"FAISS rejected the index 'hnws'.*did you mean 'hnsw'\?"):
        FaissIndex("hnws").build(x, np.arange(64))
    with pytest.raises(ConfigError) as err:
        FaissIndex("IVF8,Bogus").build(x, np.arange(64))
    assert "did you mean" not in str(err.value)


def test_a_tie_group_at_the_cut_costs_few_catalogue_scans(monkeypatch):
    # an exact search fetches again, deeper, while hits still tie at its cut; each fetch scans every vector.
    # Doubling through ~1,000 equal vectors (1M items: items without training signal) took 7 scans, 0.18 s
    # for one /similar-items there; the lists are the same (ties to the smaller id)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3000, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)  # unit vectors: an item is its own nearest
    x[1000:1600] = x[1000]  # 600 equal vectors
    index = FaissIndex("flat").build(x, np.arange(3000))
    scans = []
    plain = type(index._index).search

    def counting(self, q, f, **kw):
        scans.append(f)
        return plain(self, q, f, **kw)

    monkeypatch.setattr(type(index._index), "search", counting)
    res = index.search(x[1000:1001], 10, exclude=[np.array([1000])])
    assert res.ids[0].tolist() == list(range(1001, 1011))
    assert len(scans) <= 3, scans


def _spy_on_fetches(monkeypatch, index):
    """The depths of the FAISS searches ``index`` makes, in order."""
    fetched = []
    plain = type(index._index).search

    def spy(self, q, f, **kw):
        fetched.append(f)
        return plain(self, q, f, **kw)

    monkeypatch.setattr(type(index._index), "search", spy)
    return fetched


def test_a_large_tie_at_the_cut_of_a_flat_index_is_fetched_once_more_at_most(monkeypatch):
    # 3,000 equal vectors, k=10: fetching 8x deeper per retry took 11, 88, 704, 3,200 (4 searches of the whole
    # catalogue; 100,000 x 64, 64 queries: 2.0 s); one counting scan sizes the one deeper fetch instead
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3200, 8)).astype(np.float32)
    x[:3000] = x[0]
    ids = (rng.permutation(3200) * 3 + 1).astype(np.int64)
    q = np.repeat(x[:1], 6, axis=0) + 0.01 * rng.standard_normal((6, 8)).astype(np.float32)
    index = FaissIndex("flat").build(x, ids)
    fetched = _spy_on_fetches(monkeypatch, index)
    res = index.search(q, 10)
    assert len(fetched) <= 2 and fetched[0] == 11, fetched
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, 10))



@pytest.mark.parametrize("n_q", [1, 3, 40])
@pytest.mark.parametrize("k", [1, 7, 64, 500])
def test_heavy_quantised_ties_on_a_flat_index_match_the_full_canonical_sort(n_q, k):
    # on a coarse grid every score is exact in float32, so FAISS's scores are the canonical ones and the lists
    # must be the full sort's: all of a tie at the cut fetched, the smaller ids kept (1 query: FAISS's SIMD loop)
    rng = np.random.default_rng(k + n_q)
    n, dim = 900, 5
    x = (rng.integers(-2, 3, (n, dim)) / 2).astype(np.float32)
    x[n // 3 : n // 3 + n // 4] = x[n // 3]  # a run of equal vectors
    x[-5:] = 0  # zero vectors: score 0 for every query
    ids = (rng.permutation(4 * n)[:n]).astype(np.int64)
    q = (rng.integers(-2, 3, (n_q, dim)) / 2).astype(np.float32)
    q[: max(1, n_q // 4)] = x[n // 3]  # ties at the top
    q[n_q // 2 : n_q // 2 + n_q // 8] = -x[n // 3]  # and at the bottom, with negative scores
    index = FaissIndex("flat").build(x, ids)
    np.testing.assert_array_equal(index.search(q, k).ids, canonical_top(x, ids, q, k))
    exclude = [rng.choice(ids, int(rng.integers(0, 850)), replace=False) for _ in range(n_q)]
    res = index.search(q, k, exclude=exclude)
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, k, exclude))  # k > what is left: padded
    for allow_size in (50, 400, 900):
        allow = np.sort(rng.choice(ids, allow_size, replace=False))
        res = index.search(q, k, exclude=exclude, allow=allow)
        np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, k, exclude, allow))


@pytest.mark.parametrize("n_q", [1, 2, 64])
def test_near_ties_of_a_flat_index_keep_faiss_scores_bit_for_bit(n_q):
    # equal vectors and vectors one float32 step apart: FAISS's rounded scores tie or not depending on its
    # kernels; the lists and score bits must be those of a search of the whole catalogue, ties by smaller id
    from twotower.index.faiss_index import _sorted

    rng = np.random.default_rng(n_q)
    x = rng.standard_normal((5000, 64)).astype(np.float32)
    base = x[0].copy()
    x[:3000] = base
    x[1000:2000] = np.nextafter(base, np.float32(np.inf))  # one step up in every dimension
    x[2000:2500, :7] = np.nextafter(base[:7], np.float32(-np.inf))
    ids = rng.permutation(5000).astype(np.int64)
    q = (np.repeat(base[None], n_q, axis=0) + 0.001 * rng.standard_normal((n_q, 64))).astype(np.float32)
    index = FaissIndex("flat").build(x, ids)
    for k in (10, 1500, 2600):
        res = index.search(q, k)
        full_s, full_i = _sorted(*index._index.search(q, 5000), k)  # the same batch at full depth
        np.testing.assert_array_equal(res.ids, full_i)
        np.testing.assert_array_equal(res.scores.view(np.int32), full_s.view(np.int32))


def test_an_allow_list_of_non_integer_ids_is_refused_as_such(catalogue):
    """allow=[1.5] for two queries said "allow needs one id array (or None) per query (2), or one array for all; got
    1", where the README says a non-integer id is refused naming the argument and why."""
    x, ids, q = catalogue
    index = FaissIndex("flat").build(x, ids)
    for allow in ([1.5], ["a", "b"]):
        with pytest.raises(DataError, match=r"allow must hold integer ids"):
            index.search(q[:2], 3, allow=allow)
    with pytest.raises(DataError, match=r"allow\[0\] must hold integer ids"):
        index.search(q[:2], 3, allow=[True, [2]])  # one per query: a true/false is no id
