"""`search train` and `rerank train` at a learning rate that blows the model up say so in training words, naming
--lr: one step at --lr 1e12 left finite weights (near 1e12) and a loss as low as any, whose vectors and scores were
NaN. `search train` then failed in the next epoch's mining with "queries contain NaN or inf; check the encoder
output", and with one epoch (`rerank train`'s default) the model was saved, scoring NaN, "barely learned"."""
from __future__ import annotations

import pytest

from twotower.cli.main import main

from tests.extras import needs_text

DIVERGED = ("error: training diverged in epoch 1: {what} are not finite after its updates (learning rate 1e+12). "
            "Lower the learning rate (--lr) and train again")


@needs_text
@pytest.mark.parametrize("command, what, extra", [
    (["search", "train"], "the query tower's embeddings", []),  # 8 epochs, re-mined between them
    (["search", "train"], "the query tower's embeddings", ["--epochs", "1"]),
    (["search", "train"], "the query tower's embeddings", ["--epochs", "1", "--train-doc-tower"]),
    (["rerank", "train"], "the cross-encoder's scores", []),
])
def test_a_learning_rate_that_blows_the_model_up_is_said_in_training_words(beir_dir, tmp_path, monkeypatch, capsys,
                                                                           command, what, extra):
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    out = tmp_path / "model"
    cache = ["--cache", str(tmp_path / "cache")] if command[0] == "search" else []
    assert main(["-q", *command, "--beir", str(beir_dir), "--split", "train", "--out", str(out), "--lr", "1e12",
                 "--max-length", "32", *cache, *extra]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == DIVERGED.format(what=what)
    assert not out.exists()  # no model that scores NaN is left behind
