"""Safe save/load for every index backend: atomic directory swap, checksums, model fingerprint.

Layout of a saved index directory::

    index.faiss   FAISS backends (faiss.write_index)
    vectors.npy   ExactIndex (np.save, no pickles)
    ids.npy       the caller's int64 ids
    meta.json     {backend, factory, config, params, dim, count, metric,
                   model_fingerprint, created, twotower_version, build_params,
                   sha256: {file: hex}, meta_sha256}
    tune.json     the tuning record, when one was given (with twotower_version)

``twotower_version`` is absent from an index saved before it was recorded; readers take it with ``.get``.

The directory is written to a temporary sibling and swapped in only when
complete (:func:`twotower.utils.atomic.atomic_dir`), so a crash mid-write
leaves the previous index intact. :func:`load_index` checks every file's
sha256 (a flipped bit or a truncated file raises :class:`IntegrityError`
naming the file) and, when asked, that the index was built for the model the
caller is running.
"""
from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from twotower.errors import ConfigError, IntegrityError, NotFoundError
from twotower.utils.folder_lock import idle_lock_file
from twotower.utils.atomic import atomic_dir, read_json, sha256_file, verify_files
from twotower.utils.version import VERSION_KEY, installed_version

if TYPE_CHECKING:
    from twotower.index.base import VectorIndex

__all__ = ["save_index", "load_index", "fingerprint_arrays", "read_meta", "is_index_dir", "is_damaged_index_dir",
           "index_folder_files", "other_artefact", "FORMAT_VERSION"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
META = "meta.json"
TUNE = "tune.json"  # the autotune summary serving trusts (measured recall): checksummed like the index
PLOT = "recall_qps.png"  # `twotower index build`'s plot, written into the folder before the swap (not checksummed)


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default).encode("utf-8")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def fingerprint_arrays(*arrays: np.ndarray, config: dict[str, Any]) -> str:
    """sha256 hex digest over each array's dtype, shape and bytes, then ``config`` as canonical JSON.

    Callers fingerprint a model by its weights and config, e.g.
    ``fingerprint_arrays(*state_dict_arrays, config=asdict(model_config))``,
    and pass it to ``index.save(dir, model_fingerprint=fp)`` and
    ``load_index(dir, expected_fingerprint=fp)``.
    """
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(_canonical({"dtype": a.dtype.str, "shape": list(a.shape)}))
        h.update(memoryview(a).cast("B") if a.size else b"")
    h.update(_canonical(config))
    return h.hexdigest()


def _backends() -> dict[str, type["VectorIndex"]]:
    from twotower.index.exact import ExactIndex
    from twotower.index.faiss_index import FaissIndex

    return {cls.backend: cls for cls in (ExactIndex, FaissIndex)}


def save_index(index: "VectorIndex", directory: str | Path, *, tuning: dict[str, Any] | None = None,
               extra: Mapping[str, Callable[[Path], Any]] | None = None) -> Path:
    """Write ``index`` to ``directory`` atomically (old contents stay until the new ones are complete).

    ``tuning`` is written as ``tune.json`` and checksummed with the index files. ``extra`` maps a file name to a
    writer called with its path in the new folder before the swap (``recall_qps.png``, not checksummed): written
    after the swap, a build killed or failing in between left the new index without the plot the old one had."""
    directory = Path(directory)
    if len(index) == 0:
        raise ConfigError("refusing to save an empty index; build it first")
    _check_replaceable(directory)
    with atomic_dir(directory) as tmp:
        config, build_params = index._write(tmp)
        if tuning is not None:  # the version that measured it, as meta.json names the one that wrote the index
            tuning = {**tuning, VERSION_KEY: installed_version()}
            (tmp / TUNE).write_text(json.dumps(tuning, indent=2, sort_keys=True, default=_json_default) + "\n")
        files = sorted(p.name for p in tmp.iterdir() if p.is_file())
        meta: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "backend": index.backend,
            "factory": getattr(index, "factory", None),
            "config": config,
            "params": index.search_params,
            "dim": index.dim,
            "count": len(index),
            "metric": index.metric,
            "is_exact": bool(index.is_exact),
            "model_fingerprint": index.model_fingerprint,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            VERSION_KEY: installed_version(),
            "build_params": build_params,
            "sha256": {name: sha256_file(tmp / name) for name in files},
        }
        meta["meta_sha256"] = hashlib.sha256(_canonical(meta)).hexdigest()
        (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=_json_default) + "\n")
        for name, write in (extra or {}).items():
            write(tmp / name)
    log.info("saved %s index (%d vectors) to %s", index.backend, len(index), directory)
    return directory


