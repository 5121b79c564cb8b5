"""The metric names (``NDCG@10``) and their parsing, without numpy or scipy: :class:`twotower.config.EvalConfig`
checks ``eval.select_metric`` with :func:`parse_metric` whenever a config is made, the CLI's start-up included,
which imported scipy through :mod:`twotower.evaluation.protocol` for it (about half a second)."""
from __future__ import annotations

from collections.abc import Sequence

from twotower.errors import ConfigError

__all__ = ["PER_USER_METRICS", "CATALOGUE_METRICS", "parse_metric"]

#: Per-user metric names, averaged over evaluated users (the keys of :data:`twotower.evaluation.metrics.FROM_HITS`).
PER_USER_METRICS = ("Recall", "Precision", "NDCG", "MRR", "HitRate")
#: Catalogue-level metric names (``MeanPop`` only when item popularity is given).
CATALOGUE_METRICS = ("Coverage", "MeanPop")


def parse_metric(name: str, names: Sequence[str] | None = None) -> tuple[str, int]:
    """Split ``"NDCG@10"`` into ``("NDCG", 10)``, with a helpful error. ``names``: the metric names taken (None:
    every one), and the only ones the error lists: eval.select_metric's listed Coverage and MeanPop, then refused
    ``Coverage@10`` as a metric that cannot select."""
    choices = sorted(PER_USER_METRICS) + list(CATALOGUE_METRICS) if names is None else sorted(names)
    base, sep, k = name.partition("@")
    if not sep or base not in choices or not k.isdigit() or int(k) < 1:
        # "ndcg@10": the names are case-sensitive
        near = [c for c in choices if c.lower() == base.lower()]
        hint = f"; did you mean '{near[0]}@{k}'?" if near and k.isdigit() and int(k) >= 1 else ""
        raise ConfigError(f"metric {name!r} is not of the form NAME@K with NAME in {choices}, e.g. 'NDCG@10'{hint}")
    return base, int(k)
