"""Offline evaluation: pure ranking metrics, the full-catalogue protocol, baselines, tables, plots.

Takes arrays and sparse matrices over internal rows; never imports towers.

The names below are imported on first use (:mod:`twotower.utils.lazy`): the CLI's start-up reads a few
settings of this package, and importing any one module ran this file, which imported them all (scipy included).
"""
from twotower.utils.lazy import lazy_exports

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "EASE": "twotower.evaluation.baselines",
    "ItemKNN": "twotower.evaluation.baselines",
    "Popularity": "twotower.evaluation.baselines",
    "tune_ease": "twotower.evaluation.baselines",
    "tune_itemknn": "twotower.evaluation.baselines",
    "LowRankEASE": "twotower.evaluation.low_rank_ease",
    "tune_low_rank_ease": "twotower.evaluation.low_rank_ease",
    "coverage_at_k": "twotower.evaluation.metrics",
    "hit_rate_at_k": "twotower.evaluation.metrics",
    "hits_at_k": "twotower.evaluation.metrics",
    "mean_popularity_at_k": "twotower.evaluation.metrics",
    "mrr_at_k": "twotower.evaluation.metrics",
    "ndcg_at_k": "twotower.evaluation.metrics",
    "precision_at_k": "twotower.evaluation.metrics",
    "recall_at_k": "twotower.evaluation.metrics",
    "plot_recall_at_k": "twotower.evaluation.plots",
    "EvalProtocol": "twotower.evaluation.protocol",
    "Scorer": "twotower.evaluation.protocol",
    "evaluate": "twotower.evaluation.protocol",
    "parse_metric": "twotower.evaluation.protocol",
    "topk_excluding": "twotower.evaluation.protocol",
    "Choice": "twotower.evaluation.selection",
    "choose_on_validation": "twotower.evaluation.selection",
    "format_table": "twotower.evaluation.table",
    "to_markdown": "twotower.evaluation.table",
}
# reachable as attributes (twotower.evaluation.baselines), as when this file imported them all
_SUBMODULES = (
    "baselines", "low_rank_ease", "metrics", "plots", "protocol", "selection", "table",
)

__all__ = [
    # metrics
    "hits_at_k",
    "recall_at_k",
    "precision_at_k",
    "ndcg_at_k",
    "mrr_at_k",
    "hit_rate_at_k",
    "coverage_at_k",
    "mean_popularity_at_k",
    # protocol
    "Scorer",
    "EvalProtocol",
    "topk_excluding",
    "evaluate",
    "parse_metric",
    # baselines
    "Popularity",
    "EASE",
    "LowRankEASE",
    "ItemKNN",
    "tune_ease",
    "tune_low_rank_ease",
    "tune_itemknn",
    # model choice
    "Choice",
    "choose_on_validation",
    # reporting
    "format_table",
    "to_markdown",
    "plot_recall_at_k",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), subpackages=_SUBMODULES)
