"""The metric training selects on (``eval.select_metric``) against the lists validation ranks: where those lists hold
every item a user can be shown (the rule `twotower evaluate` warns by, evaluation/full_lists.py), a metric that counts
the hits is the same at every epoch, and is refused; NDCG and MRR still weigh where the hits fall, and are warned of.
Recall@5000 on ML-100K's 1,615 items read 1.0000 at every epoch, and early stopping kept epoch 1 without a word."""
from __future__ import annotations

import scipy.sparse as sp

from twotower.errors import ConfigError
from twotower.evaluation.full_lists import COUNTING_METRICS, past_catalogue, past_rankable, rankable_items
from twotower.evaluation.metric_names import PER_USER_METRICS, parse_metric

__all__ = ["select_k", "select_metric_warning"]


def select_k(metric: str, valid: sp.csr_matrix | None, exclude: sp.csr_matrix | None) -> int:
    """The k of ``metric`` (``eval.select_metric``), whose key early stopping reads from the validation metrics;
    ConfigError where validation cannot compute it, or where it counts hits and every validation user's list at k
    (``valid`` [U, I], less ``exclude``) holds every item that user can be shown."""
    try:  # one the validation metrics lack stopped on the loss, silently
        base, k = parse_metric(metric, PER_USER_METRICS)
    except ConfigError as e:
        raise ConfigError(f"eval.select_metric: {e}") from None
    full = _full_lists(k, valid, exclude)
    if full is not None and full[1] and base in COUNTING_METRICS:
        raise ConfigError(f"eval.select_metric: {metric}: {full[0]}, so {metric} is the same at every epoch and cannot "
                          "choose one (nor the item-item term's weight); give a smaller k, e.g. "
                          "eval.select_metric=NDCG@10")
    return k


def select_metric_warning(metric: str, valid: sp.csr_matrix | None, exclude: sp.csr_matrix | None) -> str | None:
    """The start-up warning for a ``metric`` :func:`select_k` let through whose lists hold every item some users
    can be shown (a counting metric: those users' figures are fixed) or every user can (NDCG, MRR: the whole
    ranking is weighed, not its top); None otherwise."""
    base, k = parse_metric(metric)
    full = _full_lists(k, valid, exclude)
    if full is None:
        return None
    said, every = full
    if base in COUNTING_METRICS:
        return (f"eval.select_metric={metric}: {said}, so their {metric} is the same at every epoch, and the other "
                "users' alone choose the epoch; a smaller k, e.g. eval.select_metric=NDCG@10, selects on them all")
    if not every:
        return None
    return (f"eval.select_metric={metric}: {said}, so {metric} weighs where the hits fall in the whole ranking, not "
            f"in the top of the lists a user is shown; a k such as 10 (eval.select_metric={base}@10) selects on that")


def _full_lists(k: int, valid: sp.csr_matrix | None, exclude: sp.csr_matrix | None) -> tuple[str, bool] | None:
    """Which validation lists at ``k`` hold every item their user can be shown, in `twotower evaluate`'s words, and
    whether all of them do; None where none does (or there is no validation data)."""
    if valid is None:
        return None
    rankable = rankable_items(valid, exclude)
    full = int((rankable <= k).sum())
    if not full:
        return None
    if k >= valid.shape[1]:
        return past_catalogue([k], valid.shape[1]), True
    return past_rankable(k, full, len(rankable), "validation"), full == len(rankable)
