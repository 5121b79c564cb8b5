"""Every default is declared once, in the config dataclasses: CLI flags and losses read it from there."""
from __future__ import annotations

import dataclasses

import pytest

from twotower.cli.main import build_parser
from twotower.config import DataConfig, EvalConfig, FinetuneConfig, LossConfig, RerankTrainConfig, TrainConfig
from twotower.losses import BPRLoss, DistributedInBatchSoftmax, FullSoftmax, InBatchSoftmax, ListwiseSoftmax, SampledSoftmax
from twotower.serving.settings import ServiceSettings


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_search_and_rerank_train_flags_default_to_their_configs():
    ft, rt = FinetuneConfig(), RerankTrainConfig()
    a = _parse("search", "train", "--beir", "b", "--out", "o")
    assert (a.epochs, a.lr, a.batch_size, a.temperature, a.max_length, a.seed) == (
        ft.epochs, ft.lr, ft.batch_size, ft.temperature, ft.max_length, ft.seed)
    r = _parse("rerank", "train", "--beir", "b", "--out", "o")
    assert (r.epochs, r.negatives, r.max_length, r.seed) == (rt.epochs, rt.negatives_per_query, rt.max_length, rt.seed)


def test_serve_flags_default_to_service_settings():
    a = _parse("serve", "--run", "r")
    d = ServiceSettings()
    for f in ("host", "port", "max_concurrency", "max_queue", "max_wait_ms", "max_k", "max_batch", "max_history",
              "max_body_bytes", "threads"):
        assert getattr(a, f) == getattr(d, f), f


def test_evaluate_and_split_flags_default_to_their_configs():
    a = _parse("evaluate", "--run", "r")
    assert tuple(int(k) for k in a.ks.split(",")) == EvalConfig().ks
    assert tuple(a.baselines.split(",")) == EvalConfig().baselines
    s = _parse("data", "split", "--out", "o")
    assert (s.method, tuple(float(r) for r in s.ratios.split(",")), s.n, s.seed) == (
        DataConfig().split, DataConfig().ratios, DataConfig().leave_n, TrainConfig().seed)


@pytest.mark.parametrize("cls", [InBatchSoftmax, SampledSoftmax, FullSoftmax, BPRLoss, DistributedInBatchSoftmax])
def test_recommender_losses_default_to_the_loss_config_temperature(cls):
    assert cls().temperature == LossConfig().temperature


def test_listwise_loss_defaults_to_the_reranker_temperature():
    assert ListwiseSoftmax().temperature == RerankTrainConfig().temperature


def test_text_configs_are_frozen_dataclasses_in_config():
    for cls in (FinetuneConfig, RerankTrainConfig):
        assert dataclasses.is_dataclass(cls) and cls.__module__ == "twotower.config"
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().epochs = 3  # type: ignore[misc]


def test_serve_bounds_work_with_flags_the_503_message_names(monkeypatch):
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

    def fake_load(run, index, *, settings, allow_low_recall):
        seen["settings"] = settings
        raise Stop

    monkeypatch.setattr(serving.RecommenderService, "load", staticmethod(fake_load))
    with pytest.raises(Stop):
        serve_cmd.cmd_serve(_parse("serve", "--run", "r", "--explain-k", "3", "--time-budget", "0.5"))
    assert (seen["settings"].explain_k, seen["settings"].time_budget_s) == (3, 0.5)
