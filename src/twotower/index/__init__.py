"""Vector indexes behind one interface: exact search, any FAISS index, autotuning, safe save/load.

``ExactIndex`` is the reference; ``FaissIndex`` wraps any FAISS factory string
(shortcuts ``flat``, ``ivf``, ``hnsw``, ``ivfpq``); ``autotune`` picks the
cheapest setting meeting a recall target; ``load_index`` verifies checksums and
the model fingerprint before returning any saved backend.
"""
from twotower.index.autotune import (
    IndexPolicy,
    TuneReport,
    TuneRow,
    autotune,
    exact_ground_truth,
    tie_aware_recall,
    tune_index,
)
from twotower.index.base import AllowList, VectorIndex, shortfall
from twotower.index.exact import ExactIndex
from twotower.index.faiss_index import SHORTCUTS, FaissIndex, resolve_factory
from twotower.index.plots import plot_recall_qps
from twotower.index.storage import fingerprint_arrays, load_index

__all__ = [
    "VectorIndex",
    "AllowList",
    "shortfall",
    "ExactIndex",
    "FaissIndex",
    "SHORTCUTS",
    "resolve_factory",
    "autotune",
    "TuneReport",
    "IndexPolicy",
    "tune_index",
    "TuneRow",
    "exact_ground_truth",
    "tie_aware_recall",
    "plot_recall_qps",
    "load_index",
    "fingerprint_arrays",
]
