"""Typed top-k results shared by index, fusion, rerank and the service.

Legend used across the project: ``Q`` queries, ``K`` results per query,
``N`` candidates, ``D`` embedding dimension, ``B`` batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Results", "PAD_ID", "SCORE_DECIMALS", "answer_score"]

#: Row index used to pad a result row that has fewer than K hits.
PAD_ID = -1
#: Decimals of a score in an answer (POST /recommend, /similar-items and /search, the CLI's --json, tt.recommend):
#: one rounding for all, so the same list reads the same whichever way it was asked for
SCORE_DECIMALS = 6


def answer_score(score: float) -> float:
    """``score`` as an answer gives it: rounded to :data:`SCORE_DECIMALS`."""
    return round(float(score), SCORE_DECIMALS)


@dataclass(frozen=True)
class Results:
    """Top-k hits for a batch of queries.

    ``ids[Q, K]`` are int64 row ids (``PAD_ID`` where a row ran out of hits)
    and ``scores[Q, K]`` float32, sorted by descending score in each row
    (padding scores are ``-inf``).
    """

    ids: np.ndarray
    scores: np.ndarray

    def __post_init__(self) -> None:
        if self.ids.shape != self.scores.shape or self.ids.ndim != 2:
            raise ValueError(
                f"Results needs ids and scores of the same 2-D shape, got {self.ids.shape} and {self.scores.shape}"
            )

    @property
    def shape(self) -> tuple[int, int]:
        """``(Q, K)``: queries by hits per query, the shape of ``ids`` and ``scores``."""
        return self.ids.shape  # type: ignore[return-value]

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def row(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        """The valid (non-padding) ids and scores of query ``q``."""
        keep = self.ids[q] != PAD_ID
        return self.ids[q][keep], self.scores[q][keep]

    @staticmethod
    def merge(parts: list["Results"], k: int) -> "Results":
        """Merge per-shard results of the same queries into one top-``k``.

        Shards must hold disjoint ids; ties are broken by smaller id so the
        merge is deterministic.
        """
        if not parts:
            raise ValueError("Results.merge needs at least one part")
        ids = np.concatenate([p.ids for p in parts], axis=1)  # [Q, sum K]
        scores = np.concatenate([p.scores for p in parts], axis=1)
        return Results.from_scores_and_ids(scores, ids, k)

    @staticmethod
    def from_scores_and_ids(scores: np.ndarray, ids: np.ndarray, k: int) -> "Results":
        """Top-``k`` of each row of candidate ``scores[Q, N]`` with ``ids[Q, N]``."""
        scores = np.asarray(scores, dtype=np.float32)
        ids = np.asarray(ids, dtype=np.int64)
        scores = np.where(ids == PAD_ID, -np.inf, scores).astype(np.float32)
        # lexsort: last key is primary -> sort by -score, then by id
        order = np.lexsort((ids, -scores), axis=1)[:, :k]  # [Q, k]
        top_ids = np.take_along_axis(ids, order, axis=1)
        top_scores = np.take_along_axis(scores, order, axis=1)
        top_ids = np.where(np.isneginf(top_scores), PAD_ID, top_ids)
        if top_ids.shape[1] < k:
            pad = k - top_ids.shape[1]
            top_ids = np.pad(top_ids, ((0, 0), (0, pad)), constant_values=PAD_ID)
            top_scores = np.pad(top_scores, ((0, 0), (0, pad)), constant_values=-np.inf)
        return Results(top_ids, top_scores.astype(np.float32))
