"""`search train --base` given a `search train` output goes on training its towers.

`--base` accepts a fine-tuned bi-encoder folder (its check says "give the output of 'twotower search train'"), but
training read it as one sentence-transformers folder and died with transformers' traceback "Unrecognized model in
runs/bi. Should have a `model_type` key in its config.json".
"""
from __future__ import annotations

import argparse
import json

from search_data import write_beir

from twotower.cli.search_cmd import register
from twotower.search.finetune import load_bi_encoder

from tests.extras import needs_text


def _train(*argv: str) -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["search", "train", "--epochs", "1", "--batch-size", "2", "--negatives", "1",
                              "--max-length", "32", "--threads", "1", *argv])
    assert args.func(args) == 0


@needs_text
def test_a_fine_tuned_bi_encoder_is_a_base_to_train_on(tmp_path):
    beir = write_beir(tmp_path / "b")
    cache = str(tmp_path / "cache")
    _train("--beir", str(beir), "--out", str(tmp_path / "first"), "--cache", cache)
    _train("--beir", str(beir), "--out", str(tmp_path / "second"), "--cache", cache, "--base", str(tmp_path / "first"))
    meta = json.loads((tmp_path / "second" / "twotower_bi_encoder.json").read_text())
    assert meta["base"] == str(tmp_path / "first")
    first_q, first_d = load_bi_encoder(tmp_path / "first")
    second_q, second_d = load_bi_encoder(tmp_path / "second")
    # the frozen document tower is the base's own, file for file (so its cached corpus embeddings are reused)
    assert second_d.model_id == first_d.model_id
    assert second_q.model_id not in (first_q.model_id, second_d.model_id)


@needs_text
def test_a_relative_base_is_recorded_absolute(tmp_path, monkeypatch):
    from twotower.search.finetune import FinetuneConfig, finetune_bi_encoder
    from twotower.text.encoder import default_model_path

    model = default_model_path()
    monkeypatch.chdir(model.parent)  # `--base model` typed in the folder holding it: "model" alone said nothing
    cfg = FinetuneConfig(epochs=1, batch_size=2, max_length=16, query_max_length=8, train_doc_tower=False,
                         negatives_per_query=0)
    finetune_bi_encoder(["aspirin heart", "vitamin bones"], [0, 1], ["Aspirin and the heart.", "Vitamin D."],
                        tmp_path / "m", config=cfg, base=model.name, show_progress=False)
    meta = json.loads((tmp_path / "m" / "twotower_bi_encoder.json").read_text())
    assert meta["base"] == str(model.resolve())
