"""Build one FAISS index from a catalogue encoded by several processes.

Legend: ``N`` catalogue vectors, ``D`` dim, ``C`` vectors per chunk, ``S``
training-sample size, ``W`` processes (ranks).

Under ``torchrun`` every rank calls :func:`build_index_distributed`:

1. **train once** -- rank 0 trains the empty index (IVF coarse quantizer, PQ
   codebooks) on a sample and broadcasts its bytes (``faiss.serialize_index``
   in a uint8 tensor), so every shard is encoded against the same quantizer;
2. **add a shard** -- each rank streams its own part of the catalogue,
   ``vectors_fn(rank, world) -> iterator of (ids[C], vectors[C, D])``, into its
   copy with ``add_with_ids``, chunk by chunk: memory per rank is one chunk of
   float32 plus its shard's codes, never the whole catalogue as float32;
3. **merge on rank 0** -- ranks send their shard (index bytes, ids) to rank 0
   one at a time; rank 0 appends each with ``merge_from`` and drops it, then
   wraps the result in a :class:`~twotower.index.faiss_index.FaissIndex` and
   saves it (checksums, model fingerprint) when ``out_dir`` is given.

A merged IVF index holds exactly the codes a one-process build with the same
trained quantizer would hold, so it answers with the same :class:`Results`;
so does searching each shard and combining with
:meth:`~twotower.results.Results.merge` (serving shards without merging).
Without a process group (or ``W == 1``) the same call is a plain streaming
build. Mergeable types: ``IVF*`` (any encoding) and ``Flat``; graph (HNSW)
and refine indexes cannot be merged by FAISS and are refused.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from twotower.errors import ConfigError, DataError
from twotower.index.base import check_ids, check_vectors
from twotower.index.exact import use_blas_for
from twotower.index.faiss_index import (FaissIndex, _drop_opq_pqs, _said_once, check_factory_sizes, min_training_points,
                                          resolve_factory, seed_training, skip_polysemous_training)
from twotower.distributed import distributed_world

__all__ = [
    "build_index_distributed",
    "train_empty_index",
    "broadcast_index",
    "add_shard",
    "merge_to_main",
    "wrap_index",
    "shard_range",
]

log = logging.getLogger(__name__)

VectorsFn = Callable[[int, int], Iterable[tuple[np.ndarray, np.ndarray]]]


def _faiss() -> Any:
    import faiss

    return faiss


def shard_range(n: int, shard: int, n_shards: int) -> tuple[int, int]:
    """``[start, stop)`` rows of shard ``shard`` when ``n`` rows are cut into ``n_shards`` contiguous parts."""
    if not 0 <= shard < n_shards:
        raise ConfigError(f"shard must be in [0, {n_shards}), got {shard}")
    base, extra = divmod(n, n_shards)
    start = shard * base + min(shard, extra)
    return start, start + base + (shard < extra)


def train_empty_index(factory: str, train_sample: np.ndarray, *, n_total: int | None = None,
                      seed: int = 0) -> tuple[Any, str]:
    """An empty, trained FAISS index (inner product) and its resolved factory string.

    ``train_sample[S, D]`` float32; ``n_total`` (the catalogue size, default
    ``S``) sizes shortcut factories such as ``ivfpq``; ``seed`` seeds FAISS's
    k-means (IVF lists, PQ codebooks) as :class:`FaissIndex` does (0: FAISS's
    own constants). Indexes without native ids are wrapped in ``IndexIDMap2``
    (as :class:`FaissIndex` does).
    """
    faiss = _faiss()
    sample = check_vectors(train_sample, name="train_sample")
    s, dim = sample.shape
    resolved = resolve_factory(factory, int(n_total or s), dim)
    check_factory_sizes(factory, resolved, int(n_total or s), dim)  # before FAISS allocates what it names
    try:
        index = faiss.index_factory(dim, resolved, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise ConfigError(f"FAISS rejected the index {resolved!r} (from {factory!r}): {e}") from e
    if isinstance(index, (faiss.IndexRefine, faiss.IndexHNSW)) or not (
        isinstance(index, (faiss.IndexIVF, faiss.IndexFlat))
    ):
        raise ConfigError(
            f"{resolved!r} cannot be merged across shards (FAISS merges IVF and Flat indexes only); "
            "use an IVF factory such as 'IVF4096,PQ16' or 'ivfpq', or build it in one process"
        )
    # the one-process build's seeding: `index build --seed` under torchrun left FAISS's constants in place
    lent = seed_training(index, seed)  # PQs lent to OPQ rotations, kept alive until trained
    skip_polysemous_training(index)  # only for Hamming filtering; slow
    if not isinstance(index, faiss.IndexIVF):
        index = faiss.IndexIDMap2(index)
    if not index.is_trained:
        need = min_training_points(index)
        if need > s:  # one line, as FaissIndex.build says it, not FAISS's own per k-means (16 for PQ16)
            log.warning("%s wants %d training vectors (39 per centroid) but the sample has %d, so FAISS trains it on "
                        "fewer; the recall measured on the built index says what that costs", resolved, need, s)
            lent += _said_once(index)
        t0 = time.perf_counter()
        use_blas_for(len(sample))  # k-means by SGEMM, as FaissIndex.build trains
        try:
            index.train(sample)
        finally:
            _drop_opq_pqs(lent)
        log.info("trained %s on %d vectors of dim %d in %.1fs", resolved, s, dim, time.perf_counter() - t0)
    # round-trip through bytes: FAISS reads some types back as a subclass (Flat -> IndexFlatIP),
    # and merge_from needs rank 0's index to have exactly the type the other ranks deserialise
    return faiss.deserialize_index(faiss.serialize_index(index)), resolved


def _cpu_group(group: dist.ProcessGroup | None) -> dist.ProcessGroup | None:
    """``group``, or a gloo group when the default one is NCCL (the index bytes live on CPU)."""
    if group is None and dist.get_backend() == "nccl":
        return dist.new_group(backend="gloo")
    return group


def broadcast_index(index: Any | None, group: dist.ProcessGroup | None = None) -> Any:
    """Rank 0's FAISS ``index`` on every rank (its serialised bytes in a uint8 tensor)."""
    rank, world = distributed_world(group)
    if world == 1:
        return index
    faiss = _faiss()
    payload = torch.from_numpy(faiss.serialize_index(index)) if rank == 0 else None  # [bytes]
    size = torch.tensor([payload.numel() if payload is not None else 0], dtype=torch.long)
    dist.broadcast(size, src=0, group=group)
    if payload is None:
        payload = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(payload, src=0, group=group)
    return index if rank == 0 else faiss.deserialize_index(payload.numpy())


