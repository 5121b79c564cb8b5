"""weights_fingerprint hashes whole files; ids recorded with the head/tail fingerprint used before still match."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
from twotower.text.encoder import same_encoder_id, weights_fingerprint

MIB = 1 << 20


def _model_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(5 * MIB))
    (root / "config.json").write_text(json.dumps({"hidden_size": 8}))
    return root


def _head_tail(model_dir: Path) -> str:
    """The fingerprint as runs and indexes saved before whole-file hashing recorded it (the old code, verbatim)."""
    h = hashlib.sha256()
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and p.suffix in {".safetensors", ".bin", ".json", ".txt"})
    for p in files:
        h.update(str(p.relative_to(model_dir)).encode())
        size = p.stat().st_size
        h.update(str(size).encode())
        with open(p, "rb") as fh:
            h.update(fh.read(MIB))
            if size > 2 << 20:
                fh.seek(-MIB, os.SEEK_END)
                h.update(fh.read(MIB))
    return h.hexdigest()[:16]


def _edit_middle(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.seek(path.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))


def test_an_edit_in_the_middle_of_the_weights_changes_the_fingerprint(tmp_path):
    d = _model_dir(tmp_path / "m")
    before = weights_fingerprint(d)
    _edit_middle(d / "model.safetensors")  # same size, same first and last MiB
    after = weights_fingerprint(d)
    assert after != before
    assert len(after) == 16 and int(after, 16) >= 0  # the format ids and caches hold is kept


def test_an_id_recorded_with_the_old_fingerprint_matches_the_same_weights_only(tmp_path, caplog):
    d = _model_dir(tmp_path / "m")
    now, old = weights_fingerprint(d), _head_tail(d)
    assert now != old
    with caplog.at_level("INFO", logger="twotower.text.encoder"):
        assert same_encoder_id(f"st@{old}", f"st@{now}")
        assert same_encoder_id(f"st@{old}+onnx-int8.e2", f"st@{now}+onnx-int8.e2")  # the backend suffix kept
    assert "rebuild to record the full fingerprint" in caplog.text
    assert not same_encoder_id(f"st@{old}+torch-bf16", f"st@{now}")  # another backend's vectors
    assert not same_encoder_id(f"st@{'0' * 16}", f"st@{now}")  # other weights
