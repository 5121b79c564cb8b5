"""Frozen-mode embedding cache on disk.

Layout of ``cache_dir/<key>/`` where ``key`` hashes (model id, max_length,
normalize)::

    index.json        {"model_id", "max_length", "normalize", "dim", "index_sha256",
                       "shards": [{"file", "rows", "sha256", "seconds"}],
                       "texts": {sha256(text): [shard, row]}}
    shard-00000.npy   float32 [rows, D]

Each call encodes only the texts it has not seen, appending a new shard and
rewriting ``index.json`` as it goes (at least once a minute, so an interrupted
encoding keeps what it finished); both writes are atomic, and the shard is written
before the index that points at it, so a crash never leaves the index
pointing at a missing shard. Processes on one machine share the cache through an
advisory lock (``.lock``): reading takes it shared, and a writer takes it exclusive
only to save a shard, re-reading ``index.json`` first and keeping only the texts
another process has not saved meanwhile, so no entry is lost or listed twice. The
encoding itself holds no lock: texts another process already cached are read
while it runs (two processes missing the same texts may both encode them). A shard
whose hash or shape does not match the index raises
:class:`~twotower.errors.IntegrityError` (or, with ``rebuild_corrupt=True``, the
whole entry is dropped and re-encoded).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from twotower.errors import IntegrityError
from twotower.text.encoder import TextEncoder
from twotower.utils.atomic import atomic_write_bytes, atomic_write_json, read_json, sha256_bytes, sha256_file
from twotower.utils.cache_home import expand_cache_path

__all__ = ["EmbeddingCache", "cached_encode", "cached_word_pieces", "text_key"]

logger = logging.getLogger(__name__)

_FORMAT = 1
#: texts encoded per call, between progress lines and chances to save
_CHUNK_TEXTS = 256
#: a shard is saved at least this often while encoding (and at the end): a 13-minute corpus encoding stopped a minute
#: before its end kept nothing, its one shard being written when the last text was encoded. Not much more often:
#: every save rewrites index.json, which lists every text
_SAVE_EVERY_S = 60.0


def _index_hash(index: dict) -> str:
    """sha256 of the canonical JSON body of ``index.json`` (without its own checksum)."""
    body = json.dumps({k: v for k, v in index.items() if k != "index_sha256"}, sort_keys=True, separators=(",", ":"))
    return sha256_bytes(body.encode("utf-8"))


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Embeddings of one (model, max_length, normalize) setting under ``root``."""

    def __init__(self, root: str | os.PathLike[str], *, model_id: str, max_length: int, normalize: bool = True,
                 read_only: str | None = None) -> None:
        self.model_id = model_id
        #: why the cache cannot be written (None: it can): its embeddings are still read, new ones are not kept
        self.read_only = read_only
        self.max_length = int(max_length)
        self.normalize = bool(normalize)
        key = sha256_bytes(f"{model_id}|{self.max_length}|{int(self.normalize)}|v{_FORMAT}".encode())[:16]
        self.dir = expand_cache_path(root) / key  # "~/.cache/twotower/..." as SearchConfig.cache_dir writes the default
        self.hits = 0
        self.misses = 0

    # -- reading -------------------------------------------------------
    def _empty_index(self) -> dict:
        return {"format": _FORMAT, "model_id": self.model_id, "max_length": self.max_length,
                "normalize": self.normalize, "dim": None, "shards": [], "texts": {}}

    def _load_index(self) -> dict:
        path = self.dir / "index.json"
        if not path.exists():
            return self._empty_index()
        try:
            index = read_json(path)
        except IntegrityError as e:  # "corrupted or half-written" alone left the user to work out what to do
            raise IntegrityError(f"{e}; delete {self.dir} and the texts are encoded again on the next run") from None
        if not isinstance(index, dict) or index.get("model_id") != self.model_id or index.get("format") != _FORMAT:
            raise IntegrityError(f"{path}: cache index belongs to another model or format; delete {self.dir}")
        stored = index.pop("index_sha256", None)  # caches written before the checksum existed have none
        if stored is not None and stored != _index_hash(index):
            raise IntegrityError(f"{path}: index.json does not match its checksum (edited or corrupted); "
                                 f"delete {self.dir} and the texts are encoded again on the next run (from Python, "
                                 "rebuild_corrupt=True does the same)")
        return index

    def _load_shards(self, index: dict) -> list[np.ndarray]:
        shards = []
        for s in index["shards"]:
            path = self.dir / s["file"]
            if not path.exists():
                raise IntegrityError(f"{path}: cache shard is missing; delete {self.dir} to rebuild")
            if sha256_file(path) != s["sha256"]:
                raise IntegrityError(f"{path}: cache shard hash does not match index.json (corrupted); delete {self.dir}")
            try:
                arr = np.load(path, allow_pickle=False)
            except (ValueError, OSError) as e:
                raise IntegrityError(f"{path}: unreadable cache shard ({e})") from e
            if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != s["rows"] or arr.shape[1] != index["dim"]:
                raise IntegrityError(f"{path}: cache shard has shape {arr.shape} {arr.dtype}, index says ({s['rows']}, {index['dim']})")
            shards.append(arr)
        return shards

    # -- public --------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool):
        """The ``.lock`` flock: shared to read, exclusive to write a shard and the index or to drop the cache."""
        if self.read_only is not None:
            with self._read_lock():
                yield
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        with open(self.dir / ".lock", "a+") as fh:
            try:
                fcntl.flock(fh.fileno(), mode | fcntl.LOCK_NB)
            except BlockingIOError:
                # another process holds it: this one saving a shard (a moment), or a twotower from before the lock
                # was held only for that, for its whole encoding (minutes on a CPU). Waiting without a word left
                # a second `search evaluate` / `index` looking hung
                logger.info("embedding cache %s is in use by another process (writing texts it encoded?); waiting "
                            "for it to finish", self.dir)
                t0 = time.perf_counter()
                fcntl.flock(fh.fileno(), mode)
                logger.info("embedding cache %s: waited %.0fs for the other process", self.dir.name,
                            time.perf_counter() - t0)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _read_lock(self):
        """The shared lock of a cache this process cannot write: taken on the lock file opened for reading, or none
        when that file is missing and cannot be made (a read-only mount: no writer of ours can change it either)."""
        try:
            fh = open(self.dir / ".lock")
        except OSError as e:
            if e.errno not in (errno.ENOENT, *_UNWRITABLE):
                raise
            yield
            return
        with fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def stats(self) -> dict:
        """``{"texts", "shards", "encode_seconds"}``: what the cache holds and what encoding it cost."""
        index = self._load_index()
        return {"texts": len(index["texts"]), "shards": len(index["shards"]),
                "encode_seconds": round(sum(s.get("seconds", 0.0) for s in index["shards"]), 2)}

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def encode(
        self,
        encoder: TextEncoder,
        texts: Sequence[str],
        *,
        batch_size: int = 64,
        show_progress: bool = True,
        rebuild_corrupt: bool = False,
    ) -> np.ndarray:
        """Embeddings ``[N, D]`` of ``texts``, encoding only cache misses."""
        if encoder.model_id != self.model_id:
            raise IntegrityError(f"cache is for model {self.model_id!r}, encoder is {encoder.model_id!r}")
        index, shards = self._read(rebuild_corrupt)
        keys = [text_key(t) for t in texts]
        missing: dict[str, str] = {}
        for k, t in zip(keys, texts):
            if k not in index["texts"] and k not in missing:
                missing[k] = t
        cached = len(keys) - sum(1 for k in keys if k in missing)
        self.hits += cached
        self.misses += len(keys) - cached
        # repeated texts (18 shared titles of MovieLens-100K) are encoded once: len(keys) - len(missing) counted
        # them as cached, so an empty cache said "18 of 1682 texts cached"
        distinct = f" ({len(missing)} distinct)" if len(missing) < len(keys) - cached else ""
        if keys and not missing:
            logger.info("embedding cache hit: all %d texts from %s (model %s)", len(keys), self.dir, self.model_id)
        elif missing and self.read_only is not None:
            logger.warning("embedding cache %s cannot be written (%s): %d of %d texts read from it, the other %d "
                           "encoded without being kept, so the next run encodes them again (a writable HOME, or "
                           "`--cache DIR` on the search commands, keeps them)", self.dir, self.read_only, cached,
                           len(keys), len(keys) - cached)
        elif missing:
            logger.info("embedding cache %s: %d of %d texts cached, encoding %d%s", self.dir, cached, len(keys),
                        len(keys) - cached, distinct)
        new = (self._encode_missing(encoder, list(missing.items()), batch_size, show_progress) if missing
               else np.zeros((0, index["dim"] or encoder.dim), dtype=np.float32))  # [M, D]
        # the vectors this call read or encoded itself: index.json may since list a text another process saved too
        # (the same vector) or have been rebuilt, and its shards are not read again
        row_of = {k: i for i, k in enumerate(missing)}
        out = np.empty((len(keys), new.shape[1]), dtype=np.float32)  # [N, D]
        for i, k in enumerate(keys):
            if k in row_of:
                out[i] = new[row_of[k]]
            else:
                s, r = index["texts"][k]
                out[i] = shards[s][r]
        return out

    def _read(self, rebuild_corrupt: bool) -> tuple[dict, list[np.ndarray]]:
        """``index.json`` and its shards, read under the shared lock. A corrupted cache raises, or with
        ``rebuild_corrupt`` is dropped under the exclusive one (unless another process rebuilt it meanwhile)."""
        with self._locked(exclusive=False):
            try:
                index = self._load_index()
                return index, self._load_shards(index)
            except IntegrityError:
                if not rebuild_corrupt:
                    raise
                if self.read_only is not None:  # it cannot be dropped: encoded without it
                    logger.warning("embedding cache %s is corrupted and cannot be rebuilt (%s); encoding without it",
                                   self.dir, self.read_only)
                    return self._empty_index(), []
        with self._locked(exclusive=True):
            try:
                index = self._load_index()
                return index, self._load_shards(index)
            except IntegrityError:
                logger.warning("embedding cache %s is corrupted; rebuilding it", self.dir)
                for f in self.dir.glob("*"):
                    if f.name != ".lock":
                        f.unlink()
                return self._load_index(), []

    def _encode_missing(self, encoder: TextEncoder, items: list[tuple[str, str]], batch_size: int,
                        show_progress: bool) -> np.ndarray:
        """Encode ``(key, text)`` items ``_CHUNK_TEXTS`` at a time, saving a shard (and the index pointing at it) at
        least every ``_SAVE_EVERY_S`` seconds: an encoding cut short (Ctrl-C, a killed job) keeps what it finished, so
        the next run encodes only the rest. Returns the vectors ``[M, D]``, in the order of ``items``."""
        from twotower.utils.progress import RateLog  # noqa: PLC0415

        progress = RateLog(logger, f"encoding with {encoder.backend}", len(items), "texts",
                           encoder.settings.progress_seconds if show_progress else None, rate_unit="texts",
                           rate_digits=1)
        new: list[np.ndarray] = []
        pending: list[np.ndarray] = []
        t0 = last = time.perf_counter()
        done = saved = 0
        for start in range(0, len(items), _CHUNK_TEXTS):
            part = [t for _, t in items[start : start + _CHUNK_TEXTS]]
            pending.append(encoder.encode(part, batch_size=batch_size, max_length=self.max_length,
                                          normalize=self.normalize, show_progress=False))  # [C, D]
            done += len(part)
            progress.update(done)
            if done < len(items) and time.perf_counter() - last < _SAVE_EVERY_S:
                continue
            emb = np.concatenate(pending)  # [M, D]
            if self.read_only is None:
                self._save_shard([k for k, _ in items[saved:done]], emb, round(time.perf_counter() - last, 2))
            new.append(emb)
            pending, saved, last = [], done, time.perf_counter()
        if show_progress and len(items) > batch_size:
            elapsed = time.perf_counter() - t0
            logger.info("encoded %d texts with %s in %.1fs (%.1f texts/s)", len(items), encoder.backend, elapsed,
                        len(items) / max(elapsed, 1e-9))
        return np.concatenate(new)

    def _save_shard(self, keys: list[str], emb: np.ndarray, seconds: float) -> None:
        """Append the rows of ``keys`` that the cache still lacks as its next shard, under the exclusive lock.

        ``index.json`` is read again there: another process may have saved shards (some of these texts among them)
        since this one read it, and writing this process's old copy back would drop them. The rows of texts another
        process saved meanwhile are left out: index.json lists each text once, so a second copy would be dead rows."""
        with self._locked(exclusive=True):
            index = self._load_index()
            fresh = [i for i, k in enumerate(keys) if k not in index["texts"]]
            if not fresh:
                return
            emb = emb[fresh]  # [M', D]
            shard_no = len(index["shards"])
            name = f"shard-{shard_no:05d}.npy"
            buf = io.BytesIO()
            np.save(buf, emb, allow_pickle=False)
            data = buf.getvalue()
            atomic_write_bytes(self.dir / name, data)  # shard first, then the index that points at it
            index["dim"] = int(emb.shape[1])
            index["shards"].append({"file": name, "rows": int(emb.shape[0]), "sha256": sha256_bytes(data),
                                    "seconds": seconds})
            for row, i in enumerate(fresh):
                index["texts"][keys[i]] = [shard_no, row]
            atomic_write_json(self.dir / "index.json", {**index, "index_sha256": _index_hash(index)})


