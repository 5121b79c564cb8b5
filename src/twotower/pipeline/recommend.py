"""Exact top-k recommendations from a saved run, with per-user exclusions."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
import scipy.sparse as sp

from twotower.data.readers import read_interactions
from twotower.errors import NotFoundError
from twotower.evaluation.protocol import topk_excluding
from twotower.pipeline.artifacts import TrainedRun
from twotower.results import PAD_ID, Results

__all__ = ["exclusions_from_files", "recommend_users", "recommend_history", "results_to_frame", "results_to_items"]


def exclusions_from_files(run: TrainedRun, files: Iterable[str | Path], *, include_seen: bool) -> sp.csr_matrix:
    """[U, I] pairs never to recommend: the given interaction files (+ training history)."""
    U, I = len(run.user_vocab), run.n_items
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    if include_seen:
        lengths = run.history.lengths()
        rows.append(np.repeat(np.arange(U, dtype=np.int64), lengths))
        cols.append(run.history.items)
    for f in files:
        df = read_interactions(f)
        u = run.user_vocab.encode(df["user_id"].to_numpy())
        i = run.item_vocab.encode(df["item_id"].to_numpy())
        keep = (u >= 0) & (i >= 0)
        rows.append(u[keep])
        cols.append(i[keep])
    if not rows:
        return sp.csr_matrix((U, I), dtype=np.float32)
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    m = sp.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(U, I))
    m.data[:] = 1.0
    return m


def recommend_users(run: TrainedRun, user_rows: np.ndarray, k: int, exclude: sp.csr_matrix | None, batch: int = 1024) -> Results:
    """Top-k item rows for known users (full catalogue, exact)."""
    user_rows = np.asarray(user_rows, np.int64)
    ids_parts, score_parts = [], []
    for s in range(0, len(user_rows), batch):
        chunk = user_rows[s : s + batch]
        scores = run.scores_for_users(chunk)  # [B, I]
        ex = exclude[chunk] if exclude is not None else None
        top = topk_excluding(scores, k, ex)  # [B, K] rows, -1 padded
        sc = np.take_along_axis(scores, np.maximum(top, 0), axis=1)
        sc = np.where(top == PAD_ID, -np.inf, sc)
        ids_parts.append(top)
        score_parts.append(sc.astype(np.float32))
    if not ids_parts:
        return Results(np.zeros((0, k), np.int64), np.zeros((0, k), np.float32))
    return Results(np.concatenate(ids_parts), np.concatenate(score_parts))


def recommend_history(run: TrainedRun, history_ids: list[str], k: int, exclude_seen: bool = True) -> Results:
    """Top-k for a user never seen in training, from a list of item ids (oldest first)."""
    rows = []
    for item_id in history_ids:
        if item_id not in run.item_vocab:
            raise NotFoundError("item", item_id, "not in this run's catalogue")
        rows.append(run.item_vocab.index(item_id))
    vec = run.history_vectors([np.asarray(rows, np.int64)])  # [1, D]
    scores = vec @ run.item_embeddings().T  # [1, I]
    ex = None
    if exclude_seen and rows:
        ex = sp.csr_matrix((np.ones(len(rows), np.float32), (np.zeros(len(rows), np.int64), rows)), shape=(1, run.n_items))
    top = topk_excluding(scores, k, ex)
    sc = np.where(top == PAD_ID, -np.inf, np.take_along_axis(scores, np.maximum(top, 0), axis=1))
    return Results(top, sc.astype(np.float32))


def results_to_frame(run: TrainedRun, user_rows: np.ndarray, res: Results) -> pd.DataFrame:
    users, items, ranks, scores = [], [], [], []
    for q, u in enumerate(user_rows):
        ids, sc = res.row(q)
        uid = run.user_vocab.ids[int(u)]
        for r, (i, s) in enumerate(zip(ids, sc), start=1):
            users.append(uid)
            items.append(run.item_vocab.ids[int(i)])
            ranks.append(r)
            scores.append(float(s))
    return pd.DataFrame({"user_id": users, "item_id": items, "rank": ranks, "score": scores})


def results_to_items(run: TrainedRun, res: Results, q: int = 0) -> list[dict[str, Any]]:
    """``[{"item_id", "score", "rank", ...metadata}]`` for query ``q``."""
    ids, sc = res.row(q)
    out = []
    for r, (i, s) in enumerate(zip(ids, sc), start=1):
        rec = run.item_record(int(i))
        rec.update({"item_id": run.item_vocab.ids[int(i)], "score": round(float(s), 6), "rank": r})
        out.append(rec)
    return out
