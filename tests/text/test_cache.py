from __future__ import annotations

import hashlib

import numpy as np
import pytest

from twotower.errors import IntegrityError
from twotower.text.cache import EmbeddingCache, cached_encode
from twotower.text.encoder import TextEncoder

from tests.extras import needs_text


class CountingEncoder(TextEncoder):
    """Deterministic fake: each text maps to a hash-seeded unit vector; counts encoded texts."""

    def __init__(self, model_id: str = "fake@1") -> None:
        super().__init__(model=None, model_id=model_id)
        self.encoded: list[str] = []

    @property
    def dim(self) -> int:
        return 4

    def encode(self, texts, *, batch_size=64, max_length=256, normalize=True, show_progress=True):
        self.encoded.extend(texts)
        out = []
        for t in texts:
            seed = int(hashlib.sha256(f"{t}|{max_length}".encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).standard_normal(4)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), 4)


def test_miss_then_hit_encodes_each_text_once(tmp_path):
    enc = CountingEncoder()
    a = cached_encode(enc, ["x", "y", "x"], tmp_path, max_length=8)
    assert enc.encoded == ["x", "y"]  # duplicates encoded once
    b = cached_encode(enc, ["y", "z", "x"], tmp_path, max_length=8)
    assert enc.encoded == ["x", "y", "z"]  # only the new text
    np.testing.assert_array_equal(b[[0, 2]], a[[1, 0]])
    np.testing.assert_array_equal(b, enc.encode(["y", "z", "x"], max_length=8))


def test_the_log_counts_repeated_texts_as_encoded_not_as_cached(tmp_path, caplog):
    # an empty cache and two equal titles (MovieLens-100K has 18) said "1 of 3 texts cached, encoding 2"
    enc = CountingEncoder()
    with caplog.at_level("INFO", logger="twotower.text.cache"):
        cached_encode(enc, ["x", "y", "x"], tmp_path, max_length=8)
        cached_encode(enc, ["x", "z", "z"], tmp_path, max_length=8)
    said = [r.getMessage() for r in caplog.records if "texts cached" in r.getMessage()]
    assert said[0].endswith(": 0 of 3 texts cached, encoding 3 (2 distinct)"), said
    assert said[1].endswith(": 1 of 3 texts cached, encoding 2 (1 distinct)"), said
    assert len(said) == 2


def test_key_includes_model_and_max_length(tmp_path):
    enc = CountingEncoder()
    cached_encode(enc, ["x"], tmp_path, max_length=8)
    cached_encode(enc, ["x"], tmp_path, max_length=16)
    other = CountingEncoder("fake@2")
    cached_encode(other, ["x"], tmp_path, max_length=8)
    assert enc.encoded == ["x", "x"] and other.encoded == ["x"]
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 3


def test_corrupted_shard_is_detected_or_rebuilt(tmp_path):
    enc = CountingEncoder()
    first = cached_encode(enc, ["x", "y"], tmp_path, max_length=8)
    cache = EmbeddingCache(tmp_path, model_id=enc.model_id, max_length=8)
    shard = cache.dir / "shard-00000.npy"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # flip bits in the last vector
    shard.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="corrupted"):
        cached_encode(enc, ["x"], tmp_path, max_length=8)
    again = cached_encode(enc, ["x", "y"], tmp_path, max_length=8, rebuild_corrupt=True)
    np.testing.assert_array_equal(again, first)
    assert enc.encoded == ["x", "y", "x", "y"]


def test_truncated_index_is_an_integrity_error(tmp_path):
    enc = CountingEncoder()
    cached_encode(enc, ["x"], tmp_path, max_length=8)
    cache = EmbeddingCache(tmp_path, model_id=enc.model_id, max_length=8)
    (cache.dir / "index.json").write_text('{"format": 1, "texts": {')
    with pytest.raises(IntegrityError):
        cached_encode(enc, ["x"], tmp_path, max_length=8)


@needs_text
def test_real_minilm_encodes_a_few_sentences(tmp_path):
    from twotower.text.encoder import load_text_encoder

    enc = load_text_encoder()
    texts = ["aspirin prevents heart attack", "aspirin reduces heart attack risk", "the stock market fell"]
    emb = cached_encode(enc, texts, tmp_path, max_length=32, show_progress=False)
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2]
    np.testing.assert_allclose(cached_encode(enc, texts, tmp_path, max_length=32), emb)


