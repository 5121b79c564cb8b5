"""The cross-encoder's forward-pass backend (``--rerank-backend``): torch-bf16 scores within bfloat16 rounding of
fp32's, unknown names refused naming the flag, ``auto`` resolved as the bi-encoder's ``auto``.

Before: the reranker always ran fp32 PyTorch (a reranked POST /search took ~2.2 s) while the bi-encoder had
torch-bf16 at 3.69x fp32's docs/s on an AMX Xeon.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import twotower.utils.runtime as runtime
from twotower.errors import ConfigError
from twotower.search import rerank as rerank_module
from twotower.search.rerank import CrossEncoderReranker
from twotower.text.encoder import RERANK_BACKEND_CHOICES, EncoderSettings, RerankSettings, resolve_backend

from tests.extras import needs_text
from tests.text.sample_texts import ABSTRACTS

QUERY = "does vitamin D prevent fractures in the elderly"
CANDIDATES = [*ABSTRACTS,
              "Hip fracture incidence fell after a vitamin D and calcium programme in nursing homes.",
              "Statin therapy lowered LDL cholesterol but not mortality in dialysis patients.",
              "Children who slept less than nine hours gained more weight over two years.",
              "Bone mineral density of older women rose with daily vitamin D3."]
#: |bf16 - fp32| score bound on the tiny cross-encoder below (measured: 3e-4 on scores of about 0.03, an AMX Xeon)
TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def ce_dir(tmp_path_factory):
    """A tiny cross-encoder on disk: MiniLM with a seeded one-logit head (no download, no training)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import CrossEncoder

    from twotower.text.encoder import default_model_path

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ce") / "ce"
    CrossEncoder(str(default_model_path()), num_labels=1, max_length=128, device="cpu").save(str(path))
    return path


@needs_text
def test_bf16_scores_stay_within_tolerance_and_keep_the_order(ce_dir):
    import torch

    fp32 = CrossEncoderReranker(ce_dir, settings=RerankSettings(backend="torch"))
    bf16 = CrossEncoderReranker(ce_dir, settings=RerankSettings(backend="torch-bf16"))
    assert (fp32.backend, bf16.backend) == ("torch", "torch-bf16")
    pairs = [(QUERY, d) for d in CANDIDATES]
    ref, got = fp32.score(pairs), bf16.score(pairs)
    assert got.dtype == np.float32 and got.shape == ref.shape == (len(CANDIDATES),)
    assert np.abs(got - ref).max() <= TOLERANCE
    assert not np.array_equal(got, ref)  # really another forward pass
    # the order stands wherever fp32's scores are further apart than the rounding can move two of them
    for i in range(len(pairs)):
        for j in range(len(pairs)):
            if ref[i] - ref[j] > 2 * TOLERANCE:
                assert got[i] > got[j], (i, j, ref, got)
    # the body ran in bfloat16, the head and the loaded model stay float32 (training, the fp32 path)
    copy = bf16._scoring_model().model
    assert copy.base_model.encoder.layer[0].attention.self.query.weight.dtype == torch.bfloat16
    assert copy.classifier.weight.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())


def test_unknown_backends_are_refused_naming_the_flag():
    assert RERANK_BACKEND_CHOICES == ("torch", "torch-bf16", "auto")
    with pytest.raises(ConfigError, match=r"rerank backend must be one of torch, torch-bf16, auto, got 'bf16' "
                                          r"\(set it with --rerank-backend\)"):
        RerankSettings(backend="bf16")
    with pytest.raises(ConfigError, match=r"got 'onnx' \(ONNX exports the bi-encoder only\) \(set it with "
                                          r"--rerank-backend\)"):
        RerankSettings(backend="onnx")


@pytest.mark.parametrize("argv", [["search", "evaluate", "--beir", "b"], ["search", "query", "--index", "i", "q"],
                                  ["serve", "--search-index", "i"]])
def test_the_cli_refuses_an_unknown_backend_naming_the_flag(argv, capsys):
    from twotower.cli.main import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*argv, "--rerank", "ce", "--rerank-backend", "bf16"])
    assert e.value.code == 2
    assert "--rerank-backend: invalid choice: 'bf16'" in capsys.readouterr().err


def test_the_default_is_the_encoders():
    assert RerankSettings().backend == EncoderSettings.backend


