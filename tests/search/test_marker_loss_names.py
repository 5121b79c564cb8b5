"""The trained models' markers say which loss is which, in the names their commands print.

Before: a bi-encoder's `twotower_bi_encoder.json` held "final_loss": 0.00145 while `search train` printed the last
epoch's mean loss, 0.6516: final_loss is the last step's alone (one batch, the epoch's short remainder batch maybe),
and nothing said so. `rerank train` printed "final loss 1.3450 (mean of the last 10 steps ...)" beside a marker whose
"final_loss" was another figure, the last step's.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from twotower.cli.main import main

from tests.extras import needs_text


@needs_text
def test_the_bi_encoder_marker_names_the_epoch_mean_search_train_prints(beir_dir, tmp_path, capsys):
    out = tmp_path / "bi"
    assert main(["search", "train", "--beir", str(beir_dir), "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--epochs", "2", "--max-length", "16", "--negatives", "0", "--threads", "1",
                 "--batch-size", "2"]) == 0  # 3 pairs: a batch of 2, then one of 1, whose loss is 0 (one candidate)
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    assert meta["final_step_loss"] == meta["final_loss"]  # the last step's, now under a name that says so
    assert meta["final_epoch_mean_loss"] == meta["epoch_losses"][-1]["loss"]
    assert meta["final_loss"] == 0.0  # the remainder batch's: one pair scored against its own positive alone
    assert f"epoch 2 {meta['final_epoch_mean_loss']:.4f}, against" in capsys.readouterr().out


@needs_text
def test_the_cross_encoder_marker_names_its_losses(tmp_path):
    from twotower.search.rerank import RerankTrainConfig, train_cross_encoder

    docs = ["red apple", "green apple pie", "blue sky", "apple pie with red cream"]
    negatives = [np.array([2]), np.array([0]), np.array([2]), np.array([2])]
    cfg = RerankTrainConfig(epochs=2, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6,
                            warmup_frac=0.0, seed=0)
    train_cross_encoder(["red apple", "blue sky", "apple pie", "red cream"], [0, 2, 1, 3], negatives, docs,
                        tmp_path / "ce", config=cfg, show_progress=False)
    meta = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())
    assert meta["final_step_loss"] == meta["final_loss"]
    # no validation: the saved epoch is the last, whose 2 steps' mean it names
    assert meta["saved_epoch"]["epoch"] == meta["last_epoch"] == 2
    assert meta["final_epoch_mean_loss"] == pytest.approx(meta["saved_epoch"]["mean_loss"])


@needs_text
def test_rerank_train_prints_no_final_loss_but_the_marker_s(beir_dir, tmp_path, monkeypatch, capsys, caplog):
    """The summary's figure is the marker's tail (the mean of the last steps), named so; "final loss" is the marker's
    final_loss, the last step's, which it does not print."""
    import twotower.search.rerank as rerank

    def train(queries, positives, negatives, texts, out, **_):  # noqa: ANN001, ANN202
        Path(out).mkdir()
        marker = {"kind": "cross_encoder", "first_loss": 1.389, "final_loss": 1.1,
                  "tail": {"steps": 10, "loss": 1.345, "chance_loss": math.log(4), "group_sizes": [4, 4]}}
        (Path(out) / "twotower_cross_encoder.json").write_text(json.dumps(marker))

    monkeypatch.setattr(rerank, "train_cross_encoder", train)
    with caplog.at_level("WARNING"):
        assert main(["rerank", "train", "--beir", str(beir_dir), "--out", str(tmp_path / "ce")]) == 0
    out = capsys.readouterr().out
    assert "final loss" not in out + caplog.text
    assert "mean loss of the last 10 steps 1.3450 (1.3890 at the first step)" in out
    assert "its mean loss of the last 10 steps 1.3450 is within 3.0% of 1.3863" in caplog.text
