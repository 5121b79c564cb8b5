"""Exact inner-product search, block by block: the reference every ANN backend is tested against.

Legend: ``Q`` queries, ``N`` catalogue vectors, ``D`` dim, ``F`` fetched per
query, ``Qb``/``Nb`` the query/catalogue block sizes.

Scores are computed as ``queries_block @ vectors_block.T`` with torch (so
``twotower.utils.runtime.set_threads`` controls the threads), at most
``max_block_elems`` scores at a time, and only the running top-``F`` is kept,
so memory stays bounded however large the catalogue. Ties are broken by the
smaller id, exactly as :meth:`twotower.results.Results.from_scores_and_ids`
does, so results are deterministic and comparable with ``argsort``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from twotower.errors import ConfigError, DataError
from twotower.index.base import VectorIndex, check_ids, check_vectors
from twotower.results import PAD_ID, Results

__all__ = ["ExactIndex"]


def _block_topk(scores: Any, ids: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``kk`` of a score block ``[Qb, Nb]`` (torch) with ties broken by smaller id."""
    import torch

    vals, cols = torch.topk(scores, kk, dim=1)  # [Qb, kk]
    kth = vals[:, -1:]  # [Qb, 1]
    n_ge = (scores >= kth).sum(dim=1)  # [Qb]; > kk means a tie straddles the cut
    vals_np, cols_np = vals.numpy().copy(), cols.numpy().copy()
    for r in torch.nonzero(n_ge > kk).flatten().tolist():
        row = scores[r].numpy()  # [Nb]
        t = vals_np[r, -1]
        above = np.flatnonzero(row > t)
        tied = np.flatnonzero(row == t)
        tied = tied[np.argsort(ids[tied], kind="stable")][: kk - above.size]
        pick = np.concatenate([above, tied])
        cols_np[r], vals_np[r] = pick, row[pick]
    return vals_np, ids[cols_np]


class ExactIndex(VectorIndex):
    """Brute-force inner product over all vectors, in bounded-memory blocks.

    ``max_block_elems`` caps the size of one score block (``Qb * Nb`` float32
    values; the default 2**24 is 64 MiB).
    """

    backend = "exact"
    is_exact = True

    def __init__(self, *, max_block_elems: int = 1 << 24) -> None:
        super().__init__()
        if isinstance(max_block_elems, bool) or int(max_block_elems) < 1:
            raise ConfigError(f"max_block_elems must be a positive integer, got {max_block_elems!r}")
        self.max_block_elems = int(max_block_elems)
        self._vectors = np.empty((0, 0), dtype=np.float32)  # [N, D]
        self._ids = np.empty(0, dtype=np.int64)  # [N]
        self._dim: int | None = None

    # ------------------------------------------------------------------ contents
    def build(self, vectors: np.ndarray, ids: np.ndarray) -> "ExactIndex":
        vectors = check_vectors(vectors)
        self._ids = check_ids(ids, vectors.shape[0]).copy()
        self._vectors = vectors.copy()  # the caller may reuse its buffer
        self._dim = int(vectors.shape[1])
        return self

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        if self._dim is None:
            self.build(vectors, ids)
            return
        vectors = check_vectors(vectors, self._dim)
        ids = check_ids(ids, vectors.shape[0])
        clash = np.intersect1d(ids, self._ids)
        if clash.size:
            raise DataError(f"ids already in the index: {clash[:10].tolist()}; remove them first to replace them")
        self._vectors = np.concatenate([self._vectors, vectors])
        self._ids = np.concatenate([self._ids, ids])

    def remove(self, ids: np.ndarray) -> int:
        drop = np.isin(self._ids, np.asarray(ids, dtype=np.int64).ravel())
        removed = int(drop.sum())
        if removed:
            self._vectors = self._vectors[~drop]
            self._ids = self._ids[~drop]
        return removed

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    @property
    def dim(self) -> int:
        if self._dim is None:
            raise ConfigError("the index is empty; call build(vectors, ids) first")
        return self._dim

    @property
    def ids(self) -> np.ndarray:
        """The stored ids ``[N]`` (a read-only view)."""
        view = self._ids.view()
        view.flags.writeable = False
        return view

    @property
    def vectors(self) -> np.ndarray:
        """The stored vectors ``[N, D]`` (a read-only view), row-aligned with :attr:`ids`."""
        view = self._vectors.view()
        view.flags.writeable = False
        return view

    # ------------------------------------------------------------------ search
    def _search_candidates(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        n, n_q = len(self), queries.shape[0]
        rows_per_block = min(n, 1 << 16, self.max_block_elems)
        qb = max(1, min(n_q, self.max_block_elems // rows_per_block))  # Qb
        nb = max(1, min(n, self.max_block_elems // qb))  # Nb: Qb * Nb <= max_block_elems
        base = torch.from_numpy(self._vectors)  # [N, D], shares memory
        out_scores = np.full((n_q, fetch), -np.inf, dtype=np.float32)  # [Q, F]
        out_ids = np.full((n_q, fetch), PAD_ID, dtype=np.int64)
        with torch.inference_mode():
            for q0 in range(0, n_q, qb):
                qt = torch.from_numpy(queries[q0 : q0 + qb])  # [Qb, D]
                best_s = np.full((qt.shape[0], 0), -np.inf, dtype=np.float32)
                best_i = np.full((qt.shape[0], 0), PAD_ID, dtype=np.int64)
                for n0 in range(0, n, nb):
                    block = qt @ base[n0 : n0 + nb].T  # [Qb, Nb]
                    kk = min(fetch, block.shape[1])
                    s, i = _block_topk(block, self._ids[n0 : n0 + nb], kk)  # [Qb, kk]
                    merged = Results.from_scores_and_ids(
                        np.concatenate([best_s, s], axis=1), np.concatenate([best_i, i], axis=1), min(fetch, n)
                    )
                    best_s, best_i = merged.scores, merged.ids
                out_scores[q0 : q0 + qb, : best_s.shape[1]] = best_s
                out_ids[q0 : q0 + qb, : best_i.shape[1]] = best_i
        return out_scores, out_ids

    # ------------------------------------------------------------------ storage
    def _write(self, directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        np.save(directory / "vectors.npy", self._vectors, allow_pickle=False)
        np.save(directory / "ids.npy", self._ids, allow_pickle=False)
        return {"max_block_elems": self.max_block_elems}, {}

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any]) -> "ExactIndex":
        index = cls(**meta.get("config", {}))
        vectors = np.load(directory / "vectors.npy", allow_pickle=False)
        ids = np.load(directory / "ids.npy", allow_pickle=False)
        index._vectors, index._ids, index._dim = vectors, ids, int(meta["dim"])
        return index

    def nbytes(self) -> int:
        """Bytes held for vectors and ids."""
        return int(self._vectors.nbytes + self._ids.nbytes)
