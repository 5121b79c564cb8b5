"""`search evaluate --rerank` shows the same retriever without reranking beside the reranked row.

Before: one row, "bm25 + rerank", so a cross-encoder that made the lists worse (NDCG@10 0.87 -> 0.38) looked like
any other result.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from twotower.cli.main import main
from twotower.search import rerank as rerank_module

from tests.extras import needs_text

pytestmark = needs_text


class _Reversing:
    """A cross-encoder double that scores each query's candidates in reverse first-stage order: a harmful reranker."""

    def predict(self, pairs, **kwargs):  # noqa: ANN001, ANN003, ANN201
        rank: dict[str, int] = {}
        out = []
        for q, _ in pairs:
            rank[q] = rank.get(q, 0) + 1
            out.append(float(rank[q]))
        return np.asarray(out, dtype=np.float32)


@pytest.fixture
def reranker(tmp_path, monkeypatch):
    real = rerank_module.CrossEncoderReranker
    monkeypatch.setattr(rerank_module, "CrossEncoderReranker", lambda path, **kw: real.from_model(_Reversing(), **kw))
    ce = tmp_path / "ce"
    ce.mkdir()
    (ce / "twotower_cross_encoder.json").write_text(json.dumps({"kind": "cross_encoder"}))
    return ce


def _beir(tmp_path):
    from search_data import write_beir

    # query 4 matches d4 (coffee, liver, cancer) and d1 ("risk"): BM25 ranks d4 first, the reversal puts it second
    return write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n4\td4\t1\n"})


def test_table_has_the_unreranked_row_above_the_reranked_one(tmp_path, reranker, capsys):
    beir = _beir(tmp_path)
    assert main(["search", "evaluate", "--beir", str(beir), "--rerank", str(reranker)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("bm25")]
    assert len(rows) == 2
    assert rows[0].split()[:2] == ["bm25", "1.0000"]  # BM25 alone: the relevant passage first
    assert rows[1].startswith(f"bm25 + rerank [{reranker}]") and rows[1].split()[4] == "0.6309"  # 1 / log2(3)


def test_json_keeps_its_keys_and_adds_the_unreranked_metrics(tmp_path, reranker, capsys):
    beir = _beir(tmp_path)
    assert main(["search", "evaluate", "--beir", str(beir), "--rerank", str(reranker), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert {"NDCG@10", "Recall@10", "Recall@100", "MRR@10", "without_rerank", "rerank_backend"} <= set(got)
    assert got["rerank_backend"] == "torch"  # the default forward pass, as the bi-encoder's
    assert got["NDCG@10"] == pytest.approx(1 / np.log2(3)) and got["MRR@10"] == 0.5
    assert got["without_rerank"] == {"NDCG@10": 1.0, "Recall@10": 1.0, "Recall@100": 1.0, "MRR@10": 1.0}
    # without --rerank: no reranked-only keys
    assert main(["search", "evaluate", "--beir", str(beir), "--json"]) == 0
    assert not {"without_rerank", "rerank_backend"} & set(json.loads(capsys.readouterr().out))
