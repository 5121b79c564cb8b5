"""eval.select_metric: early stopping follows that validation metric, or the run is refused before training."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def _trainer(select_metric: str) -> Trainer:
    rng, users, seqs, model = tiny_mean_model()
    valid = sp.csr_matrix((np.ones(8, np.float32), (np.arange(8), rng.integers(0, 30, size=8))), shape=(8, 30))
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, seqs.items)), shape=(8, 30))
    train.data[:] = 1.0
    return Trainer(model, seqs, loss=LossConfig(), train=TrainConfig(epochs=2, batch_size=8, progress=False,
                   checkpoint=False), eval=EvalConfig(baselines=(), select_metric=select_metric),
                   valid_relevant=valid, train_matrix=train)


@pytest.mark.parametrize("name", ["ndcg@10", "AUC", "NDCG"])
def test_a_metric_validation_does_not_compute_is_refused_before_training(name):
    # it used to train and keep the epoch with the lowest loss, logging "valid ndcg@10 nan"
    with pytest.raises(ConfigError, match=rf"eval.select_metric: metric '{name}' is not of the form NAME@K"):
        _trainer(name)


def test_a_cut_off_outside_eval_ks_is_computed_and_selects_the_epoch():
    res = _trainer("Recall@7").fit()  # 7 is not among eval.ks (10, 20, 50, 100)
    assert all("valid_Recall@7" in row for row in res.history)
    best = max(res.history, key=lambda row: row["valid_Recall@7"])
    assert res.best_metric == best["valid_Recall@7"]  # not minus the loss


def _checkpointing(out, select_metric: str, epochs: int = 1) -> Trainer:
    rng, users, seqs, model = tiny_mean_model()
    valid = sp.csr_matrix((np.ones(8, np.float32), (np.arange(8), rng.integers(0, 30, size=8))), shape=(8, 30))
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, seqs.items)), shape=(8, 30))
    train.data[:] = 1.0
    return Trainer(model, seqs, loss=LossConfig(), train=TrainConfig(epochs=epochs, batch_size=8, progress=False,
                   patience=10), eval=EvalConfig(baselines=(), select_metric=select_metric),
                   valid_relevant=valid, train_matrix=train, out_dir=out)


def _fitted(out, select_metric: str, epochs: int, resume: bool = False):
    trainer = _checkpointing(out, select_metric, epochs)
    return trainer, trainer.fit(resume=resume)


def _score(weights, select_metric: str) -> float:
    """``weights`` (a model.safetensors) scored on the validation data as a fit selecting on ``select_metric``."""
    from twotower.training.checkpoint import load_weights

    trainer = _checkpointing(None, select_metric)
    load_weights(weights, trainer.model)
    return trainer.validate()[select_metric]


def test_a_resume_with_another_select_metric_scores_the_best_epoch_again(tmp_path, caplog):
    """The checkpoint's best was NDCG@10 (above 0.1); Precision@10 of one relevant item is at most 0.1, so no
    resumed epoch could beat it: the run kept the old weights, reporting "best valid Precision@10" of an NDCG@10."""
    import json
    import logging
    import shutil

    out = tmp_path / "run"
    _, first = _fitted(out, "NDCG@10", 2)
    assert first.best_metric > 0.1  # above any Precision@10 here
    shutil.copy(out / "model.safetensors", tmp_path / "best.safetensors")
    kept = _score(tmp_path / "best.safetensors", "Precision@10")  # the old best epoch under the new measure
    with caplog.at_level(logging.INFO, logger="twotower.training"):
        _, res = _fitted(out, "Precision@10", 4, resume=True)
    scored = {first.best_epoch: kept, **{r["epoch"]: r["valid_Precision@10"] for r in res.history if r["epoch"] > 2}}
    best = max(scored, key=lambda e: (scored[e], -e))
    assert (res.best_epoch, res.best_metric) == (best, pytest.approx(scored[best]))
    # the checkpoint's best named by what measured it, and the new figure said
    assert f"resumed from epoch 2 (best NDCG@10={first.best_metric:.4f} at epoch {first.best_epoch})" in caplog.text
    assert "eval.select_metric: 'NDCG@10' in the run, 'Precision@10' now" in caplog.text
    assert f"valid Precision@10 {kept:.4f} (NDCG@10 {first.best_metric:.4f} as the run measured it)" in caplog.text
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["best"] == pytest.approx(res.best_metric) and state["best_measure"]["metric"] == "Precision@10"


def _rankable_most() -> int:
    """The most items any validation user of :func:`_trainer` can be shown: the 30 less their training items."""
    _, users, seqs, _ = tiny_mean_model()
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, seqs.items)), shape=(8, 30))
    return int(30 - train.getnnz(axis=1).min())


@pytest.mark.parametrize("metric", ["Recall@30", "Recall@5000", "HitRate@30", "Precision@31"])
def test_a_counting_metric_whose_lists_hold_the_catalogue_is_refused_before_training(metric):
    """Recall@5000 on ML-100K's 1,615 items was 1.0000 at every epoch: early stopping kept epoch 1 and the
    item-item weight was chosen on it too, without a word, where `evaluate` warns of such a k."""
    k = metric.partition("@")[2]
    with pytest.raises(ConfigError, match=rf"^eval\.select_metric: {metric}: k={k} is not below the 30 items of the "
                                          rf"catalogue: those lists hold every item, so {metric} is the same at every "
                                          r"epoch and cannot choose one .*e\.g\. eval\.select_metric=NDCG@10$"):
        _trainer(metric)


def test_a_counting_metric_past_every_users_rankable_items_is_refused():
    # below the catalogue, but each user's excluded training items leave fewer to show than k: Recall is 1 anyway
    k = _rankable_most()
    with pytest.raises(ConfigError, match=rf"^eval\.select_metric: Recall@{k}: k={k} reaches past the rankable items "
                                          r"\(the catalogue less the excluded history\) of 8 of 8 validation users"):
        _trainer(f"Recall@{k}")


@pytest.mark.parametrize("metric", ["NDCG@30", "MRR@5000"])
def test_a_ranking_metric_over_the_whole_catalogue_is_warned_of_not_refused(metric, caplog):
    # NDCG and MRR still weigh where the hits fall, so they order the epochs: said, as `evaluate` says it
    with caplog.at_level("WARNING", logger="twotower.training"):
        _trainer(metric)
    k = metric.partition("@")[2]
    assert (f"eval.select_metric={metric}: k={k} is not below the 30 items of the catalogue: those lists hold every "
            f"item, so {metric} weighs where the hits fall in the whole ranking") in caplog.text


def test_a_counting_metric_past_some_users_rankable_items_is_warned_of(caplog):
    k = _rankable_most() - 1
    with caplog.at_level("WARNING", logger="twotower.training"):
        _trainer(f"Recall@{k}")
    assert f"eval.select_metric=Recall@{k}: k={k} reaches past the rankable items" in caplog.text
    assert "validation users: their lists hold every item they can be shown" in caplog.text


def test_a_usual_select_metric_says_nothing(caplog):
    with caplog.at_level("WARNING", logger="twotower.training"):
        _trainer("NDCG@10")
        _trainer("Recall@20")
    assert "eval.select_metric" not in caplog.text
