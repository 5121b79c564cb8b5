"""`rerank train` judged its cross-encoder by the training loss alone: one trained on 70 pairs ended 9.8% below
chance (no warning) and reranking took SciFact's test NDCG@10 from 0.8962 to 0.2055. With --valid-frac, held-out
queries are reranked after training and their NDCG@10 set against the first stage's own order, with a warning when
reranking makes it worse."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twotower.cli.main import build_parser, main
from twotower.config import FinetuneConfig, RerankTrainConfig
from twotower.errors import ConfigError
from twotower.results import Results
from twotower.search.rerank import CrossEncoderReranker, RerankValidation, _log_validation, validate_reranking

from tests.extras import needs_text
from tests.search.search_data import write_beir

DOCS = [{"_id": f"d{i}", "title": "", "text": f"document {i} about topic {i}"} for i in range(8)]
QUERIES = [{"_id": str(i), "text": f"topic {i}"} for i in range(8)]
QRELS = "query-id\tcorpus-id\tscore\n" + "".join(f"{i}\td{i}\t1\n" for i in range(8))


class _Reversing:
    """A cross-encoder double that scores a document higher the larger its number: it ranks the relevant one last."""

    def predict(self, pairs, **kw):  # noqa: ANN001, ANN201
        return np.array([float(d.split()[1]) for _, d in pairs])


def _validation() -> RerankValidation:
    first = Results(np.array([[0, 1, 2], [1, 2, 0]]), np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]], dtype=np.float32))
    return RerankValidation(["q0", "q1"], first, [np.array([0]), np.array([1])], top_n=3)


def test_reranking_that_makes_the_held_out_lists_worse_is_warned_about(caplog):
    texts = [d["text"] for d in DOCS]
    v = validate_reranking(CrossEncoderReranker.from_model(_Reversing()), _validation(), texts)
    assert (v["without_rerank"], v["worse"], v["queries"], v["top_n"]) == (1.0, True, 2, 3)
    assert v["reranked"] == pytest.approx((1 / np.log2(4) + 1 / np.log2(3)) / 2)  # d0 third, d1 second
    with caplog.at_level("WARNING"):
        _log_validation(v)
    assert ("validation NDCG@10 on 2 held-out queries: bm25 order 1.0000, reranked (top 3) 0.5655: reranking with "
            "this cross-encoder makes the held-out lists WORSE than the bm25 order it reranks") in caplog.text


@pytest.fixture
def fake_training(monkeypatch):
    """train_cross_encoder replaced: records its arguments and writes a marker whose validation says reranking hurt."""
    import twotower.search.rerank as rerank

    calls: list[dict] = []

    def train(queries, positives, negatives, texts, out, *, base, config, source, validation=None,  # noqa: ANN001, ANN202
              setting_names=None, force=False):
        calls.append({"queries": list(queries), "config": config, "validation": validation})
        Path(out).mkdir()
        tail = {"steps": 10, "loss": 0.5, "chance_loss": 1.386, "group_sizes": [4, 4]}
        checked = {"queries": 2, "first_stage": "bm25", "top_n": 20, "without_rerank": 0.9, "reranked": 0.2,
                   "worse": True}
        (Path(out) / "twotower_cross_encoder.json").write_text(json.dumps(
            {"kind": "cross_encoder", "first_loss": 1.4, "final_loss": 0.5, "tail": tail, "validation": checked}))

    monkeypatch.setattr(rerank, "train_cross_encoder", train)
    return calls


@needs_text
def test_valid_frac_holds_queries_out_of_rerank_training_and_reports_them(tmp_path, fake_training, capsys):
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    assert main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "ce"), "--valid-frac", "0.25", "--mining-margin", "0",
                 "--negatives", "1"]) == 0
    call = fake_training[0]
    val = call["validation"]
    assert call["config"].valid_frac == 0.25 and len(val.queries) == 2 and len(call["queries"]) == 6
    assert not set(val.queries) & set(call["queries"])
    assert val.first_stage_name == "bm25" and val.first_stage.ids.shape[0] == 2
    out = capsys.readouterr().out
    assert "validation NDCG@10 on 2 held-out queries: bm25 order 0.9000, reranked (top 20) 0.2000 (WORSE" in out


@needs_text
def test_without_valid_frac_rerank_training_gets_no_validation(tmp_path, fake_training, capsys):
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    assert main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "ce"), "--negatives", "1", "--mining-margin", "0"]) == 0
    assert fake_training[0]["validation"] is None and len(fake_training[0]["queries"]) == 8


@pytest.mark.parametrize("cmd", [["rerank", "train"], ["search", "train"]])
@pytest.mark.parametrize("flags, message", [
    (["--valid-frac", "1"], "error: --valid-frac: must be at least 0 and less than 1 (0: no validation), got 1"),
    (["--valid-frac", "-0.1"], "error: --valid-frac: must be at least 0 and less than 1 (0: no validation), got -0.1"),
])
def test_a_bad_valid_frac_is_named_before_any_work(cmd, flags, message, tmp_path, fake_training, capsys):
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    assert main([*cmd, "--beir", str(beir), "--out", str(tmp_path / "m"), *flags]) == 2
    assert capsys.readouterr().err.strip() == message
    assert not fake_training


@pytest.mark.parametrize("cmd", [["rerank", "train"], ["search", "train"]])
@pytest.mark.parametrize("qrels, message", [
    ("query-id\tcorpus-id\tscore\n0\td0\t1\n0\td1\t1\n",
     "error: --valid-frac: 0.5 needs at least 2 distinct queries to hold some out, got 1 (split 'train')"),
    ("query-id\tcorpus-id\tscore\n0\td0\t1\n1\td0\t1\n",  # 0 and 1 share d0: one group
     "error: --valid-frac: 0.5 leaves no training queries: the 2 queries share relevant documents so that they form "
     "one group; train without validation (split 'train')"),
])
def test_a_valid_frac_that_cannot_hold_out_says_the_flag_then_a_colon(cmd, qrels, message, tmp_path, fake_training,
                                                                      capsys):
    """They read "--valid-frac=0.5 needs ...", unlike every other refusal of a flag ("--valid-frac: must be ...")."""
    beir = write_beir(tmp_path / "beir", {"train": qrels}, docs=DOCS, queries=QUERIES)
    assert main([*cmd, "--beir", str(beir), "--out", str(tmp_path / "m"), "--valid-frac", "0.5"]) == 2
    assert capsys.readouterr().err.strip() == message
    assert not fake_training


def test_valid_frac_and_patience_default_to_the_configs():
    r = build_parser().parse_args(["rerank", "train", "--beir", "b", "--out", "o"])
    s = build_parser().parse_args(["search", "train", "--beir", "b", "--out", "o"])
    assert r.valid_frac == RerankTrainConfig.valid_frac
    assert (s.valid_frac, s.patience) == (FinetuneConfig.valid_frac, FinetuneConfig.patience)
    with pytest.raises(ConfigError, match="valid_frac"):
        RerankTrainConfig(valid_frac=1.5)
