"""Pure ranking metrics over ``(ranked, relevant)``.

Every function takes

* ``ranked``: int64 ``[U, K]`` internal item rows, best first, ``-1``
  (:data:`twotower.results.PAD_ID`) where a row ran out of candidates. Items
  within a row must be distinct (what :func:`~twotower.evaluation.protocol.topk_excluding`
  returns): a row that lists an item twice is refused, since it would count one relevant
  item twice (Recall 2.0 from ``[3, 3]`` against ``{3}``).
* ``relevant``: the held-out items of each user, either a ``list`` of ``U``
  integer arrays or a scipy.sparse matrix ``[U, I]`` whose stored entries in
  row ``u`` are user ``u``'s relevant items (values are ignored; duplicates
  count once).

Per-user metrics return float64 ``[U]``. A user with no relevant items has no
defined recall, so **every per-user metric is NaN for such a user**; the
protocol skips NaN users and reports how many it skipped (``users_skipped``).
Averaging is the caller's job (``np.nanmean``), so each denominator stays
visible here.

Catalogue-level metrics (:func:`coverage_at_k`, :func:`mean_popularity_at_k`)
return one float over all rows of ``ranked``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Sequence, Union

import numpy as np
import scipy.sparse as sp

from twotower.errors import ConfigError, DataError
from twotower.results import PAD_ID

__all__ = [
    "Relevant",
    "hits_at_k",
    "recall_at_k",
    "precision_at_k",
    "ndcg_at_k",
    "graded_ndcg_at_k",
    "mrr_at_k",
    "hit_rate_at_k",
    "coverage_at_k",
    "mean_popularity_at_k",
    "check_rows",
]

#: Held-out items per user: a list of ``U`` int arrays or a sparse ``[U, I]`` matrix.
Relevant = Union[Sequence[np.ndarray], sp.spmatrix, sp.sparray]


def _check_ranked(ranked: np.ndarray, k: int) -> np.ndarray:
    ranked = np.asarray(ranked)
    if ranked.ndim != 2:
        raise DataError(f"ranked must be a 2-D [U, K] array of item rows, got shape {ranked.shape}")
    if not np.issubdtype(ranked.dtype, np.integer):
        raise DataError(f"ranked must hold integer item rows, got dtype {ranked.dtype}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k: must be a positive integer, got {k!r}")
    if k > ranked.shape[1]:
        raise ConfigError(
            f"k={k} is larger than the {ranked.shape[1]} columns of ranked; "
            f"rank at least k items per user (topk_excluding(scores, k={k}, ...))"
        )
    top = ranked[:, :k].astype(np.int64, copy=False)
    check_rows(top, "ranked")
    return top


def check_rows(top: np.ndarray, name: str) -> None:
    """Refuse entries below PAD_ID and an item listed twice in one row (naming the first such row)."""
    if top.size == 0:
        return
    if top.min() < PAD_ID:
        row = int(np.flatnonzero((top < PAD_ID).any(axis=1))[0])
        raise DataError(f"{name} holds item rows below {PAD_ID} (the padding), e.g. row {row}: {top[row].tolist()[:10]}")
    s = np.sort(top, axis=1)
    repeated = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] != PAD_ID)  # [U, k-1]
    if repeated.any():
        row = int(np.flatnonzero(repeated.any(axis=1))[0])
        item = int(s[row, 1:][repeated[row]][0])
        raise DataError(f"{name} {'list' if name.endswith('s') else 'lists'} item {item} twice in row {row} ({top[row].tolist()[:10]}"
                        f"{' ...' if top.shape[1] > 10 else ''}): each user's ranked items must be distinct, or a "
                        "relevant item counts twice (Recall and NDCG above 1)")


def _relevant_pairs(relevant: Relevant, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(user, item)`` pairs of ``relevant`` as two int64 arrays (may repeat)."""
    if sp.issparse(relevant):
        if relevant.shape[0] != n_users:
            raise DataError(f"relevant has {relevant.shape[0]} rows but ranked has {n_users} users")
        coo = sp.coo_matrix(relevant)
        users, items = coo.row.astype(np.int64), coo.col.astype(np.int64)
    else:
        if len(relevant) != n_users:
            raise DataError(f"relevant has {len(relevant)} users but ranked has {n_users}")
        arrays = [np.asarray(r, dtype=np.int64).ravel() for r in relevant]
        lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=n_users)
        users = np.repeat(np.arange(n_users, dtype=np.int64), lengths)
        items = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        if items.size and items.min() < 0:
            raise DataError("relevant item rows must be >= 0")
    return users, items