def _check_replaceable(directory: Path) -> None:
    """Refuse a target the save would destroy: the folder is replaced whole, so ``index.save(run_dir)`` (or
    ``twotower index build --out RUN``) deleted the run, and a file path was swapped for a folder."""
    if directory.is_dir() and (is_index_dir(directory) or is_damaged_index_dir(directory)
                               or all(idle_lock_file(c) for c in directory.iterdir())):
        return  # an earlier index (replaced, as saving again means; a damaged one too) or an empty folder
    if directory.exists() or directory.is_symlink():
        what = "a file" if not directory.is_dir() else "a non-empty folder that is not an index"
        raise ConfigError(f"{directory} is {what}; saving an index replaces the whole folder, so it would be lost: "
                          "choose a new or empty folder, or an earlier index (a run's index goes in RUN/index)")


def read_meta(directory: str | Path) -> dict[str, Any]:
    """Read and self-check ``meta.json`` of a saved index."""
    directory = Path(directory)
    path = directory / META
    if not path.is_file() and is_damaged_index_dir(directory):  # its other files are there: damaged, not absent
        raise IntegrityError(f"{path}: missing (the artefact is incomplete); rebuild with `twotower index build "
                             "--run DIR`")
    if not path.is_file():
        # a mistyped path is told apart from a folder of other files: both read "no meta.json there"
        where = "no meta.json there" if directory.is_dir() else (
            "it is a file, not a folder" if directory.exists() else "it does not exist")
        raise NotFoundError("index directory", str(directory), f"{where}; build one with `twotower index build --run DIR`")
    meta = read_json(path)
    other = _other_kind(meta)
    if other is not None:  # a sound file of another kind: "corrupted; rebuild it" sent the user to replace it
        raise ConfigError(f"{directory} is {other}, not a vector index (from `twotower index build`)")
    if not isinstance(meta, dict) or "meta_sha256" not in meta:
        raise IntegrityError(f"{path}: not an index meta.json (no meta_sha256); the file is corrupted")
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    if hashlib.sha256(_canonical(body)).hexdigest() != meta["meta_sha256"]:
        raise IntegrityError(f"{path}: checksum mismatch; meta.json was edited or corrupted; rebuild with "
                             "`twotower index build --run DIR`")
    return meta


