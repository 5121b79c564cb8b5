"""Integrity of the text-embedding cache (issue 7): damage is refused naming the file."""
from __future__ import annotations

import json

import pytest

from twotower.errors import IntegrityError
from twotower.text.cache import EmbeddingCache, cached_encode

from tests.text.test_cache import CountingEncoder


def _cache(tmp_path):
    enc = CountingEncoder()
    cached_encode(enc, ["x", "y"], tmp_path, max_length=8)
    return enc, EmbeddingCache(tmp_path, model_id=enc.model_id, max_length=8)


def test_truncated_shard_is_refused_naming_the_shard(tmp_path):
    enc, cache = _cache(tmp_path)
    shard = cache.dir / "shard-00000.npy"
    shard.write_bytes(shard.read_bytes()[:-7])
    with pytest.raises(IntegrityError, match="shard-00000"):
        cached_encode(enc, ["x"], tmp_path, max_length=8)


def test_bitflipped_shard_is_refused_naming_the_shard(tmp_path):
    enc, cache = _cache(tmp_path)
    shard = cache.dir / "shard-00000.npy"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="shard-00000"):
        cached_encode(enc, ["y"], tmp_path, max_length=8)


def test_truncated_index_names_the_file(tmp_path):
    enc, cache = _cache(tmp_path)
    text = (cache.dir / "index.json").read_text()
    (cache.dir / "index.json").write_text(text[: len(text) // 2])
    with pytest.raises(IntegrityError, match="index.json") as e:
        cached_encode(enc, ["x"], tmp_path, max_length=8)
    # and what to do about it, as the other damaged-cache errors say
    assert f"delete {cache.dir} and the texts are encoded again" in str(e.value)


def test_edited_index_row_pointer_is_refused(tmp_path):
    enc, cache = _cache(tmp_path)
    index = json.loads((cache.dir / "index.json").read_text())
    texts = index["texts"]
    a, b = sorted(texts)
    texts[a], texts[b] = texts[b], texts[a]  # still valid JSON, still valid rows: x <-> y swapped
    (cache.dir / "index.json").write_text(json.dumps(index))
    with pytest.raises(IntegrityError, match="index.json"):
        cached_encode(enc, ["x"], tmp_path, max_length=8)
