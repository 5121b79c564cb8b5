"""A trained run on disk: everything needed to score, recommend and serve.

Layout of a run folder::

    config.json          resolved RunConfig
    run.json             shapes needed to rebuild the model, fingerprint, title column, item text encoder,
                         sha256 of each data file given (input_sha256, by data setting), the twotower and
                         torch versions that wrote it (twotower_version, torch_version; absent from older runs)
    model.safetensors    best weights
    vocab/users.json     external id <-> row
    vocab/items.json
    features/*.json      fitted feature encoders (re-encode a new user's features)
    items.jsonl          item metadata shown to people (titles, genres, ...)
    history.npz          each user's training sequence (for scoring and exclusions)
    data/*.csv           the exact train/valid/test interactions used (in the manifest: evaluate and resume read them)
    log.jsonl, curves.png, metrics.json, eval.txt
    manifest.json        sha256 of every file above that loading reads (written last)

``manifest.json`` is written when training has finished and removed when a
run folder is (re)written, so :meth:`TrainedRun.load` refuses a bit-flipped,
truncated or swapped artefact of a finished run, naming the file.

A new (not resumed) run trained into a folder holding an earlier one first
removes that run's artefacts (:func:`clear_previous_run`), by name, so nothing
of the old run is read as part of the new one.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import logging
import operator
import os
import shutil
import time
import zipfile
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from twotower.config import DATA_FILE_SETTINGS, RunConfig, config_from_dict, config_to_dict
from twotower.data.features import SHOWN_CHARS, FeatureEncoder, shown_value
from twotower.data.readers import CANONICAL_COLUMNS
from twotower.data.vocab import Vocabulary
from twotower.errors import ConfigError, DataError, IntegrityError, NotFoundError
from twotower.utils.arguments import check_flag
from twotower.models.feature_block import FeatureArrays
from twotower.models.history import UserSequences, pad_histories
from twotower.models.two_tower import TwoTowerModel
from twotower.pipeline.saved_config import check_run_settings, saved_config_dict
from twotower.pipeline.similar import history_as_read, untrained_history_refusal
from twotower.pipeline.run_files import (CHECKPOINT_DIR, DATA_COPIES, EXPORT_FILES, INDEX_DIR,  # noqa: F401 (re-exported)
                                         INDEX_EXTRA_FILES, MANIFEST, MANIFEST_FILES, NO_VERIFY_ENV, RUN_MARKERS,
                                         RUN_OUTPUT_FILES)
from twotower.training.checkpoint import load_weights
from twotower.utils.atomic import atomic_write_bytes, atomic_write_json, atomic_write_set, atomic_write_text, read_json, sha256_file, verify_files
from twotower.utils.csv_text import frame_to_csv_blocks
from twotower.utils.folder_lock import active_writer
from twotower.utils.run_folder import other_runs_index
from twotower.utils.run_folder import run_hint as _run_hint
from twotower.utils.runtime import preserved_rng
from twotower.utils.shell import shell_arg
from twotower.utils.whole_numbers import cell_text, whole_numbers
from twotower.utils.version import VERSION_KEY, installed_version

__all__ = ["TrainedRun", "check_loaded_run", "check_finite_user", "check_new_history", "refuse_empty_history", "save_run_data", "write_manifest", "verify_manifest",
           "input_digests", "verify_data_copies", "read_item_meta", "write_item_meta",
           "model_fingerprint", "features_shape",
           "build_model", "clear_previous_run", "previous_run_files"]

#: What an empty valid/test part of a split was saved as (data/valid.csv) before such a part became no part
#: (no file): runs saved then are read as having no such part, not refused as "no data rows" after training.
EMPTY_PART_HEADER = ",".join(CANONICAL_COLUMNS).encode("utf-8")


def run_part_file(run_dir: Path, name: str) -> Path | None:
    """A run's ``data/{name}.csv``, or None when the run has no such part (no file, or an empty part's header)."""
    path = run_dir / "data" / f"{name}.csv"
    if not path.is_file():
        return None
    if path.stat().st_size <= len(EMPTY_PART_HEADER) + 2 and path.read_bytes().strip() == EMPTY_PART_HEADER:
        return None
    return path


log = logging.getLogger(__name__)


def features_shape(f: FeatureArrays | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {
        "n": f.n,
        "categorical": list(f.categorical.shape),
        "categorical_sizes": list(f.categorical_sizes),
        "multi": [list(m.shape) for m in f.multi],
        "multi_sizes": list(f.multi_sizes),
        "numeric": list(f.numeric.shape),
    }


def _zeros_features(shape: dict[str, Any] | None) -> FeatureArrays | None:
    if shape is None:
        return None
    return FeatureArrays(
        categorical=np.zeros(shape["categorical"], np.int64),
        categorical_sizes=tuple(shape["categorical_sizes"]),
        multi=tuple(np.zeros(s, np.int64) for s in shape["multi"]),
        multi_sizes=tuple(shape["multi_sizes"]),
        numeric=np.zeros(shape["numeric"], np.float32),
    )


def build_model(config: RunConfig, info: dict[str, Any]) -> TwoTowerModel:
    """An untrained model with the shapes recorded in ``run.json``."""
    from twotower.models.size import check_model_fits

    text_shape = info.get("item_text")
    # a run.json edited to a size no machine holds is refused before torch tries to allocate it
    check_model_fits(config.model, int(info["n_users"]), int(info["n_items"]), copies=1,
                     text_dim=int(text_shape[1]) if text_shape else 0)
    text = np.zeros(text_shape, np.float32) if text_shape else None
    # the layers' initial values are drawn from torch's global generator, then replaced by the saved weights: a
    # load (TrainedRun.load, the service's) advanced the caller's seeded stream by a draw it never asked for
    with preserved_rng():
        model = TwoTowerModel(
            config.model,
            int(info["n_users"]),
            int(info["n_items"]),
            user_features=_zeros_features(info.get("user_features")),
            item_features=_zeros_features(info.get("item_features")),
            item_text=text,
            sparse=config.train.optimizer == "sparse_adam",
        )
        item_item = info.get("item_item")
        if isinstance(item_item, dict) and item_item.get("weight", 0) > 0:  # its values come with the weights
            model.attach_item_item(int(item_item["rank"]))
    # float32 as saved whatever torch's default (a host's float64 built float64 towers: another fingerprint than the
    # index's); cast, not built under a float32 default, which is one setting for the whole process: loads in
    # several threads put back each other's, and the host's other threads made float32 tensors meanwhile
    return model.float()


def model_fingerprint(model: TwoTowerModel, config: RunConfig, recorded_model: Any = None) -> str:
    """sha256 over the item tower's weights and the model config (what an index depends on).

    ``recorded_model`` is the ``model`` section of the run's ``config.json``: settings it lacks, added to the
    code since the run was saved (model.item_item, model.user.extra_pools), are left out of the hash. Hashed
    with today's defaults they changed the fingerprint of every run saved before them, so the index built for
    such a run was refused as "retrained since the index was built" though not one weight had changed. A run
    saved today records every setting, so its fingerprint is the same either way.
    """
    settings = config_to_dict(config.model)
    if isinstance(recorded_model, dict):
        settings = _recorded_settings(settings, recorded_model)
    h = hashlib.sha256()
    h.update(json.dumps(settings, sort_keys=True).encode())
    for name, t in sorted(model.item_tower.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:32]


def _recorded_settings(settings: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """``settings`` restricted to the keys ``recorded`` holds, section by section (values from ``settings``)."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key not in recorded:
            continue
        sub = recorded[key]
        out[key] = _recorded_settings(value, sub) if isinstance(value, dict) and isinstance(sub, dict) else value
    return out


def _warn_unfitted_empty_history(d: Path, run: "TrainedRun") -> None:
    """Say so when a sequence run saved before the empty-history state was fitted is loaded: a user with no
    history is ranked from that never-trained state (every score near 0: the catalogue in id order), silently."""
    from twotower.pipeline.empty_history import empty_history_skip_reason  # noqa: PLC0415 - the rule, once

    if "empty_history" not in run.info and empty_history_skip_reason(run.model, run.config) is None:
        log.warning("%s: saved by a version that did not fit the sequence tower's empty-history state, so a user with "
                    "no history is ranked from an untrained state; `twotower train ... --out %s --resume` (the "
                    "command that trained it) fits it", d, d)


