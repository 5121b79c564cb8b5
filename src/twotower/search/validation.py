"""Held-out validation queries for ``search train`` and ``rerank train``: the split and the NDCG@10 they are read by.

The training loss alone could not tell a model that learned from one that did not: a pretrained bi-encoder starts
far below the loss of a model that learned nothing, so ``--lr 1e-12`` went 0.6315 -> 0.5702 against 3.5009 without a
word, and a cross-encoder whose loss ended 9.8% below chance took SciFact's test NDCG@10 from 0.8962 to 0.2055 when
it reranked. A few held-out queries scored as the model will be used say it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from twotower.errors import ConfigError
from twotower.search.beir import validation_split_by_group

__all__ = ["ValidationSet", "hold_out", "ndcg10", "NDCG_K"]

#: the cut-off of the validation metric (the one `search evaluate` leads with)
NDCG_K = 10


@dataclass(frozen=True)
class ValidationSet:
    """Held-out queries (distinct texts) and, per query, the corpus rows judged relevant to it (int64).
    ``valid_frac``: the share of the training queries :func:`hold_out` held out to make it (None: built by hand)."""

    queries: list[str]
    relevant: list[np.ndarray]
    valid_frac: float | None = None

    def __post_init__(self) -> None:
        # built by hand (finetune_bi_encoder(validation=...)), a mismatch failed after the model loaded as "relevant
        # has 1 users but ranked has 2", and an empty set or a query without a relevant row wrote NDCG@10 NaN
        relevant = checked_relevant(self.queries, self.relevant, "ValidationSet")
        object.__setattr__(self, "queries", list(self.queries))
        object.__setattr__(self, "relevant", relevant)

    @property
    def pairs(self) -> int:
        """The (query, relevant row) judgements the set holds."""
        return int(sum(r.size for r in self.relevant))


def checked_relevant(queries: Sequence[str], relevant: Sequence[np.ndarray], owner: str) -> list[np.ndarray]:
    """``relevant`` as int64 arrays: ``queries`` a list of texts, at least one, each with a non-empty 1-d array of
    corpus rows; else a ConfigError naming ``owner``, the held-out set it was given to (ValidationSet,
    RerankValidation)."""
    if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
        raise ConfigError(f"{owner}.queries must be a list of query texts")
    if len(queries) != len(relevant) or not queries:
        raise ConfigError(f"{owner} needs one array of relevant corpus rows per query, and at least one "
                          f"query; got {len(queries)} queries and {len(relevant)} arrays")
    rows = [np.asarray(r) for r in relevant]
    for q, r in zip(queries, rows):
        if r.ndim != 1 or not r.size or not np.issubdtype(r.dtype, np.integer) or r.min() < 0:
            raise ConfigError(f"{owner}.relevant for query {q!r} must be a non-empty 1-d array of corpus "
                              f"rows (integers >= 0), got {r!r}")
    return [r.astype(np.int64) for r in rows]


def hold_out(queries: Sequence[str], positive_rows: Sequence[int], frac: float, seed: int, *,
             name: str = "valid_frac") -> tuple[np.ndarray, ValidationSet]:
    """``(training pair indices, validation set)``: about ``frac`` of the distinct queries held out, queries that share
    a relevant document kept on one side (:func:`~twotower.search.beir.validation_split_by_group`, as bench/scifact.py
    splits), so no document judged relevant in validation was trained towards.

    A query is its text: the pairs give texts, and two pairs with one text are one query to the training too.
    ``name``: what a refusal calls ``frac``, the setting the caller took it from (``FinetuneConfig.valid_frac: 0.5
    needs ...``).
    """
    if not 0.0 < frac < 1.0:
        raise ConfigError(f"{name}: must be in (0, 1) to hold out queries, got {frac}")
    by_query: dict[str, dict[str, int]] = {}
    for q, r in zip(queries, positive_rows):
        by_query.setdefault(str(q), {})[str(int(r))] = 1
    if len(by_query) < 2:
        raise ConfigError(f"{name}: {frac} needs at least 2 distinct queries to hold some out, got {len(by_query)}")
    try:
        _, valid = validation_split_by_group(by_query, frac, seed)
    except ConfigError:  # every query held out: too large a share, or groups joined by shared documents
        n = len(by_query)
        if max(1, round(frac * n)) >= n:  # said of 3 queries with 3 documents apart that they "form one group"
            raise ConfigError(f"{name}: {frac} leaves no training queries: it holds out {frac:.0%} of the {n} distinct "
                              "queries, which rounds to all of them; give a smaller value") from None
        raise ConfigError(f"{name}: {frac} leaves no training queries: the {n} queries share "
                          "relevant documents so that they form one group; train without validation") from None
    keep = np.asarray([i for i, q in enumerate(queries) if str(q) not in valid], dtype=np.int64)
    held = sorted(valid, key=list(by_query).index)  # in the order the pairs gave them
    return keep, ValidationSet(held, [np.asarray(sorted(int(d) for d in valid[q]), dtype=np.int64) for q in held],
                               valid_frac=frac)


def ndcg10(ranked: np.ndarray, relevant: Sequence[np.ndarray]) -> float:
    """Mean binary NDCG@10 of ``ranked[Q, k]`` (corpus rows, -1 padding; fewer than 10 columns padded)."""
    from twotower.evaluation.metrics import ndcg_at_k  # noqa: PLC0415
    from twotower.results import PAD_ID  # noqa: PLC0415

    ranked = np.asarray(ranked, dtype=np.int64)
    if ranked.shape[1] < NDCG_K:  # a corpus of fewer than 10 documents: the rest of the list is empty
        pad = np.full((ranked.shape[0], NDCG_K - ranked.shape[1]), PAD_ID, dtype=np.int64)
        ranked = np.concatenate([ranked, pad], axis=1)
    return float(np.nanmean(ndcg_at_k(ranked, list(relevant), NDCG_K)))
