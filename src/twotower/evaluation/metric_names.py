"""The metric names (``NDCG@10``) and their parsing, without numpy or scipy: :class:`twotower.config.EvalConfig`
checks ``eval.select_metric`` with :func:`parse_metric` whenever a config is made, the CLI's start-up included,
which imported scipy through :mod:`twotower.evaluation.protocol` for it (about half a second)."""
from __future__ import annotations

from twotower.errors import ConfigError

__all__ = ["PER_USER_METRICS", "CATALOGUE_METRICS", "parse_metric"]

#: Per-user metric names, averaged over evaluated users (the keys of :data:`twotower.evaluation.metrics.FROM_HITS`).
PER_USER_METRICS = ("Recall", "Precision", "NDCG", "MRR", "HitRate")
#: Catalogue-level metric names (``MeanPop`` only when item popularity is given).
CATALOGUE_METRICS = ("Coverage", "MeanPop")


def parse_metric(name: str) -> tuple[str, int]:
    """Split ``"NDCG@10"`` into ``("NDCG", 10)``, with a helpful error."""
    choices = sorted(PER_USER_METRICS) + list(CATALOGUE_METRICS)
    base, sep, k = name.partition("@")
    if not sep or base not in choices or not k.isdigit() or int(k) < 1:
        raise ConfigError(f"metric {name!r} is not of the form NAME@K with NAME in {choices}, e.g. 'NDCG@10'")
    return base, int(k)
