"""Tiny BEIR data shared by the search tests."""
from __future__ import annotations

import json
from pathlib import Path

DOCS = [
    {"_id": "d1", "title": "Aspirin", "text": "Aspirin reduces the risk of heart attack."},
    {"_id": "d2", "title": "Vitamin D", "text": "Vitamin D supplements do not prevent fractures."},
    {"_id": "d3", "title": "Sleep", "text": "Short sleep is linked to obesity in children."},
    {"_id": "d4", "title": "Coffee", "text": "Coffee intake is associated with lower liver cancer risk."},
    {"_id": "d5", "title": "Exercise", "text": "Exercise improves insulin sensitivity."},
]
QUERIES = [
    {"_id": "1", "text": "aspirin prevents heart attack"},
    {"_id": "2", "text": "aspirin does not prevent heart attack"},
    {"_id": "3", "text": "vitamin D prevents fractures"},
    {"_id": "4", "text": "coffee lowers liver cancer risk"},
    {"_id": "5", "text": "sleep and obesity"},
]


#: a corpus where the single-letter "D" of "vitamin D" decides the ranking (the BM25 token-pattern tests)
VITAMIN_DOCS = ["Type 1 diabetes in children and insulin",
                "Type 2 diabetes in adults and metformin",
                "Fat-soluble vitamins A and E",
                "Vitamin D: the sunshine vitamin made in the skin from sunlight, absorbed with calcium, for bone health "
                "in older adults",
                "Coffee and liver cancer"]
VITAMIN_IDS = ["t1", "t2", "ae", "d", "coffee"]


def write_beir(root: Path, qrels: dict[str, str] | None = None, docs=DOCS, queries=QUERIES) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = qrels or {
        "train": "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td1\t1\n3\td2\t1\n",
        "test": "query-id\tcorpus-id\tscore\n4\td4\t1\n5\td3\t1\n",
    }
    for split, text in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text(text)
    return root


def build_small_index(tmp_path: Path, monkeypatch, name: str = "idx") -> Path:
    """``twotower search index`` over :func:`write_beir`'s corpus with the torch encoder on one thread, 32 word
    pieces a passage: the index folder (``tmp_path / name``)."""
    from twotower.cli.main import main

    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    out = tmp_path / name
    assert main(["-q", "search", "index", "--beir", str(write_beir(tmp_path / "beir")), "--out", str(out),
                 "--max-length", "32", "--cache", str(tmp_path / "cache")]) == 0
    return out

#: qrels of the five QUERIES, one relevant document each (d1 twice): enough to hold queries out and mine negatives
ONE_RELEVANT_QRELS = "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td1\t1\n3\td2\t1\n4\td4\t1\n5\td3\t1\n"


def capture_rerank_training(monkeypatch) -> list:  # noqa: ANN001 - pytest's MonkeyPatch
    """`rerank train` runs up to the cross-encoder's training, which is recorded instead (``(args, kwargs)`` a
    call) and not run, and its report is skipped: what the command mined and validated with, without training."""
    import twotower.cli.search_cmd as search_cmd
    import twotower.search.rerank as rerank

    calls: list = []
    monkeypatch.setattr(rerank, "train_cross_encoder", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(search_cmd, "_report_rerank_training", lambda *a, **k: None)
    return calls
