"""`rerank train` ends with its last steps' mean loss beside a model's that learned nothing, and warns when they are close.

Before: it printed only "cross-encoder saved to DIR" after a training whose loss went 1.389 -> 1.345 against
ln(4) = 1.386; reranking with that model took NDCG@10 from 0.87 to 0.38. It also offered no --lr or --batch-size,
and its mining summary told the user to "raise depth or loosen relative_margin/margin", which no flag was called.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from twotower.cli.main import build_parser, main
from twotower.config import RerankTrainConfig
from twotower.search.negatives import MiningConfig

from tests.extras import needs_text


@pytest.fixture
def fake_training(monkeypatch):
    """train_cross_encoder replaced by one that records its arguments and writes a marker with a chosen tail."""
    import twotower.search.rerank as rerank

    calls: list[dict] = []
    tail = {"steps": 10, "loss": 1.345, "chance_loss": math.log(4), "group_sizes": [4, 4]}

    def train(queries, positives, negatives, texts, out, *, base, config, source, setting_names,  # noqa: ANN001, ANN202
              force=False):
        calls.append({"config": config, "source": source, "pairs": len(queries), "setting_names": setting_names})
        Path(out).mkdir()
        marker = {"kind": "cross_encoder", "first_loss": 1.389, "final_loss": tail["loss"], "tail": dict(tail)}
        (Path(out) / "twotower_cross_encoder.json").write_text(json.dumps(marker))

    monkeypatch.setattr(rerank, "train_cross_encoder", train)
    return calls, tail


def _train(beir_dir, tmp_path, *flags: str) -> int:
    return main(["rerank", "train", "--beir", str(beir_dir), "--out", str(tmp_path / "ce"), *flags])


@needs_text
def test_a_loss_near_chance_is_reported_and_warned_about(beir_dir, tmp_path, fake_training, capsys, caplog):
    with caplog.at_level("WARNING"):
        assert _train(beir_dir, tmp_path) == 0
    out = capsys.readouterr().out
    assert (f"cross-encoder saved to {tmp_path / 'ce'}: mean loss of the last 10 steps 1.3450 (1.3890 at the first "
            "step), against ln(4) = 1.3863 (1 positive + 3 negatives per query) for a model that has learned "
            "nothing") in out
    assert ("the cross-encoder has barely learned: its mean loss of the last 10 steps 1.3450 is within 3.0% of 1.3863, the loss of a "
            "model that has learned nothing (it went from 1.3890 at the first step to 1.3450); reranking with it is "
            "likely to make lists worse, not better. Before using it, compare the rows with and without reranking "
            f"that `twotower search evaluate --beir {beir_dir} --rerank {tmp_path / 'ce'}` prints, and train with more "
            "--epochs (now 1) or on more training queries (3 judgements in split 'train')") in caplog.text


@needs_text
def test_a_loss_past_chance_is_said_to_be_above_it(beir_dir, tmp_path, fake_training, caplog):
    """A diverged run's loss past the no-learning loss was "within 20.0% of" it."""
    _, tail = fake_training
    tail.update(loss=1.8, chance_loss=1.5)  # (1.8 - 1.5) / 1.5 = 20%
    with caplog.at_level("WARNING"):
        assert _train(beir_dir, tmp_path) == 0
    assert "its mean loss of the last 10 steps 1.8000 is 20.0% above 1.5000, the loss of a model" in caplog.text
    assert "within" not in caplog.text


@needs_text
def test_a_loss_well_below_chance_is_reported_without_a_warning(beir_dir, tmp_path, fake_training, capsys, caplog):
    _, tail = fake_training
    tail.update(loss=0.41, group_sizes=[2, 4], chance_loss=1.2)
    with caplog.at_level("WARNING"):
        assert _train(beir_dir, tmp_path) == 0
    assert ("mean loss of the last 10 steps 0.4100 (1.3890 at the first step), against 1.2000 (the mean ln of group "
            "sizes 2-4: 1 positive + up to 3 negatives) for a model that has learned nothing") in capsys.readouterr().out
    assert "barely learned" not in caplog.text


@needs_text
def test_lr_batch_size_and_mining_flags_reach_the_training(beir_dir, tmp_path, fake_training, caplog):
    calls, _ = fake_training
    with caplog.at_level("INFO", logger="twotower.search.negatives"):
        assert _train(beir_dir, tmp_path, "--lr", "1e-4", "--batch-size", "2", "--mining-depth", "4",
                      "--mining-margin", "0.2") == 0
    cfg, mining = calls[0]["config"], calls[0]["source"]["mining"]
    assert (cfg.lr, cfg.groups_per_step) == (1e-4, 2)
    assert (mining["depth"], mining["relative_margin"]) == (4, 0.2)
    # the 5-document corpus leaves queries short of 3 negatives: the hint names this command's flags
    assert "queries got fewer than requested (raise --mining-depth or lower --mining-margin to fill them)" in caplog.text