def cached_encode(
    encoder: TextEncoder,
    texts: Sequence[str],
    cache_dir: str | os.PathLike[str] | None,
    *,
    max_length: int = 256,
    batch_size: int = 64,
    normalize: bool = True,
    show_progress: bool = True,
    rebuild_corrupt: bool = False,
) -> np.ndarray:
    """``encoder.encode`` through an on-disk cache (``cache_dir=None`` disables it)."""
    if cache_dir is None:
        return encoder.encode(texts, batch_size=batch_size, max_length=max_length, normalize=normalize,
                              show_progress=show_progress)
    cache = EmbeddingCache(cache_dir, model_id=encoder.model_id, max_length=max_length, normalize=normalize)
    # a cache that cannot be written is still read: a pre-filled one on a read-only mount saves the whole encoding
    cache.read_only = _unwritable(cache.dir)
    return cache.encode(encoder, texts, batch_size=batch_size, show_progress=show_progress,
                        rebuild_corrupt=rebuild_corrupt)


_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _unwritable(folder: Path) -> str | None:
    """Why the cache folder cannot be made or written (a read-only or unset HOME, a read-only mount), else None:
    the cache only saves time, so a run goes on without it instead of stopping at "Permission denied"."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a+"):
            return None
    except OSError as e:
        if e.errno not in _UNWRITABLE:
            raise
        return e.strerror or str(e)


def cached_word_pieces(encoder: TextEncoder, texts: Sequence[str],
                       cache_dir: str | os.PathLike[str] | None) -> np.ndarray | None:
    """``encoder.word_pieces(texts)``, kept under ``cache_dir/word-pieces/`` for this exact list of texts.

    Counting what the encoder cuts (:func:`~twotower.text.encoder.truncation_report`) tokenizes the whole corpus:
    3.1 s of SciFact's 5,183 abstracts on every ``search evaluate`` whose embeddings came from the cache in less.
    The file is named by a hash of the tokenizer's model id and every text, so another corpus, order or model
    never reads it; a damaged file is counted again and replaced.
    """
    if cache_dir is None:
        return encoder.word_pieces(list(texts))
    digest = hashlib.sha256(f"{encoder.model_id}\n".encode())
    for t in texts:
        digest.update(text_key(str(t)).encode())
    path = expand_cache_path(cache_dir) / "word-pieces" / f"{digest.hexdigest()[:32]}.npy"
    if path.is_file():
        try:
            lengths = np.load(path, allow_pickle=False)
            if lengths.shape == (len(texts),) and lengths.dtype.kind == "i":
                return lengths.astype(np.int64)
        except (OSError, ValueError, EOFError):  # an empty file is an EOFError to np.load: counted again, not a traceback
            pass
        logger.debug("word-piece counts at %s do not match the texts; counting again", path)
    lengths = encoder.word_pieces(list(texts))
    if lengths is not None:
        buf = io.BytesIO()
        np.save(buf, lengths.astype(np.int32), allow_pickle=False)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, buf.getvalue())
        except OSError as e:  # only saves the next run the counting: not worth stopping this one
            if e.errno not in _UNWRITABLE:
                raise
            logger.debug("word-piece counts not kept at %s: %s", path, e)
    return lengths
