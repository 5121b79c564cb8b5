"""Sizes in a FAISS factory string that no catalogue can use are refused in one line before FAISS allocates them.

`index build --index IVF100000000,Flat` grew to 15 GB and hung: FAISS allocates every IVF list as the index is
created. Each test replaces ``faiss.index_factory`` so that a check coming too late fails instead of allocating.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError


@pytest.fixture
def no_faiss_index(monkeypatch):
    """``faiss.index_factory`` replaced by one that records its calls and builds nothing, but for the parse check
    of ``FaissIndex(spec)`` (an empty index at placeholder sizes, after check_factory_sizes bounded them): it is the
    build's index, sized to the catalogue, that must not be allocated before the sizes are checked."""
    import faiss

    calls = []
    real = faiss.index_factory

    def refuse(*args):
        if any(frame.function == "check_factory_parses" for frame in inspect.stack()):
            return real(*args)
        calls.append(args)
        raise AssertionError(f"faiss.index_factory{args} was called before the sizes were checked")

    monkeypatch.setattr(faiss, "index_factory", refuse)
    return calls


def test_an_ivf_list_count_past_any_catalogue_is_refused_before_the_run_loads(tmp_path, capsys, no_faiss_index):
    # the run does not exist: the string is refused first
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", "IVF100000000,Flat"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: index IVF100000000,Flat: IVF100000000 asks for 100,000,000 IVF lists")
    assert "1,048,576" in err and "IVF{nlist}" in err
    import twotower as tt
    from twotower.index.faiss_index import FaissIndex

    with pytest.raises(ConfigError, match="100,000,000 IVF lists"):
        tt.build_index(tmp_path / "nope", "IVF100000000,Flat")
    with pytest.raises(ConfigError, match="100,000,000 IVF lists"):
        FaissIndex("IVF100000000,PQ8")
    assert no_faiss_index == []


def test_more_ivf_lists_than_vectors_are_refused_before_faiss_builds_the_index(no_faiss_index):
    from twotower.index.faiss_index import FaissIndex

    vectors = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
    with pytest.raises(ConfigError, match=r"IVF5000 asks for 5,000 IVF lists over 100 vectors.* at most 2 lists "
                                          r"here\); name fewer \(IVF2\)"):
        FaissIndex("IVF5000,Flat").build(vectors, np.arange(100))
    assert no_faiss_index == []


def test_a_list_count_the_catalogue_can_train_is_still_built():
    from twotower.index.faiss_index import FaissIndex

    vectors = np.random.default_rng(0).standard_normal((200, 8)).astype(np.float32)
    index = FaissIndex("IVF4,Flat").build(vectors, np.arange(200))
    assert index.nlist == 4 and len(index) == 200


@pytest.mark.parametrize("spec, m", [("HNSW100000000", 100_000_000), ("HNSW1", 1), ("IVF64_HNSW0,Flat", 0)])
def test_an_hnsw_m_outside_what_faiss_can_build_is_refused_before_the_run_loads(spec, m, tmp_path, capsys,
                                                                                 no_faiss_index):
    # HNSW100000000 failed with std::bad_alloc 12 s into the build; HNSW0 and HNSW1 crashed the process in FAISS
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: index {spec}: HNSW{m} links each vector to {m:,} neighbours (M), outside 2..512")
    from twotower.index.faiss_index import FaissIndex

    with pytest.raises(ConfigError, match=r"\(M\), outside 2\.\.512"):
        FaissIndex(spec)
    assert no_faiss_index == []


def test_an_ef_search_pinned_past_the_catalogue_is_refused_before_the_build():
    # FAISS sizes each query's candidate heaps to efSearch: --ef-search 1000000000 failed with std::bad_alloc
    from twotower.index.autotune import check_pin

    with pytest.raises(ConfigError, match=r"^params\['efSearch'\] 1000000000 is more than the 100 vectors of the "
                                          r"HNSW32 graph; at params\['efSearch'\] 100 a search"):
        check_pin("hnsw", {"efSearch": 1_000_000_000}, 100, 8)
    assert check_pin("hnsw", {"efSearch": 100}, 100, 8) == {"efSearch": 100}


