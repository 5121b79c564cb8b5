"""`finetune_bi_encoder` and `train_cross_encoder` called from Python name the config fields their caller set in a
divergence's error (``FinetuneConfig.lr``, ``RerankTrainConfig.lr``), not the `search train` / `rerank train` flag
``--lr``, which a Python caller never typed; the commands still name their flags (test_search_train_diverged.py)."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import TrainingDiverged

from tests.extras import needs_text

DOCS = [f"document {i} about topic {i % 3} and words {i * 7}" for i in range(12)]
QUERIES = [f"what about topic {i % 3} words {i * 7}" for i in range(8)]


@needs_text
def test_fine_tuning_from_python_names_finetune_configs_field(tmp_path, monkeypatch) -> None:
    from twotower.config import FinetuneConfig
    from twotower.search.finetune import finetune_bi_encoder

    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    cfg = FinetuneConfig(lr=1e12, epochs=1, batch_size=4, max_length=32, query_max_length=32)
    with pytest.raises(TrainingDiverged, match=r"Lower the learning rate \(FinetuneConfig\.lr\) and train again"):
        finetune_bi_encoder(QUERIES, list(range(8)), DOCS, tmp_path / "bi", config=cfg, show_progress=False,
                            cache_dir=tmp_path / "cache", encoder_threads=1, threads=1)


@needs_text
def test_cross_encoder_training_from_python_names_rerank_configs_field(tmp_path) -> None:
    from twotower.config import RerankTrainConfig
    from twotower.search.rerank import train_cross_encoder

    cfg = RerankTrainConfig(lr=1e12, epochs=1, max_length=32)
    negatives = [np.array([(i + 1) % 12, (i + 5) % 12]) for i in range(8)]
    with pytest.raises(TrainingDiverged, match=r"Lower the learning rate \(RerankTrainConfig\.lr\) and train again"):
        train_cross_encoder(QUERIES, list(range(8)), negatives, DOCS, tmp_path / "ce", config=cfg, show_progress=False,
                            threads=1)