def recorded_config(config: RunConfig) -> dict[str, Any]:
    """``config`` as a run's ``config.json`` records it: its data files as absolute paths.

    Recorded as given (``data/x.csv``), the file was the one of the folder training ran from: ``train --config
    R/config.json`` from another folder read another file of that name, or none. A DataFrame given in a file's
    place (``frames=``) is recorded by its name, as before.
    """
    out = config_to_dict(config)
    for name in DATA_FILE_SETTINGS:
        value = getattr(config.data, name)
        if isinstance(value, str) and not hasattr(value, "frame"):
            out["data"][name] = os.path.abspath(value)
    return out


def input_digests(config: RunConfig) -> dict[str, str]:
    """sha256 of each data file the run is given, by data setting (``train``, ``path``, ``items``, ...); frames
    passed in memory have no file and are left out. Taken before the files are read, so it is what was read."""
    out: dict[str, str] = {}
    for name in DATA_FILE_SETTINGS:
        value = getattr(config.data, name)
        if isinstance(value, str) and not hasattr(value, "frame") and Path(value).is_file():
            out[name] = sha256_file(value)
    return out


def save_run_data(out: Path, config: RunConfig, prep: Any, item_text_shape: tuple[int, int] | None, *,
                  item_text_encoder: str | None = None, write_config: bool = True, keep_data: bool = False,
                  input_sha256: dict[str, str] | None = None) -> None:
    """Write everything about a run except the weights (written by the trainer).

    ``item_text_encoder`` is the ``model_id`` of the text encoder of the item text embeddings (weights and
    forward-pass backend), recorded so a run says which vectors it was trained on. ``write_config=False`` keeps
    the folder's ``config.json`` (a resume that trains nothing changes nothing the run was trained with);
    ``keep_data=True`` keeps its ``data`` settings (a resume reading the run's own copies of its split: recorded
    as read, in their canonical layout, the files given later would be read with other column names than the run's).
    ``input_sha256`` (:func:`input_digests`) is recorded in ``run.json``; with ``keep_data`` the run's record is
    kept, as the files read now are its own copies, not the inputs it was trained from.
    """
    out.mkdir(parents=True, exist_ok=True)
    if keep_data:
        before = _read_json_dict(out / "run.json")
        input_sha256 = before.get("input_sha256") if before is not None else None
    (out / MANIFEST).unlink(missing_ok=True)  # the folder changes now; write_manifest seals it again
    if write_config:
        record = recorded_config(config)
        old = _read_json_dict(out / "config.json") if keep_data else None
        if old is not None and isinstance(old.get("data"), dict):
            record["data"] = old["data"]
        atomic_write_json(out / "config.json", record)
    prep.user_vocab.save(out / "vocab" / "users.json")
    prep.item_vocab.save(out / "vocab" / "items.json")
    if prep.item_encoder is not None:
        atomic_write_json(out / "features" / "items.json", prep.item_encoder.to_dict())
    if prep.user_encoder is not None:
        atomic_write_json(out / "features" / "users.json", prep.user_encoder.to_dict())
    if prep.item_meta is not None:
        write_item_meta(out / "items.jsonl", prep.item_meta)
    buf = io.BytesIO()
    np.savez(buf, **prep.train_seqs.to_npz_dict())
    atomic_write_bytes(out / "history.npz", buf.getvalue())
    for name, df in (("train", prep.sources.train), ("valid", prep.sources.valid), ("test", prep.sources.test)):
        if df is not None:
            # a block at a time: the whole text of a 16M-row train.csv took the run to 8.5 GB at its end
            atomic_write_set({out / "data" / f"{name}.csv": (t.encode("utf-8") for t in frame_to_csv_blocks(df))})
    info = {
        "format": 1,
        "n_users": prep.n_users,
        "n_items": prep.n_items,
        "user_features": features_shape(prep.user_features),
        "item_features": features_shape(prep.item_features),
        "item_text": list(item_text_shape) if item_text_shape else None,
        "item_text_encoder": item_text_encoder,
        "input_sha256": input_sha256,
        "title_col": prep.sources.title_col,
        "report": prep.report,
        # which code trained it: a run's numbers can move with either (torch's kernels change float sums); not
        # hashed into the fingerprint, so a run trained by another version serves its indexes as before
        VERSION_KEY: installed_version(),
        "torch_version": torch.__version__,
    }
    atomic_write_json(out / "run.json", info)


def write_manifest(out: str | Path) -> None:
    """Seal a finished run folder: ``manifest.json`` with the sha256 of every file loading reads.

    ``run.json`` is marked ``"sealed": true`` first (and so is covered by the
    manifest), so deleting ``manifest.json`` does not switch the checks off:
    loading a sealed run without it is refused (unless ``verify=False``).
    """
    out = Path(out)
    info = read_json(out / "run.json")
    if isinstance(info, dict) and not info.get("sealed"):
        atomic_write_json(out / "run.json", {**info, "sealed": True})
    files = {rel: sha256_file(out / rel) for rel in (*MANIFEST_FILES, *DATA_COPIES) if (out / rel).is_file()}
    atomic_write_json(out / MANIFEST, {"format": 1, "sha256": files})


def clear_previous_run(out: Path, *, keep: tuple[Path, ...] = ()) -> list[str]:
    """Remove the artefacts of an earlier run in ``out`` before a new run is written there; the paths removed.

    Only files a run, its evaluation, its index build or its ONNX export write are removed, by name
    (the folder may also hold the user's own files), and never a path in ``keep`` (the new run's input
    files). The manifest and the weights go first, so a crash part-way leaves no folder that loads as
    the old run. A folder holding no run is left alone.
    """
    derived = _derived_folders(out) if any((out / rel).is_file() for rel in RUN_MARKERS) else []
    removed = previous_run_files(out, keep=keep)
    for rel in removed:
        if rel == f"{CHECKPOINT_DIR}/":
            shutil.rmtree(out / CHECKPOINT_DIR)
        else:
            (out / rel).unlink()
    if removed:  # what a resume stopped before it sealed set aside (pipeline/resume_snapshot.py): the old run's too
        from twotower.pipeline.resume_snapshot import HELD_DIR
        from twotower.training.checkpoint import RESUME_BEST

        (out / RESUME_BEST).unlink(missing_ok=True)
        shutil.rmtree(out / HELD_DIR, ignore_errors=True)
    for folder in (out / "data", out / "vocab", out / "features", *(f for f, _ in derived if f != out)):
        with contextlib.suppress(OSError):  # left in place when it holds anything else
            folder.rmdir()
    return removed


def previous_run_files(out: Path, *, keep: tuple[Path, ...] = ()) -> list[str]:
    """The files of an earlier run in ``out`` that :func:`clear_previous_run` removes, relative to ``out``
    (``checkpoint/`` for that whole folder), manifest and weights first; [] when ``out`` holds no run."""
    if not any((out / rel).is_file() for rel in RUN_MARKERS):
        return []
    kept = {_resolved(p) for p in keep}
    derived = _derived_folders(out)  # read before the weights their fingerprints are checked against go
    owned = [rel for rel in dict.fromkeys((MANIFEST, "model.safetensors", *MANIFEST_FILES, *RUN_OUTPUT_FILES))
             if _removable(out / rel, kept)]
    if (out / CHECKPOINT_DIR / "state.json").is_file():
        owned.append(f"{CHECKPOINT_DIR}/")
    for folder, names in derived:
        owned += [(folder / n).relative_to(out).as_posix() for n in names if _removable(folder / n, kept)]
    return list(dict.fromkeys(owned))


#: What scores a run's weights (its evaluation): stale once a resume trains them further.
EVAL_OUTPUT_FILES = ("metrics.json", "eval.txt", "recall_at_k.png")


def derived_folders(out: Path) -> list[Path]:
    """The index and export folders built from the run's weights as they are now (matched by fingerprint or
    name); read before a resume restores its checkpoint, which rewrites ``model.safetensors``."""
    return [folder for folder, _ in _derived_folders(out)]


