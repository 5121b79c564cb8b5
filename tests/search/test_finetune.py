from __future__ import annotations

import json

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.search.finetune import FinetuneConfig, evaluate_loss, finetune_bi_encoder, load_bi_encoder
from twotower.text.encoder import load_text_encoder

from tests.extras import needs_text

DOCS = [
    "Aspirin reduces the risk of heart attack.",
    "Vitamin D supplements do not prevent fractures.",
    "Short sleep is linked to obesity in children.",
    "Coffee intake is associated with lower liver cancer risk.",
    "Exercise improves insulin sensitivity.",
    "Statins lower LDL cholesterol.",
    "Smoking causes lung cancer.",
    "Breastfeeding lowers the risk of asthma.",
]
QUERIES = [
    "does aspirin help the heart", "vitamin D and bone fractures", "kids sleep and weight", "coffee liver",
    "exercise and insulin", "statins cholesterol", "smoking lung", "breastfeeding asthma",
]


@needs_text
def test_one_step_on_8_pairs_lowers_the_loss(tmp_path):
    base = load_text_encoder()
    before = evaluate_loss(base, base, QUERIES, DOCS, max_length=32)
    cfg = FinetuneConfig(epochs=1, batch_size=8, lr=2e-4, warmup_frac=0.0, max_length=32, query_max_length=16, seed=0)
    res = finetune_bi_encoder(QUERIES, list(range(8)), DOCS, tmp_path / "m", config=cfg, show_progress=False)
    assert len(res.history) == 1
    after = evaluate_loss(res.query_encoder, res.doc_encoder, QUERIES, DOCS, max_length=32)
    assert after < before
    # saved as two sentence-transformers directories with safetensors, and reloadable
    assert (tmp_path / "m" / "query" / "model.safetensors").is_file()
    assert (tmp_path / "m" / "doc" / "model.safetensors").is_file()
    meta = json.loads((tmp_path / "m" / "twotower_bi_encoder.json").read_text())
    assert meta["steps"] == 1 and meta["config"]["shared"] is False
    # documents cut at max_length counted (text_encoder.truncation_report): none of these 8 reaches 32 word pieces
    assert meta["truncation"] == {"passages": 8, "cut": 0, "max_length": 32, "longest": 12}
    q, d = load_bi_encoder(tmp_path / "m")
    np.testing.assert_allclose(q.encode(QUERIES[:2], show_progress=False),
                               res.query_encoder.encode(QUERIES[:2], show_progress=False), atol=1e-6)


@needs_text
def test_frozen_doc_tower_keeps_doc_weights_and_cache_key(tmp_path):
    cfg = FinetuneConfig(epochs=1, batch_size=4, lr=1e-4, max_length=32, query_max_length=16,
                         train_doc_tower=False, corpus_negatives=True, negatives_per_query=0)
    res = finetune_bi_encoder(QUERIES[:4], [0, 1, 2, 3], DOCS, tmp_path / "m", config=cfg,
                              cache_dir=tmp_path / "cache", show_progress=False)
    assert res.doc_encoder.model_id == load_text_encoder().model_id  # copied verbatim -> same cache entry
    assert res.query_encoder.model_id != res.doc_encoder.model_id


def test_config_errors_name_the_setting():
    with pytest.raises(ConfigError, match="corpus_negatives"):
        FinetuneConfig(corpus_negatives=True)
    with pytest.raises(ConfigError, match="negatives_per_query=0"):
        FinetuneConfig(corpus_negatives=True, train_doc_tower=False)
    with pytest.raises(ConfigError, match="batch_size"):
        FinetuneConfig(batch_size=1)
    with pytest.raises(ConfigError, match="shared"):
        FinetuneConfig(shared=True, train_doc_tower=False)


@needs_text
def test_embedding_for_training_does_not_call_the_deprecated_tokenize(monkeypatch):
    # newer sentence-transformers (6.3 here) warn "The `tokenize` method is deprecated" into the user's training log
    from twotower.search.finetune import _embed

    model = load_text_encoder().model
    if not hasattr(model, "preprocess"):
        pytest.skip("this sentence-transformers has no preprocess (tokenize is its only API)")

    def deprecated(*_a, **_k):
        raise AssertionError("tokenize called")

    monkeypatch.setattr(model, "tokenize", deprecated)
    emb = _embed(model, QUERIES[:2], max_length=16)
    assert tuple(emb.shape) == (2, 384)


@needs_text
def test_the_learning_rate_schedule_counts_the_steps_taken(tmp_path):
    # a query asked twice (two relevant documents) cannot share a batch, so the batch count depends on the shuffle:
    # the schedule counted 3 steps on another shuffle while seed 2 takes 4, and the 4th ran at learning rate 0
    queries = [QUERIES[0], QUERIES[0], *QUERIES[1:7]]
    cfg = FinetuneConfig(epochs=1, batch_size=3, lr=2e-4, warmup_frac=0.0, max_length=32, query_max_length=16, seed=2)
    res = finetune_bi_encoder(queries, [0, 5, 1, 2, 3, 4, 5, 6], DOCS, tmp_path / "m", config=cfg, show_progress=False)
    assert len(res.history) == 4
    lrs = [h["lr"] for h in res.history]  # the rate each step leaves for the next: decays step by step to 0 at the end
    assert all(a > b for a, b in zip(lrs, lrs[1:])) and lrs[-1] == 0.0, lrs