def is_index_dir(directory: str | Path) -> bool:
    """True when ``directory`` holds a saved vector index (its meta.json names a backend and a digest).

    A search index keeps a meta.json too, so the file's presence alone does not say which artefact it is.
    """
    try:
        meta = json.loads((Path(directory) / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "meta_sha256" in meta and "backend" in meta


#: the other artefacts that keep a meta.json, by its ``kind``: what each is, said where a vector index was expected
_OTHER_KINDS = {
    "search_index": "a search index (from `twotower search index`)",
    "bm25": "a BM25 index (the text half of a search index, from `twotower search index`)",
}


def other_artefact(directory: str | Path) -> str | None:
    """What ``directory`` holds when its meta.json is another artefact's (a search index's), in words; else None."""
    try:
        return _other_kind(json.loads((Path(directory) / META).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _other_kind(meta: Any) -> str | None:
    if not isinstance(meta, dict) or "meta_sha256" in meta or not isinstance(meta.get("kind"), str):
        return None
    return _OTHER_KINDS.get(meta["kind"])


def is_damaged_index_dir(directory: str | Path) -> bool:
    """True when ``directory`` holds only files a saved index holds, but no readable index: its meta.json was
    removed or cut short (the other files' damage is caught by their checksums).

    Such a folder was read as "no index built" by `recommend` and `serve`, and `twotower index build`, the command
    every damaged-index error names, refused it as "a non-empty folder that is not a vector index".
    """
    d = Path(directory)
    if not d.is_dir() or is_index_dir(d):
        return False
    try:  # a meta.json that reads as a JSON object is another artefact's (a search index keeps one): not ours
        if isinstance(json.loads((d / META).read_text(encoding="utf-8")), dict):
            return False
    except (OSError, ValueError):
        pass
    stored = {f for cls in _backends().values() for f in cls.stored_files}
    entries = [c for c in d.iterdir() if not idle_lock_file(c)]
    return (any(c.name in stored for c in entries)
            and all(c.name in index_folder_files(d) and c.is_file() and not c.is_symlink() for c in entries))


def index_folder_files(directory: str | Path) -> frozenset[str]:
    """The names of the files an index folder may hold (any backend's, with meta.json, tune.json and the plot): any
    other file there is the user's, which `twotower index build` would remove with the folder."""
    return frozenset({f for cls in _backends().values() for f in cls.stored_files} | {META, TUNE, PLOT})


def read_tuning(directory: str | Path) -> dict[str, Any] | None:
    """The index's ``tune.json`` (measured recall, target, timings), checked against ``meta.json``; None if none.

    An edited or replaced file raises IntegrityError. A tune.json beside an index saved before it was
    checksummed is read as it is (nothing to check it against)."""
    directory = Path(directory)
    listed = read_meta(directory).get("sha256") or {}
    if TUNE in listed:
        verify_files(directory, {TUNE: listed[TUNE]}, fix="rebuild with `twotower index build --run DIR`")
    elif not (directory / TUNE).is_file():
        return None
    tune = read_json(directory / TUNE)
    if not isinstance(tune, dict):
        raise IntegrityError(f"{directory / TUNE}: not a tuning summary (expected a JSON object); rebuild the index")
    return tune


def load_index(directory: str | Path, expected_fingerprint: str | None = None, *, mmap: bool = False) -> "VectorIndex":
    """Load any saved index, verifying checksums and (optionally) the model fingerprint.

    ``mmap=True`` maps the stored vectors / FAISS codes read-only instead of
    reading them into private memory, so several server processes opening the
    same directory share one copy in the page cache (``twotower serve
    --workers N``). Such an index is for searching only: add/remove copy it.
    """
    directory = Path(directory)
    meta = read_meta(directory)
    fix = "rebuild with `twotower index build --run DIR`"
    backends = _backends()
    cls = backends.get(meta.get("backend"))
    if cls is None:
        raise IntegrityError(f"{directory}: unknown index backend {meta.get('backend')!r}; known: {sorted(backends)}")
    listed = meta.get("sha256")
    # a file the backend reads but the table leaves out would be read unchecked (FAISS parses index.faiss
    # natively): a meta.json without its entry, rewritten with a matching meta_sha256, switched the check off
    unlisted = [name for name in cls.stored_files if not isinstance(listed, dict) or name not in listed]
    if unlisted:
        raise IntegrityError(f"{directory / unlisted[0]}: not listed in the checksums of {directory / META}, so it "
                             f"cannot be verified before it is read; {fix}")
    verify_files(directory, listed, fix=fix)
    if expected_fingerprint is not None and meta.get("model_fingerprint") != expected_fingerprint:
        raise IntegrityError(
            f"{directory}: index was built for model {meta.get('model_fingerprint')}, run has {expected_fingerprint}; "
            f"{fix}"
        )
    index = cls._read(directory, meta, mmap=mmap)
    index.model_fingerprint = meta.get("model_fingerprint")
    if len(index) != meta["count"] or index.dim != meta["dim"]:
        raise IntegrityError(
            f"{directory}: holds {len(index)} vectors of dim {index.dim}, meta.json says "
            f"{meta['count']} of dim {meta['dim']}; rebuild the index"
        )
    return index