def _resolved(path: Path) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # a symlink loop: compared as written
        return Path(path)


def _removable(path: Path, kept: set[Path]) -> bool:
    return (path.is_file() or path.is_symlink()) and _resolved(path) not in kept


def _remove_file(path: Path, kept: set[Path]) -> bool:
    if not _removable(path, kept):
        return False
    path.unlink()
    return True


def write_item_meta(path: Path, meta: pd.DataFrame) -> None:
    """``items.jsonl``: one JSON object an item (atomic), read back by :func:`read_item_meta`."""
    atomic_write_text(path, meta.to_json(orient="records", lines=True, force_ascii=False))


def read_item_meta(path: Path) -> pd.DataFrame:
    """A run's ``items.jsonl`` as it was written: JSON strings stay strings, numbers stay numbers.

    ``pd.read_json`` infers each column's type from its values, so an ISBN or SKU column of digit strings
    came back as integers ("0012" as 12) and a column named ``date`` or ``modified`` as timestamps: the
    metadata the service, ``recommend`` and ``explain`` show would differ from the user's own file.
    """
    try:
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise IntegrityError(f"{path}: unreadable ({e}); the file is corrupted or truncated") from e
    if not all(isinstance(r, dict) for r in records):
        raise IntegrityError(f"{path}: a line is not a JSON object; the file is corrupted")
    meta = pd.DataFrame.from_records(records) if records else pd.DataFrame({"item_id": pd.Series(dtype=str)})
    if "item_id" in meta:
        meta["item_id"] = meta["item_id"].astype(str)
    return meta


def rebuild_command(run_dir: str | Path, folder: str | Path, *, export: bool = False, kind: str | None = None,
                    tune: dict[str, Any] | None = None) -> str:
    """The command that rebuilds ``folder`` (an index, or with ``export`` an ONNX export) for the run in ``run_dir``;
    ``--out`` only where the folder is not the run's default one. ``kind``: the ``--index`` to build instead of the
    type the folder was built as (said even when it is ``auto``), with the recorded tuning flags but no pinned
    setting (a pin applies to one type: ``--index auto`` refuses it). ``tune``: the folder's tuning record where it
    is not on disk yet (a build's own, before it is saved), else read from the folder's tune.json."""
    if export:
        return f"twotower export --run {shell_arg(run_dir)} --format onnx --out {shell_arg(folder)}"
    # --out only for a folder of the run's own choosing: another run's index folder is that run's to keep (building
    # into it was the advice, and replaced the other run's index), so this run's is built in its own default
    default = _resolved(Path(folder)) == _resolved(Path(run_dir) / "index")
    out = "" if default or other_runs_index(run_dir, folder) else f" --out {shell_arg(folder)}"
    # the index type its tune.json says was asked for: without it the command built `auto`, maybe another type
    if tune is None:
        tune = _read_json_dict(Path(folder) / "tune.json") or {}
    if kind is not None:
        return (f"twotower index build --run {shell_arg(run_dir)} --index {shell_arg(kind)}"
                f"{_tuning_flags(tune, pins=False, budget=kind.strip().lower() == 'auto')}{out}")
    asked = tune.get("requested")
    if not (isinstance(asked, str) and asked.strip()):  # no record of the request: the type meta.json says was built
        asked = _built_kind(Path(folder))
    index = f" --index {shell_arg(asked)}" if isinstance(asked, str) and asked and asked.lower() != "auto" else ""
    # no --index builds `auto`, which chooses exact search by its --exact-budget-ms: without the recorded one it
    # chose on the default budget, maybe another type than the index rebuilt
    return f"twotower index build --run {shell_arg(run_dir)}{index}{_tuning_flags(tune, budget=not index)}{out}"


def _built_kind(folder: Path) -> str | None:
    """The ``--index`` that builds the type of index in ``folder``, read from its meta.json: ``exact``, or the
    FAISS type as it was given (``hnsw``, ``IVF16,PQ8x4``). For a folder without a tune.json (an index saved from
    Python, or one whose tune.json is gone), whose rebuild command otherwise built `auto`: maybe another type."""
    meta = _read_json_dict(folder / "meta.json") or {}
    if meta.get("backend") == "exact":
        return "exact"
    config = meta.get("config")
    for given in ((config or {}).get("factory") if isinstance(config, dict) else None, meta.get("factory")):
        if meta.get("backend") == "faiss" and isinstance(given, str) and given.strip():
            return given.strip()
    return None


def _tuning_flags(tune: dict[str, Any], *, pins: bool = True, budget: bool = False) -> str:
    """The build flags ``tune.json`` records, where they differ from the defaults: the rebuild a refusal prints ran
    with recall@10 0.95 on 1,000 queries, seed 0, whatever the index had been tuned for (--target-recall 0.99 --k 20
    --queries 300 --seed 3, a pinned --nprobe). ``pins=False`` leaves a pinned setting out; ``budget``: with
    ``--exact-budget-ms`` where an ``auto`` build recorded another than the default."""
    from twotower.index.autotune import IndexPolicy

    flags = []
    value = tune.get("exact_budget_ms")
    if budget and isinstance(value, (int, float)) and not isinstance(value, bool) and value != IndexPolicy.exact_p99_ms:
        flags.append(f" --exact-budget-ms {_flag_number(value)}")
    for key, flag, default in (("target_recall", "--target-recall", IndexPolicy.target_recall),
                               ("k", "--k", IndexPolicy.k), ("tune_queries", "--queries", IndexPolicy.tune_queries),
                               ("seed", "--seed", IndexPolicy.seed)):
        value = tune.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value != default:
            flags.append(f" {flag} {_flag_number(value)}")
    params = tune.get("params") if pins and tune.get("pinned") is True else None
    for key, flag in (("nprobe", "--nprobe"), ("efSearch", "--ef-search")):
        if isinstance(params, dict) and isinstance(params.get(key), int):
            flags.append(f" {flag} {params[key]}")
    return "".join(flags)


