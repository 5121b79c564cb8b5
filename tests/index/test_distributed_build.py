"""A 2-rank streaming index build gives the Results of a one-process build with the same quantizer.

One ``mp.spawn`` of 2 gloo ranks; each streams its half of a seeded clustered
catalogue (3,000 x 16, ids ``10 * row + 7``) in chunks of 400. Checked against
a one-process build in the test process (same sample, same FAISS seed, 1
thread, so the same trained quantizer):

* the merged IVF-PQ index (rank 0) answers with the same ids and scores;
* searching each rank's shard and ``Results.merge`` gives the same scores, and the same ids
  wherever ties at the k-th place leave the order defined (serving shards);
* ``build_index_distributed`` end to end writes one verified index directory
  that loads with the model fingerprint and answers the same; Flat as well.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch.multiprocessing as mp

from twotower.errors import ConfigError
from twotower.index import load_index
from twotower.index.distributed_build import (
    add_shard,
    broadcast_index,
    build_index_distributed,
    merge_to_main,
    shard_range,
    train_empty_index,
    wrap_index,
)
from twotower.results import Results

WORLD, N, DIM, CHUNK, K = 2, 3000, 16, 400, 10
IVFPQ = "IVF16,PQ4x4"


def _catalogue(rows: np.ndarray) -> np.ndarray:
    """Row r's vector depends on r only (so any shard can make its own rows): 20 clusters + noise."""
    centers = np.random.default_rng(0).standard_normal((20, DIM)).astype(np.float32)
    x = np.stack([centers[r % 20] + 0.3 * np.random.default_rng([1, int(r)]).standard_normal(DIM) for r in rows])
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # [C, D]


def _vectors_fn(rank: int, world: int):
    lo, hi = shard_range(N, rank, world)
    for s in range(lo, hi, CHUNK):
        rows = np.arange(s, min(s + CHUNK, hi))
        yield 10 * rows + 7, _catalogue(rows)


def _sample() -> np.ndarray:
    return _catalogue(np.arange(0, N, 2))


def _queries() -> np.ndarray:
    return _catalogue(np.arange(N, N + 25))


def _search(index, resolved: str, ids: np.ndarray) -> Results:
    wrapped = wrap_index(index, ids, IVFPQ, resolved, {})
    wrapped.set_search_params(nprobe=4)
    return wrapped.search(_queries(), K)


def _worker(rank: int, port: int, out_dir: str) -> None:
    import faiss
    import torch

    from twotower.training import distributed as tdist

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    out = Path(out_dir)
    try:
        assert tdist.init_from_env("gloo")
        # step by step: train on rank 0, broadcast, add this rank's shard
        trained, resolved = train_empty_index(IVFPQ, _sample()) if rank == 0 else (None, None)
        index = broadcast_index(trained)
        ids = add_shard(index, _vectors_fn(rank, WORLD))
        shard = _search(faiss.clone_index(index), IVFPQ, ids)
        np.savez(out / f"shard{rank}.npz", ids=shard.ids, scores=shard.scores)
        merged = merge_to_main(index, ids)
        if rank == 0:
            assert merged is not None and merged[0].ntotal == N
            res = _search(merged[0], resolved, merged[1])
            np.savez(out / "merged.npz", ids=res.ids, scores=res.scores, all_ids=merged[1])
        else:
            assert merged is None
        # end to end, saved on rank 0
        for name, factory in (("ivfpq", IVFPQ), ("flat", "Flat")):
            got = build_index_distributed(
                _vectors_fn, factory, _sample, out / name, nprobe=4 if name == "ivfpq" else None, model_fingerprint="fp"
            )
            assert (got is not None) == (rank == 0)
            assert (out / name / "meta.json").exists()  # the barrier: saved before any rank returns
    finally:
        tdist.cleanup()
    os._exit(0)  # skip the slow teardown of a torch child; results are on disk


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return out


@pytest.fixture(scope="module")
def reference() -> Results:
    """One process, one shard, the same sample: the results the distributed build must reproduce."""
    import faiss

    faiss.omp_set_num_threads(1)
    index, resolved = train_empty_index(IVFPQ, _sample())
    ids = add_shard(index, _vectors_fn(0, 1))
    return _search(index, resolved, ids)


def _assert_same(got: Results, want: Results) -> None:
    np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-6)


def test_merged_index_answers_like_a_one_process_build(two_ranks: Path, reference: Results) -> None:
    merged = np.load(two_ranks / "merged.npz")
    np.testing.assert_array_equal(np.sort(merged["all_ids"]), 10 * np.arange(N) + 7)
    _assert_same(Results(merged["ids"], merged["scores"]), reference)
    assert (reference.ids != -1).all()


def test_searching_shards_and_merging_results_answers_the_same(two_ranks: Path, reference: Results) -> None:
    parts = [np.load(two_ranks / f"shard{r}.npz") for r in range(WORLD)]
    shards = [Results(p["ids"], p["scores"]) for p in parts]
    assert np.isin(shards[0].ids, 10 * np.arange(N // 2) + 7).all()  # rank 0 holds the first half
    got = Results.merge(shards, K)
    # PQ scores can tie; FAISS cuts a tie at the k-th place arbitrarily, so compare the scores and
    # the ids strictly above each row's k-th score (the ids must agree wherever the order is defined)
    np.testing.assert_allclose(got.scores, reference.scores, rtol=0, atol=1e-6)
    for q in range(len(got)):
        above = reference.scores[q] > reference.scores[q, -1] + 1e-6
        assert set(got.ids[q][above]) == set(reference.ids[q][above]), q


def test_build_index_distributed_saves_one_verified_index(two_ranks: Path, reference: Results) -> None:
    index = load_index(two_ranks / "ivfpq", expected_fingerprint="fp")
    assert len(index) == N and index.search_params == {"nprobe": 4}
    assert index.factory == IVFPQ
    _assert_same(index.search(_queries(), K), reference)
    flat = load_index(two_ranks / "flat", expected_fingerprint="fp")
    exact = np.argsort(-(_queries() @ _catalogue(np.arange(N)).T), axis=1, kind="stable")[:, :K]
    np.testing.assert_array_equal(flat.search(_queries(), K).ids, 10 * exact + 7)


def test_one_process_call_and_errors(tmp_path: Path, reference: Results) -> None:
    index = build_index_distributed(_vectors_fn, IVFPQ, _sample(), tmp_path / "one", nprobe=4)
    _assert_same(index.search(_queries(), K), reference)
    with pytest.raises(ConfigError, match="cannot be merged"):
        train_empty_index("HNSW32", _sample())
    with pytest.raises(ConfigError, match="train_sample"):
        build_index_distributed(_vectors_fn, IVFPQ, None)
    assert [shard_range(10, s, 3) for s in range(3)] == [(0, 4), (4, 7), (7, 10)]
