"""`search train` held out no queries: it reported the training loss only, against the loss of a model that learned
nothing, which a pretrained MiniLM starts far below (--lr 1e-12: 0.6315 -> 0.5702 against 3.5009, no warning). Now
``valid_frac`` / a ValidationSet scores held-out queries by dense NDCG@10 before training and after each epoch, the
best epoch's weights are saved (the starting ones when no epoch beat them) and training stops after ``patience``
epochs without a new best."""
from __future__ import annotations

import json

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.search.finetune import FinetuneConfig, finetune_bi_encoder, load_bi_encoder
from twotower.search.validation import ValidationSet, hold_out, ndcg10

from tests.extras import needs_text

DOCS = [
    "Aspirin reduces the risk of heart attack.", "Vitamin D supplements do not prevent fractures.",
    "Short sleep is linked to obesity in children.", "Coffee intake is associated with lower liver cancer risk.",
    "Exercise improves insulin sensitivity.", "Statins lower LDL cholesterol.", "Smoking causes lung cancer.",
    "Breastfeeding lowers the risk of asthma.",
]
QUERIES = ["does aspirin help the heart", "vitamin D and bone fractures", "kids sleep and weight", "coffee liver",
           "exercise and insulin", "statins cholesterol", "smoking lung", "breastfeeding asthma"]
VALID = ValidationSet(QUERIES[6:], [np.array([6]), np.array([7])])


def _scripted(monkeypatch, scores: list[float]) -> list[dict]:
    """Validation NDCG@10 replaced by ``scores`` in turn (epoch 0 first); returns the query tower's weights at each
    validation, to compare the saved tower with."""
    import twotower.search.finetune as ft

    seen: list[dict] = []

    def ndcg(self, q_model, *a):  # noqa: ANN001, ANN202
        seen.append({k: v.detach().clone() for k, v in q_model.state_dict().items()})
        return scores[len(seen) - 1]

    monkeypatch.setattr(ft._Validator, "_ndcg", ndcg)
    return seen


def _cfg(**kw) -> FinetuneConfig:
    return FinetuneConfig(**{"epochs": 5, "batch_size": 3, "lr": 1e-4, "warmup_frac": 0.0, "max_length": 16,
                             "query_max_length": 16, "train_doc_tower": False, "negatives_per_query": 0, **kw})


def _same(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


@needs_text
def test_the_best_epoch_is_saved_and_training_stops_when_patience_runs_out(monkeypatch, tmp_path):
    seen = _scripted(monkeypatch, [0.5, 0.6, 0.7, 0.65, 0.66, 0.9])  # best at epoch 2, then 2 epochs without
    res = finetune_bi_encoder(QUERIES[:6], list(range(6)), DOCS, tmp_path / "m", config=_cfg(patience=2),
                              show_progress=False, validation=VALID)
    assert len(seen) == 5 and {h["epoch"] for h in res.history} == {0, 1, 2, 3}  # epoch 5 never ran
    meta = json.loads((tmp_path / "m" / "twotower_bi_encoder.json").read_text())
    v = meta["validation"]
    assert (v["start"], v["best_epoch"], v["best"], v["stopped_early"], v["queries"]) == (0.5, 2, 0.7, True, 2)
    assert [e["ndcg10"] for e in v["epochs"]] == [0.6, 0.7, 0.65, 0.66]
    saved = load_bi_encoder(tmp_path / "m")[0].model.state_dict()
    assert _same(seen[2], saved) and not _same(seen[4], saved)  # epoch 2's weights, not the last epoch's


@needs_text
def test_when_no_epoch_beats_the_start_the_starting_weights_are_saved_with_a_warning(monkeypatch, tmp_path, caplog):
    from twotower.text.encoder import load_text_encoder

    _scripted(monkeypatch, [0.5, 0.4, 0.5, 0.3])  # a tie is no improvement
    with caplog.at_level("WARNING"):
        res = finetune_bi_encoder(QUERIES[:6], list(range(6)), DOCS, tmp_path / "m",
                                  config=_cfg(epochs=3, patience=5), show_progress=False, validation=VALID)
    assert res.validation["best_epoch"] == 0 and not res.validation["stopped_early"]
    assert "fine-tuning did not beat the starting model on the 2 validation queries: dense NDCG@10 0.5000 before " \
           "training, at best 0.5000 after an epoch; the starting weights were saved" in caplog.text
    saved = load_bi_encoder(tmp_path / "m")[0].model.state_dict()
    assert _same(load_text_encoder().model.state_dict(), saved)


@needs_text
def test_valid_frac_holds_queries_out_and_scores_them_densely(tmp_path):
    cfg = _cfg(epochs=1, valid_frac=0.25, seed=0)
    res = finetune_bi_encoder(QUERIES, list(range(8)), DOCS, tmp_path / "m", config=cfg, show_progress=False)
    meta = json.loads((tmp_path / "m" / "twotower_bi_encoder.json").read_text())
    keep, valid = hold_out(QUERIES, list(range(8)), 0.25, 0)
    assert meta["data"]["pairs"] == 6 == keep.size and meta["validation"]["queries"] == 2
    assert meta["config"]["valid_frac"] == 0.25 and meta["config"]["patience"] == FinetuneConfig.patience
    # epoch 0 is the starting model's own dense NDCG@10 on the held-out queries
    from twotower.search.dense import DenseRetriever
    from twotower.text.encoder import load_text_encoder

    zero_shot = DenseRetriever(load_text_encoder(), max_length=16, query_max_length=16, show_progress=False).fit(DOCS)
    assert meta["validation"]["start"] == pytest.approx(ndcg10(zero_shot.search(valid.queries, 8).ids, valid.relevant))
    assert res.validation == meta["validation"]


def test_hold_out_keeps_queries_sharing_a_document_together():
    queries = ["a", "b", "c", "d", "e", "f", "g", "h"]
    rows = [0, 0, 1, 2, 3, 4, 5, 6]  # a and b share document 0
    for seed in range(10):
        keep, valid = hold_out(queries, rows, 0.3, seed)
        trained = {rows[i] for i in keep}
        assert not trained & {int(r) for rel in valid.relevant for r in rel}
        assert {"a", "b"} <= set(valid.queries) or not {"a", "b"} & set(valid.queries)
        assert sorted(valid.queries + [queries[i] for i in keep]) == queries
    assert hold_out(queries, rows, 0.3, 1)[0].tolist() == hold_out(queries, rows, 0.3, 1)[0].tolist()


def test_hold_out_that_would_leave_nothing_to_train_on_is_refused():
    with pytest.raises(ConfigError, match="leaves no training queries"):
        hold_out(["a", "b"], [0, 0], 0.5, 0)
    with pytest.raises(ConfigError, match=r"^FinetuneConfig\.valid_frac: must be in \[0, 1\)"):
        FinetuneConfig(valid_frac=1.0)
    with pytest.raises(ConfigError, match=r"^FinetuneConfig\.patience: must be >= 1, got 0$"):
        FinetuneConfig(patience=0)


def test_ndcg10_pads_a_list_shorter_than_10():
    assert ndcg10(np.array([[1, 0], [0, 1]]), [np.array([0]), np.array([0])]) == pytest.approx((1 / np.log2(3) + 1) / 2)
