"""Every default is declared once, in the config dataclasses: CLI flags and losses read it from there."""
from __future__ import annotations

import dataclasses

import pytest

from twotower.cli.main import build_parser
from twotower.config import (
    DataConfig,
    EvalConfig,
    FinetuneConfig,
    LossConfig,
    RerankTrainConfig,
    SearchConfig,
    TrainConfig,
)
from twotower.errors import ConfigError
from twotower.index.autotune import IndexPolicy
from twotower.losses import BPRLoss, DistributedInBatchSoftmax, FullSoftmax, InBatchSoftmax, ListwiseSoftmax, SampledSoftmax
from twotower.serving.settings import ServiceSettings


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_search_and_rerank_train_flags_default_to_their_configs():
    ft, rt = FinetuneConfig(), RerankTrainConfig()
    a = _parse("search", "train", "--beir", "b", "--out", "o")
    assert (a.epochs, a.lr, a.batch_size, a.temperature, a.seed) == (
        ft.epochs, ft.lr, ft.batch_size, ft.temperature, ft.seed)
    # the lengths parse as None: --base's own (its marker), else the config's, as search evaluate / index read
    # --model's (tests/search/test_finetune_from_bi_encoder.py); a default of 256 here overrode a base's 128
    assert (a.max_length, a.query_max_length) == (None, None)
    r = _parse("rerank", "train", "--beir", "b", "--out", "o")
    assert (r.epochs, r.negatives, r.seed) == (rt.epochs, rt.negatives_per_query, rt.seed)
    # as search train's: --base's own length, else the config's (tests/search/test_rerank_train_report.py)
    assert r.max_length is None


def test_search_flags_default_to_the_search_config():
    sc = SearchConfig()
    e = _parse("search", "evaluate", "--beir", "b")
    assert (e.fusion, e.bm25_weight, e.cache) == (sc.fusion, sc.bm25_weight, sc.cache_dir)
    # --rerank-top parses as None (given or not: without --rerank it is refused) and reads SearchConfig's value
    from twotower.cli.search_cmd import _rerank_top

    assert e.rerank_top is None
    _rerank_top(e)
    assert e.rerank_top == sc.rerank_top
    i = _parse("search", "index", "--beir", "b", "--out", "o")
    assert (i.fusion, i.bm25_weight, i.cache) == (sc.fusion, sc.bm25_weight, sc.cache_dir)
    # the lengths default to the model's own training lengths, and to the config's for a plain model
    # (tests/search/test_trained_lengths.py): the flags pass None on, never a second copy of 256 / 64
    for parsed in (e, i):
        assert (parsed.max_length, parsed.query_max_length) == (None, None)
    q = _parse("search", "query", "--index", "i", "text")
    assert q.k == sc.k and q.rerank_top is None
    assert _parse("search", "train", "--beir", "b", "--out", "o").cache == sc.cache_dir
    # the fine-tuning and reranker configs read their text lengths from it too
    assert FinetuneConfig().max_length == RerankTrainConfig().max_length == sc.max_length
    assert FinetuneConfig().query_max_length == sc.query_max_length


def test_library_search_defaults_match_the_config():
    import inspect

    from twotower.search import SearchIndex, fusion_from_config, rrf
    from twotower.search.dense import DenseRetriever
    from twotower.search.evaluate import search_evaluate

    sc = SearchConfig()
    assert inspect.signature(rrf).parameters["k"].default == sc.rrf_k
    dense = inspect.signature(DenseRetriever).parameters
    assert (dense["max_length"].default, dense["query_max_length"].default) == (sc.max_length, sc.query_max_length)
    ev = inspect.signature(search_evaluate).parameters
    assert (ev["rerank_top"].default, ev["cache_dir"].default) == (sc.rerank_top, sc.cache_dir)
    se = inspect.signature(SearchIndex.search).parameters
    # rerank_top: None reads SearchConfig.rerank_top, so one given without a reranker can be told from the default
    assert (se["k"].default, se["rerank_top"].default) == (sc.k, None)
    assert fusion_from_config(sc).params == {"k": sc.rrf_k}
    z = fusion_from_config(SearchConfig(fusion="zscore", bm25_weight=0.7))
    assert z.name == "interpolation" and z.params["normalization"] == "zscore"
    assert z.params["weights"] == pytest.approx([0.7, 0.3])


@pytest.mark.parametrize("over, msg", [({"fusion": "rr"}, "did you mean 'rrf'"), ({"bm25_weight": 1.5}, "search.bm25_weight"),
                                      ({"k": 0}, "search.k"), ({"rrf_k": True}, "search.rrf_k")])
