"""The recall of a built index for item-to-item search (`twotower similar`, ``/similar-items``), beside autotune's.

Autotune measures recall@k with user vectors as queries, and that is what it tunes for. `similar` searches the same
index with item vectors, which sit on the items themselves: an IVF list holds an item's nearest neighbours with it,
but at a small ``nprobe`` the lists around it are not read, and on a 373k-item catalogue the ``nprobe=1`` that gave
users recall@10 0.99 gave items 0.21. This module measures the item-query recall of the index chosen (it does not
change the choice), for ``tune.json``'s ``"similar_recall"``, and says what to do when it misses the target.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from twotower.config import SIMILAR_RECALL_QUERIES
from twotower.index import ExactIndex, VectorIndex
from twotower.index.autotune import EF_SEARCH, half_octaves, tie_aware_recall

if TYPE_CHECKING:
    from twotower.pipeline.artifacts import TrainedRun

__all__ = ["SIMILAR_RECALL", "measure_similar_recall", "similar_recall_shortfall"]

log = logging.getLogger(__name__)

#: tune.json's key: {"recall", "k", "queries", "target", "met_target", "params", "suggest"}; "suggest" (None when the
#: setting built meets the target): {KNOB: value, "recall": item-query recall, "user_recall": user-query recall}
SIMILAR_RECALL = "similar_recall"


def _item_sample(run: TrainedRun, n: int, seed: int) -> np.ndarray:
    """Up to ``n`` item rows (seeded, sorted) that `similar` searches: not the items the model cannot place."""
    from twotower.pipeline.similar import unplaced_item_mask

    rows = np.flatnonzero(~unplaced_item_mask(run))
    if rows.size > n:
        rows = np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))
    return rows.astype(np.int64)


def _recall(index: VectorIndex, queries: np.ndarray, rows: np.ndarray, vectors: np.ndarray, ids: np.ndarray,
            kth: np.ndarray, k: int) -> float:
    found = index.search(queries, k, exclude=[rows[q : q + 1] for q in range(rows.size)])
    return tie_aware_recall(found.ids, queries, vectors, ids, kth, k)


def _ladder(index: VectorIndex, params: dict[str, Any]) -> tuple[str, list[int]]:
    """The knob to raise and its larger values: autotune's own grids (nprobe's half-octaves up to the list count,
    efSearch's values), so a suggestion lands on a setting the user-query sweep measured too (nprobe 6, where
    doubling from 1 went 4, 8)."""
    if "nprobe" in params:
        nlist = getattr(index, "nlist", None) or int(params["nprobe"])
        return "nprobe", [v for v in half_octaves(nlist) if v > int(params["nprobe"])]
    if "efSearch" in params:
        return "efSearch", [v for v in EF_SEARCH if v > int(params["efSearch"])]
    return "", []


class _UserRecall:
    """Recall@k of an index for the user queries the build tuned it on, against exact search, as autotune measures
    it: a raised setting suggested for item queries must keep meeting the target for users too."""

    def __init__(self, queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray, k: int) -> None:
        self.queries = np.ascontiguousarray(queries, dtype=np.float32)  # [Q, D]
        self.vectors, self.ids, self.k = vectors, ids, k
        exact = ExactIndex().build(vectors, ids).search(self.queries, k)
        self.kth = exact.scores[:, min(k, len(ids)) - 1].astype(np.float64)  # [Q]

    def __call__(self, index: VectorIndex) -> float:
        found = index.search(self.queries, self.k)
        return tie_aware_recall(found.ids, self.queries, self.vectors, self.ids, self.kth, self.k)


def measure_similar_recall(run: TrainedRun, index: VectorIndex, vectors: np.ndarray, *, k: int, target: float,
                           queries: int, seed: int, user_queries: np.ndarray | None = None) -> dict[str, Any]:
    """Recall@``k`` of ``index`` against exact search with item vectors as queries, as `similar` asks them.

    ``queries`` items (capped at :data:`~twotower.config.SIMILAR_RECALL_QUERIES`, seeded by ``seed``) are queried
    as :func:`~twotower.pipeline.similar.similar_queries` queries them (a cold item of a dual-head run by its
    semantic head), each left out of its own list in both searches; recall is tie-aware as autotune's. Below
    ``target`` the index's search knob (``nprobe`` / ``efSearch``) is raised on the index already built, and the
    first value meeting the target is recorded as ``"suggest"`` (the knob is put back after). ``user_queries``
    (``[Q, D]``, the user vectors the build tuned on): that value must meet the target for them too, with their
    recall recorded as ``"user_recall"``; the suggestion was item recall alone, and `--nprobe 1`'s advice of
    nprobe 4 built an index whose user recall@10 read 0.9429, which `serve` then refused.
    """
    from twotower.pipeline.similar import cold_item_mask, similar_queries
    from twotower.serving.settings import ServiceSettings

    ids = np.arange(vectors.shape[0], dtype=np.int64)
    rows = _item_sample(run, min(int(queries), SIMILAR_RECALL_QUERIES), seed)
    params = dict(index.search_params)
    out: dict[str, Any] = {"recall": None, "k": int(k), "queries": int(rows.size), "target": float(target),
                           "met_target": True, "params": params, "suggest": None}
    if rows.size == 0 or vectors.shape[0] < 2:
        return out
    q, _ = similar_queries(run, vectors, rows, cold_item_mask(run), ServiceSettings.cold_similar)
    q = np.ascontiguousarray(q, dtype=np.float32)  # [Q, D]
    exact = ExactIndex().build(vectors, ids).search(q, k, exclude=[rows[i : i + 1] for i in range(rows.size)])
    # the k-th exact score of each query (its last real neighbour when fewer than k are left)
    width = np.maximum((exact.ids != -1).sum(axis=1), 1)
    kth = exact.scores[np.arange(rows.size), width - 1].astype(np.float64)
    recall = _recall(index, q, rows, vectors, ids, kth, k)
    out.update(recall=round(float(recall), 6), met_target=bool(recall >= target))
    if recall >= target:
        return out
    knob, values = _ladder(index, params)
    users = None if user_queries is None or not len(user_queries) else _UserRecall(user_queries, vectors, ids, k)
    try:
        for v in values:
            index.set_search_params(**{**params, knob: v})
            got = _recall(index, q, rows, vectors, ids, kth, k)
            if got < target:
                continue
            user_got = None if users is None else users(index)
            if user_got is None or user_got >= target:
                out["suggest"] = {knob: int(v), "recall": round(float(got), 6),
                                  "user_recall": None if user_got is None else round(float(user_got), 6)}
                break
    finally:
        if values:
            index.set_search_params(**params)  # the index is served at the setting autotune chose
    return out


def similar_recall_shortfall(index_dir: str | Path, tune: dict[str, Any] | None, run_dir: str | Path) -> str | None:
    """The warning for an index whose recorded item-query recall (``tune.json``'s ``"similar_recall"``) is below its
    target, else None (None too for an index built before it was recorded). ``run_dir``: the run the index serves,
    so that the rebuild it names is a command to run, not flags to fit into one."""
    rec = (tune or {}).get(SIMILAR_RECALL)
    if not isinstance(rec, dict) or rec.get("recall") is None or rec.get("met_target", True):
        return None
    from twotower.pipeline.artifacts import rebuild_command

    suggest = rec.get("suggest") or {}
    knob = next((key for key in suggest if key not in ("recall", "user_recall")), None)
    flag = {"nprobe": "--nprobe", "efSearch": "--ef-search"}.get(knob or "")
    if flag:  # the type as built, at the setting measured to meet the target (rebuild_command leaves pins out)
        command = f"{rebuild_command(run_dir, index_dir, kind=str(tune.get('spec')), tune=tune)} {flag} {suggest[knob]}"
        users = "" if suggest.get("user_recall") is None else (
            f"; user queries recall@{rec['k']} {suggest['user_recall']:.4f}, which `serve` needs")
        rebuild = f"rebuild with `{command}` (recall@{rec['k']} {suggest['recall']:.4f} on the same items{users})"
    else:
        rebuild = (f"rebuild with `{rebuild_command(run_dir, index_dir, kind='exact', tune=tune)}` (no setting of this index "
                   f"met the target)")
    return (f"the index in {index_dir} was tuned for user queries, but with item vectors as queries (`twotower similar`, "
            f"POST /similar-items) it measured recall@{rec['k']} {rec['recall']:.4f} on {rec['queries']:,} items, below "
            f"the target {rec['target']:g}: item-to-item searches through it miss neighbours; `twotower similar "
            f"--exact` (tt.similar(..., exact=True)) ranks exactly, or {rebuild}")
