"""What a search artefact folder is, told by its marker file, checked cheaply before any model is loaded.

The CLI uses these to refuse a wrong ``--out`` (replacing it would remove whatever is there) and a model folder
of the wrong kind (``--rerank`` given a bi-encoder or an index) with one line, instead of a transformers
traceback after minutes of work.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from twotower.errors import ConfigError, IntegrityError
from twotower.utils.atomic import read_json, sha256_file, verify_files
from twotower.utils.shell import shell_arg

__all__ = [
    "BI_ENCODER_META",
    "CROSS_ENCODER_META",
    "INDEX_META",
    "base_chain",
    "check_bi_encoder_dir",
    "check_cross_encoder_dir",
    "check_marker_readable",
    "check_out_folder",
    "existing_dir",
    "file_table",
    "is_bi_encoder",
    "is_bm25_index",
    "is_cross_encoder",
    "is_search_index",
    "listed_files",
    "no_index_message",
    "out_check",
    "trained_backend",
    "trained_config",
    "trained_lengths",
    "trained_on",
    "unreadable_marker",
    "verify_model_dir",
]

#: marker of a :func:`twotower.search.finetune.finetune_bi_encoder` output
BI_ENCODER_META = "twotower_bi_encoder.json"
#: marker of a :func:`twotower.search.rerank.train_cross_encoder` output
CROSS_ENCODER_META = "twotower_cross_encoder.json"
#: description of a :class:`twotower.search.pipeline.SearchIndex` folder
INDEX_META = "meta.json"
#: a transformers model folder has this (sentence-transformers folders too)
_HF_CONFIG = "config.json"


def _marker(path: Path) -> dict:
    """A marker file's JSON object, or ``{}`` when it is missing or unreadable (checked cheaply, before any model is
    loaded; a damaged marker is reported by :func:`verify_model_dir` when the folder is loaded)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


#: each marker: what it marks, and the command that writes one again
_MARKERS = {
    BI_ENCODER_META: ("bi-encoder", "twotower search train"),
    CROSS_ENCODER_META: ("cross-encoder", "twotower rerank train"),
    INDEX_META: ("search index", "twotower search index"),
}


def unreadable_marker(folder: str | os.PathLike[str], name: str) -> str | None:
    """Why ``folder``'s marker ``name`` cannot be read (``"not valid JSON (Expecting ',' delimiter: line 3 column 1
    (char 40))"``), or None when it is missing or holds a JSON object: a marker damaged or cut short (a disk that
    filled, a copy that stopped) made a bi-encoder read as "a non-empty folder that is not a bi-encoder", or as a
    folder with "no twotower_bi_encoder.json", though the file was there."""
    path = Path(folder) / name
    try:
        text = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    try:
        data = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError as e:
        return f"not UTF-8 text ({e})"
    except ValueError as e:
        return f"not valid JSON ({e})"
    return None if isinstance(data, dict) else f"not a JSON object (a {type(data).__name__})"


def check_marker_readable(folder: str | os.PathLike[str], flag: str, names: tuple[str, ...], *,
                          out: bool = False) -> None:
    """IntegrityError naming the first of the markers ``names`` in ``folder`` that is there but unreadable, with the
    JSON error and what to do: given as an ``--out`` (``out``), the folder is not replaced, as nothing says what it
    is; given as a model, it cannot be checked (its checksums and trained lengths are in the marker) nor loaded."""
    p = Path(folder)
    for name in names:
        why = unreadable_marker(p, name)
        if why is None:
            continue
        kind, command = _MARKERS[name]
        if out:
            raise IntegrityError(
                f"{flag} {p}: its {name} is {why}: the file is damaged or half-written, so nothing says this folder "
                f"is an earlier {kind}, and writing there would replace everything in it; remove the folder (rm -r "
                f"{shell_arg(p)}) to write a new one there, or give another {flag}")
        raise IntegrityError(
            f"{flag} {p}: its {name} (the {kind}'s marker, with its files' checksums) is {why}: the file is damaged "
            f"or half-written, so the {kind} cannot be checked or loaded; restore the file from a copy, or train it "
            f"again with `{command} --out {shell_arg(p)}`")


