"""The EASE baseline above eval.ease_max_items: fitted low-rank (and labelled so) instead of being left out,
and skipped, with a warning naming the settings to raise, only above eval.ease_low_rank_max_items."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from twotower.config import EvalConfig
from twotower.errors import ConfigError
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.evaluate_run import evaluate_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> TrainedRun:
    return TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("ease-baseline")))


def test_above_ease_max_items_the_low_rank_ease_is_fitted_and_with_every_eigenpair_scores_as_ease(
        run, caplog, monkeypatch):
    # 60 items > eval.ease_max_items=5 left the table without an EASE row; the tiny run's 40 users give its Gram
    # matrix at most 40 non-zero eigenpairs, all of them kept (of eval.ease_eigenpairs=256 asked for), so it scores
    # as EASE off the history, and its row says 40 (it said 256)
    module = sys.modules[evaluate_run.__module__]
    scorers: dict[str, object] = {}

    def recording(scorer, *args, **kwargs):  # the scorer each row was evaluated with
        scorers[kwargs["what"]] = scorer
        return evaluate_segments(scorer, *args, **kwargs)

    evaluate_segments = module.evaluate_segments  # what evaluate_run ranks with (its --segments from the same lists)
    monkeypatch.setattr(module, "evaluate_segments", recording)
    dense = [r["model"] for r in evaluate_run(run, baselines=("ease",), ks=(10,))]
    with caplog.at_level(logging.INFO, logger="twotower.evaluation.baselines"):
        low = [r["model"] for r in evaluate_run(run, baselines=("ease",), ks=(10,), ease_max_items=5)]
    eigenpairs = EvalConfig.ease_eigenpairs
    assert eigenpairs > 40
    assert dense[1].startswith("ease (λ=") and low[1].startswith("ease (low-rank, 40 eigenpairs, λ=")
    assert dense[1].split("λ=")[1] == low[1].split("λ=")[1]  # the same λ chosen on validation
    exact, approx = (scorers[f"evaluating {name} on test"] for name in (dense[1], low[1]))
    assert type(exact).__name__ == "EASE" and type(approx).__name__ == "LowRankEASE" and approx.eigenpairs == 40
    users = np.arange(exact._require_fitted().shape[0])
    unseen = exact._require_fitted()[users].toarray() == 0  # a history item's low-rank score is not EASE's 0
    assert np.allclose(approx.score(users)[unseen], exact.score(users)[unseen], atol=1e-5)
    assert f"EASE baseline: solved on its Gram matrix's {eigenpairs} leading eigenpairs" in caplog.text
    assert "60 items > eval.ease_max_items=5" in caplog.text
    assert "EASE skipped" not in caplog.text


def test_above_the_low_rank_limit_ease_is_skipped_naming_both_settings(run, caplog):
    with caplog.at_level(logging.WARNING, logger="twotower.evaluation.baselines"):
        rows = evaluate_run(run, baselines=("popularity", "ease"), ks=(10,), ease_max_items=5,
                            ease_low_rank_max_items=50)
    assert [r["model"] for r in rows] == ["two-tower", "popularity"]
    [said] = [r.getMessage() for r in caplog.records if "EASE skipped" in r.getMessage()]
    assert "60 items > eval.ease_low_rank_max_items=50" in said
    assert "raise eval.ease_low_rank_max_items (`twotower evaluate --ease-low-rank-max-items N`)" in said
    assert "Not solved densely either: 60 items > eval.ease_max_items=5" in said


def test_a_bad_low_rank_limit_is_refused_before_any_work(run, monkeypatch):
    module = sys.modules[evaluate_run.__module__]
    monkeypatch.setattr(module, "run_matrices", lambda r: pytest.fail("work started before the arguments were checked"))
    with pytest.raises(ConfigError, match=r"^ease_low_rank_max_items: must be an integer >= 1 .* got 0"):
        evaluate_run(run, ease_low_rank_max_items=0)


def test_the_baseline_solver_is_chosen_by_eval_ease_solver(monkeypatch, caplog):
    from twotower.evaluation.baselines import ease_baseline_solver

    monkeypatch.setattr("twotower.utils.runtime.available_memory", lambda: 2**40)
    limits = {"max_items": 20_000, "eigenpairs": 256, "low_rank_max_items": 100_000}
    assert ease_baseline_solver(3_416, solver="auto", **limits) == "dense"
    assert ease_baseline_solver(50_000, solver="auto", **limits) == "low_rank"
    assert ease_baseline_solver(3_416, solver="low_rank", **limits) == "low_rank"
    with caplog.at_level(logging.WARNING, logger="twotower.evaluation.baselines"):
        # dense: the old rule, skipped above eval.ease_max_items with the old message
        assert ease_baseline_solver(50_000, solver="dense", **limits) is None
        assert "EASE skipped: 50,000 items > eval.ease_max_items=20,000" in caplog.text
        assert "--ease-low-rank-max-items" not in caplog.text
        caplog.clear()
        assert ease_baseline_solver(500_000, solver="low_rank", **limits) is None
        assert "500,000 items > eval.ease_low_rank_max_items=100,000" in caplog.text
        assert "Not solved densely" not in caplog.text  # it was not asked to be
    monkeypatch.setattr("twotower.utils.runtime.available_memory", lambda: 2**30)
    with caplog.at_level(logging.WARNING, logger="twotower.evaluation.baselines"):
        assert ease_baseline_solver(90_000, solver="auto", **limits) is None  # ~1.2 GiB of eigenpairs > 1 GiB
        assert "for the low-rank EASE's 256 eigenpairs, more than the 1.0 GiB available" in caplog.text


def test_the_eval_ease_settings_are_checked_by_name() -> None:
    with pytest.raises(ConfigError, match="eval.ease_solver: 'lowrank' is not one of auto, dense, low_rank"):
        EvalConfig(ease_solver="lowrank")
    with pytest.raises(ConfigError, match="eval.ease_low_rank_max_items"):
        EvalConfig(ease_low_rank_max_items=0)
    with pytest.raises(ConfigError, match="eval.ease_eigenpairs"):
        EvalConfig(ease_eigenpairs=0)
    with pytest.raises(ConfigError, match="eval.ease_tune_max_users: must be >= 1, or null"):
        EvalConfig(ease_tune_max_users=0)
    assert EvalConfig(ease_tune_max_users=None).ease_tune_max_users is None


def test_the_low_rank_ease_follows_the_runs_seed(run, monkeypatch):
    # its eigensolver and its sample of validation users were drawn with seed 0 whatever train.seed, while the
    # dense EASE's and ItemKNN's samples follow the run's seed
    import twotower.evaluation.low_rank_ease as low_rank_ease

    seeds: list[int] = []
    solve = low_rank_ease.gram_eigenpairs

    def recording(x, k, seed):  # noqa: ANN001
        seeds.append(seed)
        return solve(x, k, seed)

    monkeypatch.setattr(low_rank_ease, "gram_eigenpairs", recording)
    assert run.config.train.seed != 0
    evaluate_run(run, baselines=("ease",), ks=(10,), ease_max_items=5)
    assert seeds and set(seeds) == {run.config.train.seed}