@pytest.mark.parametrize("native, expected", [(True, "torch-bf16"), (False, "torch")])
def test_auto_resolves_as_the_encoders_auto(monkeypatch, native, expected):
    monkeypatch.setattr(runtime, "native_bf16", lambda: native)
    assert resolve_backend("auto") == EncoderSettings(backend="auto").resolved().backend == expected
    assert RerankSettings(backend="auto").resolved() == RerankSettings(backend=expected)

    class Double:
        def predict(self, pairs, **kwargs):
            return np.zeros(len(pairs), dtype=np.float32)

    # resolved once, when the reranker is made: what the logs and `search evaluate --json` record is never "auto"
    assert CrossEncoderReranker.from_model(Double(), settings=RerankSettings(backend="auto")).backend == expected


@needs_text
def test_search_evaluate_hands_the_backend_to_the_reranker_and_records_it(tmp_path, monkeypatch, capsys):
    from search_data import write_beir

    from twotower.cli.main import main

    seen = []

    class Double:
        def predict(self, pairs, **kwargs):
            return np.arange(len(pairs), dtype=np.float32)

    def make(path, **kw):
        seen.append(kw["settings"])
        return CrossEncoderReranker.from_model(Double(), **kw)

    monkeypatch.setattr(rerank_module, "CrossEncoderReranker", make)
    monkeypatch.setattr(runtime, "native_bf16", lambda: False)
    ce = tmp_path / "ce"
    ce.mkdir()
    (ce / "twotower_cross_encoder.json").write_text(json.dumps({"kind": "cross_encoder"}))
    beir = write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n4\td4\t1\n"})
    argv = ["search", "evaluate", "--beir", str(beir), "--rerank", str(ce), "--json"]
    assert main([*argv, "--rerank-backend", "auto"]) == 0
    assert seen == [RerankSettings(backend="auto")]
    assert json.loads(capsys.readouterr().out)["rerank_backend"] == "torch"  # auto, resolved on this (patched) CPU


def test_serve_hands_the_backend_to_the_search_service_and_its_workers(tmp_path, monkeypatch):
    from twotower.cli import serve_cmd
    from twotower.cli.main import build_parser
    from twotower.serving import search_service

    class Stop(Exception):
        pass

    seen = {}

    def fake_load(index_dir, rerank_dir=None, *, rerank_settings=None):
        seen["settings"] = rerank_settings
        raise Stop

    ce = tmp_path / "ce"
    ce.mkdir()
    (ce / "twotower_cross_encoder.json").write_text(json.dumps({"kind": "cross_encoder"}))
    monkeypatch.setattr(search_service.SearchService, "load", staticmethod(fake_load))
    monkeypatch.setattr(serve_cmd, "_bind_port", lambda *a, **k: [])
    args = build_parser().parse_args(["serve", "--search-index", str(tmp_path), "--rerank", str(ce),
                                      "--rerank-backend", "torch-bf16"])
    with pytest.raises(Stop):
        serve_cmd.cmd_serve(args)
    assert seen["settings"] == RerankSettings(backend="torch-bf16")
    # --workers N: each worker process loads the reranker from the spec, with the same backend
    from twotower.serving.settings import ServiceSettings

    args.workers = 2
    spec = serve_cmd._share_with_workers(args, ServiceSettings(), None, tmp_path)  # the folder serve made for them
    assert spec.rerank_backend == "torch-bf16"


@needs_text
def test_search_query_json_names_the_rerank_backend_as_post_search_does(tmp_path, monkeypatch, capsys):
    from search_data import write_beir

    from twotower.cli.main import main
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus

    class Double:
        def predict(self, pairs, **kwargs):
            return np.arange(len(pairs), dtype=np.float32)

    monkeypatch.setattr(rerank_module, "CrossEncoderReranker",
                        lambda path, **kw: CrossEncoderReranker.from_model(Double(), **kw))
    ce = tmp_path / "ce"
    ce.mkdir()
    (ce / "twotower_cross_encoder.json").write_text(json.dumps({"kind": "cross_encoder"}))
    idx = tmp_path / "idx"
    SearchIndex.build(load_corpus(write_beir(tmp_path / "b") / "corpus.jsonl"), max_length=32).save(idx)
    assert main(["search", "query", "--index", str(idx), "--rerank", str(ce), "--k", "3", "--json", "sleep"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["reranked"] and got["rerank_backend"] == "torch" and got["items"] == got["hits"]
