"""Whether a saved index holds the vectors its model gives its items: a fixed few read back, or searched for.

meta.json's model fingerprint and the index's ids say which model and items an index was built for, not what its
file holds: an index file of another run's build swapped in (its checksum entry brought in line), or an index
saved from Python over another checkpoint's vectors under the run's fingerprint, passed both checks and served
other neighbours without a word.

A fixed sample of :data:`SAMPLE` stored ids (evenly spaced, so every load checks the same ones) is checked
against ``vectors_of(ids)``, the vectors the model gives those items now:

* a backend that keeps its vectors as given (exact search, flat, HNSW-flat, a flat refine stage) reads them back:
  each must be within :data:`VECTOR_TOL` of the model's (relative L2 distance; batch shapes and thread counts
  move the last bits only);
* any other (IVF, PQ, SQ) is searched with the items' own vectors, top :func:`search_k`: an item agrees when the
  index returns it, or an item scoring at least as high with it (a duplicate), judged by the model's vectors as
  autotune's tie-aware recall judges a hit, so a PQ index's own score estimates decide nothing. An index whose
  scores are exact (IVF-flat) must also report the item's own score within :data:`VECTOR_TOL`.

Refused when :data:`MAX_DISAGREEING` or more of the sample disagree: an index of the model's own vectors agrees
on (nearly) all, even a coarse PQ whose recall@10 missed its target (ML-100K, ``PQ4x4``: 31 of 32 within the top
50); another seed's vectors agree on 0 to 2 of 32. Milliseconds at 1M items: 32 vectors read, or 32 searches.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from twotower.index.base import VectorIndex
from twotower.results import PAD_ID

__all__ = ["check_contents", "search_k", "SAMPLE", "VECTOR_TOL", "MAX_DISAGREEING"]

#: Stored ids checked on each load.
SAMPLE = 32
#: Relative distance between a stored vector (or an exactly reported self-score) and the model's beyond which
#: they disagree: float32 recomputation differs by ~1e-6; the demo's last checkpoint against its best, by 0.04+.
VECTOR_TOL = 1e-3
#: Share of the sample that, disagreeing, gets the index refused.
MAX_DISAGREEING = 0.5
#: The deepest search of an item for itself (1,000,000 items: the top 50).
SEARCH_K_MAX = 50


def search_k(n: int) -> int:
    """How deep an item of an approximate index of ``n`` vectors is looked for: a tenth of the index, at most
    :data:`SEARCH_K_MAX`, so that an index of other vectors returns it by chance for about a tenth of the sample
    at most, far below :data:`MAX_DISAGREEING`."""
    return int(min(SEARCH_K_MAX, max(1, n // 10)))


def check_contents(index: VectorIndex, vectors_of: Callable[[np.ndarray], np.ndarray]) -> str | None:
    """Why ``index`` does not hold the vectors ``vectors_of(ids[B]) -> [B, D]`` gives its items (one sentence), or
    None when the sample agrees (or the index is empty)."""
    ids = np.asarray(getattr(index, "_ids", np.empty(0, np.int64)), dtype=np.int64)  # [N] both backends
    if not ids.size:
        return None
    sample = np.unique(ids[np.linspace(0, ids.size - 1, min(SAMPLE, ids.size)).astype(np.int64)])  # [S]
    stored = index._stored_vectors(sample)
    if stored is not None:
        return _compare_stored(sample, np.asarray(stored, np.float32), np.asarray(vectors_of(sample), np.float32))
    return _search_for_themselves(index, sample, vectors_of, search_k(ids.size))


def _too_many(bad: np.ndarray) -> bool:
    return bool(bad.sum() >= MAX_DISAGREEING * bad.size)


def _compare_stored(sample: np.ndarray, stored: np.ndarray, model: np.ndarray) -> str | None:
    """The stored vectors of ``sample`` against the model's ``[S, D]``."""
    if stored.shape != model.shape:  # the dimension is checked before; kept as a guard
        return f"it stores vectors of shape {stored.shape[1:]}, the model gives {model.shape[1:]}"
    norm = np.linalg.norm(model.astype(np.float64), axis=1)  # [S]
    dist = np.linalg.norm(stored.astype(np.float64) - model, axis=1) / np.maximum(norm, 1e-12)  # [S] relative
    bad = dist > VECTOR_TOL
    if not _too_many(bad):
        return None
    worst = int(np.argmax(dist))
    return (f"{int(bad.sum())} of {bad.size} sampled items are stored with other vectors than the model gives them "
            f"(item row {int(sample[worst])}: {dist[worst]:.3g} of its vector's length away)")


def _search_for_themselves(index: VectorIndex, sample: np.ndarray, vectors_of: Callable[[np.ndarray], np.ndarray],
                           k: int) -> str | None:
    """``sample``'s own vectors searched in ``index``, each looked for in its top ``k``."""
    queries = np.ascontiguousarray(vectors_of(sample), dtype=np.float32)  # [S, D]
    res = index.search(queries, k)
    found = np.asarray(res.ids, dtype=np.int64)  # [S, K]
    # the model's vectors of everything returned, computed once: its scores judge a hit, not the index's own
    rows = np.unique(np.concatenate([sample, found[found != PAD_ID]]))
    vectors = np.asarray(vectors_of(rows), dtype=np.float32)  # [R, D]
    at = np.searchsorted(rows, np.where(found == PAD_ID, sample[:, None], found))  # [S, K]
    q = vectors[np.searchsorted(rows, sample)].astype(np.float64)  # [S, D], as the found rows' are computed
    own = (q * q).sum(axis=1)  # [S] each item's score with itself
    exact = np.einsum("sd,skd->sk", q, vectors[at].astype(np.float64))  # [S, K]
    tie = 1e-6 * np.maximum(np.abs(own), 1.0)  # [S] float32 rounding of a duplicate's score
    hit = ((found != PAD_ID) & (exact >= (own - tie)[:, None])).any(axis=1)  # [S]
    bad = ~hit
    off = np.zeros_like(bad)
    if index._scores_exact():  # its scores are inner products of its stored vectors: the item's must be its own
        self_at = found == sample[:, None]  # [S, K], true once at most in a row
        reported = np.where(self_at, np.asarray(res.scores, np.float64), -np.inf).max(axis=1)  # [S]
        off = self_at.any(axis=1) & (np.abs(reported - own) > VECTOR_TOL * np.maximum(np.abs(own), 1e-12))
        bad |= off
    if not _too_many(bad):
        return None
    missed = int((~hit).sum())
    first = int(np.argmax(~hit)) if missed else int(np.argmax(off))
    said = (f"{missed} of {bad.size} sampled items, searched with their own vectors, are not among the top {k} it "
            "returns" if missed else "")
    if off.any():
        said += ("; " if said else "") + (f"{int(off.sum())} of {bad.size} are returned with another score than "
                                          "their own")
    best = found[first, 0]
    top = ("nothing" if best == PAD_ID else
           f"item row {int(best)}, scoring {exact[first, 0]:.4g} with it by the model's vectors")
    return f"{said} (item row {int(sample[first])}, own score {own[first]:.4g}: its top result is {top})"
