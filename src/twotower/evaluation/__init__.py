"""Offline evaluation: pure ranking metrics, the full-catalogue protocol, baselines, tables, plots.

Takes arrays and sparse matrices over internal rows; never imports towers.
"""
from twotower.evaluation.baselines import EASE, ItemKNN, Popularity, tune_ease, tune_itemknn
from twotower.evaluation.low_rank_ease import LowRankEASE, tune_low_rank_ease
from twotower.evaluation.metrics import (
    coverage_at_k,
    hit_rate_at_k,
    hits_at_k,
    mean_popularity_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
)
from twotower.evaluation.plots import plot_recall_at_k
from twotower.evaluation.protocol import EvalProtocol, Scorer, evaluate, parse_metric, topk_excluding
from twotower.evaluation.selection import Choice, choose_on_validation
from twotower.evaluation.table import format_table, to_markdown

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
