"""Text retrieval on BEIR-style data: BM25, dense two-tower, fusion, reranking.

Heavy dependencies (torch, sentence-transformers, bm25s) load lazily inside the
functions that need them.

The names below are imported on first use (:mod:`twotower.utils.lazy`): the CLI's start-up reads a few
settings of this package, and importing any one module ran this file, which imported them all (scipy included).
"""
from twotower.utils.lazy import lazy_exports

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "BeirData": "twotower.search.beir",
    "Corpus": "twotower.search.beir",
    "TrainPair": "twotower.search.beir",
    "load_beir": "twotower.search.beir",
    "load_corpus": "twotower.search.beir",
    "load_pairs": "twotower.search.beir",
    "load_qrels": "twotower.search.beir",
    "load_queries": "twotower.search.beir",
    "pairs_from_qrels": "twotower.search.beir",
    "relevant_rows": "twotower.search.beir",
    "resolve_beir_dir": "twotower.search.beir",
    "validation_split_by_group": "twotower.search.beir",
    "BM25Config": "twotower.search.bm25",
    "BM25Retriever": "twotower.search.bm25",
    "DenseRetriever": "twotower.search.dense",
    "METRIC_KEYS": "twotower.search.evaluate",
    "evaluate_retriever": "twotower.search.evaluate",
    "search_evaluate": "twotower.search.evaluate",
    "FinetuneConfig": "twotower.search.finetune",
    "FinetuneResult": "twotower.search.finetune",
    "evaluate_loss": "twotower.search.finetune",
    "finetune_bi_encoder": "twotower.search.finetune",
    "load_bi_encoder": "twotower.search.finetune",
    "load_dense_retriever": "twotower.search.finetune",
    "FUSIONS": "twotower.search.fusion",
    "FusionChoice": "twotower.search.fusion",
    "fusion_from_config": "twotower.search.fusion",
    "rrf": "twotower.search.fusion",
    "score_interpolation": "twotower.search.fusion",
    "tune_fusion": "twotower.search.fusion",
    "MiningConfig": "twotower.search.negatives",
    "MiningReport": "twotower.search.negatives",
    "mine_hard_negatives": "twotower.search.negatives",
    "Hit": "twotower.search.pipeline",
    "PrepareConfig": "twotower.search.prepare",
    "prepare_beir": "twotower.search.prepare",
    "SearchIndex": "twotower.search.pipeline",
    "describe_index": "twotower.search.pipeline",
    "CrossEncoderReranker": "twotower.search.rerank",
    "RerankTrainConfig": "twotower.search.rerank",
    "RerankValidation": "twotower.search.rerank",
    "train_cross_encoder": "twotower.search.rerank",
    "ValidationSet": "twotower.search.validation",
}
# reachable as attributes (twotower.search.artefacts), as when this file imported them all
_SUBMODULES = (
    "artefacts", "beir", "bm25", "checks", "dense", "evaluate", "finetune", "fusion", "id_cells", "negatives",
    "pipeline", "prepare", "rerank", "validation",
)

__all__ = [
    "BeirData", "Corpus", "TrainPair", "load_beir", "load_corpus", "load_pairs", "load_qrels", "load_queries",
    "pairs_from_qrels", "relevant_rows", "resolve_beir_dir", "validation_split_by_group",
    "BM25Config", "BM25Retriever", "DenseRetriever",
    "METRIC_KEYS", "evaluate_retriever", "search_evaluate",
    "FinetuneConfig", "FinetuneResult", "finetune_bi_encoder", "load_bi_encoder", "load_dense_retriever", "evaluate_loss",
    "FUSIONS", "FusionChoice", "fusion_from_config", "rrf", "score_interpolation", "tune_fusion",
    "MiningConfig", "MiningReport", "mine_hard_negatives",
    "Hit", "SearchIndex", "describe_index",
    # your own passages and query-passage pairs to a BEIR folder (`twotower search prepare`), and its settings
    "PrepareConfig", "prepare_beir",
    "CrossEncoderReranker", "RerankTrainConfig", "train_cross_encoder",
    # the held-out queries finetune_bi_encoder(validation=) and train_cross_encoder(validation=) take
    "ValidationSet", "RerankValidation",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), subpackages=_SUBMODULES)
