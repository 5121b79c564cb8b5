"""Text retrieval on BEIR-style data: BM25, dense two-tower, fusion, reranking.

Heavy dependencies (torch, sentence-transformers, bm25s) load lazily inside the
functions that need them.
"""
from twotower.search.beir import (
    BeirData,
    Corpus,
    TrainPair,
    load_beir,
    load_corpus,
    load_pairs,
    load_qrels,
    load_queries,
    pairs_from_qrels,
    relevant_rows,
    resolve_beir_dir,
    validation_split_by_group,
)
from twotower.search.bm25 import BM25Config, BM25Retriever
from twotower.search.dense import DenseRetriever
from twotower.search.evaluate import METRIC_KEYS, evaluate_retriever, search_evaluate
from twotower.search.finetune import (
    FinetuneConfig,
    FinetuneResult,
    evaluate_loss,
    finetune_bi_encoder,
    load_bi_encoder,
    load_dense_retriever,
)
from twotower.search.fusion import FUSIONS, FusionChoice, fusion_from_config, rrf, score_interpolation, tune_fusion
from twotower.search.negatives import MiningConfig, MiningReport, mine_hard_negatives
from twotower.search.pipeline import Hit, SearchIndex
from twotower.search.rerank import CrossEncoderReranker, RerankTrainConfig, RerankValidation, train_cross_encoder
from twotower.search.validation import ValidationSet

__all__ = [
    "BeirData", "Corpus", "TrainPair", "load_beir", "load_corpus", "load_pairs", "load_qrels", "load_queries",
    "pairs_from_qrels", "relevant_rows", "resolve_beir_dir", "validation_split_by_group",
    "BM25Config", "BM25Retriever", "DenseRetriever",
    "METRIC_KEYS", "evaluate_retriever", "search_evaluate",
    "FinetuneConfig", "FinetuneResult", "finetune_bi_encoder", "load_bi_encoder", "load_dense_retriever", "evaluate_loss",
    "FUSIONS", "FusionChoice", "fusion_from_config", "rrf", "score_interpolation", "tune_fusion",
    "MiningConfig", "MiningReport", "mine_hard_negatives",
    "Hit", "SearchIndex",
    "CrossEncoderReranker", "RerankTrainConfig", "train_cross_encoder",
    # the held-out queries finetune_bi_encoder(validation=) and train_cross_encoder(validation=) take
    "ValidationSet", "RerankValidation",
]