def _flag_number(value: int | float) -> str:
    """A recorded number as its flag takes it back: ``:g`` wrote --seed 20240101 as ``2.02401e+07``, which
    `index build` refuses as no integer, and --target-recall 0.9999999 as ``1``, another target."""
    if isinstance(value, int):
        return str(value)
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _read_json_dict(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing or not one (then it is not ours to act on)."""
    if not path.is_file():
        return None
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def _derived_folders(out: Path) -> list[tuple[Path, tuple[str, ...]]]:
    """Index and ONNX export folders in ``out`` (or ``out`` itself) made from its run: (folder, their files).

    An index in ``out/index`` is the run's by convention (serve and recommend read it as such); any other is
    the run's when its model fingerprint is the run's, and an export also when its export.json names ``out``.
    """
    # a linked folder is someone else's (a shared index, say): nothing is removed through a link
    candidates = [out, *sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink() and p.name != CHECKPOINT_DIR)]
    metas = {f: (_read_json_dict(f / "meta.json"), _read_json_dict(f / "export.json")) for f in candidates}
    fingerprint = _old_fingerprint(out) if any(m or e for m, e in metas.values()) else None
    found: list[tuple[Path, tuple[str, ...]]] = []
    for folder, (meta, export) in metas.items():
        if meta is not None and "meta_sha256" in meta and (
                folder == out / INDEX_DIR or _same_model(meta, fingerprint)):
            listed = meta.get("sha256") if isinstance(meta.get("sha256"), dict) else {}
            # plain names only: a listed path may not reach outside the index folder
            found.append((folder, (*(n for n in listed if Path(n).name == n), *INDEX_EXTRA_FILES)))
        if export is not None and (_same_model(export, fingerprint) or _names_run(export, out)):
            found.append((folder, EXPORT_FILES))
    return found


def _same_model(record: dict[str, Any], fingerprint: str | None) -> bool:
    return fingerprint is not None and record.get("model_fingerprint") == fingerprint


def saved_run_config(path: Path) -> RunConfig:
    """The RunConfig of the run whose ``config.json`` is ``path`` (:func:`saved_config_dict`)."""
    return read_saved_config(path)[0]


def read_saved_config(path: Path) -> tuple[RunConfig, Any]:
    """``(RunConfig, the file's JSON as saved)`` of a run's ``config.json``: the settings the run loads with,
    and the record of which it saved (what its model fingerprint hashes: :func:`model_fingerprint`)."""
    recorded = read_json(path)
    check_run_settings(recorded, str(path))
    return config_from_dict(RunConfig, saved_config_dict(recorded)), recorded


def _names_run(record: dict[str, Any], out: Path) -> bool:
    run = record.get("run")
    return isinstance(run, str) and _resolved(Path(run)) == _resolved(out)


def _old_fingerprint(out: Path) -> str | None:
    """The model fingerprint of the run in ``out``, None when it cannot be loaded (unfinished or damaged)."""
    try:
        config, recorded = read_saved_config(out / "config.json")
        model = build_model(config, read_json(out / "run.json"))
        load_weights(out / "model.safetensors", model)
        return model_fingerprint(model, config, recorded.get("model"))
    except Exception:  # noqa: BLE001 - any failure only means its derived folders are matched by name
        return None


def _no_weights_hint(d: Path) -> str:
    """Why a run folder has no best weights, and what to run: its training stopped before writing them.

    A kill while the first best weights were written leaves the checkpoint of that epoch: "the run did not finish
    an epoch" sent the user to train again from scratch, and said nothing of --resume, which writes them.
    """
    state = _read_json_dict(d / CHECKPOINT_DIR / "state.json")
    epoch = state.get("epoch") if state is not None else None
    if isinstance(epoch, int) and epoch > 0:
        return (f"its training stopped after the checkpoint of epoch {epoch}, before the best weights were written; "
                f"continue it with `twotower train --resume --out {shell_arg(d)}` and the same data and settings")
    return "the run did not finish an epoch; train it again (`twotower train --out DIR`)"


#: The commands whose writer lock on a run folder leaves the files loading reads alone (they add an index, an
#: export or the baselines' tuning cache): a reader is not warned about them. tt.build_index is the Python call of
#: `twotower index build` (pipeline/index_build.py).
DERIVED_WRITERS = ("twotower index build", "tt.build_index", "twotower export", "twotower evaluate")
#: Loads of a run tried while its files change under them (a writer replacing them), and the pause between.
_LOAD_TRIES = 3
_LOAD_RETRY_S = 0.5


def _file_states(d: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """(inode, mtime, size) of each file loading reads, None where absent: a file replaced (atomic writes rename
    a new inode in) or rewritten between two calls changes it."""
    states: list[tuple[int, int, int] | None] = []
    for rel in (MANIFEST, *MANIFEST_FILES):
        try:
            st = (d / rel).stat()
        except OSError:
            states.append(None)
        else:
            states.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(states)


def verify_manifest(directory: str | Path) -> bool:
    """Check every file listed in ``manifest.json``; False when the folder has none (unsealed)."""
    d = Path(directory)
    if not (d / MANIFEST).is_file():
        return False
    manifest = read_json(d / MANIFEST)
    files = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise IntegrityError(f"{d / MANIFEST}: not a run manifest (no sha256 table); the file is corrupted")
    # the data copies may be left behind when a model is deployed (serving reads none of them): only those present
    # are checked; evaluate and resume, which read them, find a missing one themselves
    files = {rel: digest for rel, digest in files.items() if rel not in DATA_COPIES or (d / rel).is_file()}
    verify_files(d, files, fix=f"listed in {MANIFEST}; restore the file or retrain the run")
    # the seal lists every file loading reads that the run wrote (write_manifest); an optional one that
    # appeared later (items.jsonl in a run trained without an item table) would be read unchecked
    for rel in MANIFEST_FILES:
        if rel not in files and (d / rel).exists():
            raise IntegrityError(f"{d / rel}: not listed in {MANIFEST}, so the run did not write it (it was added "
                                 "after training) and loading would read it unchecked; remove it or retrain the run")
    return True


def manifest_differences(directory: str | Path) -> list[str] | None:
    """The files of ``directory`` that differ from its manifest (missing, other sha256, or read by loading but not
    listed), by relative path; None when there is no readable manifest to compare with."""
    d = Path(directory)
    manifest = read_json(d / MANIFEST) if (d / MANIFEST).is_file() else None
    files = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        return None
    differ = [rel for rel, digest in sorted(files.items())
              if not (d / rel).is_file() and rel not in DATA_COPIES
              or (d / rel).is_file() and sha256_file(d / rel) != digest]
    return differ + [rel for rel in MANIFEST_FILES if rel not in files and (d / rel).exists()]


def _warn_unverified_differences(d: Path) -> None:
    """With --no-verify the run loads as it is, but an edited file (items.jsonl: titles shown beside the
    embeddings of the old ones) was loaded without a word: name each file that differs from the manifest."""
    try:
        differ = manifest_differences(d)
    except (OSError, ValueError, IntegrityError):  # an unreadable manifest: --no-verify is for such runs
        differ = None
    if differ:
        one = len(differ) == 1
        log.warning("%s: %s differ%s from %s (edited, replaced or damaged since training); loaded as %s "
                    "(--no-verify): what %s or score%s may not be what the model was trained with", d,
                    ", ".join(differ), "s" if one else "", MANIFEST, "it is" if one else "they are",
                    "it shows" if one else "they show", "s" if one else "")


def verify_data_copies(directory: str | Path) -> None:
    """Check the run's ``data/*.csv`` against its manifest before a resume reads them; nothing to check when the
    run has no manifest (training unfinished) or one written before the copies were listed."""
    d = Path(directory)
    manifest = read_json(d / MANIFEST) if (d / MANIFEST).is_file() else None
    files = manifest.get("sha256") if isinstance(manifest, dict) else None
    if isinstance(files, dict):
        verify_files(d, {rel: files[rel] for rel in DATA_COPIES if rel in files},
                     fix=f"listed in {MANIFEST}; restore the file or retrain the run")


def vocab_rows(values: Any, n: int, kind: str) -> np.ndarray:
    """``values`` as ``[N]`` int64 rows of a vocabulary of ``n``; NotFoundError naming the first that is not one.

    Rows, not external ids: without this check, ids such as ``["50", "181"]`` are cast to the rows 50 and 181
    (other items), and a negative or too large row reads a neighbour's slot: a plausible vector for the wrong
    entity instead of an error.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"expected a 1-D sequence of {kind} rows, got an array of {arr.ndim} dimension(s): {values!r}")
    if arr.size and arr.dtype.kind not in "iu":
        raise NotFoundError(f"{kind} row", arr[0].item(), f"rows are integers 0..{n - 1}; map external ids with "
                            f"the run's vocabulary (run.{kind}_vocab.encode(ids))")
    rows = arr.astype(np.int64, copy=False)
    bad = (rows < 0) | (rows >= n)
    if bad.any():
        first = int(rows[bad][0])
        if first == -1:
            # the hint below sends callers to encode(), which returns -1 for an id it does not know: "unknown user
            # row -1 ... map external ids with run.user_vocab.encode(ids)" after doing just that read as a bug
            raise NotFoundError(f"{kind} row", first, f"rows run 0..{n - 1}; -1 is what run.{kind}_vocab.encode(ids) "
                                f"gives an id that is not among the run's {kind}s: check the ids with "
                                f"`id in run.{kind}_vocab`")
        raise NotFoundError(f"{kind} row", first, f"rows run 0..{n - 1}; map external ids with the "
                            f"run's vocabulary (run.{kind}_vocab.encode(ids))")
    return rows


def check_loaded_run(run: Any, where: str) -> None:
    """ConfigError naming ``where`` when ``run`` is not a loaded run (:class:`TrainedRun`, or an object read as one).

    A run folder's path, or ``tt.train_run``'s whole ``(run, result, data)`` tuple, failed deep inside with
    "AttributeError: 'str' object has no attribute 'fingerprint'" (or 'config', 'model')."""
    if isinstance(run, TrainedRun) or (hasattr(run, "model") and hasattr(run, "item_vocab")):
        return
    rank = os.environ.get("RANK", "0")
    if run is None and rank not in ("", "0"):
        # README's example (tt.evaluate_run(run) after tt.train_run) failed there as "got a NoneType"
        raise ConfigError(f"{where}: run is None: under torchrun tt.train_run returns the run on rank 0 alone "
                          f"(rank {rank} gets None, as it writes no run folder); use it there: `if run is not None: ...`")
    if isinstance(run, (str, os.PathLike)):
        hint = f"load the folder first: run = tt.TrainedRun.load({str(run)!r})"
    elif isinstance(run, tuple):
        hint = "tt.train_run returns (run, result, data): unpack it, run, result, data = tt.train_run(cfg, out)"
    else:
        hint = "load one with tt.TrainedRun.load(DIR)"
    raise ConfigError(f"{where}: run must be a loaded run (tt.TrainedRun), got a {type(run).__name__}; {hint}")


_F32_MAX = float(np.finfo(np.float32).max)


def _has_value(value: Any) -> bool:
    """Whether one ``user_features`` value says something: null, blank text (``"gender": ""``, an empty form field)
    and a list of none of those (``"segments": []``) encode as missing, as an empty cell of the user table does."""
    if isinstance(value, (list, tuple)):
        return any(_has_value(v) for v in value)
    return value is not None and not (isinstance(value, str) and not value.strip())

def check_finite_user(values: Any) -> None:
    """Refuse (DataError naming ``user_features``) a new user whose features drive the user tower to inf/NaN.

    ``values``: that user's tower output, or scores computed from it. Finite values far outside the training
    range (an age of 1e30) pass the float32-range check above yet overflow inside the tower: the index then
    refused the query with "queries contain NaN or inf; check the encoder output", which names no field, and
    an explanation printed (or answered) ``"score": NaN``. One check for the service, the CLI and Python."""
    if not np.isfinite(np.asarray(values, dtype=np.float64)).all():
        raise DataError("user_features: the user tower's output is not finite for these values (a number far "
                        "outside the range seen in training, such as an age of 1e30); send values in that range")


def check_new_history(history: Any, name: str = "history", *, run: TrainedRun | None = None,
                      user_features: Any = None, features_field: str = "user_features") -> list[Any]:
    """A new user's ``history`` (item ids, oldest first) as a list, refused (ConfigError) when it is a string or
    empty: the rule of `recommend --history` / `explain --history` and POST /recommend / /explain (a 422 there),
    held by every Python entry point too (``tt.recommend``, ``tt.explain_by_id``, :class:`RecRequest`,
    ``RecommenderService.explain``). ``tt.explain_by_id(history=[])`` explained the item from the empty-history
    state, a popularity prior, where the three others refused the same request.

    One exception, with the ``run``: a user with no history yet who sent ``user_features`` (a sign-up form) on a
    run whose user tower reads them (:meth:`TrainedRun.describes_new_user`) is served from those features alone;
    then the empty list is returned. Without them the refusal says so on such a run.

    A history whose every item had no training interactions reads as empty (the user tower leaves such items out,
    :func:`~twotower.pipeline.similar.history_as_read`), so it is refused or served alike, the refusal saying why;
    served, it is returned as given (its items are still left out of the list as seen)."""
    from twotower.utils.arguments import check_history

    history = check_history(history, name)  # a string ("181" read as "1", "8", "1"), a set (no order), one id
    untrained = _untrained_only(run, history) if history and run is not None else None
    if not history or untrained:
        if run is not None and run.describes_new_user(user_features):
            return history
        unknown = [] if run is None else run.unknown_user_feature_columns(user_features)
        if unknown:  # {"nope": 3}: the column is what is wrong, as with a history (not "served from features alone")
            raise _not_a_user_feature(unknown[0], run.user_feature_columns)
        from twotower.pipeline.refusals import empty_history_refusal  # the words of HTTP's 422 and the CLI

        columns = run.user_feature_columns if run is not None else ()
        raise ConfigError(f"{name}: {empty_history_refusal(columns, features_field, untrained=untrained)}")
    return history


def _untrained_only(run: TrainedRun, history: list[Any]) -> str | None:
    """Why ``history`` (item ids) reads as empty, every item having no training interactions, else None. None too
    while an id is unknown: its lookup after this names it, as it names one beside an empty history's features."""
    rows = []
    for item_id in history:
        try:
            rows.append(run.item_vocab.index(item_id))
        except NotFoundError:
            return None
    return untrained_history_refusal(run, rows)


def refuse_empty_history(history: Any, name: str = "history", *, run: TrainedRun, user_features: Any = None,
                         features_field: str = "user_features") -> None:
    """The refusal of an empty new-user ``history`` given where POST /recommend gives it: after the request's shape
    and size checks, before any lookup in the run (filters, exclusions, the features' values, the history's ids;
    ``routes.refuse_empty_histories``). Unless ``user_features`` alone describe a user with no history yet (then it
    is served from them); one naming a column the run does not read is left to the features' check, which names the
    column, after the filters and exclusions are looked up, as HTTP's service does. Anything but an empty sequence
    is left to :func:`check_new_history`."""
    if (history is None or isinstance(history, (str, bytes)) or not hasattr(history, "__len__") or len(history)
            or run.unknown_user_feature_columns(user_features)):
        return
    check_new_history(history, name, run=run, user_features=user_features, features_field=features_field)


def _not_a_user_feature(col: str, columns: Sequence[str]) -> DataError:
    return DataError(f"user_features.{col}: not a user feature of this run; its user tower reads {', '.join(columns)}")


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _string_for_number(col: str, value: str) -> str:
    """The refusal of a string for a numeric column, with the number to write where the string spells one: "a
    finite number, got '25'" read as if 25 were none. The body is typed, so a string stays refused."""
    text = value.strip()
    try:  # NaN and Infinity are no JSON numbers, though Python's json reads them
        spelled = json.loads(text, parse_constant=_no_constant) if len(text) <= SHOWN_CHARS else None
    except ValueError:
        spelled = None
    write = (f" (write {{{json.dumps(col)}: {text}}})"
             if isinstance(spelled, (int, float)) and not isinstance(spelled, bool) else "")
    return f"user_features.{col}: expected a JSON number, got the string {shown_value(value)}{write}"


def _missing_value(value: Any) -> bool:
    """None, or a missing value of pandas (pd.NA, NaT, NaN): what a row of a user DataFrame (dict(users.loc[7]))
    holds for a cell the user table's reader reads as missing; refused as "a finite number, got nan"."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def _feature_value(col: str, value: Any, *, numeric: bool, multi: bool, separator: str) -> Any:
    """One raw user-feature value checked for its column kind (None: missing)."""
    if _missing_value(value):
        return None
    # numpy scalars as plain Python values: a row of a user DataFrame (dict(users.loc[0])) holds np.int64 ages
    # and category codes, refused as "a finite number, got np.int64(25)"; true/false (JSON's, Python's, numpy's) is
    # read as 1/0 for a numeric column, as the table reader reads a column of them
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        value = value.item()
    elif multi and isinstance(value, (list, tuple)):
        value = [v.item() if isinstance(v, (np.integer, np.floating)) else v for v in value]
    if numeric:
        if isinstance(value, bool):  # 1 and 0, as the user table's reader reads a column of true/false
            return float(value)
        if isinstance(value, str):
            raise DataError(_string_for_number(col, value))
        if not isinstance(value, (int, float)):
            raise DataError(f"user_features.{col}: a finite number, got {shown_value(value)}")
        # float() first: np.isfinite raised TypeError (an HTTP 500) on an int beyond uint64 such as 10**20,
        # and float() itself raises OverflowError past 1e308. The bound is the table reader's (float32 range):
        # the tower reads float32, where 1e39 is inf.
        try:
            x = float(value)
        except OverflowError:
            x = float("inf")
        if not (np.isfinite(x) and abs(x) <= _F32_MAX):
            shown = value if isinstance(value, float) else f"an integer of {len(str(abs(value)))} digits"
            raise DataError(f"user_features.{col}: a finite number (float32 range), got {shown}")
        return x
    if multi:
        if isinstance(value, str):
            return value
        if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
            return separator.join(str(v) for v in value)
        raise DataError(f"user_features.{col}: a list of values or one {separator!r}-separated string, got {shown_value(value)}")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DataError(f"user_features.{col}: one value (a string or a number), got {shown_value(value)}")
    return value


class TrainedRun:
    """A loaded run: model, vocabularies, histories and metadata, ready to score."""

    def __init__(
        self,
        directory: Path,
        config: RunConfig,
        info: dict[str, Any],
        model: TwoTowerModel,
        user_vocab: Vocabulary,
        item_vocab: Vocabulary,
        history: UserSequences,
        item_meta: pd.DataFrame | None,
        user_encoder: FeatureEncoder | None,
        item_encoder: FeatureEncoder | None,
    ) -> None:
        self.dir = directory
        self.config = config
        self.info = info
        self.model = model.eval()
        self.user_vocab = user_vocab
        self.item_vocab = item_vocab
        self.history = history
        self.item_meta = item_meta
        self.user_encoder = user_encoder
        self.item_encoder = item_encoder
        self.title_col: str | None = info.get("title_col")
        self._item_emb: np.ndarray | None = None
        self._fingerprint: str | None = None
        self._weights_seen: tuple[Any, ...] | None = None  # weights_state() the two caches above were computed at
        self._cleared = 0  # clear_caches() calls: part of weights_state(), so every cache keyed on it starts over
        # config.json's model section as saved: the settings the run's fingerprint hashes (model_fingerprint)
        self.recorded_model: dict[str, Any] | None = None
        # item_meta as JSON-safe values, column by column; dropped when another table is assigned (item_meta's setter)
        self._meta_columns: dict[str, list[Any]] | None = None

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, directory: str | Path, *, verify: bool | None = None) -> "TrainedRun":
        """Load a run folder, verifying every file against ``manifest.json``.

        A sealed run (``run.json`` says so) without its manifest is refused.
        ``verify=False`` skips the checks with a loud warning; the default
        (None) reads ``TWOTOWER_NO_VERIFY=1``, which the CLI's ``--no-verify`` sets.
        """
        if not isinstance(directory, (str, os.PathLike)) or not str(directory).strip():
            raise ConfigError(f"TrainedRun.load: expected a run folder's path (a str or pathlib.Path), got "
                              f"{directory!r:.60}")
        d = Path(directory)
        verify = check_flag(verify, "verify", optional=True)  # verify="no" verified; verify=0 skipped with a warning
        if verify is None:
            verify = os.environ.get(NO_VERIFY_ENV, "") != "1"
        writer = active_writer(d)
        # `index build`, `export` and evaluate's tuning cache write beside the files loading reads, never over them
        rewriting = writer is not None and not writer.startswith(DERIVED_WRITERS)
        if rewriting:
            log.warning("%s: %s is writing this run folder now; loading the run as it stands (the weights of its "
                        "best epoch so far%s), which that command replaces when it ends: load it again then for "
                        "the finished run", d, writer, "" if (d / MANIFEST).is_file() else ", checksums not verified")
        # the files are read one by one while a writer (a train, or an older version's command that takes no lock)
        # may replace them: a load is kept only when none changed under it, so it is never a mix of two writes
        for _ in range(_LOAD_TRIES):
            before = _file_states(d)
            try:
                run = cls._load_files(d, verify, quiet=rewriting)
            except (IntegrityError, NotFoundError, DataError, ConfigError, OSError, ValueError):
                if _file_states(d) == before:
                    raise
            else:
                if _file_states(d) == before:
                    return run
            time.sleep(_LOAD_RETRY_S)
        writer = writer or active_writer(d)
        raise IntegrityError(f"{d}: its files kept changing while they were read ({_LOAD_TRIES} tries)"
                             + (f"; {writer} is writing it" if writer else "")
                             + ": wait for the command writing it to finish, then load it again")

    @classmethod
    def _load_files(cls, d: Path, verify: bool, *, quiet: bool = False) -> "TrainedRun":
        """One read of the run's files (:meth:`load` checks that none changed meanwhile)."""
        if not (d / "run.json").exists():
            raise NotFoundError("run", str(d), "no run.json there; " + _run_hint(d))
        if not (d / "model.safetensors").exists():
            raise IntegrityError(f"{d}: model.safetensors missing; {_no_weights_hint(d)}")
        if not verify:
            log.warning("!!! LOADING %s WITHOUT INTEGRITY CHECKS (--no-verify): corrupted or swapped files will "
                        "not be detected and may serve wrong results !!!", d)
            _warn_unverified_differences(d)
        elif not verify_manifest(d):
            from twotower.pipeline.resume_snapshot import HELD_DIR

            if (d / HELD_DIR).is_dir():  # a resume killed outright: its files set aside are the finished run
                # checked first: that resume had rewritten run.json (no longer sealed), and the reader went on to
                # "weights do not match this model", which read like a wrong model
                raise IntegrityError(
                    f"{d}: a `twotower train --resume` was killed while it continued this run, and the finished "
                    f"run's files are set aside in {d / HELD_DIR}; `twotower train --resume --out {shell_arg(d)}` "
                    "puts them back and continues the run")
            sealed = read_json(d / "run.json")
            if isinstance(sealed, dict) and sealed.get("sealed"):
                # write_manifest seals run.json, then writes the manifest: a train killed between the two left
                # this state, which "restore it (or retrain)" sent to a retraining from scratch
                resume = (f"if its training was stopped while sealing it, `twotower train --resume --out {shell_arg(d)}` with "
                          "the same data and settings seals it again; otherwise "
                          if (d / CHECKPOINT_DIR / "state.json").is_file() else "")
                raise IntegrityError(
                    f"{d}: {MANIFEST} is missing from a sealed run, so its files cannot be verified; {resume}restore "
                    "it (or retrain), or pass --no-verify to load it unchecked at your own risk"
                )
            if not quiet:  # load() said why (a train is writing it)
                log.warning("%s has no %s (training unfinished or an older version): checksums not verified", d,
                            MANIFEST)
        info = read_json(d / "run.json")
        config, recorded = read_saved_config(d / "config.json")
        model = build_model(config, info)
        load_weights(d / "model.safetensors", model)
        user_vocab = Vocabulary.load(d / "vocab" / "users.json")
        item_vocab = Vocabulary.load(d / "vocab" / "items.json")
        if len(user_vocab) != info["n_users"] or len(item_vocab) != info["n_items"]:
            raise IntegrityError(f"{d}: vocabularies do not match run.json (users/items count)")
        try:
            with np.load(d / "history.npz", allow_pickle=False) as z:
                history = UserSequences(z["indptr"], z["items"], z["timestamps"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            raise IntegrityError(f"{d / 'history.npz'}: unreadable ({e}); the file is corrupted or truncated") from e
        meta = read_item_meta(d / "items.jsonl") if (d / "items.jsonl").exists() else None
        ue = FeatureEncoder.from_dict(read_json(d / "features" / "users.json")) if (d / "features" / "users.json").exists() else None
        ie = FeatureEncoder.from_dict(read_json(d / "features" / "items.json")) if (d / "features" / "items.json").exists() else None
        run = cls(d, config, info, model, user_vocab, item_vocab, history, meta, ue, ie)
        run.recorded_model = recorded.get("model") if isinstance(recorded, dict) else None
        _warn_unfitted_empty_history(d, run)
        return run

    # ------------------------------------------------------------------ facts
    @property
    def n_items(self) -> int:
        """Items in the catalogue (rows of ``item_vocab`` and of :meth:`item_embeddings`)."""
        return len(self.item_vocab)

    def weights_state(self) -> tuple[Any, ...]:
        """A token that changes when the model's weights do: each parameter's and buffer's identity, storage and
        in-place version counter, so ``with torch.no_grad(): p.mul_(2)``, an optimizer step, ``load_state_dict``
        and a module or parameter swapped in all change it (microseconds; no weight is read).

        The vectors this run caches (:meth:`item_embeddings`, :meth:`fingerprint`, and the known users' and cold
        items' query vectors of ``tt.recommend`` / ``tt.similar``) are dropped when it changes: after a weight edit
        in memory they scored the weights as loaded. An edit through ``p.data`` bypasses the version counter;
        call :meth:`clear_caches` after one."""
        model = self.model
        return (self._cleared, id(model), *((id(t), t.data_ptr(), t._version)
                             for t in itertools.chain(model.parameters(), model.buffers())))

    def clear_caches(self) -> None:
        """Forget every vector computed from the weights (item and user vectors, the fingerprint): the next call
        computes them afresh. Needed only after an edit :meth:`weights_state` cannot see (``p.data.copy_(...)``)."""
        self._item_emb = self._fingerprint = self._weights_seen = None
        self._cleared += 1

    def _check_weights(self) -> tuple[Any, ...]:
        """The current :meth:`weights_state`, after dropping this run's cached vectors when it changed."""
        state = self.weights_state()
        if state != self._weights_seen:
            self._item_emb = self._fingerprint = None
            self._weights_seen = state
        return state

    def fingerprint(self) -> str:
        """The model's fingerprint (weights and settings): what a saved index or export records and is checked
        against (``tt.load_index(dir, run.fingerprint())``); recomputed after the weights change in memory."""
        self._check_weights()
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.model, self.config, self.recorded_model)
        return self._fingerprint

    def item_embeddings(self) -> np.ndarray:
        """[I, D] float32 vectors of the whole catalogue (cached, read-only: ``.copy()`` to change them): unit
        vectors, or with the item-item term ``[v(i); Q[i]]``, ``D = out_dim + rank`` (models/item_item.py).
        Computed again after the weights change in memory (:meth:`weights_state`)."""
        self._check_weights()
        if self._item_emb is None:
            emb = self.model.all_item_embeddings().numpy().astype(np.float32)
            # the cache is what scores_for_users, recommend and the service rank with: `items -= items.mean(0)` on
            # the returned array silently changed every later score of the run
            emb.flags.writeable = False
            self._item_emb = emb
        return self._item_emb

    def item_vectors(self, item_rows: np.ndarray) -> np.ndarray:
        """``[B, D]`` float32 vectors of item rows, as :meth:`item_embeddings` holds them: read from it once it is
        computed, else computed for these rows alone (a saved index's content check reads a few dozen when it is
        opened, where the whole catalogue of 1M items takes seconds)."""
        rows = vocab_rows(item_rows, self.n_items, "item")
        self._check_weights()
        if self._item_emb is not None:
            return self._item_emb[rows]
        return self.model.item_embeddings_of(torch.from_numpy(rows)).numpy().astype(np.float32)

    def _item_row(self, row: int) -> int:
        """``row`` as an item row of this run; NotFoundError for anything else.

        A scalar counterpart of :func:`vocab_rows`, cheap enough for a loop over the catalogue: ``title(-1)``
        used to name the last item and ``title(n)`` to fail with a bare IndexError from pandas.
        """
        try:
            r = operator.index(row)
        except TypeError:
            raise NotFoundError("item row", row, f"rows are integers 0..{self.n_items - 1}; map an external id "
                                "with the run's vocabulary (run.item_vocab.index(id))") from None
        if not 0 <= r < self.n_items:
            raise NotFoundError("item row", r, f"rows run 0..{self.n_items - 1}; map an external id with the "
                                "run's vocabulary (run.item_vocab.index(id))")
        return r

    @property
    def item_meta(self) -> pd.DataFrame | None:
        """The item table (``items.jsonl``), or None. Assigning another table drops the JSON-safe columns read from
        the old one (:meth:`item_meta_columns`): they outlived it, so after ``run.item_meta = edited`` records and
        explanations still named the old titles (a table edited in place is not seen; assign the edited copy)."""
        return self._item_meta

    @item_meta.setter
    def item_meta(self, meta: pd.DataFrame | None) -> None:
        self._item_meta = meta
        self._meta_columns = None

    def item_meta_columns(self) -> dict[str, list[Any]]:
        """The item table as JSON-safe values (NaN -> None), ``{column: [value per item row]}``, read once.

        Column lists, not a dict per item: a million items' records took 1.2 s and far more memory to build,
        on the first explanation a service answered."""
        if self._meta_columns is None:
            meta = self.item_meta
            self._meta_columns = {} if meta is None else {
                str(c): whole_numbers(meta[c], json.loads(meta[c].to_json(orient="values", force_ascii=False)))
                for c in meta.columns}
        return self._meta_columns

    def item_record(self, row: int) -> dict[str, Any]:
        """Metadata of item ``row`` as JSON-safe values (external id included)."""
        row = self._item_row(row)
        rec = {c: values[row] for c, values in self.item_meta_columns().items()}
        rec["item_id"] = self.item_vocab.id_at(row)
        if self.title_col and self.title_col != "title" and self.title_col in rec:
            # every reader of a record (CLI lists, explanations, the explorer) shows its "title", which is
            # data.title_col's: a table's own "title" column beside it named the items in the sentences while the
            # lists' display_name used data.title_col; it is kept as item_title
            if "title" in rec:
                key = "item_title"
                while key in rec:
                    key = "item_" + key
                rec[key] = rec["title"]
            rec["title"] = rec[self.title_col]
        return rec

    def title(self, row: int) -> str:
        """Item ``row``'s title (explain/names.py ``title_column``: data.title_col, else a "title" column), else
        its external id."""
        from twotower.explain.names import title_column  # here: the explain package imports this module

        row = self._item_row(row)
        col = title_column(self.title_col, self.item_meta.columns) if self.item_meta is not None else None
        if col and col in self.item_meta.columns:
            text = cell_text(self.item_meta.iloc[row][col])  # a number (the film 1917) is a title too
            if text is not None:
                return text
        return self.item_vocab.id_at(row)

    def user_row(self, user_id: str) -> int:
        """The ``user_vocab`` row of one external user id; an unknown id raises NotFoundError naming it."""
        # index() spells the id as training read it (42.0 from a float column is "42"); str() made it '42.0'
        return self.user_vocab.index(user_id)

    def seen_rows(self, user_row: int) -> np.ndarray:
        """Item rows of one known user's training history, oldest first: ``exclude=[run.seen_rows(row)]`` leaves
        them out of an index search."""
        return self.history.of(int(vocab_rows([user_row], len(self.user_vocab), "user")[0]))

    # ------------------------------------------------------------------ scoring
    def user_vectors(self, user_rows: np.ndarray) -> np.ndarray:
        """[B, D] for known users (rows of ``user_vocab``), reading their training histories."""
        rows = vocab_rows(user_rows, len(self.user_vocab), "user")
        hist = self.history.last_windows(rows, self.model.history_len, self.model.pad_item)
        return self.model.user_embeddings(rows, hist).numpy()

    def history_vectors(self, histories: list[np.ndarray],
                        features: tuple[torch.Tensor, list[torch.Tensor], torch.Tensor] | None = None, *,
                        check: Callable[[], None] | None = None) -> np.ndarray:
        """[B, D] for ad-hoc histories of item rows (oldest first): users never seen in training. Items without
        training interactions are left out (:func:`~twotower.pipeline.similar.history_as_read`): a history of only
        such items reads as the empty history.

        ``features``: those users' feature tensors from :meth:`encode_user_features` (one row per
        history); without them a feature tower reads the users' features as missing. ``check`` (without
        ``features``): called between blocks of a sequence tower's rows, and may raise to abandon the work.
        """
        if self.model.user_tower.id_emb is not None:
            raise IntegrityError(
                "this run's user tower uses user-ID embeddings, so it cannot embed an unseen user from history; "
                "train with model.user.use_id=false and model.user.history=recency"
            )
        flat = isinstance(histories, np.ndarray) and histories.ndim == 1 and histories.dtype != object
        if flat or (isinstance(histories, (list, tuple)) and histories
                    and all(isinstance(h, (int, np.integer)) for h in histories)):
            # each row was taken as one user's history: "expected a 1-D sequence of item rows, got an array of 0
            # dimension(s): np.int64(50)", which does not say that the list itself was the mistake
            raise DataError(f"histories takes one array of item rows per user (a list of arrays), got one flat "
                            f"{'array' if flat else 'list'} of {len(histories)} item rows; for one user pass [rows]")
        # items without training interactions left out: the tower reads them through rows training never updated
        histories = [history_as_read(self, vocab_rows(h, self.n_items, "item")) for h in histories]
        hist = pad_histories(histories, self.model.history_len, self.model.pad_item)
        if features is None:
            return self.model.user_embeddings(None, hist, check=check).numpy()
        if features[2].shape[0] != len(histories):
            raise DataError(f"{features[2].shape[0]} feature rows for {len(histories)} histories")
        with torch.no_grad():
            return self.model.user_tower(None, torch.as_tensor(hist, dtype=torch.long), features=features).numpy()

    def _why_no_features(self) -> str:
        """Why the user tower reads no user features: trained without feature columns, or with the tower told to
        leave them (``model.user.use_features = false``, the columns read and fitted all the same)."""
        spec = self.user_encoder.spec if self.user_encoder is not None else None
        if spec is not None and (spec.categorical or spec.multi or spec.numeric) and \
                not self.config.model.user.use_features:
            return ("it was trained with model.user.use_features=false, which leaves the user table's columns "
                    "unread: train with model.user.use_features=true to read them")
        return ("it was trained without user feature columns: train with --users FILE data.user_categorical=[...] "
                "data.user_numeric=[...] to read them")

    @property
    def user_feature_columns(self) -> tuple[str, ...]:
        """The user-table columns the user tower reads (none when it reads no user features)."""
        if self.user_encoder is None or not self.model.user_tower.features.out_dim:
            return ()
        spec = self.user_encoder.spec
        return (*spec.categorical, *spec.multi, *spec.numeric)

    def encode_new_user_features(
        self, user_features: Any, *, with_user_id: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor] | None:
        """One request's ``user_features`` (column -> value) encoded (None without them), checked as
        ``POST /recommend``, ``/explain`` and the CLI all check them: they describe a user unseen in
        training, so they go with a history, never with a known ``user_id``."""
        if user_features is None:
            return None
        if with_user_id:
            from twotower.pipeline.refusals import known_user_features_refusal  # noqa: PLC0415 - the words, once

            raise ConfigError(f"user_features: {known_user_features_refusal()}")
        from twotower.pipeline.refusals import (  # noqa: PLC0415 - the rule and the words, once
            python_type_words,
            refuse_oversized_user_features,
            user_features_shape_refusal,
        )

        if not isinstance(user_features, Mapping):  # the words of POST /recommend's 422
            raise ConfigError(f"user_features: {user_features_shape_refusal(python_type_words(user_features))}")

        refuse_oversized_user_features(user_features)  # HTTP's bounds, for every Python caller (explain_recommendation)
        return self.encode_user_features([dict(user_features)])

    def describes_new_user(self, user_features: Any) -> bool:
        """Whether ``user_features`` alone describe a user with no history yet: this run's user tower reads user
        features and at least one of its columns is given a value (not null, not blank text, not an empty list:
        each of those encodes as missing). The user is then scored from the empty history (the tower's
        empty-history state) and these features, so two users who filled in the form differently get different
        lists; without any value every such user would get the same list."""
        columns = self.user_feature_columns
        # a numeric column's blank is not missing here: it is refused as "not a number", with the column named
        numeric = set(self.user_encoder.spec.numeric) if self.user_encoder is not None else set()
        return bool(columns) and isinstance(user_features, Mapping) and any(
            c in columns and (_has_value(v) or (c in numeric and v is not None)) for c, v in user_features.items())

    def unknown_user_feature_columns(self, user_features: Any) -> list[str]:
        """The keys of ``user_features`` this run's user tower does not read, on a run that reads user features
        (``[]`` on one that reads none: its refusal is its own). With an empty history they are the error, in the
        words a request with a history gets, rather than "served from user_features alone"."""
        columns = self.user_feature_columns
        if not columns or not isinstance(user_features, Mapping):
            return []
        return [c for c in user_features if c not in columns]

    def new_user_feature_notes(self, user_features: Any) -> list[str]:
        """``["user_features.<column>: ..."]``: values of one request's ``user_features`` that training never
        saw (an unknown category, with the nearest known spelling; a number far outside the training
        range). They are encoded all the same (an unknown category as unknown); these lines say so, for the
        CLI to warn and ``POST /recommend`` to answer in ``warnings``. Call after the values were checked
        (:meth:`encode_new_user_features`)."""
        row = self._feature_row(user_features)
        return [] if row is None else [f"user_features.{n}" for n in self.user_encoder.value_notes(row)]

    def new_user_unknown_columns(self, user_features: Any) -> set[str]:
        """The columns of one request's ``user_features`` that read as unknown (values training never saw)."""
        row = self._feature_row(user_features)
        return set() if row is None else self.user_encoder.unknown_columns(row)

    def _feature_row(self, user_features: Any) -> dict[str, Any] | None:
        """One request's checked ``user_features`` as the encoder reads a table row (a list as the table's joined
        string); None without them or without a user feature table."""
        if not user_features or self.user_encoder is None or not isinstance(user_features, Mapping):
            return None
        spec = self.user_encoder.spec
        return {c: _feature_value(c, v, numeric=c in spec.numeric, multi=c in spec.multi, separator=spec.separator)
                for c, v in user_features.items()}

    def encode_user_features(self, rows: list[dict[str, Any]]) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        """Feature tensors of new users from raw values (``{"age": 25, "occupation": "writer"}`` each).

        Encoded as training encoded the user table (``features/users.json``): a column left out is
        missing, a category never seen in training reads as unknown, a multi-valued column takes a list
        or one string joined by the table's separator. A column the tower does not read, or a value of
        the wrong kind, is a DataError naming ``user_features.<column>``.
        """
        columns = self.user_feature_columns
        if self.user_encoder is None and self.model.user_tower.features.out_dim:
            # the tower reads features, but the file that encodes them is gone (a run loaded with --no-verify):
            # "trained without user feature columns" blamed training for it
            raise DataError(f"user_features: {self.dir / 'features' / 'users.json'}: missing (the artefact is "
                            "incomplete), so a new user's features cannot be encoded as training encoded them; "
                            "restore the file or retrain the run")
        if not columns:
            raise DataError(f"user_features: this run's user tower reads no user features ({self._why_no_features()}); "
                            "send the history only")
        assert self.user_encoder is not None
        spec = self.user_encoder.spec
        clean: list[dict[str, Any]] = []
        for pos, row in enumerate(rows):
            if not isinstance(row, dict):  # the words of POST /recommend's 422 and tt.recommend, naming the row
                from twotower.pipeline.refusals import python_type_words, user_features_shape_refusal  # noqa: PLC0415

                where = "user_features" if len(rows) == 1 else f"user_features[{pos}]"
                raise DataError(f"{where}: {user_features_shape_refusal(python_type_words(row))}")
            out: dict[str, Any] = {}
            for col, value in row.items():
                if col not in columns:
                    raise _not_a_user_feature(col, columns)
                out[col] = _feature_value(col, value, numeric=col in spec.numeric, multi=col in spec.multi,
                                          separator=spec.separator)
            clean.append(out)
        enc = self.user_encoder.encode_rows(pd.DataFrame(clean, columns=list(columns), dtype=object))
        return (torch.as_tensor(enc.categorical, dtype=torch.long), [torch.as_tensor(m, dtype=torch.long) for m in enc.multi],
                torch.as_tensor(enc.numeric, dtype=torch.float32))

    def scores_for_users(self, user_rows: np.ndarray) -> np.ndarray:
        """``[B, I]`` scores of every item for known users (rows of ``user_vocab``), seen items included."""
        return self.user_vectors(user_rows) @ self.item_embeddings().T

    @torch.no_grad()
    def score_pairs(self, user_vec: np.ndarray, item_rows: np.ndarray) -> np.ndarray:
        """Scores ``[N]`` of ``item_rows`` for one user vector ``[D]`` (a row of :meth:`user_vectors`)."""
        items = self.item_embeddings()
        vec = np.asarray(user_vec)
        if vec.shape != (items.shape[1],):  # was numpy's "matmul: Input operand 1 has a mismatch in its core dimension"
            raise DataError(f"score_pairs takes one user vector of shape ({items.shape[1]},), got shape {vec.shape}; "
                            "for one user pass run.user_vectors([row])[0]")
        # checked: a negative row read another item's vector (numpy counts from the end) without a word
        return items[vocab_rows(item_rows, self.n_items, "item")] @ vec