def hits_at_k(ranked: np.ndarray, relevant: Relevant, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Which of the first ``k`` ranked items are relevant.

    Returns ``(hits, n_relevant)``: bool ``[U, k]`` (padding is never a hit)
    and int64 ``[U]`` distinct relevant items per user.
    """
    return checked_hits(_check_ranked(ranked, k), relevant)


def checked_hits(top: np.ndarray, relevant: Relevant) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hits_at_k` of lists already checked: int64 ``top[U, k]``, no entry below PAD_ID and no item twice in a
    row. The evaluation loop checks its lists once (``scorer.rank``'s by :func:`check_rows`; ``topk_excluding``'s
    are distinct by construction): checked again here, each row was sorted once more per model, batch and segment."""
    n_users = top.shape[0]
    users, items = _relevant_pairs(relevant, n_users)
    if items.size == 0:
        return np.zeros(top.shape, dtype=bool), np.zeros(n_users, dtype=np.int64)
    # Encode (user, item) as one int64 key: dedup and membership become np.unique / np.isin.
    width = int(max(items.max(), top.max(initial=0))) + 1
    rel_keys = np.unique(users * width + items)  # [P] distinct pairs
    n_relevant = np.bincount(rel_keys // width, minlength=n_users).astype(np.int64)
    row = np.arange(n_users, dtype=np.int64)[:, None]  # [U, 1]
    top_keys = row * width + top  # [U, k]
    hits = np.isin(top_keys, rel_keys) & (top != PAD_ID)
    return hits, n_relevant


def _undefined_to_nan(values: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    values = values.astype(np.float64)
    values[n_relevant == 0] = np.nan
    return values


# Each metric is a formula over (hits [U, k], n_relevant [U]); the public
# *_at_k functions compute hits once and apply it, and the protocol reuses the
# formulas on prefixes of one hits matrix for every k.


def _recall(hits: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    return _undefined_to_nan(hits.sum(axis=1) / np.maximum(n_rel, 1), n_rel)


def _precision(hits: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    return _undefined_to_nan(hits.sum(axis=1) / float(hits.shape[1]), n_rel)


def _ndcg(hits: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    k = hits.shape[1]
    discount = 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))  # [k]
    dcg = hits @ discount  # [U]
    ideal_cum = np.concatenate([[0.0], np.cumsum(discount)])  # [k + 1]
    idcg = ideal_cum[np.minimum(n_rel, k)]  # [U]
    return _undefined_to_nan(dcg / np.where(idcg > 0, idcg, 1.0), n_rel)


def _mrr(hits: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    first = np.argmax(hits, axis=1)  # [U] 0-based position of the first hit
    rr = np.where(hits.any(axis=1), 1.0 / (first + 1.0), 0.0)
    return _undefined_to_nan(rr, n_rel)


def _hit_rate(hits: np.ndarray, n_rel: np.ndarray) -> np.ndarray:
    return _undefined_to_nan(hits.any(axis=1).astype(np.float64), n_rel)


#: Metric name -> formula(hits[U, k], n_relevant[U]) -> [U]; used by the protocol.
FROM_HITS = {
    "Recall": _recall,
    "Precision": _precision,
    "NDCG": _ndcg,
    "MRR": _mrr,
    "HitRate": _hit_rate,
}


def recall_at_k(ranked: np.ndarray, relevant: Relevant, k: int) -> np.ndarray:
    """Recall@k per user: ``|top_k ∩ rel| / |rel|``.

    The denominator is the full number of relevant items, so a user with more
    than ``k`` relevant items cannot reach 1.0. NaN where ``|rel| = 0``.
    """
    return _recall(*hits_at_k(ranked, relevant, k))


def precision_at_k(ranked: np.ndarray, relevant: Relevant, k: int) -> np.ndarray:
    """Precision@k per user: ``|top_k ∩ rel| / k``.

    The denominator is always ``k``, also for rows padded with ``-1`` (a model
    that cannot fill ``k`` slots is not rewarded for it). NaN where ``|rel| = 0``.
    """
    return _precision(*hits_at_k(ranked, relevant, k))


def ndcg_at_k(ranked: np.ndarray, relevant: Relevant, k: int) -> np.ndarray:
    """NDCG@k per user with binary gains.

    ``DCG = Σ_{j=1..k} hit_j / log2(j + 1)`` and
    ``IDCG = Σ_{j=1..min(|rel|, k)} 1 / log2(j + 1)`` (all relevant items
    ranked first), ``NDCG = DCG / IDCG`` in [0, 1]. NaN where ``|rel| = 0``.
    """
    return _ndcg(*hits_at_k(ranked, relevant, k))


def graded_ndcg_at_k(ranked: np.ndarray, grades: Sequence[Mapping[int, int]], k: int) -> np.ndarray:
    """NDCG@k per query ``[Q]`` of ``ranked[Q, >=k]``, each document's grade in ``grades[q]`` (row -> grade > 0) its
    gain: ``DCG = sum_j gain_j / log2(j + 1)`` over the list, ``IDCG`` the same for every judged document ranked by
    grade (trec_eval's / BEIR's ``ndcg_cut``). NaN for a query without one.

    The binary :func:`ndcg_at_k` counts a grade-2 document like a grade-1 one, so `search evaluate` on graded
    qrels (a `search prepare --score-col` folder, TREC-COVID, NFCorpus) gave an NDCG@10 BEIR's evaluation does not.
    """
    discounts = 1.0 / np.log2(np.arange(2, k + 2))  # [k]
    out = np.full(len(grades), np.nan)
    for q, g in enumerate(grades):
        if not g:
            continue
        gains = np.array([g.get(int(d), 0) for d in ranked[q, :k]], dtype=np.float64)  # padding (-1) gains 0
        ideal = np.sort(np.fromiter(g.values(), dtype=np.float64))[::-1][:k]
        out[q] = float(gains @ discounts[: gains.size]) / float(ideal @ discounts[: ideal.size])
    return out


def mrr_at_k(ranked: np.ndarray, relevant: Relevant, k: int) -> np.ndarray:
    """Reciprocal rank of the first relevant item within the top ``k`` (1-based), else 0.

    NaN where ``|rel| = 0``.
    """
    return _mrr(*hits_at_k(ranked, relevant, k))


def hit_rate_at_k(ranked: np.ndarray, relevant: Relevant, k: int) -> np.ndarray:
    """1.0 if any relevant item is in the top ``k``, else 0.0. NaN where ``|rel| = 0``."""
    return _hit_rate(*hits_at_k(ranked, relevant, k))


def coverage_at_k(ranked: np.ndarray, n_items: int, k: int) -> float:
    """Catalogue coverage: distinct items recommended in any top ``k`` / ``n_items``.

    Padding (``-1``) is not an item. Computed over every row of ``ranked``.
    """
    top = _check_ranked(ranked, k)
    if n_items < 1:
        raise ConfigError(f"n_items must be >= 1, got {n_items}")
    distinct = np.unique(top[top != PAD_ID])
    if distinct.size and distinct.max() >= n_items:
        raise DataError(f"ranked holds item row {int(distinct.max())} but n_items={n_items}")
    return float(distinct.size) / float(n_items)


def mean_popularity_at_k(ranked: np.ndarray, item_popularity: np.ndarray, k: int) -> float:
    """Mean training count of recommended items over all non-padding top-``k`` slots.

    ``item_popularity[i]`` is item ``i``'s number of training users (a user's
    repeats of an item count once: ``Popularity.counts``, what `twotower
    evaluate` passes). Lower means more long-tail recommendations. NaN if
    nothing was recommended.
    """
    top = _check_ranked(ranked, k)
    pop = np.asarray(item_popularity, dtype=np.float64)
    if pop.ndim != 1:
        raise DataError(f"item_popularity must be 1-D [I], got shape {pop.shape}")
    valid = top[top != PAD_ID]
    if valid.size == 0:
        return float("nan")
    if valid.max() >= pop.size:
        raise DataError(f"ranked holds item row {int(valid.max())} but item_popularity has {pop.size} items")
    return float(pop[valid].mean())
