"""Top-k lists that hold every item a user can be shown, and what their metrics then say: the one rule behind
`twotower evaluate`'s warnings of such a k and the check of the metric training selects on (``eval.select_metric``,
:mod:`twotower.training.select_metric`). A user can be shown the catalogue less their excluded history, so a k below
the catalogue may reach past it: ``--ks 1600`` on ML-100K's 1,615 items gave every model Recall@1600 1.0000."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["COUNTING_METRICS", "counting_at", "past_catalogue", "past_rankable", "rankable_items"]

#: The per-user metrics that count the held-out items a list holds, not where it holds them: once a user's list holds
#: every item they can be shown they are fixed, whatever the ranking (NDCG and MRR still weigh where the hits fall)
COUNTING_METRICS = ("Recall", "Precision", "HitRate")


def counting_at(k: int) -> str:
    """``Recall@20, Precision@20 and HitRate@20``: the :data:`COUNTING_METRICS` at ``k``, as a warning names them."""
    *rest, last = [f"{name}@{k}" for name in COUNTING_METRICS]
    return f"{', '.join(rest)} and {last}"


def rankable_items(relevant: sp.csr_matrix, exclude: sp.csr_matrix | None) -> np.ndarray:
    """``[evaluated users]``: how many items each user with a held-out item can be shown, the catalogue less that
    user's excluded items (``exclude`` None: none are)."""
    evaluated = np.diff(relevant.indptr) > 0
    n_items = relevant.shape[1]
    if exclude is None:
        return np.full(int(evaluated.sum()), n_items, dtype=np.int64)
    return n_items - (exclude != 0).getnnz(axis=1)[evaluated]


def past_catalogue(ks: Sequence[int], n_items: int) -> str:
    """``k=5000 is not below the 1615 items of the catalogue: those lists hold every item``."""
    return f"k={','.join(map(str, ks))} is not below the {n_items} items of the catalogue: those lists hold every item"


def past_rankable(k: int, full: int, evaluated: int, who: str = "evaluated") -> str:
    """``k=1600 reaches past the rankable items (...) of 943 of 943 evaluated users: their lists hold every item
    they can be shown``; ``who`` names the users (``evaluated``, ``validation``)."""
    return (f"k={k} reaches past the rankable items (the catalogue less the excluded history) of {full} of "
            f"{evaluated} {who} users: their lists hold every item they can be shown")
