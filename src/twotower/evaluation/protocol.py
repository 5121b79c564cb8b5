"""Full-catalogue evaluation protocol.

The protocol, stated once:

1. Every user with at least one relevant (held-out) item is evaluated; users
   with none are skipped and counted in ``users_skipped``.
2. The scorer scores **the whole catalogue** for each evaluated user (no
   sampled negatives).
3. Items in ``exclude`` (normally the user's training items, plus validation
   items when testing) get score ``-inf`` and are never recommended. An item
   the scorer itself scores ``-inf`` is likewise not a candidate. A held-out
   item that is also excluded (a repeat of a training item) is never ranked
   but stays relevant: it counts in recall's and IDCG's denominators, so such
   a user cannot reach 1.0, and a user whose every held-out item is excluded
   is evaluated with 0 (never skipped, so a leak cannot raise the average;
   ``twotower evaluate`` warns how many pairs this concerns).
4. Items are ranked by descending score; ties go to the smaller item row, so
   results are deterministic.
5. Per-user metrics (:mod:`twotower.evaluation.metrics`) are averaged over
   evaluated users, each user weighing the same. Coverage and mean popularity
   are computed over the top-k lists of all evaluated users.

Users are processed in chunks of ``batch_users``, fewer on a large catalogue
(at most ``max_chunk_scores`` scores a chunk), so memory stays bounded whatever ``I``; a scorer with a
``rank`` method (an index, Popularity, ItemKNN) gets whole ``batch_users`` chunks and bounds its own memory.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp

from twotower.errors import ConfigError, DataError
from twotower.evaluation import metrics as M
from twotower.evaluation.metric_names import CATALOGUE_METRICS, PER_USER_METRICS, parse_metric
from twotower.results import PAD_ID
from twotower.utils.progress import RateLog

__all__ = [
    "Scorer",
    "EvalProtocol",
    "topk_excluding",
    "evaluate",
    "evaluate_segments",
    "PER_USER_METRICS",
    "CATALOGUE_METRICS",
    "parse_metric",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Scorer(Protocol):
    """Anything that scores the whole catalogue for a batch of users."""

    def score(self, users: np.ndarray) -> np.ndarray:
        """Scores ``[len(users), I]`` (float32, higher is better) for internal user rows ``users``."""
        ...


@dataclass(frozen=True, kw_only=True)
class EvalProtocol:
    """Cut-offs and chunking for :func:`evaluate`."""

    ks: tuple[int, ...] = (10, 20, 50, 100)
    # Users scored per chunk; memory is about batch_users × I × 4 bytes × 3.5
    # (scores, masked copy, partition buffer, selection mask).
    batch_users: int = 1024
    # ...but no more than this many scores (users × items) a chunk: 1,024 users × Book-Crossing's 330k items
    # peaked at 4.6 GB in the top-k alone (a million-item catalogue: ~15 GB); 2^25 keeps a chunk near 0.5 GB
    # and leaves catalogues up to 32k items (ML-1M's 3.4k) at batch_users
    max_chunk_scores: int = 2**25
    # seconds between progress log lines (users done, users/s, ETA), so that a long evaluation in a
    # redirected log is not silent; None: no lines (the CLI passes the run's train.log_every_s)
    log_every_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.ks, (str, bytes)) or not isinstance(self.ks, Iterable):
            # ks=10 failed with "TypeError: 'int' object is not iterable" from tuple() below
            raise ConfigError(f"EvalProtocol.ks: must be a sequence of positive integers, e.g. ks=(10, 20), "
                              f"got {self.ks!r}")
        ks = tuple(self.ks)
        if not ks:
            raise ConfigError("EvalProtocol.ks: must name at least one cut-off, e.g. ks=(10, 20)")
        for k in ks:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                raise ConfigError(f"EvalProtocol.ks: must hold positive integers, got {self.ks!r}")
        if len(set(ks)) != len(ks):
            raise ConfigError(f"EvalProtocol.ks: has duplicates, got {self.ks!r}")
        object.__setattr__(self, "ks", tuple(sorted(int(k) for k in ks)))
        if isinstance(self.batch_users, bool) or not isinstance(self.batch_users, int) or self.batch_users < 1:
            raise ConfigError(f"EvalProtocol.batch_users: must be a positive integer, got {self.batch_users!r}")
        if (isinstance(self.max_chunk_scores, bool) or not isinstance(self.max_chunk_scores, int)
                or self.max_chunk_scores < 1):
            raise ConfigError(f"EvalProtocol.max_chunk_scores: must be a positive integer, got {self.max_chunk_scores!r}")
        if self.log_every_s is not None and not self.log_every_s > 0:
            raise ConfigError(f"EvalProtocol.log_every_s: must be > 0 or None, got {self.log_every_s!r}")

    def chunk_users(self, n_items: int) -> int:
        """Users a chunk scores over ``n_items`` items: ``batch_users``, fewer where the scores would pass
        ``max_chunk_scores`` (never below one)."""
        return max(1, min(self.batch_users, self.max_chunk_scores // max(n_items, 1)))


def _as_csr(matrix: object, name: str) -> sp.csr_matrix:
    if not sp.issparse(matrix):
        raise DataError(f"{name} must be a scipy.sparse [U, I] matrix, got {type(matrix).__name__}")
    return sp.csr_matrix(matrix)


def topk_excluding(scores: np.ndarray, k: int, exclude: sp.spmatrix | sp.sparray | None = None) -> np.ndarray:
    """Top-``k`` item rows of each row of ``scores[U, I]``, never returning excluded items.

    ``exclude`` is a sparse ``[U, I]`` matrix aligned with ``scores``; its stored
    entries (whatever their value) are set to ``-inf`` in a copy of the scores.
    Items scored ``-inf`` are not candidates: a row with fewer than ``k``
    candidates is padded with ``-1``. Ties go to the smaller item row. Returns
    int64 ``[U, k]``.

    Runs in ``O(I)`` per row (partition) plus a sort of the items that tie
    with or beat the k-th score; equal to a stable full sort by
    ``(-score, item)`` (tested against one).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k: must be a positive integer, got {k!r}")
    scores = np.array(scores, dtype=np.float32 if np.asarray(scores).dtype != np.float64 else np.float64)
    if scores.ndim != 2:
        raise DataError(f"scores must be 2-D [U, I], got shape {scores.shape}")
    n_users, n_items = scores.shape
    if np.isnan(scores).any():
        raise DataError("scores contain NaN; the scorer must return finite scores (or -inf to drop an item)")
    if exclude is not None:
        ex = _as_csr(exclude, "exclude")
        if ex.shape != scores.shape:
            raise DataError(f"exclude has shape {ex.shape} but scores have shape {scores.shape}")
        rows = np.repeat(np.arange(n_users), np.diff(ex.indptr))
        scores[rows, ex.indices] = -np.inf
    out = np.full((n_users, k), PAD_ID, dtype=np.int64)
    if n_users == 0 or n_items == 0:
        return out
    kk = min(k, n_items)
    kth = np.partition(scores, n_items - kk, axis=1)[:, n_items - kk]  # [U] k-th largest score
    # Every item at or above the k-th score, so ties at the boundary are all kept.
    sel = (scores >= kth[:, None]) & (scores > -np.inf)  # [U, I]
    r, c = np.nonzero(sel)  # row-major: grouped by row
    counts = np.bincount(r, minlength=n_users)  # [U]
    width = max(int(counts.max()), 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(r.size) - starts[r]
    cand_ids = np.full((n_users, width), n_items, dtype=np.int64)  # [U, W]; n_items = empty slot
    cand_scores = np.full((n_users, width), -np.inf, dtype=scores.dtype)  # [U, W]
    cand_ids[r, pos] = c
    cand_scores[r, pos] = scores[r, c]
    order = np.lexsort((cand_ids, -cand_scores), axis=1)[:, :kk]  # primary -score, then item row
    top = np.take_along_axis(cand_ids, order, axis=1)  # [U, kk]
    top[top == n_items] = PAD_ID
    out[:, : top.shape[1]] = top
    return out


class _Totals:
    """The running sums of one set of relevant pairs over the top-``kmax`` lists of its users."""

    def __init__(self, ks: tuple[int, ...], n_items: int, pop: np.ndarray | None) -> None:
        self.ks, self.n_items, self.pop = ks, n_items, pop
        self.sums = {f"{name}@{k}": 0.0 for k in ks for name in PER_USER_METRICS}
        self.recommended = {k: np.zeros(n_items, dtype=bool) for k in ks}
        self.pop_sum = {k: 0.0 for k in ks}
        self.pop_n = {k: 0 for k in ks}

    def add(self, ranked: np.ndarray, rel: sp.csr_matrix, kmax: int) -> None:
        """``ranked[B, kmax]`` the lists of ``B`` users, ``rel[B, I]`` their relevant items (each user >= 1)."""
        # checked where they were made (evaluate_segments: check_rows of a scorer's rank, topk_excluding's distinct rows)
        hits, n_rel = M.checked_hits(ranked[:, :kmax], rel)  # [B, kmax], [B]
        for k in self.ks:
            for name in PER_USER_METRICS:
                self.sums[f"{name}@{k}"] += float(np.sum(M.FROM_HITS[name](hits[:, :k], n_rel)))
            top = ranked[:, :k]
            valid = top[top != PAD_ID]
            self.recommended[k][valid] = True
            if self.pop is not None:
                self.pop_sum[k] += float(self.pop[valid].sum())
                self.pop_n[k] += int(valid.size)

    def result(self, n: int, skipped: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for k in self.ks:
            for name in PER_USER_METRICS:
                key = f"{name}@{k}"
                out[key] = self.sums[key] / n if n else float("nan")
            out[f"Coverage@{k}"] = float(self.recommended[k].sum()) / self.n_items if self.n_items else float("nan")
            if self.pop is not None:
                out[f"MeanPop@{k}"] = self.pop_sum[k] / self.pop_n[k] if self.pop_n[k] else float("nan")
        out["users_evaluated"] = int(n)
        out["users_skipped"] = int(skipped)
        return out


def evaluate(
    scorer: Scorer,
    relevant: sp.spmatrix | sp.sparray,
    exclude: sp.spmatrix | sp.sparray | None,
    protocol: EvalProtocol | None = None,
    item_popularity: np.ndarray | None = None,
    *,
    what: str = "evaluation",
) -> dict[str, float]:
    """Full-catalogue ranking metrics of ``scorer`` (see the module docstring for the protocol).

    ``relevant`` and ``exclude`` are sparse ``[U, I]`` over the same internal
    user and item rows as the scorer. Returns ``"Recall@k"``, ``"Precision@k"``,
    ``"NDCG@k"``, ``"MRR@k"``, ``"HitRate@k"``, ``"Coverage@k"`` (and
    ``"MeanPop@k"`` when ``item_popularity[I]`` is given) for every ``k`` in
    ``protocol.ks``, plus ``"users_evaluated"`` and ``"users_skipped"``. ``what`` starts each progress
    line (e.g. ``"evaluating ItemKNN (k=10) on test"``): a table evaluates several models one after
    another, and on a large catalogue each takes minutes, so a bare "evaluation:" line did not say whose.
    """
    return evaluate_segments(scorer, relevant, exclude, protocol, item_popularity, what=what)[0]


def evaluate_segments(
    scorer: Scorer,
    relevant: sp.spmatrix | sp.sparray,
    exclude: sp.spmatrix | sp.sparray | None,
    protocol: EvalProtocol | None = None,
    item_popularity: np.ndarray | None = None,
    segments: dict[str, sp.spmatrix | sp.sparray] | None = None,
    *,
    what: str = "evaluation",
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """:func:`evaluate` of ``relevant``, and of each of ``segments`` (name -> a part of ``relevant``'s pairs, e.g.
    those of items without training interactions) from the same ranked lists: each segment's figures are those
    :func:`evaluate` gives with that part as ``relevant`` (its users alone evaluated), without ranking twice."""
    protocol = protocol if protocol is not None else EvalProtocol()
    rel = _as_csr(relevant, "relevant")
    rel.sum_duplicates()
    n_users, n_items = rel.shape
    ex = None
    if exclude is not None:
        ex = _as_csr(exclude, "exclude")
        if ex.shape != rel.shape:
            raise DataError(
                f"exclude has shape {ex.shape} but relevant has shape {rel.shape}; both are [users, items] "
                "over the same internal rows"
            )
    parts: dict[str, sp.csr_matrix] = {}
    for name, part in (segments or {}).items():
        part = _as_csr(part, f"segment {name!r}")
        part.sum_duplicates()
        if part.shape != rel.shape:
            raise DataError(f"segment {name!r} has shape {part.shape} but relevant has shape {rel.shape}")
        parts[name] = part
    pop = None
    if item_popularity is not None:
        pop = np.asarray(item_popularity, dtype=np.float64)
        if pop.shape != (n_items,):
            raise DataError(f"item_popularity has shape {pop.shape} but the catalogue has {n_items} items")

    has_rel = np.diff(rel.indptr) > 0  # [U]
    for part in parts.values():  # a segment's user with no relevant pair would not be ranked: rank them too
        has_rel |= np.diff(part.indptr) > 0
    users = np.flatnonzero(np.diff(rel.indptr) > 0).astype(np.int64)  # users with >= 1 relevant item
    ranked_users = np.flatnonzero(has_rel).astype(np.int64)
    skipped = n_users - users.size
    kmax = max(protocol.ks)
    totals = _Totals(protocol.ks, n_items, pop)
    part_totals = {name: _Totals(protocol.ks, n_items, pop) for name in parts}
    t0 = time.perf_counter()
    progress = RateLog(log, what, ranked_users.size, "users", protocol.log_every_s, rate_unit="users")
    rank = getattr(scorer, "rank", None)  # a scorer with an index ranks through it (the path recommend/serve use)
    # a dense [chunk, I] score block is what chunk_users bounds; a scorer that ranks bounds its own memory, and an
    # exact index scans the whole catalogue once per call, so 33 users a call (1M items) cost ~4x the scans
    chunk = protocol.batch_users if rank is not None else protocol.chunk_users(n_items)
    for start in range(0, ranked_users.size, chunk):
        batch = ranked_users[start : start + chunk]  # [B]
        if rank is not None:
            ranked = np.asarray(rank(batch, kmax, ex[batch] if ex is not None else None), dtype=np.int64)
            if ranked.shape != (batch.size, kmax):
                raise DataError(f"scorer.rank returned shape {ranked.shape}, expected {(batch.size, kmax)}")
            if ranked.size and ranked.max() >= n_items:
                raise DataError(f"scorer.rank returned item row {int(ranked.max())}, past the catalogue's {n_items} "
                                f"items (rows 0 to {n_items - 1}, {PAD_ID} for padding)")
            M.check_rows(ranked, "scorer.rank's lists")  # a repeat would count one relevant item twice
        else:
            scores = np.asarray(scorer.score(batch))  # [B, I]
            if scores.shape != (batch.size, n_items):
                raise DataError(
                    f"scorer.score returned shape {scores.shape}, expected {(batch.size, n_items)} "
                    "(one row per user, one column per catalogue item)"
                )
            ranked = topk_excluding(scores, kmax, ex[batch] if ex is not None else None)  # [B, kmax]
        for part, tot in ((rel, totals), *((parts[n], part_totals[n]) for n in parts)):
            rows = part[batch]
            mine = np.diff(rows.indptr) > 0  # [B] this part's users among the batch
            if mine.any():
                tot.add(ranked if mine.all() else ranked[mine], rows if mine.all() else rows[mine], kmax)
        progress.update(start + batch.size)
    n = users.size
    out = totals.result(n, skipped)
    part_out = {}
    for name, part in parts.items():
        n_part = int((np.diff(part.indptr) > 0).sum())
        part_out[name] = part_totals[name].result(n_part, n_users - n_part)
    # debug: evaluation runs once per epoch and once per tuned setting; callers report the result
    log.debug("evaluated %d users (%d skipped: no relevant items) over %d items, ks=%s, in %.2fs",
              n, skipped, n_items, protocol.ks, time.perf_counter() - t0)
    return out, part_out
