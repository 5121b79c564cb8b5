"""twotower: train, evaluate, index, serve and explain two-tower retrieval models.

The public API is listed in ``__all__``; heavy modules (torch, faiss,
sentence-transformers) are imported lazily on first use, so ``import twotower``
is cheap and has no side effects.
"""
from __future__ import annotations

from twotower.utils.lazy import lazy_exports

from twotower.errors import (ConfigError, DataError, IntegrityError, NotFoundError, OverloadError, TrainingDiverged,
                             TwoTowerError)

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    # results (numpy): imported on first use, like the rest, so that the console script and `python -m twotower`,
    # which import this package first, set their SIGTERM handler before numpy loads (cli/main.py)
    "Results": "twotower.results",
    "PAD_ID": "twotower.results",
    # configuration
    "RunConfig": "twotower.config",
    "DataConfig": "twotower.config",
    "TowerConfig": "twotower.config",
    "ModelConfig": "twotower.config",
    "ItemItemConfig": "twotower.config",
    "LossConfig": "twotower.config",
    "TrainConfig": "twotower.config",
    "EvalConfig": "twotower.config",
    "load_config": "twotower.config",
    # data
    "ColumnMap": "twotower.data",
    "read_interactions": "twotower.data",
    "Vocabulary": "twotower.data",
    "FeatureSpec": "twotower.data",
    "temporal_split": "twotower.data",
    "leave_last_n_out": "twotower.data",
    "global_time_split": "twotower.data",
    "random_split": "twotower.data",
    "load_movielens_100k": "twotower.data",
    "fetch_movielens_100k": "twotower.data",
    # models and losses
    "TwoTowerModel": "twotower.models",
    "UserTower": "twotower.models",
    "ItemTower": "twotower.models",
    "InBatchSoftmax": "twotower.losses",
    "FullSoftmax": "twotower.losses",
    "BPRLoss": "twotower.losses",
    "SampledSoftmax": "twotower.losses",
    "ListwiseSoftmax": "twotower.losses",
    "LossBatch": "twotower.losses",
    "RetrievalLoss": "twotower.losses",
    "TrainLoop": "twotower.training.loop",
    "RowSparseAdam": "twotower.training.sparse_adam",  # SparseAdam, same numbers, row writes (2x on big tables)
    "DistributedInBatchSoftmax": "twotower.losses",
    # training and pipeline
    "Trainer": "twotower.training.trainer",
    "train_run": "twotower.pipeline",
    "prepare_data": "twotower.pipeline",
    "TrainedRun": "twotower.pipeline",
    "evaluate_run": "twotower.pipeline",
    "recommend": "twotower.pipeline.recommend",  # the lists `twotower recommend` prints, from Python
    "similar": "twotower.pipeline.similar",  # the lists `twotower similar` prints (POST /similar-items), from Python
    # evaluation
    "evaluate": "twotower.evaluation",
    "EvalProtocol": "twotower.evaluation",
    "Popularity": "twotower.evaluation",
    "EASE": "twotower.evaluation",
    "LowRankEASE": "twotower.evaluation",
    "ItemKNN": "twotower.evaluation",
    "format_table": "twotower.evaluation",
    "choose_on_validation": "twotower.evaluation",
    # index
    "ExactIndex": "twotower.index",
    "FaissIndex": "twotower.index",
    "autotune": "twotower.index",
    "tune_index": "twotower.index",
    "load_index": "twotower.index",
    "IndexPolicy": "twotower.index",
    "shortfall": "twotower.index",
    "build_index": "twotower.pipeline.index_build",  # `twotower index build`: autotuned, saved into RUN/index
    "EncoderSettings": "twotower.text",
    # serving and explanations
    "create_app": "twotower.serving",
    "ServiceSettings": "twotower.serving",
    "explain_recommendation": "twotower.explain",
    "explain_recommendations": "twotower.explain",  # several items of one user, the user-side work done once
    "explain_by_id": "twotower.explain",  # `twotower explain`: external ids, as tt.recommend returns them
    # export
    "export_onnx": "twotower.export",  # `twotower export --format onnx`
}

#: subpackages reachable as ``tt.<name>`` without importing them first (``tt.search.SearchIndex``): an attribute
#: lookup does not import a submodule, so ``tt.search`` was "module 'twotower' has no attribute 'search'"
_SUBPACKAGES = ("search",)

__all__ = [
    "__version__",
    "ConfigError",
    "DataError",
    "IntegrityError",
    "NotFoundError",
    "OverloadError",
    "TrainingDiverged",
    "TwoTowerError",
    *_LAZY,
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), subpackages=_SUBPACKAGES)