def test_search_config_is_validated(over, msg):
    with pytest.raises(ConfigError, match=msg):
        SearchConfig(**over)


def test_search_cli_names_the_flag_of_a_bad_fusion_weight():
    from twotower.cli.search_cmd import _fusion_choice

    with pytest.raises(ConfigError, match=r"^--bm25-weight: must be between 0 and 1, got 2$"):
        _fusion_choice(_parse("search", "evaluate", "--beir", "b", "--fusion", "minmax", "--bm25-weight", "2"))


def test_index_build_flags_default_to_the_index_policy():
    pol = IndexPolicy()
    a = _parse("index", "build", "--run", "r")
    assert (a.target_recall, a.k, a.queries, a.seed) == (pol.target_recall, pol.k, pol.tune_queries, pol.seed)
    assert a.exact_budget_ms is None  # None: the policy's exact_p99_ms


@pytest.mark.parametrize("flags, msg", [(["--queries", "0"], "--queries: must be at least 1, got 0"),
                                        (["--target-recall", "1.5"], "--target-recall: must be more than 0 and at most 1, got 1.5"),
                                        (["--k", "0"], "--k: must be at least 1, got 0"),
                                        (["--exact-budget-ms", "-1"], "--exact-budget-ms: must be at least 0")])
def test_index_build_checks_flags_before_loading_the_run(flags, msg):
    from twotower.cli.index_cmd import cmd_index_build

    with pytest.raises(ConfigError, match=msg):  # the run folder "r" does not exist: the flag is checked first
        cmd_index_build(_parse("index", "build", "--run", "r", *flags))


def test_request_and_cli_list_lengths_default_to_the_service_setting():
    from twotower.serving.service import RecRequest

    # None: the answering service's own default_k (ServiceSettings().default_k unless set otherwise), as its HTTP
    # schema gives a body without k; tests/serving/test_default_k_agrees.py checks the lists
    assert RecRequest(user_id="1").k is None


def test_serve_flags_default_to_service_settings():
    a = _parse("serve", "--run", "r")
    d = ServiceSettings()
    for f in ("host", "port", "max_concurrency", "max_queue", "max_wait_ms", "max_k", "max_batch", "max_history",
              "max_body_bytes", "threads"):
        assert getattr(a, f) == getattr(d, f), f


def test_evaluate_and_split_flags_default_to_their_configs():
    a = _parse("evaluate", "--run", "r")
    # not given: the run's own eval.ks / eval.baselines (EvalConfig's unless the run set them), read after loading it
    assert a.ks is None and a.baselines is None
    helps = _help_of(build_parser(), "evaluate")
    assert ",".join(map(str, EvalConfig().ks)) in helps["--ks"] and ",".join(EvalConfig().baselines) in helps["--baselines"]
    s = _parse("data", "split", "--out", "o")
    # not given: None, so a flag of another --method is refused rather than dropped; the split then reads the
    # configs' defaults, which the help names
    assert s.method == DataConfig().split and (s.ratios, s.n, s.seed) == (None, None, None)
    helps = _help_of(build_parser(), "data", "split")
    assert ",".join(map(str, DataConfig().ratios)) in helps["--ratios"]
    assert f"(default {DataConfig().leave_n})" in helps["--n"] and f"(default {TrainConfig().seed})" in helps["--seed"]


@pytest.mark.parametrize("cls", [InBatchSoftmax, SampledSoftmax, FullSoftmax, BPRLoss, DistributedInBatchSoftmax])
def test_recommender_losses_default_to_the_loss_config_temperature(cls):
    assert cls().temperature == LossConfig().temperature


def test_listwise_loss_defaults_to_the_reranker_temperature():
    assert ListwiseSoftmax().temperature == RerankTrainConfig().temperature


def test_text_configs_are_frozen_dataclasses_in_config():
    for cls in (FinetuneConfig, RerankTrainConfig, SearchConfig):
        assert dataclasses.is_dataclass(cls) and cls.__module__ == "twotower.config"
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().epochs = 3  # type: ignore[misc]