@needs_text
def test_encoder_reports_its_dimension():
    from twotower.text import load_text_encoder

    assert load_text_encoder(None).dim == 384  # all-MiniLM-L6-v2


def test_the_default_cache_is_the_users_not_the_working_folders(tmp_path, monkeypatch):
    """The default was ``runs/cache/embeddings`` under the folder the command ran from: `twotower search` from
    another folder encoded the whole corpus again into a second cache (and failed where that folder was
    read-only). It is now one folder per user, whatever the working folder; an explicit path is kept as given."""
    from twotower.cli.main import build_parser
    from twotower.cli.search_cmd import _check_cache
    from twotower.config import SearchConfig

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the user's cache is then ~/.cache's, under HOME
    enc = CountingEncoder()
    for cwd in ("a", "b"):
        (tmp_path / cwd).mkdir()
        monkeypatch.chdir(tmp_path / cwd)
        cached_encode(enc, ["x", "y"], SearchConfig.cache_dir, max_length=8)
    assert enc.encoded == ["x", "y"]  # the second folder read the first one's entries
    assert not (tmp_path / "a" / "runs").exists() and not (tmp_path / "b" / "runs").exists()
    assert list((home / ".cache" / "twotower" / "text-embeddings").glob("*/index.json"))
    args = build_parser().parse_args(["search", "evaluate", "--beir", "b"])
    _check_cache(args)
    assert args.cache == str(home / ".cache" / "twotower" / "text-embeddings")
    args = build_parser().parse_args(["search", "evaluate", "--beir", "b", "--cache", "here/cache"])
    _check_cache(args)
    assert args.cache == "here/cache"  # an explicit relative path means the folder it names, as before


def test_waiting_for_another_writer_is_said_not_silent(tmp_path, caplog):
    """A second process reaching a cache another one is filling (a corpus encoding: minutes) waited without a word."""
    import fcntl
    import logging
    import threading

    enc = CountingEncoder()
    cache = EmbeddingCache(tmp_path, model_id=enc.model_id, max_length=8)
    cache.dir.mkdir(parents=True)
    with open(cache.dir / ".lock", "a+") as held:  # another open file: flock conflicts as another process's would
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        release = threading.Timer(0.3, fcntl.flock, (held.fileno(), fcntl.LOCK_UN))
        release.start()
        with caplog.at_level(logging.INFO, logger="twotower.text.cache"):
            out = cached_encode(enc, ["x"], tmp_path, max_length=8)
        release.join()
    assert out.shape == (1, 4)
    assert "is in use by another process" in caplog.text and "waited" in caplog.text


def test_an_interrupted_encoding_keeps_what_it_finished(tmp_path, monkeypatch):
    """The texts to encode were one shard, written once the last was encoded: a corpus encoding (13 minutes of
    SciFact on a busy core) stopped before its end kept nothing. Shards are now saved as it goes."""
    import twotower.text.cache as cache_mod

    monkeypatch.setattr(cache_mod, "_CHUNK_TEXTS", 2)
    monkeypatch.setattr(cache_mod, "_SAVE_EVERY_S", 0.0)

    class Interrupted(CountingEncoder):
        def encode(self, texts, **kw):
            if len(self.encoded) >= 4:
                raise KeyboardInterrupt
            return super().encode(texts, **kw)

    texts = [f"t{i}" for i in range(7)]
    with pytest.raises(KeyboardInterrupt):
        cached_encode(Interrupted(), texts, tmp_path, max_length=8)
    enc = CountingEncoder()
    out = cached_encode(enc, texts, tmp_path, max_length=8)
    assert enc.encoded == ["t4", "t5", "t6"]  # the first four were saved before the interruption
    np.testing.assert_array_equal(out, CountingEncoder().encode(texts, max_length=8))
    assert EmbeddingCache(tmp_path, model_id=enc.model_id, max_length=8).stats()["shards"] == 4


# -- two processes on one cache ----------------------------------------------------------------------------------
#: how long a step of the two-process tests may take before it counts as blocked: far above what it needs (well under
#: a second), so a slow machine does not fail them; only a process stuck behind the other's lock reaches it
_STEP_S = 60.0


