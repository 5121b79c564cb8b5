"""The ONNX encoder cache's files.json is checked as a saved index's meta.json is: no file of the folder unlisted."""
from __future__ import annotations

import json

import pytest

from twotower.errors import IntegrityError
from twotower.text.onnx_backend import EXPORT_VERSION, EXPORTED_FILES, read_export
from twotower.utils.atomic import sha256_file

FP = "0123abcd"


def _export(root, *, listed=EXPORTED_FILES, extra=()):
    """A cache folder as export_onnx leaves it (stand-in bytes; nothing here parses them), its table listing
    ``listed`` only."""
    folder = root / f"{FP}.e{EXPORT_VERSION}"
    folder.mkdir(parents=True)
    for name in (*EXPORTED_FILES, *extra):
        (folder / name).write_bytes(f"weights of {name}".encode())
    files = {name: sha256_file(folder / name) for name in listed}
    (folder / "files.json").write_text(json.dumps({"inputs": ["input_ids"], "pooling": "mean", "files": files}))
    return folder


def test_a_complete_table_is_read(tmp_path):
    folder = _export(tmp_path)
    assert read_export(folder)["inputs"] == ["input_ids"]


@pytest.mark.parametrize("listed,extra,named", [
    (("model-fp32.onnx",), (), "model-int8.onnx"),  # the int8 entry dropped: the file was opened unchecked
    (EXPORTED_FILES, ("model.onnx_data",), "model.onnx_data"),  # a file of the folder the table never saw
])
def test_a_file_the_table_leaves_out_is_refused_before_a_session_reads_it(tmp_path, monkeypatch, listed, extra, named):
    pytest.importorskip("onnxruntime")
    from twotower.text.onnx_backend import OnnxForward

    folder = _export(tmp_path, listed=listed, extra=extra)
    said = rf"{named}: not listed in the checksums of .*files\.json.*delete .* to export the encoder again"
    with pytest.raises(IntegrityError, match=said):
        read_export(folder)
    # the backend's own path: refused before ONNX Runtime parses anything (it raised its own InvalidProtobuf
    # on the stand-in int8 file, or, on a real one, ran it unchecked)
    monkeypatch.setenv("TWOTOWER_ONNX_CACHE", str(tmp_path))
    with pytest.raises(IntegrityError, match=said):
        OnnxForward(None, FP, int8=True, threads=1)


def test_a_checksum_that_does_not_match_and_a_table_that_is_not_one_are_refused(tmp_path):
    folder = _export(tmp_path)
    (folder / "model-int8.onnx").write_bytes(b"replaced")
    with pytest.raises(IntegrityError, match=r"model-int8\.onnx: sha256 mismatch.*export the encoder again"):
        read_export(folder)
    (folder / "files.json").write_text(json.dumps({"inputs": ["input_ids"], "files": ["model-int8.onnx"]}))
    with pytest.raises(IntegrityError, match=r"files\.json: not an exported encoder's file table"):
        read_export(folder)