def check_out_folder(
    path: str | os.PathLike[str],
    flag: str,
    kind: str,
    is_same_kind: Callable[[Path], bool],
    marker: str | None = None,
    inputs: Mapping[str, str | os.PathLike[str] | None] | None = None,
    *,
    own_files: Callable[[Path], Collection[str] | None] | None = None,
    force: bool = False,
) -> Path:
    """``path`` checked as the output folder a search command (``flag`` ``--out``) or Python call (``flag`` its
    parameter, ``out_dir``) replaces as a whole: refused, before any work, when it is a file, a non-empty folder that
    is not an earlier ``kind`` (or overlaps an input folder: ``inputs``), an earlier one whose ``marker`` is
    damaged (said so, rather than "not a ``kind``", which sent the user looking for another kind of folder), or,
    unless ``force``, an earlier one holding files it did not write (``own_files``; by default those its ``marker``
    lists)."""
    from twotower.utils.output_folders import check_artefact_dir  # noqa: PLC0415

    same = is_same_kind if marker is None else (
        lambda p: is_same_kind(p) or unreadable_marker(p, marker) is not None)
    if own_files is None and marker is not None:
        own_files = lambda p: listed_files(p, marker)  # noqa: E731
    out = check_artefact_dir(path, kind=kind, is_same_kind=same, inputs=inputs, flag=flag, own_files=own_files,
                             force=force)
    if marker is not None:
        check_marker_readable(out, flag, (marker,), out=True)
    return out


def listed_files(folder: Path, marker: str) -> frozenset[str] | None:
    """The files an earlier artefact wrote in ``folder``: those its ``marker`` lists by checksum, and the marker;
    None when no table says (a marker missing, damaged or written before the table existed)."""
    files = _marker(folder / marker).get("files")
    return frozenset({*files, marker}) if isinstance(files, dict) else None


def out_check(kind: str, is_same_kind: Callable[[Path], bool], marker: str | None = None,
              inputs: Iterable[str] = (),
              own_files: Callable[[Path], Collection[str] | None] | None = None,
              ) -> Callable[[Any, str, dict[str, Any]], None]:
    """:func:`~twotower.utils.folder_lock.writes_folder`'s ``check`` for a Python call writing a ``kind`` folder:
    :func:`check_out_folder` on it, the call's parameters ``inputs`` being its input paths and its ``force``
    parameter the override. Before, only the commands checked ``--out``: ``prepare_beir(p, q,
    "/some/non-empty/dir")`` replaced that folder's contents."""
    names = tuple(inputs)

    def check(folder: Any, param: str, arguments: dict[str, Any]) -> None:
        given = {n: arguments.get(n) for n in names if isinstance(arguments.get(n), (str, os.PathLike))}
        check_out_folder(folder, param, kind, is_same_kind, marker, given, own_files=own_files,
                         force=arguments.get("force") is True)

    return check


def _json_kind(path: Path) -> object:
    return _marker(path).get("kind")


def is_search_index(path: str | os.PathLike[str]) -> bool:
    return _json_kind(Path(path) / INDEX_META) == "search_index"


def is_bm25_index(path: str | os.PathLike[str]) -> bool:
    """A folder :meth:`~twotower.search.bm25.BM25Retriever.save` wrote (its meta.json says ``"kind": "bm25"``)."""
    return _json_kind(Path(path) / INDEX_META) == "bm25"


def is_bi_encoder(path: str | os.PathLike[str]) -> bool:
    return _json_kind(Path(path) / BI_ENCODER_META) == "bi_encoder"


def is_cross_encoder(path: str | os.PathLike[str]) -> bool:
    return _json_kind(Path(path) / CROSS_ENCODER_META) == "cross_encoder"