def add_shard(index: Any, chunks: Iterable[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Add ``(ids[C], vectors[C, D])`` chunks to ``index``; returns the shard's ids ``[N_shard]``."""
    dim = int(index.d)
    parts: list[np.ndarray] = []
    for ids, vectors in chunks:
        vectors = check_vectors(vectors, dim)
        ids = check_ids(ids, vectors.shape[0])
        use_blas_for(vectors.shape[0])  # list assignment by SGEMM
        index.add_with_ids(vectors, ids)
        parts.append(ids)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _send_array(arr: np.ndarray, dst: int, group: dist.ProcessGroup | None) -> None:
    payload = torch.from_numpy(np.ascontiguousarray(arr).view(np.uint8).ravel())
    dist.send(torch.tensor([payload.numel()], dtype=torch.long), dst=dst, group=group)
    if payload.numel():
        dist.send(payload, dst=dst, group=group)


def _recv_array(src: int, dtype: np.dtype, group: dist.ProcessGroup | None) -> np.ndarray:
    size = torch.empty(1, dtype=torch.long)
    dist.recv(size, src=src, group=group)
    payload = torch.empty(int(size.item()), dtype=torch.uint8)
    if payload.numel():
        dist.recv(payload, src=src, group=group)
    return payload.numpy().view(dtype)


def merge_to_main(index: Any, ids: np.ndarray, group: dist.ProcessGroup | None = None) -> tuple[Any, np.ndarray] | None:
    """Merge every rank's shard into rank 0's, one shard at a time; ``(index, ids)`` on rank 0, None elsewhere.

    Ids end up in rank order; a duplicate id across shards is a DataError.
    """
    rank, world = distributed_world(group)
    if world == 1:
        return index, ids
    faiss = _faiss()
    if rank != 0:
        _send_array(faiss.serialize_index(index), 0, group)
        _send_array(ids.astype(np.int64), 0, group)
        return None
    all_ids = [ids]
    for src in range(1, world):
        shard = faiss.deserialize_index(_recv_array(src, np.dtype(np.uint8), group))
        all_ids.append(_recv_array(src, np.dtype(np.int64), group).copy())
        index.merge_from(shard, 0)  # moves the codes; the shard is left empty
        del shard
    merged_ids = np.concatenate(all_ids)
    if np.unique(merged_ids).size != merged_ids.size:
        raise DataError("the shards share ids; vectors_fn must give every rank disjoint ids")
    return index, merged_ids


def wrap_index(index: Any, ids: np.ndarray, factory: str, resolved: str, build_params: dict[str, Any],
               *, seed: int = 0, max_train: int | None = None) -> FaissIndex:
    """A :class:`FaissIndex` around an already built FAISS ``index`` holding ``ids``, trained with ``seed``."""
    # FaissIndex has no public constructor from a built FAISS index yet; these are the
    # fields its own build() fills (see the report to the index owner). The seed goes to meta.json's config.
    out = FaissIndex(factory, seed=seed, max_train=max_train)
    out._index = index
    out._ids = np.asarray(ids, dtype=np.int64)
    out.factory = resolved
    out._build_params = dict(build_params)
    return out


def build_index_distributed(
    vectors_fn: VectorsFn,
    factory: str,
    train_sample: np.ndarray | Callable[[], np.ndarray] | None,
    out_dir: str | Path | None = None,
    *,
    n_total: int | None = None,
    nprobe: int | None = None,
    model_fingerprint: str | None = None,
    group: dist.ProcessGroup | None = None,
    seed: int = 0,
    max_train: int | None = None,
) -> FaissIndex | None:
    """Train once on rank 0, add shards on every rank, merge and save on rank 0.

    ``vectors_fn(rank, world)`` yields this rank's ``(ids[C], vectors[C, D])``
    chunks (disjoint ids across ranks; see :func:`shard_range`).
    ``train_sample`` (``[S, D]`` or a function returning it) is read on rank 0
    only. ``n_total`` sizes shortcut factories; ``seed`` seeds FAISS's
    k-means on rank 0 (as ``FaissIndex(seed=...)``); ``nprobe`` is set on the
    result; ``out_dir`` is written on rank 0 with ``model_fingerprint``.
    Returns the merged :class:`FaissIndex` on rank 0 and None on other ranks,
    after a barrier (the saved index exists when any rank returns). ``max_train``: the cap the training sample
    was drawn under, recorded in ``meta.json`` as a one-process build records its own (it caps nothing here).
    """
    rank, world = distributed_world(group)
    if world > 1:
        group = _cpu_group(group)
    t0 = time.perf_counter()
    index = resolved = None
    n_train = 0
    if rank == 0:
        sample = train_sample() if callable(train_sample) else train_sample
        if sample is None:
            raise ConfigError("rank 0 needs train_sample (an array [S, D] or a function returning one)")
        n_train = int(np.asarray(sample).shape[0])
        index, resolved = train_empty_index(factory, sample, n_total=n_total, seed=seed)
        del sample
    train_s = time.perf_counter() - t0
    index = broadcast_index(index, group)
    t1 = time.perf_counter()
    ids = add_shard(index, vectors_fn(rank, world))
    add_s = time.perf_counter() - t1
    log.info("rank %d/%d: added %d vectors in %.1fs", rank, world, ids.size, add_s)
    t2 = time.perf_counter()
    merged = merge_to_main(index, ids, group)
    result = None
    if merged is not None:
        params = {
            "n_train": n_train,
            "train_seconds": round(train_s, 3),
            "add_seconds": round(add_s, 3),
            "merge_seconds": round(time.perf_counter() - t2, 3),
            "world_size": world,
            "distributed": True,
            "seed": int(seed),
            "max_train": max_train,  # as FaissIndex.build records it: the torchrun meta.json lacked it
        }
        result = wrap_index(merged[0], merged[1], factory, str(resolved), params, seed=seed, max_train=max_train)
        if nprobe is not None:
            result.set_search_params(nprobe=nprobe)
        if out_dir is not None:
            result.save(out_dir, model_fingerprint=model_fingerprint)
    if world > 1:
        dist.barrier(group=group)
    return result