def _wait_for(path, timeout: float = _STEP_S) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class GatedEncoder(CountingEncoder):
    """Says it has started encoding (creates ``started``), then encodes only once ``release`` exists: a corpus
    encoding of minutes, held for as long as a test needs another process to run beside it."""

    def __init__(self, started, release) -> None:
        super().__init__()
        self.started, self.release = started, release

    def encode(self, texts, **kw):
        self.started.touch()
        if not _wait_for(self.release, 2 * _STEP_S):
            raise TimeoutError("never released")
        return super().encode(texts, **kw)


class RefusingEncoder(CountingEncoder):
    def encode(self, texts, **kw):
        raise AssertionError(f"asked to encode {list(texts)}, all cached")


def _encode_in_child(encoder: TextEncoder, texts: list[str], root, done) -> None:
    """A process's whole use of the cache: its vectors must be the texts' own, whoever encoded them."""
    out = cached_encode(encoder, texts, root, max_length=8, show_progress=False)
    np.testing.assert_array_equal(out, CountingEncoder().encode(texts, max_length=8))
    done.touch()


def _start(target, *args):
    import multiprocessing

    proc = multiprocessing.get_context("fork").Process(target=target, args=args)
    proc.start()
    return proc


def _finish(*procs) -> None:
    for p in procs:
        p.join(2 * _STEP_S)
        if p.is_alive():
            p.kill()
            p.join()


def _entries(root) -> dict:
    """``{sha256(text): vector}`` of every text ``index.json`` lists, read through its shards (checksums checked)."""
    cache = EmbeddingCache(root, model_id="fake@1", max_length=8)
    index = cache._load_index()
    shards = cache._load_shards(index)
    return {k: shards[s][r] for k, (s, r) in index["texts"].items()}


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_cached_texts_are_read_while_another_process_encodes(tmp_path):
    """An encoding held the cache's lock from its first text to its last: a training whose 1,689 titles were all
    cached waited 12 minutes behind another user's SciFact encoding. Only writing a shard takes the lock now."""
    cached_encode(CountingEncoder(), ["a", "b"], tmp_path, max_length=8)
    started, release, wrote, read = (tmp_path / n for n in ("started", "release", "wrote", "read"))
    writer = _start(_encode_in_child, GatedEncoder(started, release), ["a", "c", "d"], tmp_path, wrote)
    reader = None
    try:
        assert _wait_for(started), "the writer never started encoding"
        reader = _start(_encode_in_child, RefusingEncoder(), ["b", "a"], tmp_path, read)
        reader.join(_STEP_S)
        assert read.exists(), "reading cached texts waited for another process's encoding"
        assert reader.exitcode == 0
    finally:
        release.touch()
        _finish(writer, *([reader] if reader else []))
    assert writer.exitcode == 0 and wrote.exists()
    got = _entries(tmp_path)
    assert sorted(got) == sorted(_key(t) for t in "abcd")
    for t, v in zip("abcd", CountingEncoder().encode(list("abcd"), max_length=8)):
        np.testing.assert_array_equal(got[_key(t)], v)


def test_two_processes_encoding_the_same_texts_both_finish_and_list_each_text_once(tmp_path):
    """The second encoder of the same texts no longer waits for the first: both encode, and the one saving second
    keeps only what the cache still lacks, so no text is listed twice and nothing the first saved is lost."""
    started, release, first, second = (tmp_path / n for n in ("started", "release", "first", "second"))
    slow = _start(_encode_in_child, GatedEncoder(started, release), ["x", "y"], tmp_path, first)
    fast = None
    try:
        assert _wait_for(started), "the first process never started encoding"
        fast = _start(_encode_in_child, CountingEncoder(), ["y", "z"], tmp_path, second)
        fast.join(_STEP_S)
        assert second.exists(), "encoding waited for another process's whole encoding"
    finally:
        release.touch()
        _finish(slow, *([fast] if fast else []))
    assert slow.exitcode == 0 and fast.exitcode == 0 and first.exists()
    index = EmbeddingCache(tmp_path, model_id="fake@1", max_length=8)._load_index()
    assert [s["rows"] for s in index["shards"]] == [2, 1]  # the slow one saved "x" alone, "y" being there already
    got = _entries(tmp_path)
    assert sorted(got) == sorted(_key(t) for t in "xyz")
    for t, v in zip("xyz", CountingEncoder().encode(list("xyz"), max_length=8)):
        np.testing.assert_array_equal(got[_key(t)], v)
    np.testing.assert_array_equal(cached_encode(RefusingEncoder(), ["z", "y", "x"], tmp_path, max_length=8),
                                  CountingEncoder().encode(["z", "y", "x"], max_length=8))
