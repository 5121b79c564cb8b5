"""Exact inner-product search on BLAS: the reference every ANN backend is tested against.

Legend: ``Q`` queries, ``N`` catalogue vectors, ``D`` dim, ``F`` fetched per
query, ``Qb`` a block of queries.

Two passes. (1) Candidates: FAISS's brute-force ``knn`` over the stored
vectors (no copy into a FAISS index), which scores blocks with one SGEMM
each and keeps a running heap per query: ``distance_compute_blas_threshold``
is set so that batches of :data:`BLAS_MIN_QUERIES` or more take SGEMM (FAISS's
default, 128,000, leaves batches on its SIMD loop, 5-7x slower) and smaller
ones the SIMD loop (faster for one query).
(2) Canonical scores: every candidate is re-scored as a float64 dot product
rounded to float32, so a score does not depend on the batch it was computed
in (SGEMM kernels differ by batch shape), and candidates are sorted by
``(-score, id)``. The fetched prefix is provably the exact top-``F``: a row
is accepted only when the last SGEMM score fetched is below the ``F``-th
canonical score by more than the SGEMM rounding bound. Otherwise (ties or
near-ties at the cut) one more scan settles it: the ``F``-th canonical score
fetched, ``t``, is a lower bound of the true ``F``-th, so the answer is the
top-``F`` of the items scoring at least ``t``. The scan rules out most
blocks by SGEMM, scores the rest with a float64 GEMM (whose error bound tells,
for nearly every item, its canonical float32 score without re-scoring it),
and keeps a running top-``F`` that takes the smaller ids of a tie (a zero query ties every item at exactly 0: its
top-``F`` is the ``F`` smallest ids, without a scan). Fetching
twice as deep instead took about ``log2(tie / F)`` more scans for a tie of
that size at the cut. The CLI and the HTTP service therefore return
identical lists for identical queries.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from twotower.errors import ConfigError, DataError
from twotower.index.base import VectorIndex, check_ids, check_vectors, describe
from twotower.results import PAD_ID

__all__ = ["ExactIndex", "BLAS_MIN_QUERIES", "canonical_scores", "use_blas_for"]

#: Batches of at least this many queries are scored with SGEMM by FAISS; smaller ones on its SIMD loop.
#: Measured with FAISS 1.15 at 100k x 64, one thread: 1 query 2.9 ms (SIMD) vs 6.6 ms (BLAS); 8 queries
#: 3.1 ms/query (SIMD) vs 1.1 ms/query (BLAS); 64 queries 2.9 vs 0.4 ms/query.
BLAS_MIN_QUERIES = 4
_NO_BLAS = 1 << 30
#: Extra candidates fetched past ``F`` so that near-ties at the cut rarely need a second pass.
_MARGIN = 8
#: Items per block of the scan that settles a tie at the cut, unless ``F`` is larger (fewer, longer GEMMs).
_SCAN_COLS = 4096


def use_blas_for(n_queries: int) -> None:
    """Set FAISS's brute-force path for a search of ``n_queries``: SGEMM from :data:`BLAS_MIN_QUERIES` on.

    FAISS reads one process-wide threshold, used by ``knn`` here and by every flat scan inside its indexes
    (``IndexFlat``, an IVF index's coarse quantizer). Each search sets it for its own batch, so no index
    runs on the setting the previous search left: a batch after a single query would otherwise take the
    SIMD loop (FAISS ``Flat`` measured 22 against 318 batched QPS for this index in one autotune at 299K
    items). A concurrent search may still see the other setting, which costs speed, never correctness
    (both paths compute the same candidates).
    """
    import faiss

    threshold = 1 if n_queries >= BLAS_MIN_QUERIES else _NO_BLAS
    if faiss.cvar.distance_compute_blas_threshold != threshold:
        faiss.cvar.distance_compute_blas_threshold = threshold


def _faiss_knn(queries: np.ndarray, vectors: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray]:
    """FAISS brute-force top-``f`` by inner product -> ``(scores[Q, f], rows[Q, f])``, best first."""
    import faiss

    use_blas_for(queries.shape[0])
    scores, rows = faiss.knn(queries, vectors, f, metric=faiss.METRIC_INNER_PRODUCT)
    return scores, rows.astype(np.int64, copy=False)


def canonical_scores(queries: np.ndarray, vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``queries[Q, D]`` . ``vectors[rows[Q, F]]`` as float64 dot products rounded to float32 -> ``[Q, F]``.

    Independent of how queries are batched (numpy's pairwise sum over a fixed
    ``D``); rows equal to ``PAD_ID`` score ``-inf``.
    """
    rows = np.asarray(rows)
    scores = np.empty(rows.shape, dtype=np.float32)  # [Q, F]
    # in blocks of queries of at most ~8 MB of float64 gathers: one [Q, F, D] gather (256 queries x 1,024 rows x 64:
    # 134 MB) was first-touched memory on every new size, 0.65 s of a first POST /recommend/batch's 1.1 s
    step = max(1, (1 << 20) // max(1, rows.shape[1] * vectors.shape[1]))
    for s in range(0, len(rows), step):
        gathered = vectors[np.maximum(rows[s : s + step], 0)].astype(np.float64)  # [q, F, D]
        scores[s : s + step] = (gathered * queries[s : s + step].astype(np.float64)[:, None, :]).sum(axis=2)
    return np.where(rows == PAD_ID, np.float32(-np.inf), scores)


def max_norm(vectors: np.ndarray) -> float:
    """Largest row norm of ``vectors[N, D]``: scales the SGEMM rounding bound of :func:`sgemm_eps`."""
    # in row chunks: a float64 copy of a 1M x 64 catalogue would be 512 MB per (worker) process
    best = 0.0
    for s in range(0, len(vectors), 1 << 16):
        chunk = vectors[s : s + (1 << 16)].astype(np.float64)
        best = max(best, float((chunk**2).sum(axis=1).max(initial=0.0)))
    return float(np.sqrt(best))


def sgemm_eps(queries: np.ndarray, norm_bound: float) -> np.ndarray:
    """A bound, per query, on how far any float32 dot product of ``queries[Q, D]`` with a vector of norm at most
    ``norm_bound`` lies from the exact one (SGEMM, FAISS's SIMD loop, any summation order) -> ``[Q]``.

    The error of one sum is at most about ``D * 2**-24 * |q| * |v|``; this is four times that, with slack, so that
    twice it separates a strict winner from anything a search left behind."""
    q_norm = np.sqrt((queries.astype(np.float64) ** 2).sum(axis=1))  # [Q]
    return (queries.shape[1] + 2) * 2.0**-22 * q_norm * norm_bound + 1e-30


def scan_reaching(
    vectors: np.ndarray, queries: np.ndarray, cut: np.ndarray, eps: np.ndarray, cols: int
) -> Iterator[tuple[int, np.ndarray]]:
    """Blocks of ``cols`` rows of ``vectors[N, D]`` with, for each, which may score ``>= cut[Q]`` exactly.

    Yields ``(c0, hit[C, Q])``: ``hit`` is False only where the block row's SGEMM score is below ``cut - eps``
    (``eps`` from :func:`sgemm_eps`), so an item whose exact score (or any float32 one within ``eps``) reaches
    the cut is never ruled out. Past a near-tie at a cut, nearly every row is ruled out by one SGEMM."""
    # rounded down to float32: no SGEMM score that could reach the cut is compared away
    floor = np.nextafter((cut - eps).astype(np.float32), np.float32(-np.inf))  # [Q]
    for c0 in range(0, len(vectors), cols):
        yield c0, vectors[c0 : c0 + cols] @ queries.T >= floor  # [C, Q]


def count_reaching(
    vectors: np.ndarray, queries: np.ndarray, cut: np.ndarray, eps: np.ndarray, max_block_elems: int
) -> np.ndarray:
    """How many rows of ``vectors`` :func:`scan_reaching` keeps for each query -> ``[Q]`` int64.

    An upper bound of the number of items whose score reaches ``cut``; ``Q * C <= max_block_elems`` per block."""
    counts = np.zeros(queries.shape[0], dtype=np.int64)
    for _, hit in scan_reaching(vectors, queries, cut, eps, max(1, max_block_elems // max(1, queries.shape[0]))):
        counts += hit.sum(axis=0)
    return counts


def _sort_rows(scores: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Column order of each row by descending score, ties by smaller id -> ``[Q, F]``."""
    return np.lexsort((ids, -scores), axis=1)


def _keep_best(
    best_s: np.ndarray, best_i: np.ndarray, scores: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The top-``F`` by ``(-score, id)`` of a running ``best_s[Q, F]`` and a block ``scores[Q, C]`` of ``ids[C]``.

    Unsorted, ids unique: every score above the ``F``-th is kept, and of those equal to it the smallest ids."""
    f = best_s.shape[1]
    both_s = np.concatenate([best_s, scores], axis=1)  # [Q, F + C]
    both_i = np.concatenate([best_i, np.broadcast_to(ids, scores.shape)], axis=1)
    kth = -np.partition(-both_s, f - 1, axis=1)[:, f - 1 : f]  # [Q, 1] the F-th largest score
    above, at = both_s > kth, both_s == kth
    take = above | at
    room = f - above.sum(axis=1, keepdims=True)  # [Q, 1] >= 1 places left for the tie at kth
    if (at.sum(axis=1, keepdims=True) > room).any():  # a tie straddles the F-th place: its smallest ids
        key = np.where(at, both_i, np.iinfo(np.int64).max)
        last = np.take_along_axis(np.sort(key, axis=1), room - 1, axis=1)  # [Q, 1] largest id kept
        take = above | (at & (key <= last))
    col = np.nonzero(take)[1].reshape(-1, f)  # [Q, F]: exactly F per row
    return np.take_along_axis(both_s, col, axis=1), np.take_along_axis(both_i, col, axis=1)


class ExactIndex(VectorIndex):
    """Brute-force inner product over all vectors on BLAS, exact and deterministic (ties by smaller id).

    ``max_block_elems`` caps the candidate values re-scored at once
    (``Qb * F * D``; the default 2**24 is 128 MiB of float64), and the GEMM
    values of one block of the scan that settles a tie at the cut (``Qb * C * D``).
    FAISS blocks the SGEMM itself, so memory stays bounded however large the catalogue.
    """

    backend = "exact"
    is_exact = True
    stored_files = ("vectors.npy", "ids.npy")

    def __init__(self, *args: Any, max_block_elems: int = 1 << 24) -> None:
        super().__init__()
        if args:  # ExactIndex(vectors, ids) failed with "takes 1 positional argument but 3 were given"
            raise ConfigError(f"ExactIndex() takes no vectors (got {describe(args[0])}): build it with "
                              "ExactIndex().build(vectors, ids), or ExactIndex.over(vectors, ids) without a copy")
        if isinstance(max_block_elems, bool) or int(max_block_elems) < 1:
            raise ConfigError(f"max_block_elems: must be a positive integer, got {max_block_elems!r}")
        self.max_block_elems = int(max_block_elems)
        self._vectors = np.empty((0, 0), dtype=np.float32)  # [N, D]
        self._ids = np.empty(0, dtype=np.int64)  # [N]
        self._dim: int | None = None
        self._max_norm: float | None = None  # cache, reset whenever the contents change
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None

    def _changed(self) -> None:
        self._max_norm, self._lookup = None, None

    # ------------------------------------------------------------------ contents
    def build(self, vectors: np.ndarray, ids: np.ndarray) -> "ExactIndex":
        vectors = check_vectors(vectors)
        self._ids = check_ids(ids, vectors.shape[0]).copy()
        self._vectors = vectors.copy()  # the caller may reuse its buffer
        self._dim = int(vectors.shape[1])
        self._changed()
        return self

    @classmethod
    def over(cls, vectors: np.ndarray, ids: np.ndarray, **kwargs: Any) -> "ExactIndex":
        """An index over ``vectors[N, D]`` and ``ids[N]`` *without copying them* (unlike :meth:`build`).

        For read-only memory maps shared by server processes: the caller must
        not change the arrays afterwards. add/remove still work (on new arrays).
        """
        vectors = check_vectors(vectors)
        index = cls(**kwargs)
        index._ids = check_ids(ids, vectors.shape[0])
        index._vectors, index._dim = vectors, int(vectors.shape[1])
        return index

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
        self._changed()

    def remove(self, ids: np.ndarray) -> int:
        drop = np.isin(self._ids, np.asarray(ids, dtype=np.int64).ravel())
        removed = int(drop.sum())
        if removed:
            self._vectors = self._vectors[~drop]
            self._ids = self._ids[~drop]
            self._changed()
        return removed

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    @property
    def dim(self) -> int:
        """Dimension of the indexed vectors (the index must be built)."""
        if self._dim is None:
            raise self._not_built()
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
    def _norm_bound(self) -> float:
        """Largest stored vector norm (cached): scales the SGEMM rounding bound."""
        if self._max_norm is None:
            self._max_norm = max_norm(self._vectors)
        return self._max_norm

    def _search_candidates(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``fetch`` of ``queries[Q, D]`` -> ``(scores[Q, F], ids[Q, F])``, ties by smaller id."""
        n, n_q, dim = len(self), queries.shape[0], queries.shape[1]
        fetch = min(fetch, n)
        out_scores = np.empty((n_q, fetch), dtype=np.float32)  # [Q, F]
        out_ids = np.empty((n_q, fetch), dtype=np.int64)
        eps = sgemm_eps(queries, self._norm_bound())  # [Q]
        f = min(n, fetch + _MARGIN)
        qb = max(1, min(n_q, self.max_block_elems // max(1, f * dim)))
        unsettled = np.zeros(n_q, dtype=bool)  # [Q] rows whose cut may hide an unfetched (tied) item
        for b0 in range(0, n_q, qb):
            block = slice(b0, min(b0 + qb, n_q))
            faiss_s, rows = _faiss_knn(queries[block], self._vectors, f)  # [T, f]
            scores = self._rescore(queries[block], rows)  # [T, f]
            ids = np.where(rows == PAD_ID, PAD_ID, self._ids[np.maximum(rows, 0)])
            order = _sort_rows(scores, ids)[:, :fetch]  # [T, F]
            out_scores[block] = np.take_along_axis(scores, order, axis=1)
            out_ids[block] = np.take_along_axis(ids, order, axis=1)
            if f < n:
                # everything not fetched scored <= faiss_s[:, -1] in SGEMM, so <= that + eps exactly
                unsettled[block] = faiss_s[:, -1].astype(np.float64) + 2 * eps[block] >= out_scores[block, -1]
        todo = np.flatnonzero(unsettled)
        if todo.size:
            out_scores[todo], out_ids[todo] = self._settle_cut(queries[todo], out_scores[todo, -1], fetch, eps[todo])
        return out_scores, out_ids

    def _settle_cut(
        self, queries: np.ndarray, cut: np.ndarray, fetch: int, eps: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``fetch`` of ``queries[T, D]`` whose ``fetch``-th canonical score is at least ``cut[T]``.

        One scan of the catalogue per ``Qb`` queries, ``Qb * C * D <= max_block_elems`` per block of ``C`` items:
        an item can be in the top-``F`` only if its canonical score is >= ``cut``; a running top-``F`` keeps the
        smallest ids of a tie. A block's SGEMM scores rule out the items below the cut (past a near-tie, nearly all of them).
        A float64 dot product is within ``err`` of the one :func:`canonical_scores` sums, so where both ends of
        ``[s - err, s + err]`` round to the same float32, that float32 *is* the canonical score: only the items
        whose interval straddles a float32 rounding boundary are re-scored.
        """
        n_t, dim = queries.shape
        qb = max(1, min(n_t, self.max_block_elems // (dim * max(fetch, _SCAN_COLS))))
        cols = max(1, self.max_block_elems // (dim * qb))
        # |float64 sum - exact| <= D * 2**-53 * |q| * |v| in any order; 2**-50 leaves slack for s +- err itself.
        # No floor: err is 0 exactly when every product is (a zero query or catalogue), and those rows need no scan.
        # A floor of 1e-30 made [-err, err] straddle float32's 0 for every item: a zero query re-scored the whole
        # catalogue pair by pair (40,000 x 128: 70-100 ms against 2 ms for any other query)
        q_norm = np.sqrt((queries.astype(np.float64) ** 2).sum(axis=1))  # [T]
        err = (dim + 2) * 2.0**-50 * q_norm * self._norm_bound()  # [T]
        pairs = max(1, self.max_block_elems // dim)  # items re-scored per canonical_scores call
        out_scores = np.empty((n_t, fetch), dtype=np.float32)  # [T, F]
        out_ids = np.empty((n_t, fetch), dtype=np.int64)
        zero = err == 0  # [T] every product exactly 0 (zero query or catalogue): all N items tie at score 0
        out_scores[zero], out_ids[zero] = 0.0, self._smallest_ids(fetch)
        todo = np.flatnonzero(~zero)
        queries, cut, eps, err, n_t = queries[todo], cut[todo], eps[todo], err[todo], todo.size
        for q0 in range(0, n_t, qb):
            q = queries[q0 : q0 + qb]  # [Qb, D]
            q64, e, t = q.astype(np.float64), err[q0 : q0 + qb, None], cut[q0 : q0 + qb, None]
            best_s = np.full((q.shape[0], fetch), -np.inf, dtype=np.float32)  # [Qb, F] running top-F, unsorted
            # distinct placeholder ids above any real one: the first F items scanned displace them, even at -inf
            best_i = np.broadcast_to(np.iinfo(np.int64).max - 1 - np.arange(fetch), best_s.shape)
            for c0, hit in scan_reaching(self._vectors, q, cut[q0 : q0 + qb], eps[q0 : q0 + qb], cols):
                near = np.flatnonzero(hit.any(axis=1))  # [H] items some query may keep
                if near.size == 0:
                    continue
                s64 = q64 @ self._vectors[c0 + near].astype(np.float64).T  # [Qb, H]
                hi = (s64 + e).astype(np.float32)
                keep = hi >= t  # the others score < cut canonically (rounding is monotone)
                lo = (s64 - e).astype(np.float32)
                scores = np.where(keep, hi, np.float32(-np.inf))  # [Qb, H]
                r, c = np.nonzero(keep & (lo != hi))
                rows = c0 + near  # [H]
                for p0 in range(0, r.size, pairs):
                    rr, cc = r[p0 : p0 + pairs], c[p0 : p0 + pairs]
                    scores[rr, cc] = canonical_scores(q[rr], self._vectors, rows[cc][:, None])[:, 0]
                best_s, best_i = _keep_best(best_s, best_i, scores, self._ids[rows])
            order = _sort_rows(best_s, best_i)
            out_scores[todo[q0 : q0 + qb]] = np.take_along_axis(best_s, order, axis=1)
            out_ids[todo[q0 : q0 + qb]] = np.take_along_axis(best_i, order, axis=1)
        return out_scores, out_ids

    def _smallest_ids(self, fetch: int) -> np.ndarray:
        """The ``fetch`` smallest stored ids, ascending: the top-``fetch`` of a query under which every item ties."""
        return np.sort(np.partition(self._ids, fetch - 1)[:fetch])

    def _rescore(self, queries: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """:func:`canonical_scores` of ``rows[T, F]``, gathering at most ``max_block_elems`` values at once.

        Column chunks give the same scores (each is its own sum over ``D``); a single query over a deep fetch
        or a large allow-list would otherwise gather ``F * D`` float64 values in one piece."""
        t, f = rows.shape
        cols = max(1, self.max_block_elems // max(1, t * queries.shape[1]))
        if cols >= f:
            return canonical_scores(queries, self._vectors, rows)
        out = np.empty((t, f), dtype=np.float32)
        for c0 in range(0, f, cols):
            out[:, c0 : c0 + cols] = canonical_scores(queries, self._vectors, rows[:, c0 : c0 + cols])
        return out

    def _stored_vectors(self, ids: np.ndarray) -> np.ndarray | None:
        sorted_ids, rows = self._row_of()
        return self._vectors[rows[np.searchsorted(sorted_ids, ids)]]

    def _row_of(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sorted ids, their rows)`` for id -> row lookups (cached)."""
        if self._lookup is None:
            order = np.argsort(self._ids, kind="stable")
            self._lookup = (self._ids[order], order)
        return self._lookup

    def _search_allowed_exactly(
        self, query: np.ndarray, k: int, allow: np.ndarray, exclude: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Score only the allowed ids (minus ``exclude``): ``(scores[<=K], ids[<=K])``."""
        sorted_ids, rows_of = self._row_of()
        pos = np.minimum(np.searchsorted(sorted_ids, allow), max(len(sorted_ids) - 1, 0))
        present = sorted_ids[pos] == allow if sorted_ids.size else np.zeros(allow.size, dtype=bool)
        ids = allow[present]
        rows = rows_of[pos[present]]
        if exclude.size:
            keep = ~np.isin(ids, exclude)
            ids, rows = ids[keep], rows[keep]
        scores = self._rescore(query[None, :], rows[None, :])[0]  # [M]
        order = np.lexsort((ids, -scores))[:k]
        return scores[order], ids[order]

    # ------------------------------------------------------------------ storage
    def _write(self, directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        np.save(directory / "vectors.npy", self._vectors, allow_pickle=False)
        np.save(directory / "ids.npy", self._ids, allow_pickle=False)
        return {"max_block_elems": self.max_block_elems}, {}

    @classmethod
    def _read(cls, directory: Path, meta: dict[str, Any], *, mmap: bool = False) -> "ExactIndex":
        index = cls(**meta.get("config", {}))
        mode = "r" if mmap else None  # read-only map: add/remove build new arrays, never write the file
        vectors = np.load(directory / "vectors.npy", allow_pickle=False, mmap_mode=mode)
        ids = np.load(directory / "ids.npy", allow_pickle=False, mmap_mode=mode)
        index._vectors, index._ids, index._dim = vectors, ids, int(meta["dim"])
        return index

    def nbytes(self) -> int:
        """Bytes held for vectors and ids."""
        return int(self._vectors.nbytes + self._ids.nbytes)