def _architectures(path: Path) -> list[str]:
    try:
        data = json.loads((path / _HF_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    arch = data.get("architectures") if isinstance(data, dict) else None
    return [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else []


def _not_a_model(path: Path) -> str | None:
    """Why ``path`` holds no transformers model, or None when its ``config.json`` looks like one.

    A ``config.json`` alone says little: a recommender run folder (``twotower train``) has one too, and taking it
    for a model let ``--model runs/ml`` through to a transformers traceback ("Unrecognized model ... Should have a
    `model_type` key") after the corpus was read. Every transformers config names ``model_type`` or
    ``architectures``; a run's names neither.
    """
    if (path / "run.json").is_file():  # twotower.pipeline.artifacts.RUN_MARKERS[0], not imported: that loads torch
        return "is a recommender run folder (from 'twotower train'), not a text model"
    try:
        data = json.loads((path / _HF_CONFIG).read_text(encoding="utf-8"))
    except OSError:
        return f"no {_HF_CONFIG}"
    except ValueError:
        return f"its {_HF_CONFIG} is not valid JSON"
    if not isinstance(data, dict) or not ({"model_type", "architectures"} & data.keys()):
        return f"its {_HF_CONFIG} is not a transformers model's (no model_type or architectures)"
    return None


def existing_dir(path: str | os.PathLike[str], flag: str, what: str) -> Path:
    """``path`` as a Path when it is a folder; a ConfigError naming ``flag`` (a CLI flag or a Python argument)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{flag} {p}: no such folder; give a {what} folder")
    if not p.is_dir():
        raise ConfigError(f"{flag} {p}: is a file, not a {what} folder")
    return p


def check_bi_encoder_dir(path: str | os.PathLike[str], flag: str = "--model") -> Path:
    """``path`` must be a fine-tuned bi-encoder or a sentence-transformers folder (not an index or cross-encoder)."""
    p = existing_dir(path, flag, "bi-encoder")
    check_marker_readable(p, flag, (BI_ENCODER_META, CROSS_ENCODER_META))
    if is_bi_encoder(p):
        return p
    if is_search_index(p):
        raise ConfigError(f"{flag} {p}: is a search index, not a bi-encoder; give the model folder it was built with")
    if is_cross_encoder(p):
        raise ConfigError(f"{flag} {p}: is a cross-encoder (a reranker, give it to --rerank), not a bi-encoder")
    problem = _not_a_model(p)
    if problem is not None:
        raise ConfigError(f"{flag} {p}: not a bi-encoder folder (no {BI_ENCODER_META}; {problem}); give the "
                          "output of 'twotower search train' or a sentence-transformers folder")
    return p


def check_cross_encoder_dir(path: str | os.PathLike[str], flag: str = "--rerank", *, base: bool = False,
                            bi_encoder_hint: str = "give it to --model") -> Path:
    """``path`` must be a cross-encoder folder; with ``base=True`` (``rerank train --base``) also any
    transformers folder, whose weights start the training (the classification head is new). ``bi_encoder_hint``:
    where a bi-encoder given instead belongs, for a command without ``--model`` (`search query`, `serve`)."""
    # rerank train --base also starts from a plain transformers folder (--help: "starting sentence-transformers
    # directory"), which "give the output of 'twotower rerank train'" told the user was not accepted
    accepted = "cross-encoder or sentence-transformers" if base else "cross-encoder"
    fix = ("give the output of 'twotower rerank train' or a sentence-transformers / transformers model folder" if base
           else "give the output of 'twotower rerank train'")
    p = existing_dir(path, flag, accepted)
    check_marker_readable(p, flag, (CROSS_ENCODER_META, BI_ENCODER_META))
    if is_cross_encoder(p):
        return p
    if is_search_index(p):
        raise ConfigError(f"{flag} {p}: is a search index, not a cross-encoder; give a 'twotower rerank train' output")
    if is_bi_encoder(p):
        raise ConfigError(f"{flag} {p}: is a bi-encoder ({bi_encoder_hint}), not a cross-encoder"
                          + (f"; to start from its weights give {p / 'query'}" if base else ""))
    problem = _not_a_model(p)
    if problem is not None:
        raise ConfigError(f"{flag} {p}: not a {accepted} folder (no {CROSS_ENCODER_META}; {problem}); {fix}")
    if not base and not any(a.endswith("ForSequenceClassification") for a in _architectures(p)):
        raise ConfigError(f"{flag} {p}: a model without a relevance head (not a cross-encoder); give the output of "
                          "'twotower rerank train'")
    return p


def index_it_hint(model: str | os.PathLike[str]) -> str:
    """Where a bi-encoder goes for a command that searches a saved index (no ``--model``): into the index."""
    return (f"a search index searches with the bi-encoder it was built with: `twotower search index --beir DIR "
            f"--out NEW_INDEX --model {shell_arg(model)}`")


def _beir_folder(path: Path) -> bool:
    """A BEIR folder as ``--beir`` takes it (twotower.search.beir.resolve_beir_dir): corpus.jsonl in it or in beir/."""
    return any((cand / "corpus.jsonl").is_file() for cand in (path, path / "beir"))


def no_index_message(path: str | os.PathLike[str]) -> str:
    """Why ``path`` (given as a search index, e.g. ``search query --index``, ``serve --search-index``) is none, and
    the command that builds one from what it is.

    "build one with 'twotower search index --beir DIR --out DIR'" sent a user who gave a bi-encoder, a BEIR folder or
    a cross-encoder to a command that refuses that very folder as --out (it is not an index to replace); the kinds
    are told apart by their markers, as ``--model`` / ``--rerank`` tell them apart.
    """
    p = Path(path)
    out = f"{p}-index" if p.name else "INDEX"  # a sibling: --out may not hold, or sit inside, --beir
    trained = (trained_on(p) or {}).get("beir")  # the BEIR folder a model was trained on is the likely corpus
    beir = trained if isinstance(trained, str) else "BEIR"
    if is_bi_encoder(p):
        return (f"{p} is a fine-tuned bi-encoder (search train), not a search index; build an index with "
                f"`twotower search index --beir {shell_arg(beir)} --model {shell_arg(p)} --out {shell_arg(out)}`")
    if is_cross_encoder(p):
        return (f"{p} is a cross-encoder (rerank train), not a search index: give it to --rerank; build an index "
                f"with `twotower search index --beir {shell_arg(beir)} --out {shell_arg(out)}` and rerank its hits with "
                f"--rerank {shell_arg(p)}")
    if _beir_folder(p):
        return (f"{p} is a BEIR folder (search prepare), not a search index; build an index from it with "
                f"`twotower search index --beir {shell_arg(p)} --out {shell_arg(out)}`")
    from twotower.utils.folder_lock import idle_lock_file  # noqa: PLC0415

    # `search index --out P` refuses a non-empty folder that is not a search index: suggesting it sent the user
    # from one refusal to the next (an index whose meta.json was lost, any folder of other files)
    try:
        held = sorted(c.name for c in p.iterdir() if not idle_lock_file(c)) if p.is_dir() else []
    except OSError:  # unreadable: the plain message
        held = []
    if any(name in _INDEX_PARTS for name in held):
        return (f"{p} is an incomplete search index: no meta.json beside its {', '.join(n for n in held if n in _INDEX_PARTS)} "
                f"(meta.json lists every file's checksum; without it nothing can be checked); remove the folder "
                f"(rm -r {shell_arg(p)}) and build it again with `twotower search index --beir DIR --out {shell_arg(p)}`")
    if held:
        return (f"no search index at {p} (a folder of other files, which search index --out does not replace); build one "
                f"beside it with `twotower search index --beir DIR --out {shell_arg(out)}` and give that folder")
    return f"no search index at {p}; build one with `twotower search index --beir DIR --out {shell_arg(p)}`"


#: what a search index folder holds beside meta.json (SearchIndex.save)
_INDEX_PARTS = ("bm25", "docs.json", "embeddings.npy")


def trained_on(folder: str | os.PathLike[str] | None) -> dict | None:
    """The ``data`` a bi- or cross-encoder's marker records it was trained on (``{"beir": absolute path, "split",
    "pairs", ...}``), with ``"marker"``: the marker file's path; None for a folder without such a record."""
    if folder is None:
        return None
    for marker in (BI_ENCODER_META, CROSS_ENCODER_META):
        data = _marker(Path(folder) / marker).get("data")
        if isinstance(data, dict):
            return {**data, "marker": str(Path(folder) / marker)}
    return None


def base_chain(base_dir: str | os.PathLike[str]) -> list[str]:
    """``base_dir`` and the models it descends from, nearest first: the ``base`` its marker records, then that
    base's own (the marker's ``base_chain``, absent from markers written before it). A new marker records this list
    after its ``base``, as its ``base_chain``.

    Read before the new model is saved: `search train --base X --out X` (retraining in place) wrote "base": X, the
    folder it had just replaced, and the model X had been trained from was recorded nowhere any more.
    """
    for marker in (BI_ENCODER_META, CROSS_ENCODER_META):
        data = _marker(Path(base_dir) / marker)
        if isinstance(data.get("base"), str):
            chain = data.get("base_chain")
            older = chain if isinstance(chain, list) and all(isinstance(b, str) for b in chain) else []
            return [str(base_dir), data["base"], *older]
    return [str(base_dir)]


def trained_config(folder: str | os.PathLike[str] | None) -> dict:
    """The ``config`` a bi- or cross-encoder's marker records it was trained with (``valid_frac``, ``seed``, ...);
    ``{}`` for a folder without such a record or ``None``."""
    if folder is None:
        return {}
    for marker in (BI_ENCODER_META, CROSS_ENCODER_META):
        config = _marker(Path(folder) / marker).get("config")
        if isinstance(config, dict):
            return config
    return {}


def recorded_worse_validation(folder: str | os.PathLike[str]) -> str | None:
    """A warning for a cross-encoder whose own training found reranking with it WORSE on held-out queries than the
    first-stage order it reranks (``rerank train`` warned then; `search query --rerank` and `serve --rerank` loaded
    it later without a word), or None."""
    v = _marker(Path(folder) / CROSS_ENCODER_META).get("validation")
    if not isinstance(v, dict) or v.get("worse") is not True:
        return None
    try:
        said = (f"{v['metric']} {float(v['reranked']):.4f} reranked against {float(v['without_rerank']):.4f} in "
                f"{v['first_stage']}'s order, on {int(v['queries'])} held-out queries")
    except (KeyError, TypeError, ValueError):
        said = "its held-out lists got worse"
    return (f"cross-encoder {folder}: its training validated reranking with it as WORSE than the first stage alone "
            f"({said}); its lists are likely worse than without --rerank")


def trained_lengths(folder: str | os.PathLike[str] | None) -> dict[str, int]:
    """The word-piece limits a bi- or cross-encoder folder was trained with (``max_length``, and for a bi-encoder
    ``query_max_length``), read from its marker; ``{}`` for a plain sentence-transformers folder or ``None``.

    They are the lengths a model is used at unless told otherwise: a query tower tuned on 32-piece queries against
    documents cut at 128 is measured (and served) on those, not on the library's defaults.
    """
    if folder is None:
        return {}
    for marker in (BI_ENCODER_META, CROSS_ENCODER_META):
        config = _marker(Path(folder) / marker).get("config")
        if isinstance(config, dict):
            return {k: int(v) for k, v in config.items()
                    if k in ("max_length", "query_max_length") and isinstance(v, int) and not isinstance(v, bool)
                    and v >= 1}
    return {}


def trained_backend(folder: str | os.PathLike[str] | None) -> str | None:
    """The encoder backend a bi-encoder folder was fine-tuned through (its marker's ``encoder_backend``: the frozen
    document vectors and the mined negatives came from it); None for a plain sentence-transformers folder, ``None``,
    or a marker written before it was recorded.

    It is the backend the model is evaluated and indexed on unless told otherwise, as :func:`trained_lengths` are
    its lengths: a model trained on torch-bf16 was otherwise re-encoded on fp32, ~4x slower and not as trained.
    """
    if folder is None:
        return None
    backend = _marker(Path(folder) / BI_ENCODER_META).get("encoder_backend")
    return backend if isinstance(backend, str) and backend else None


def file_table(folder: Path, marker: str) -> dict[str, str]:
    """sha256 of every file under ``folder`` but ``marker`` (which will hold this table), by relative path."""
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix() != marker}


def verify_model_dir(folder: str | os.PathLike[str], marker: str, kind: str, fix: str) -> dict:
    """The marker's description of a bi-/cross-encoder folder, after checking every file it lists.

    Format 2 markers list every file's sha256 (as search indexes, runs and vector indexes do), so a truncated
    or replaced weights file is one line naming it, not a safetensors traceback at load (or, worse, other
    vectors than the index was built with). Format 1 folders, written before the table existed, load unchecked.
    """
    path = Path(folder) / marker
    try:
        meta = read_json(path)
    except IntegrityError as e:  # "...; the file is corrupted or half-written" said nothing of what to do
        raise IntegrityError(f"{e}; {fix}") from None
    if not isinstance(meta, dict) or meta.get("kind") != kind:
        raise IntegrityError(f"{path} does not describe a {kind.replace('_', '-')}")
    if meta.get("format", 1) != 1 or "files" in meta:
        files = meta.get("files")
        if not isinstance(files, dict) or not files:  # an empty table would check nothing
            raise IntegrityError(f"{path}: the table of file checksums is missing or empty; {fix}")
        verify_files(folder, files, fix=fix)
    return meta