@pytest.mark.parametrize("spec, said", [
    ("IVF{nlist},PQ64x24", "PQ64x24 codes with 24 bits, 16,777,216 centroids per codebook; the bits must be 1 to 16"),
    ("IVF8,PQ16x0", "PQ16x0 codes with 0 bits; the bits must be 1 to 16"),
    ("RQ2x30", "RQ2x30 codes with 30 bits, 1,073,741,824 centroids per codebook; the bits must be 1 to 16"),
])
def test_pq_bits_outside_1_to_16_are_refused_before_the_run_loads(spec, said, tmp_path, capsys, no_faiss_index):
    # IVF{nlist},PQ64x24 was refused by FAISS only after 30 s and 8.7 GB RSS; PQ64x0 crashed the process
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: index ") and said in err
    from twotower.index.faiss_index import FaissIndex

    with pytest.raises(ConfigError, match="the bits must be 1 to 16"):
        FaissIndex(spec)
    assert no_faiss_index == []


@pytest.mark.parametrize("spec, said", [
    ("PQ48", r"PQ48 splits each vector into 48 sub-vectors, and the dim 64 is not a multiple of 48; name a divisor "
             r"of 64 \(the nearest: 32 or 64\)"),
    ("IVF2,PQ8x12", r"PQ8x12 has 4,096 centroids per codebook over 1,000 vectors.*name fewer bits \(PQ8x4\)"),
])
def test_a_pq_the_catalogue_cannot_hold_is_refused_before_faiss_builds_it(spec, said, no_faiss_index):
    from twotower.index.faiss_index import FaissIndex

    vectors = np.random.default_rng(0).standard_normal((1000, 64)).astype(np.float32)
    with pytest.raises(ConfigError, match=said):
        FaissIndex(spec).build(vectors, np.arange(1000))
    assert no_faiss_index == []


@pytest.mark.parametrize("spec, said", [
    ("NSG100000000", "NSG100000000 links each vector to 100,000,000 neighbours (R), outside 24..512"),
    ("NSG2", "NSG2 links each vector to 2 neighbours (R), outside 24..512"),
    ("IVF64_NSG0,Flat", "NSG0 links each vector to 0 neighbours (R), outside 24..512"),
    ("OPQ16_100000000,PQ16", "OPQ16_100000000 outputs 100,000,000 dimensions, outside 1..16,384"),
    ("OPQ16_0,PQ16", "OPQ16_0 outputs 0 dimensions, outside 1..16,384"),
    ("OPQ0,PQ16", "OPQ0 has no sub-quantisers"),
    ("PCA100000000,Flat", "PCA100000000 outputs 100,000,000 dimensions"),
    ("PCAR0,Flat", "PCAR0 outputs 0 dimensions"),
    ("RR0,Flat", "RR0 outputs 0 dimensions"),
    ("PRQ2x0x8", "PRQ2x0x8 has 2 splits of 0 sub-quantisers each"),
    ("PLSQ2x2x0", "PLSQ2x2x0 codes with 0 bits; the bits must be 1 to 16"),
    ("PRQ2x2x24", "PRQ2x2x24 codes with 24 bits; the bits must be 1 to 16"),
    ("IVF100M,Flat", "IVF100M asks for 104,857,600 IVF lists, more than the 1,048,576"),
])
def test_transform_nsg_and_product_sizes_no_catalogue_can_use_are_refused_before_the_run_loads(
        spec, said, tmp_path, capsys, no_faiss_index):
    # NSG100000000 and NSG2 never finished building; OPQ16_100000000 failed with std::bad_alloc; OPQ16_0, RR0,
    # PRQ2x0x8 and PLSQ2x2x0 crashed the process in FAISS; IVF100M was read as IVF100 (FAISS: 100 x 2^20 lists)
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: index {spec}: ") and said in err
    from twotower.index.faiss_index import FaissIndex

    with pytest.raises(ConfigError, match=re.escape(said)):
        FaissIndex(spec)
    assert no_faiss_index == []