def _record_hard_negatives(monkeypatch, n_pairs: int) -> list[list[int]]:
    """Each step's hard-negative rows (the candidates after the batch's positives)."""
    import twotower.losses as losses

    seen: list[list[int]] = []

    class Recording(losses.InBatchSoftmax):
        def forward(self, queries, candidates, batch=None, **legacy):
            if batch is not None:
                seen.append(batch.candidate_ids[n_pairs:].tolist())
            return super().forward(queries, candidates, batch, **legacy)

    monkeypatch.setattr(losses, "InBatchSoftmax", Recording)
    return seen


@needs_text
def test_refreshed_negatives_are_used_from_the_hardest(monkeypatch, tmp_path):
    # the round-robin over each pair's negatives counted epochs from the first: after a re-mining, epoch 1 took the
    # fresh lists' second-hardest negative and epoch 2 their third, so the hardest one was used one epoch in three
    import twotower.search.finetune as ft

    fresh = [np.array([5, 6, 7]), np.array([4, 6, 7]), np.array([7, 5, 4]), np.array([6, 4, 5])]  # hardest first
    monkeypatch.setattr(ft, "_remine", lambda *a, **k: [n.copy() for n in fresh])
    seen = _record_hard_negatives(monkeypatch, 4)
    cfg = FinetuneConfig(epochs=3, batch_size=4, lr=1e-5, max_length=32, query_max_length=16, train_doc_tower=False,
                         negatives_per_query=1, refresh_negatives=True, seed=0)
    first = [np.array([7, 6, 5]), np.array([7, 5, 6]), np.array([4, 5, 6]), np.array([4, 7, 6])]
    finetune_bi_encoder(QUERIES[:4], [0, 1, 2, 3], DOCS, tmp_path / "m", config=cfg, negatives=first,
                        cache_dir=tmp_path / "cache", show_progress=False)
    assert len(seen) == 3  # one step an epoch
    by_epoch = [sorted(s) for s in seen]
    assert by_epoch[0] == sorted(int(n[0]) for n in first)
    assert by_epoch[1] == by_epoch[2] == sorted(int(n[0]) for n in fresh)


@needs_text
def test_fixed_negatives_take_turns_epoch_by_epoch(monkeypatch, tmp_path):
    seen = _record_hard_negatives(monkeypatch, 4)
    cfg = FinetuneConfig(epochs=3, batch_size=4, lr=1e-5, max_length=32, query_max_length=16, train_doc_tower=False,
                         refresh_negatives=False,
                         negatives_per_query=1, seed=0)
    first = [np.array([7, 6, 5]), np.array([7, 5, 6]), np.array([4, 5, 6]), np.array([4, 7, 6])]
    finetune_bi_encoder(QUERIES[:4], [0, 1, 2, 3], DOCS, tmp_path / "m", config=cfg, negatives=first,
                        cache_dir=tmp_path / "cache", show_progress=False)
    assert [sorted(s) for s in seen] == [sorted(int(n[e]) for n in first) for e in range(3)]


@needs_text
def test_the_marker_records_the_encoder_backend_the_frozen_documents_were_encoded_with(tmp_path, monkeypatch):
    # Before: `search train --encoder-backend torch-bf16` and the same command on torch wrote markers that differed
    # only in final_loss and the files' checksums, yet trained other weights (the frozen document vectors and the
    # mined negatives come from that backend): the marker could not say how to train the model again.
    cfg = FinetuneConfig(epochs=1, batch_size=4, lr=1e-4, max_length=32, query_max_length=16,
                         train_doc_tower=False, corpus_negatives=True, negatives_per_query=0)
    metas = {}
    for backend in ("torch", "torch-bf16"):
        monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", backend)
        finetune_bi_encoder(QUERIES[:4], [0, 1, 2, 3], DOCS, tmp_path / backend, config=cfg,
                            cache_dir=tmp_path / "cache", show_progress=False)
        metas[backend] = json.loads((tmp_path / backend / "twotower_bi_encoder.json").read_text())
    assert {b: m["encoder_backend"] for b, m in metas.items()} == {"torch": "torch", "torch-bf16": "torch-bf16"}


@needs_text
def test_a_tiny_temperature_is_named_when_fine_tuning_diverges(tmp_path):
    # 1/1e-40 overflows float32: the first loss is NaN whatever the rate, yet the error named the rate alone; a
    # Python caller set FinetuneConfig's fields, so those are what it names (`search train` names its flags)
    from twotower.errors import TrainingDiverged

    cfg = FinetuneConfig(epochs=1, batch_size=4, lr=1e-5, temperature=1e-40, max_length=16, query_max_length=16)
    with pytest.raises(TrainingDiverged, match=r"Raise FinetuneConfig\.temperature=1e-40 .*the default is 0\.05.*"
                                               r"\(FinetuneConfig\.lr\)"):
        finetune_bi_encoder(QUERIES[:4], [0, 1, 2, 3], DOCS, tmp_path / "m", config=cfg, show_progress=False)


@pytest.mark.parametrize("row, match", [
    # -1, the padding of a Results row, read doc_texts[-1]: the last document trained on as a negative, silently
    (-1, r"^negatives\[1\] holds the row -1: rows must lie in \[0, 8\), the corpus rows; -1 is the padding of a "
         r"Results row \(PAD_ID\): leave it out"),
    (8, r"^negatives\[1\] holds the row 8: rows must lie in \[0, 8\), the corpus rows$"),
])
def test_a_negative_row_outside_the_corpus_is_refused_before_training(tmp_path, row, match):
    from twotower.errors import DataError

    negatives = [np.array([1]), np.array([2, row])] + [np.array([0])] * 6
    with pytest.raises(DataError, match=match):
        finetune_bi_encoder(QUERIES, list(range(8)), DOCS, tmp_path / "m", negatives=negatives, show_progress=False)
    assert not (tmp_path / "m").exists()
