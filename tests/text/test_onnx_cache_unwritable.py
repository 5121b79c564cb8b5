"""An ONNX cache that cannot be written (a read-only HOME) exports the encoder into a temporary folder, with a
warning, as the embedding cache goes on without its folder.

Before: `--encoder-backend onnx` with a read-only HOME stopped with PermissionError from export_onnx although
the cache only saves the next run the export.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import twotower.text.onnx_backend as ob
from twotower.utils.atomic import sha256_file

from tests.read_only_home import read_only_home


def test_an_unwritable_onnx_cache_exports_into_a_temporary_folder_and_warns_once(tmp_path, monkeypatch, caplog):
    ort = pytest.importorskip("onnxruntime")
    home = tmp_path / "home"
    monkeypatch.delenv("TWOTOWER_ONNX_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    def export(st_model, folder: Path) -> None:  # the files export_onnx writes, without a model to export
        folder.mkdir(parents=True)
        for name in ob.EXPORTED_FILES:
            (folder / name).write_bytes(b"graph")
        files = {name: sha256_file(folder / name) for name in ob.EXPORTED_FILES}
        (folder / ob.TABLE).write_text(json.dumps({"inputs": ["input_ids"], "pooling": "mean", "files": files}))

    opened = []
    read_only_home(monkeypatch, home)
    monkeypatch.setattr(ob, "export_onnx", export)
    monkeypatch.setattr(ort, "InferenceSession", lambda path, *a, **k: opened.append(Path(path)) or object())
    model = [SimpleNamespace(tokenizer=None)]
    with caplog.at_level("WARNING", logger="twotower.text.onnx_backend"):
        first = ob.OnnxForward(model, "fp1", int8=True, threads=1)
        second = ob.OnnxForward(model, "fp2", int8=False, threads=1)
    assert [p.name for p in opened] == ["model-int8.onnx", "model-fp32.onnx"]
    assert all(home not in p.parents for p in opened)  # exported and opened outside the unwritable cache
    said = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(said) == 1  # once, not for every encoder
    assert str(home / ".cache" / "twotower" / "onnx") in said[0]
    assert "TWOTOWER_ONNX_CACHE" in said[0] and "XDG_CACHE_HOME" in said[0]
    assert not home.exists() and first.names == ["input_ids"] and second.names == ["input_ids"]
