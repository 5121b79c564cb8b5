"""train_cross_encoder(validation=...) reranks the held-out queries after every epoch, keeps the best epoch's weights
and stops after config.patience epochs without a better one; it validated once, after the last epoch, and saved that
epoch whatever it scored."""

from __future__ import annotations

import json

import numpy as np
import pytest

import twotower.search.rerank as rerank
from twotower.errors import ConfigError, DataError
from twotower.results import Results
from twotower.search import RerankTrainConfig, RerankValidation, train_cross_encoder

from tests.extras import needs_text

DOCS = ["red apple fruit", "green apple pie", "blue sky clouds", "grey sky rain"]


def _validation() -> RerankValidation:
    first = Results(np.array([[1, 0, 2], [3, 2, 0]]), np.array([[3.0, 2.0, 1.0]] * 2, dtype=np.float32))
    return RerankValidation(["red apple", "blue sky"], first, [np.array([0]), np.array([2])], top_n=3)


@needs_text
def test_the_best_epoch_is_kept_and_patience_stops_training(tmp_path, monkeypatch, caplog):
    scores = iter([0.4, 0.9, 0.5, 0.6, 0.7])  # epoch 2 is the best; patience 2 stops after epoch 4
    weights = []
    real = rerank.validate_reranking

    def scored(reranker, val, texts):  # noqa: ANN001, ANN202
        v = real(reranker, val, texts)
        weights.append({k: t.detach().clone() for k, t in reranker.model.state_dict().items()})
        return {**v, "reranked": next(scores), "worse": False}

    monkeypatch.setattr(rerank, "validate_reranking", scored)
    steps = []
    real_tail = rerank._tail_summary
    monkeypatch.setattr(rerank, "_tail_summary", lambda h, c, z: (steps.extend(h), real_tail(h, c, z))[1])
    cfg = RerankTrainConfig(
        epochs=5, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=5, head_lr=5e-2, seed=0, patience=2
    )
    with caplog.at_level("INFO", logger="twotower.search.rerank"):
        rr = train_cross_encoder(
            ["red apple", "blue sky"],
            [0, 2],
            [np.array([2]), np.array([0])],
            DOCS,
            tmp_path / "ce",
            config=cfg,
            show_progress=False,
            validation=_validation(),
        )
    meta = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())
    v = meta["validation"]
    assert [e["reranked"] for e in v["epochs"]] == [0.4, 0.9, 0.5, 0.6]
    # final_loss and tail are epoch 4's (one step per epoch here); the marker names that epoch and gives the saved
    # epoch's own loss besides
    assert (meta["final_loss"], meta["last_epoch"]) == (steps[3], 4)
    assert meta["saved_epoch"] == {"epoch": 2, "steps": 1, "mean_loss": steps[1], "chance_loss": pytest.approx(np.log(2))}
    assert (v["best_epoch"], v["reranked"], v["stopped_early"], v["patience"]) == (2, 0.9, True, 2)
    # the fields the single check wrote are all still there
    assert {"queries", "pairs", "metric", "first_stage", "top_n", "without_rerank", "reranked", "worse", "seconds"} <= set(v)
    assert "early stopping after epoch 4" in caplog.text
    saved = rr.model.state_dict()
    head = next(k for k in saved if "classifier" in k and k.endswith("weight"))
    assert np.allclose(saved[head].numpy(), weights[1][head].numpy())  # epoch 2's weights, not epoch 4's
    assert not np.allclose(saved[head].numpy(), weights[3][head].numpy())


@needs_text
def test_a_best_epoch_still_worse_than_bm25_is_warned_about(tmp_path, caplog):
    cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6, seed=0)
    # BM25's lists put the relevant document first: reranking can only tie or lose
    first = Results(np.array([[0, 1, 2], [2, 3, 0]]), np.array([[3.0, 2.0, 1.0]] * 2, dtype=np.float32))
    val = RerankValidation(["red apple", "blue sky"], first, [np.array([0]), np.array([2])], top_n=3)
    train_cross_encoder(
        ["red apple", "blue sky"],
        [0, 2],
        [np.array([2]), np.array([0])],
        DOCS,
        tmp_path / "ce",
        config=cfg,
        show_progress=False,
        validation=val,
    )
    v = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())["validation"]
    assert v["best_epoch"] == 1 and len(v["epochs"]) == 1 and v["without_rerank"] == pytest.approx(1.0)
    worst = {**v, "reranked": 0.5, "worse": True}
    with caplog.at_level("WARNING", logger="twotower.search.rerank"):
        rerank._log_validation(worst)
    assert "(epoch 1 of 1, the best, kept): reranking with this cross-encoder makes the held-out lists WORSE" in caplog.text


def test_patience_defaults_to_the_config_and_is_checked():
    from twotower.cli.main import build_parser
    from twotower.errors import ConfigError

    args = build_parser().parse_args(["rerank", "train", "--beir", "b", "--out", "o"])
    assert args.patience == RerankTrainConfig.patience
    with pytest.raises(ConfigError, match=r"^RerankTrainConfig\.patience: must be >= 1, got 0$"):
        RerankTrainConfig(patience=0)


_FIRST = Results(np.array([[1, 0, 2], [3, 2, 0]]), np.array([[3.0, 2.0, 1.0]] * 2, dtype=np.float32))


@pytest.mark.parametrize("queries, relevant, top_n, match", [
    # were accepted, and failed only once the first epoch had trained ("3 queries but 2 result rows")
    (["a", "b", "c"], [np.array([0])] * 3, 3,
     r"^RerankValidation.first_stage must be Results with one row per query \(3\), got 2 rows"),
    (["a", "b"], [np.array([0])], 3, r"^RerankValidation needs one array of relevant corpus rows per query"),
    (["a", "b"], [np.array([0]), np.array([], dtype=np.int64)], 3, r"^RerankValidation.relevant for query 'b'"),
    (["a", "b"], [np.array([0])] * 2, 0, r"^RerankValidation.top_n: must be a positive integer, got 0"),
    ("ab", [np.array([0])] * 2, 3, r"^RerankValidation.queries must be a list of query texts"),
])
def test_a_validation_set_that_cannot_be_reranked_is_refused_when_built(queries, relevant, top_n, match):
    with pytest.raises(ConfigError, match=match):
        RerankValidation(queries, _FIRST, relevant, top_n=top_n)


@pytest.mark.parametrize("first, relevant, what", [
    (Results(np.array([[9, 0, 2], [3, 2, 0]]), _FIRST.scores), [np.array([0]), np.array([2])], "first_stage"),
    (_FIRST, [np.array([0]), np.array([9])], "relevant"),
])
def test_validation_rows_past_the_corpus_are_refused_before_training(tmp_path, first, relevant, what):
    # a first-stage row past the corpus was an IndexError after the first epoch; a relevant one scored 0 silently
    val = RerankValidation(["red apple", "blue sky"], first, relevant, top_n=3)
    with pytest.raises(DataError, match=rf"^validation.{what} rows must lie in \[0, 4\), the corpus rows"):
        train_cross_encoder(["red apple", "blue sky"], [0, 2], [np.array([1]), np.array([3])], DOCS,
                            tmp_path / "ce", validation=val, show_progress=False)
    assert not (tmp_path / "ce").exists()