@needs_text
@pytest.mark.parametrize("flags, length, said", [
    ([], 96, "--base {base} was fine-tuned at 96 word pieces a (query, passage) pair: training goes on at it "
             "(--max-length to choose another)"),
    (["--max-length", "128"], 128, "--max-length 128: not the 96 word pieces a (query, passage) pair --base {base} "
                                   "was fine-tuned at; training goes on at 128")])
def test_training_goes_on_at_the_length_the_base_was_trained_with(beir_dir, tmp_path, fake_training, caplog, flags,
                                                                   length, said):
    # `rerank train --base CE` read CE's pairs at 256 word pieces whatever CE was trained at, without a word, where
    # --rerank reads CE at its own length
    calls, _ = fake_training
    base = tmp_path / "base"
    base.mkdir()
    (base / "twotower_cross_encoder.json").write_text(json.dumps({"kind": "cross_encoder",
                                                                  "config": {"max_length": 96}}))
    with caplog.at_level("INFO", logger="twotower.cli.search_cmd"):
        assert _train(beir_dir, tmp_path, "--base", str(base), *flags) == 0
    assert calls[0]["config"].max_length == length
    assert said.format(base=base) in caplog.text


def test_new_flags_default_to_the_configs():
    r = build_parser().parse_args(["rerank", "train", "--beir", "b", "--out", "o"])
    rt = RerankTrainConfig()
    assert (r.lr, r.batch_size, r.mining_depth, r.mining_margin) == (
        rt.lr, rt.groups_per_step, MiningConfig.depth, MiningConfig.relative_margin)
    s = build_parser().parse_args(["search", "train", "--beir", "b", "--out", "o"])
    assert (s.mining_depth, s.mining_margin) == (MiningConfig.depth, MiningConfig.relative_margin)


@pytest.mark.parametrize("cmd", [["rerank", "train"], ["search", "train"]])
@pytest.mark.parametrize("flags, message", [
    (["--mining-depth", "0"], "error: --mining-depth: must be at least 1, got 0"),
    (["--mining-margin", "1"], "error: --mining-margin: must be at least 0 and less than 1, got 1"),
    (["--lr", "0"], "error: --lr: must be more than 0, got 0"),
])
def test_bad_flags_are_named_before_any_work(cmd, flags, message, beir_dir, tmp_path, fake_training, capsys):
    assert main([*cmd, "--beir", str(beir_dir), "--out", str(tmp_path / "m"), *flags]) == 2
    assert capsys.readouterr().err.strip() == message
    assert not fake_training[0]


def test_batch_size_of_zero_names_the_flag(beir_dir, tmp_path, fake_training, capsys):
    assert _train(beir_dir, tmp_path, "--batch-size", "0") == 2
    assert capsys.readouterr().err.strip() == "error: --batch-size: must be at least 1, got 0"


@needs_text
def test_the_new_heads_load_report_is_not_shown(caplog, capfd):
    """transformers' LOAD REPORT table ('classifier.weight | MISSING', coloured on a terminal) read like an error
    at the start of every rerank train; a new head is expected to be missing from the base model."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    from twotower.search.rerank import _load_fresh_head
    from twotower.text.encoder import default_model_path

    before = hf_logging.get_verbosity()
    st_before = logging.getLogger("sentence_transformers").level
    with caplog.at_level("INFO"):
        _load_fresh_head(default_model_path(), 64)
    shown = capfd.readouterr()  # transformers writes its report to stderr through its own handler
    assert "LOAD REPORT" not in shown.err + shown.out and "MISSING" not in shown.err + caplog.text
    # sentence-transformers' own WARNING said it again ("Converting SentenceTransformer model ... to CrossEncoder")
    assert "Converting" not in shown.err + caplog.text
    assert logging.getLogger("sentence_transformers").level == st_before  # restored
    assert "a new relevance head (one output), initialised at random" in caplog.text
    assert hf_logging.get_verbosity() == before


@needs_text
def test_the_report_says_when_the_saved_epoch_is_not_the_one_the_final_loss_is_of(beir_dir, tmp_path, monkeypatch,
                                                                                   capsys):
    """Per-epoch validation keeps the best epoch: the last steps' loss (the last epoch's) read as the saved model's."""
    import twotower.search.rerank as rerank

    def train(queries, positives, negatives, texts, out, **_):  # noqa: ANN001, ANN202
        Path(out).mkdir()
        marker = {"kind": "cross_encoder", "first_loss": 1.389, "final_loss": 0.3,
                  "tail": {"steps": 10, "loss": 0.3, "chance_loss": math.log(4), "group_sizes": [4, 4]},
                  "last_epoch": 4, "saved_epoch": {"epoch": 2, "steps": 5, "mean_loss": 0.52, "chance_loss": 1.38}}
        (Path(out) / "twotower_cross_encoder.json").write_text(json.dumps(marker))

    monkeypatch.setattr(rerank, "train_cross_encoder", train)
    assert _train(beir_dir, tmp_path) == 0
    assert ("for a model that has learned nothing; the weights saved are epoch 2's (the best validated), whose mean "
            "loss was 0.5200, not the last steps' (epoch 4)") in capsys.readouterr().out