def test_serve_bounds_work_with_flags_the_503_message_names(monkeypatch, tmp_path):
    """--explain-k / --time-budget default to ServiceSettings and reach the service's settings."""
    import twotower.cli.serve_cmd as serve_cmd
    import twotower.serving as serving
    from twotower.serving.budget import BudgetExceeded, WorkBudget

    a = _parse("serve", "--run", "r")
    d = ServiceSettings()
    assert (a.explain_k, a.time_budget) == (d.explain_k, d.time_budget_s)
    budget = WorkBudget(1e-9, "POST /recommend/batch").start()
    with pytest.raises(BudgetExceeded, match="--time-budget"):
        while True:  # the clock passes 1e-9 s at once
            budget.check()

    class Stop(Exception):
        pass

    seen = {}

    def fake_load(run, index, *, settings, allow_low_recall, exact, history_from, exact_flag, allow_flag):
        seen["settings"] = settings
        raise Stop

    monkeypatch.setattr(serving.RecommenderService, "load", staticmethod(fake_load))
    with pytest.raises(Stop):
        (tmp_path / "run.json").write_text("{}")  # serve refuses a folder without one before the load
        serve_cmd.cmd_serve(_parse("serve", "--run", str(tmp_path), "--explain-k", "3", "--time-budget", "0.5"))
    assert (seen["settings"].explain_k, seen["settings"].time_budget_s) == (3, 0.5)


def _help_of(parser, *path: str) -> dict[str, str]:
    """{option: help} of the subcommand ``path`` of ``parser``."""
    import argparse

    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return {o: a.help or "" for a in parser._actions for o in a.option_strings}


def test_train_help_states_the_thread_and_split_defaults_the_config_holds():
    """`train --threads` said "default: TWOTOWER_THREADS or torch's", but training never leaves the count to torch
    (train.threads = null: half the idle cores); `--data` wrote the split's defaults out by hand."""
    from twotower.config import TRAIN_THREADS_DEFAULT

    train, demo = _help_of(build_parser(), "train"), _help_of(build_parser(), "demo")
    assert train["--threads"].endswith(f"(default: {TRAIN_THREADS_DEFAULT})") and "torch's" not in train["--threads"]
    assert demo["--threads"].endswith(f"(default: {TRAIN_THREADS_DEFAULT})")
    dc = DataConfig()
    assert f"default {dc.split} {'/'.join(f'{r * 100:g}' for r in dc.ratios)})" in train["--data"]


def test_rerank_backend_flags_default_to_the_rerank_settings():
    """`--rerank-backend` (search evaluate, search query, serve) reads RerankSettings, whose default is the bi-encoder's."""
    from twotower.text.encoder import EncoderSettings, RerankSettings

    assert RerankSettings.backend == EncoderSettings.backend
    for argv in (["search", "evaluate", "--beir", "b"], ["search", "query", "--index", "i", "q"],
                 ["serve", "--search-index", "i"]):
        assert _parse(*argv).rerank_backend == RerankSettings.backend


def test_epochs_and_demo_user_help_states_their_defaults():
    """`train --epochs` said only "shortcut for train.epochs=N", demo's "the config's train.epochs" (which config?),
    and demo's --user none of its default 42: a newcomer read neither the 30 epochs nor who the demo shows."""
    train, demo = _help_of(build_parser(), "train"), _help_of(build_parser(), "demo")
    assert train["--epochs"].endswith(f"(default: --config's train.epochs, else {TrainConfig.epochs})")
    assert demo["--epochs"].endswith(f"(default: train.epochs, {TrainConfig.epochs})")
    assert demo["--user"] % {"default": _parse("demo").user} == "user to show recommendations for (default 42)"


def test_explain_and_export_flags_default_to_their_library_functions():
    """The CLI's `explain --top` and `export --check-users` repeat the library's keyword defaults: kept equal."""
    import inspect

    from twotower.explain.explainer import explain_recommendation
    from twotower.export.onnx import export_onnx

    assert _parse("explain", "--run", "r", "--user", "1", "--item", "2").top == (
        inspect.signature(explain_recommendation).parameters["top"].default)
    assert _parse("export", "--run", "r", "--out", "o").check_users == (
        inspect.signature(export_onnx).parameters["check_users"].default)


def test_search_train_and_the_python_fine_tuning_default_to_the_same_training():
    """`search train` froze the document tower, used 3 mined negatives a query and re-mined them each epoch, while
    FinetuneConfig() trained both towers on 1 and never re-mined: `finetune_bi_encoder` and the command trained
    different models by default."""
    ft = FinetuneConfig()
    a = _parse("search", "train", "--beir", "b", "--out", "o")
    assert (a.train_doc_tower or a.shared, a.negatives) == (ft.train_doc_tower, ft.negatives_per_query)
    assert ft.re_mines  # the command's default re-mines: a frozen document tower, dense mining, negatives used
    assert not FinetuneConfig(train_doc_tower=True).re_mines
    assert not FinetuneConfig(mining_retriever="bm25").re_mines
    assert not FinetuneConfig(negatives_per_query=0).re_mines
    assert FinetuneConfig(refresh_negatives=False).re_mines is False
