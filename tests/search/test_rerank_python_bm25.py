"""train_cross_encoder(bm25=BM25Config(...)), as finetune_bi_encoder(bm25=) takes it: with config.valid_frac and no
validation=, the held-out queries were judged against a BM25 with BM25Config's defaults whatever the negatives were
mined with, and Python had no way to say it. Now the hold-out's BM25 uses ``bm25`` and the marker records it in
data.mining, as `rerank train --token-pattern` records it."""
from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest

from tests.extras import needs_text
from tests.search.test_rerank_python_holdout import DOCS, QUERIES
from twotower.errors import ConfigError
from twotower.search import RerankTrainConfig, train_cross_encoder
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config, BM25Retriever

NEGATIVES = [np.array([(i + 2) % len(DOCS)]) for i in range(len(QUERIES))]


@needs_text
def test_the_holdout_is_judged_against_bm25_with_its_settings_and_the_marker_records_them(tmp_path, monkeypatch):
    fitted = []
    real = BM25Retriever.fit
    monkeypatch.setattr(BM25Retriever, "fit", lambda self, *a, **k: (fitted.append(self.config), real(self, *a, **k))[1])
    cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6,
                            seed=0, valid_frac=0.34)
    bm25 = BM25Config(token_pattern=LEGACY_TOKEN_PATTERN)
    source = {"beir": "b", "mining": {"retriever": "bm25", "n": 1}}
    train_cross_encoder(QUERIES, list(range(len(QUERIES))), NEGATIVES, DOCS, tmp_path / "ce", config=cfg,
                        show_progress=False, threads=1, source=source, bm25=bm25)
    assert [c.token_pattern for c in fitted] == [LEGACY_TOKEN_PATTERN]
    meta = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())
    assert meta["data"]["mining"] == {"retriever": "bm25", "n": 1, "bm25": asdict(bm25)}
    assert meta["validation"]["first_stage"] == "bm25"
    assert source == {"beir": "b", "mining": {"retriever": "bm25", "n": 1}}  # the caller's mapping is left as it was


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"bm25": {"token_pattern": "\\w+"}}, "bm25 must be a BM25Config"),
    ({"bm25": BM25Config(), "source": {"mining": {"retriever": "dense"}}}, "bm25= gives the settings of BM25 mining"),
])
def test_bad_bm25_settings_are_refused_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        train_cross_encoder(QUERIES, list(range(len(QUERIES))), NEGATIVES, DOCS, tmp_path / "ce",
                            config=RerankTrainConfig(valid_frac=0.34), **kwargs)
    assert not (tmp_path / "ce").exists()