@pytest.mark.parametrize("spec, said", [
    ("PCA128,Flat", r"PCA128 keeps 128 principal components of vectors of dim 64, which have at most 64; "
                    r"name at most PCA64"),
    ("PCAWR96,HNSW32", r"PCAWR96 keeps 96 principal components of vectors of dim 64"),
    ("OPQ16_256,PQ16", r"OPQ16_256 rotates vectors of dim 64 to 256 dimensions; past 64 .* name at most OPQ16_64"),
    ("OPQ16_40,PQ16", r"OPQ16_40 rotates to 40 dimensions for 16 sub-quantisers, and 40 is not a multiple of 16; "
                      r"name an output dimension that is \(OPQ16_48\)"),
    ("PRQ3x2x4", r"PRQ3x2x4 splits each vector into 3 parts, and the dim 64 is not a multiple of 3"),
    ("PRQ2x2x12", r"PRQ2x2x12 has 4,096 centroids per codebook over 1,000 vectors"),
])
def test_a_transform_or_product_quantiser_the_vectors_cannot_hold_is_refused_with_the_dim(spec, said,
                                                                                         no_faiss_index):
    from twotower.index.faiss_index import FaissIndex

    vectors = np.random.default_rng(0).standard_normal((1000, 64)).astype(np.float32)
    with pytest.raises(ConfigError, match=said):
        FaissIndex(spec).build(vectors, np.arange(1000))
    assert no_faiss_index == []


@pytest.mark.parametrize("spec", ["PCA32,Flat", "OPQ8_32,PQ8x4", "OPQ12_72,PQ12x4", "PCA48,PQ48x4", "IVF1k,Flat",
                                  "PRQ2x2x4"])
def test_sizes_within_the_bounds_are_still_built(spec):
    from twotower.index.faiss_index import FaissIndex

    # OPQ12_72 on dim 64 pads to a multiple of 12, the one use of an output past the dim; its PQ12 and PCA48's
    # PQ48 split the transform's output, not the 64 dimensions (once refused: "the dim 64 is not a multiple of 12")
    vectors = np.random.default_rng(0).standard_normal((1200, 64)).astype(np.float32)
    index = FaissIndex(spec).build(vectors, np.arange(1200))
    assert len(index) == 1200 and index.search(vectors[:3], 5).ids.shape == (3, 5)


@pytest.mark.parametrize("spec, said", [
    ("IVF8(PQ4x4),Flat", "the coarse quantiser PQ4x4 of IVF8 has 16 centroids per codebook, and it is trained on the "
                         "8 list centroids alone: k-means cannot place more centroids than points; name fewer bits "
                         "(PQ4x3) or more lists (IVF16(PQ4x4))"),
    ("IVF8(RQ2),Flat", "the coarse quantiser RQ2 (8 bits, FAISS's default) of IVF8 has 256 centroids per codebook"),
])
def test_a_coarse_pq_with_more_centroids_than_lists_is_refused_before_the_run_loads(spec, said, tmp_path, capsys,
                                                                                    no_faiss_index):
    # FAISS refused IVF8(PQ4x4),Flat only at training: "Number of training points (8) should be at least as large
    # as number of clusters (16)"; the coarse PQ is trained on the 8 list centroids
    assert main(["index", "build", "--run", str(tmp_path / "nope"), "--index", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: index {spec}: ") and said in err
    from twotower.index.faiss_index import FaissIndex

    with pytest.raises(ConfigError, match=re.escape(said)):
        FaissIndex(spec)
    assert no_faiss_index == []


def test_a_coarse_pq_the_lists_can_train_is_still_built():
    from twotower.index.faiss_index import FaissIndex

    vectors = np.random.default_rng(0).standard_normal((1200, 16)).astype(np.float32)
    index = FaissIndex("IVF16(PQ4x4),Flat").build(vectors, np.arange(1200))
    assert len(index) == 1200 and index.search(vectors[:3], 5).ids.shape == (3, 5)
