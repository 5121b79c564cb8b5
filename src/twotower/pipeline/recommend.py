"""Top-k recommendations from a saved run through the run's index: the same path the HTTP service takes.

Legend: ``U`` users, ``I`` items, ``D`` dim, ``K`` top-k, ``B`` a batch of users.

Every list comes from :meth:`twotower.index.VectorIndex.search` (exclusions
and filters applied by the index), with query vectors computed exactly as
the service computes them (known users in fixed chunks of
:data:`USER_CHUNK`), so with an exact index ``twotower recommend`` and
``POST /recommend`` return identical lists.
"""
from __future__ import annotations

import logging
import os

import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from twotower.pipeline.run_inputs import read_run_interactions
from twotower.errors import ConfigError, IntegrityError, NotFoundError
from twotower.utils.arguments import check_flag, check_ids, is_id_list
from twotower.index import ExactIndex, VectorIndex, load_index
from twotower.index.autotune import params_text
from twotower.index.content_check import check_contents
from twotower.index.storage import is_damaged_index_dir, other_artefact, read_meta, read_tuning
from twotower.pipeline.artifacts import (TrainedRun, check_finite_user, check_loaded_run, check_new_history,
                                         rebuild_command, refuse_empty_history)
from twotower.pipeline.refusals import (
    USER_LIST,
    empty_user_id_refusal,
    hint_unknown_user,
    id_list_refusal,
    k_refusal,
    known_user_features_refusal,
    locate,
    python_type_words,
    refuse_oversized_user_features,
    rows_naming_every_unknown,
)
from twotower.pipeline.histories import unknown_examples
from twotower.pipeline.results_csv import results_to_frame
from twotower.results import Results, answer_score
from twotower.serving.settings import ServiceSettings, checked_filter_exact_max  # the service's defaults, once
from twotower.utils.progress import RateLog
from twotower.utils.run_folder import other_runs_index
from twotower.utils.shell import shell_arg
from twotower.utils.wording import plural

log = logging.getLogger(__name__)



def exact_hint(exact_flag: str = "--exact") -> str:
    """The way around a stale or damaged index, in the words of the interface that opened it: ``--exact`` on the
    command line (recommend, similar, serve), ``exact=True`` from Python (tt.recommend, tt.similar), which were
    told "rank exactly with --exact"; each interface names its own argument, as with :func:`located`."""
    return f" (or rank exactly with {exact_flag})"


#: the command line's words (`index info` drops them: no such flag)
EXACT_HINT = exact_hint()

__all__ = [
    "USER_CHUNK",
    "exclusions_from_files",
    "low_recall",
    "measured_recall_notes",
    "recall_record",
    "run_index_dir",
    "open_run_index",
    "open_served_index",
    "ServedIndex",
    "user_query_vectors",
    "recommend",
    "recommend_users",
    "recommend_history",
    "history_query_vectors",
    "long_history_note",
    "no_input_history_note",
    "log_shortfall",
    "results_to_frame",
    "results_to_items",
]

#: Known users are embedded in chunks of this many rows (``[0, C)``, ``[C, 2C)``, ...), by the CLI and
#: the service alike: a batch's shape can change the last bits of a torch matmul, so both use the same one.
USER_CHUNK = 65536
#: per loaded run: (its weights_state() when computed, {chunk: [C, D] vectors}); a weight edit in memory drops them
_chunks: "weakref.WeakKeyDictionary[TrainedRun, tuple[Any, dict[int, np.ndarray]]]" = weakref.WeakKeyDictionary()
#: the same per run and per input histories (keyed by their ``UserSequences``): `evaluate --history-from` ranks
#: through :func:`recommend_users` 1,024 users a call, and each call embedded every user's chunk again (30,000
#: users of a 3-layer transformer: 30 passes over all of them, 130 of the 190 s the evaluation took)
_history_chunks: "weakref.WeakKeyDictionary[TrainedRun, tuple[Any, weakref.WeakKeyDictionary[Any, dict[int, np.ndarray]]]]" = (
    weakref.WeakKeyDictionary())


def _run_cache(store: "weakref.WeakKeyDictionary[Any, tuple[Any, Any]]", run: TrainedRun, empty: Any,
               fixed_weights: bool = False) -> Any:
    """``run``'s entry of a module cache, emptied (``empty()``) when its weights changed since it was filled:
    ``tt.recommend`` after ``p.mul_(2)`` in memory ranked with the user vectors of the weights as loaded.
    ``fixed_weights``: the caller holds the weights fixed (the service, which loads a run once), so the check,
    a walk over the model's modules (~0.2 ms on a busy core), is skipped once the entry exists."""
    got = store.get(run)
    if fixed_weights and got is not None:
        return got[1]
    state = run.weights_state()
    if got is None or got[0] != state:
        got = store[run] = (state, empty())
    return got[1]


def low_recall_fix(exact_flag: str = "--exact", allow_flag: str = "--allow-low-recall",
                   rebuild: str = "twotower index build --run DIR --index auto") -> str:
    """The ways out of an index that missed its recall target, in the words of the interface that opened it:
    `serve`'s flags, or ``exact=True`` / ``allow_low_recall=True`` for ``RecommenderService.load`` (which
    told a Python caller to "pass --allow-low-recall"). ``rebuild``: the command that rebuilds it for its run
    (:func:`~twotower.pipeline.artifacts.rebuild_command` with ``kind="auto"``); `serve` said
    `twotower index build --index auto`, without the --run the command needs or the --out of the index."""
    return (f"; rebuild it (`{rebuild}`, which keeps exact search when it is fast "
            "enough; a PQ index reaches high recall with a refine stage, e.g. --index ivfpq,RFlat), serve "
            f"exact search with {exact_flag}, or pass {allow_flag} to serve it anyway")


_LOW_RECALL_FIX = low_recall_fix()


def _recall_shortfall(index_dir: str | Path, tune: dict[str, Any] | None) -> str | None:
    """What the tuning record ``tune`` measured, when the index missed its recall target; else None."""
    chosen = (tune or {}).get("chosen") or {}
    if tune is None or tune.get("met_target", True) or "recall" not in chosen:
        return None
    n_queries = tune.get("n_queries")
    queries = plural(n_queries, "query", "queries") if isinstance(n_queries, int) else f"{n_queries} queries"
    return (f"the index in {index_dir} ({chosen.get('factory')} {chosen.get('params')}) measured recall@{tune.get('k')} "
            f"{chosen['recall']:.4f} on {queries} when built, below its target "
            f"{tune.get('target_recall')}")


def _recall_record(tune: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the tuning record ``tune`` measured when the index was built: ``{"recall", "k", "queries", "target",
    "met_target"}``; None for exact search or an index without a record. A server started with
    ``--allow-low-recall`` says so in ``/readyz`` and ``/metrics`` with it, not only in its start-up log."""
    chosen = (tune or {}).get("chosen") or {}
    if tune is None or "recall" not in chosen or chosen.get("index") == "exact":
        return None
    return {"recall": float(chosen["recall"]), "k": tune.get("k"), "queries": tune.get("n_queries"),
            "target": tune.get("target_recall"), "met_target": bool(tune.get("met_target", True))}


def measured_recall_notes(served: ServedIndex, k: int, allow: np.ndarray | None, filter_exact_max: int | None = None,
                          *, exact_flag: str = "--exact", filter_flag: str = "--filter") -> list[str]:
    """What the recall ``served``'s build measured does not cover in a request: a ``k`` above the k it was measured
    at, and a filter applied within the approximate search (not ranked exactly over the items it allows). An IVF
    index tuned to recall@10 0.9792 recalled 0.8746 at `recommend --users`' k=100 and 0.8438 under
    ``--filter genres=Horror``, while every line said 0.979. Empty for exact search or an unmeasured index (whose
    own warning says so as it loads). ``exact_flag`` / ``filter_flag``: the caller's words for them."""
    rec = served.recall
    if rec is None or served.index.is_exact or rec.get("k") is None:
        return []
    measured = f"recall@{rec['k']} {rec['recall']:.4f}"
    where = served.directory if served.directory is not None else "the index"
    notes = []
    if k > int(rec["k"]):
        notes.append(f"the index in {where} measured {measured} when built, at k={rec['k']}; at k={k} its recall was "
                     f"not measured and is lower as a rule ({exact_flag} ranks exactly, or build the index with "
                     f"--k {k})")
    if allow is not None and not served.index.ranks_filter_exactly(int(allow.size), _exact_subset_max(filter_exact_max)):
        notes.append(f"{filter_flag}: the index in {where} applies the filter within its approximate search "
                     f"({plural(int(allow.size), 'item')} allowed), whose recall was measured without a filter "
                     f"({measured}), so these lists' recall was not measured ({exact_flag} ranks them exactly)")
    return notes


def recall_record(index_dir: str | Path) -> dict[str, Any] | None:
    """The recall the build of the index in ``index_dir`` measured (:func:`_recall_record`), for the record beside
    a `recommend --out` / `similar --out` CSV; None for exact search or an index without a tuning record."""
    return _recall_record(read_tuning(index_dir))


def low_recall(index_dir: str | Path) -> str | None:
    """Why the index in ``index_dir`` misses its recall target (from its checksummed ``tune.json``), or None
    if it does not; IntegrityError when that record was edited."""
    shortfall = _recall_shortfall(index_dir, read_tuning(index_dir))
    return None if shortfall is None else shortfall + _LOW_RECALL_FIX


def run_index_dir(run_dir: str | Path, index_dir: str | Path | None = None, *, exact: bool = False) -> Path | None:
    """The saved index a run is served from: ``index_dir``, else ``RUN/index`` if built; None = exact search."""
    if exact:
        return None
    own = Path(run_dir) / "index"
    if index_dir is None and ((own / "meta.json").is_file() or is_damaged_index_dir(own)):
        return own  # a damaged one too: refused when opened, not read as "no index built" and ranked exactly
    return None if index_dir is None else Path(index_dir)


@dataclass(frozen=True)
class ServedIndex:
    """The index a run is served from, the sentence saying which it is, and the recall its build measured."""

    index: VectorIndex
    description: str
    recall: dict[str, Any] | None  # ``{"recall", "k", "queries", "target", "met_target"}``; None: exact or unmeasured
    directory: Path | None = None  # the saved index's folder; None: exact search over the run's item vectors


def check_index_argument(index: Any, exact: bool) -> None:
    """``index=`` of ``tt.recommend`` / ``tt.similar`` (``--index DIR``), refused as the CLI refuses the flag: no
    folder path, an empty one, or beside ``exact=True``."""
    if index is None:
        return
    if not isinstance(index, (str, os.PathLike)) or not str(index).strip():
        raise ConfigError(f"index: the folder of an index built for the run (a str or pathlib.Path), got {index!r:.60}")
    if exact:
        raise ConfigError("exact=True ranks the whole catalogue exactly; index= names an index to rank with: use one "
                          "or the other")


def open_run_index(
    run: TrainedRun, index_dir: str | Path | None = None, *, exact: bool = False, allow_low_recall: bool = True,
    exact_flag: str = "--exact", item_queries: bool = False,
) -> tuple[VectorIndex, str]:
    """The index a run is served from, and a sentence saying which it is.

    ``index_dir`` if given, else ``RUN/index`` when ``twotower index build``
    made one, else exact search over the item embeddings; ``exact=True``
    forces exact search. A saved index built for another model raises
    IntegrityError; with ``allow_low_recall=False`` one whose measured recall
    missed its target raises ConfigError saying what was measured.
    ``exact_flag``: how the caller's user asks for exact search (``exact=True`` from Python), said in those errors and in the sentence.
    ``item_queries``: the index answers item-to-item searches (`similar`), so a recorded item-query recall below
    target is warned.
    """
    served = open_served_index(run, index_dir, exact=exact, allow_low_recall=allow_low_recall, exact_flag=exact_flag,
                               item_queries=item_queries)
    return served.index, served.description


def open_served_index(
    run: TrainedRun, index_dir: str | Path | None = None, *, exact: bool = False, allow_low_recall: bool = True,
    exact_flag: str = "--exact", allow_flag: str = "--allow-low-recall", item_queries: bool = False,
) -> ServedIndex:
    """:func:`open_run_index`, with the recall its ``tune.json`` recorded (what ``/readyz`` and ``/metrics`` show).
    ``allow_flag``: how the caller's user allows a low-recall index (``allow_low_recall=True`` from Python).
    ``item_queries``: it answers `similar` / /similar-items, so an item-query recall (``tune.json``'s
    ``"similar_recall"``) below target is warned, once, as it loads (not refused: user queries meet the target).

    The tuning record is read once, so the recall reported is that of the record the index was checked against
    (the service read it a second time, after opening the index).
    """
    fp = run.fingerprint()
    index_dir = run_index_dir(run.dir, index_dir, exact=exact)
    if index_dir is None:
        index = ExactIndex().build(run.item_embeddings(), np.arange(run.n_items, dtype=np.int64))
        index.model_fingerprint = fp
        why = exact_flag if exact else "no index built; `twotower index build` makes one"
        return ServedIndex(index, f"exact search over {run.n_items:,} items ({why})", None)
    _refuse_other_artefact(run, index_dir, exact_flag)
    try:
        _check_index_model(run, index_dir, fp, exact_flag)
        tune = read_tuning(index_dir)  # read (and checked) once: it says both whether and what was measured
        shortfall = _recall_shortfall(index_dir, tune)
        if shortfall and not allow_low_recall:
            raise ConfigError(shortfall + low_recall_fix(exact_flag, allow_flag,
                                                         rebuild_command(run.dir, index_dir, kind="auto")))
        index = load_index(index_dir, expected_fingerprint=fp)
    except IntegrityError as e:
        raise IntegrityError(_with_rebuild(str(e), run, index_dir, exact_flag)) from e
    except NotFoundError as e:
        raise with_build_command(e, run, index_dir) from None
    _check_index_ids(run, index_dir, index)
    _check_index_vectors(run, index_dir, index, fp, exact_flag)
    if shortfall:  # allowed (recommend, or serve --allow-low-recall), never silent
        log.warning("%s; %s ranks exactly", shortfall, exact_flag)  # the caller's way: --exact, exact=True
    elif not index.is_exact and tune is None:
        log.warning("the approximate index in %s has no tuning record, so its recall was never measured "
                    "(`twotower index build` measures it)", index_dir)
    if item_queries and not index.is_exact:
        from twotower.pipeline.similar_recall import similar_recall_shortfall

        similar_note = similar_recall_shortfall(index_dir, tune, run.dir)
        if similar_note:
            log.warning("%s", similar_note)
    if index.is_exact:
        return ServedIndex(index, f"index {index_dir}: exact search over {len(index):,} items", _recall_record(tune),
                           index_dir)
    factory = getattr(index, "factory", None) or index.backend
    params = params_text(index.search_params)
    return ServedIndex(index, (f"index {index_dir}: approximate {factory}" + (f" ({params})" if params else "")
                               + f"; {exact_flag} ranks the whole catalogue exactly"),  # in the caller's words
                       _recall_record(tune), index_dir)


#: how the index layer, which knows no run, words the way out of a damaged index
_GENERIC_REBUILD = "rebuild with `twotower index build --run DIR`"


def _with_rebuild(message: str, run: TrainedRun, index_dir: Path, exact_flag: str = "--exact") -> str:
    """``message`` of a damaged index with the command that rebuilds it for this run, and the way around it.

    The index layer said "rebuild with `twotower index build --run DIR`" (a placeholder, beside messages that
    name the run) or nothing at all (a meta.json that is not JSON), and never that --exact ranks without it.
    """
    if "rank exactly with" in message:  # already says both (an index of other weights)
        return message
    fix = f"rebuild it with `{rebuild_command(run.dir, index_dir)}`" + exact_hint(exact_flag)
    return message.replace(_GENERIC_REBUILD, fix) if _GENERIC_REBUILD in message else f"{message}; {fix}"


#: how the index layer words the way to a missing index (it knows no run)
_GENERIC_BUILD = "build one with `twotower index build --run DIR`"


def with_build_command(error: NotFoundError, run: TrainedRun, index_dir: Path) -> NotFoundError:
    """``error`` (no index in ``index_dir``) naming the command that builds one for ``run``: it said
    "build one with `twotower index build --run DIR`", DIR as written, where other hints name the run."""
    if _GENERIC_BUILD not in str(error):
        return error
    hint = str(error)[len(str(NotFoundError(error.kind, error.id))) + 2:-1]  # the "(...)" after "unknown KIND 'ID'"
    return NotFoundError(error.kind, error.id, hint.replace(_GENERIC_BUILD, _build_advice(run, index_dir)))


def _build_advice(run: TrainedRun, index_dir: Path) -> str:
    """How to get an index where ``index_dir`` holds none. A folder of other files (the data, the run's own
    ``data``) is no place to build one: `index build --out` there is refused, as saving replaces the whole folder,
    so the run's own index folder is named instead (read when no index is named)."""
    own = Path(run.dir) / "index"
    empty = not index_dir.exists() or (index_dir.is_dir() and not any(index_dir.iterdir()))
    if empty or index_dir.resolve() == own.resolve():
        return f"build one with `{rebuild_command(run.dir, index_dir)}`"
    if (own / "meta.json").is_file():
        return f"the run's own index is {own}, read when no index is named"
    lost = "it holds other files, and an index built there would replace them" if index_dir.is_dir() else (
        "an index built there would replace it")
    return f"{lost}; build the run's own with `{rebuild_command(run.dir, own)}`, which writes {own}, read when no index is named"


def _refuse_other_artefact(run: TrainedRun, index_dir: Path, exact_flag: str = "--exact") -> None:
    """ConfigError when ``index_dir`` holds another artefact than a vector index (a search index): its meta.json was
    called corrupted, with a rebuild into that very folder, which `index build` then refused as no vector index."""
    other = other_artefact(index_dir)
    if other is None:
        return
    own = Path(run.dir) / "index"
    if index_dir.resolve() == own.resolve():  # the run's own folder holds it: a vector index goes elsewhere
        way = f"build one in another folder with `twotower index build --run {shell_arg(run.dir)} --out DIR`"
    else:
        way = (f"the run's own ({own}, built by `twotower index build --run {shell_arg(run.dir)}`) is read when no "
               "index is named")
    raise ConfigError(f"{index_dir} is {other}, not a vector index of the run's items; {way}" + exact_hint(exact_flag))


def _check_index_model(run: TrainedRun, index_dir: Path, fp: str, exact_flag: str = "--exact") -> None:
    """IntegrityError when the index in ``index_dir`` was built from other item vectors than ``run``'s.

    Read from meta.json before the tuning record: an index of a model since retrained was first refused for its
    low recall (pass --allow-low-recall), and only then, with the flag, as the stale index it is.
    """
    built_for = read_meta(index_dir).get("model_fingerprint")
    if built_for != fp:
        other = other_runs_index(run.dir, index_dir)
        fix = "build this run's own with" if other is not None else "rebuild it with"
        fix = f"{fix} `{rebuild_command(run.dir, index_dir)}`" + exact_hint(exact_flag)
        if built_for is None:  # "built for model None ... (retrained since ...)": neither was so
            raise IntegrityError(
                f"{index_dir}: records no model (saved without model_fingerprint=), so nothing says its vectors are "
                f"those of the run {run.dir} (model {fp}); save it with model_fingerprint=run.fingerprint(), or {fix}")
        why = f"it is the run {other}'s index" if other is not None else (
            "retrained since the index was built, or the index is another run's")
        raise IntegrityError(
            f"{index_dir}: built for model {built_for}, but the run {run.dir} now holds model {fp} ({why}), so its "
            f"ids would rank other vectors; {fix}")


def _check_index_vectors(run: TrainedRun, index_dir: Path, index: VectorIndex, fp: str,
                         exact_flag: str = "--exact") -> None:
    """IntegrityError when the index in ``index_dir`` holds other vectors than ``run``'s model gives its items,
    though its meta.json names that model (:func:`_check_index_model`) and its ids are item rows
    (:func:`_check_index_ids`): an index file of another build swapped in, or vectors of another checkpoint saved
    under the run's fingerprint, served other neighbours without a word. A fixed few items are checked
    (:mod:`twotower.index.content_check`): milliseconds at 1M items."""
    why = check_contents(index, run.item_vectors)
    if why is None:
        return
    raise IntegrityError(
        f"{index_dir}: meta.json says it was built for the run {run.dir}'s model {fp}, but it holds other vectors: "
        f"{why}; its index file is another build's, or it was saved from other weights' vectors, so it would rank "
        f"other neighbours; rebuild it with `{rebuild_command(run.dir, index_dir)}`" + exact_hint(exact_flag))


def _check_index_ids(run: TrainedRun, index_dir: Path, index: VectorIndex) -> None:
    """IntegrityError when the index's ids are not rows of ``run``'s items: results are read as item rows, so an
    index saved from Python with other ids (external ids, an offset) under the run's fingerprint ranked the right
    vectors and then named other items, silently, or none."""
    ids = getattr(index, "_ids", None)  # [N] int64, both backends
    if ids is None or not len(ids):
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= run.n_items:
        raise IntegrityError(
            f"{index_dir}: holds ids {lo}..{hi}, but the run {run.dir} reads ids as its item rows 0..{run.n_items - 1}; "
            f"the index's id map is not this run's (build it with ids = item rows, as `twotower index build --run "
            f"{shell_arg(run.dir)}` does)")


def user_query_vectors(run: TrainedRun, user_rows: np.ndarray, *, fixed_weights: bool = False) -> np.ndarray:
    """``[B, D]`` query vectors of known users, computed chunk by chunk as the service caches them; computed
    again after the run's weights change in memory unless ``fixed_weights`` (:func:`_run_cache`)."""
    rows = np.asarray(user_rows, dtype=np.int64)
    cache = _run_cache(_chunks, run, dict, fixed_weights)  # per loaded run: [C, D] vectors of each chunk computed so far
    out = None
    n_users = len(run.user_vocab)
    for c in np.unique(rows // USER_CHUNK).tolist():
        if c not in cache:
            start = c * USER_CHUNK
            cache[c] = np.asarray(run.user_vectors(np.arange(start, min(start + USER_CHUNK, n_users))), np.float32)
        vecs = cache[c]
        if out is None:
            out = np.empty((rows.size, vecs.shape[1]), dtype=np.float32)  # [B, D]
        sel = rows // USER_CHUNK == c
        out[sel] = vecs[rows[sel] - c * USER_CHUNK]
    return out if out is not None else np.zeros((0, run.item_embeddings().shape[1]), np.float32)


def history_query_vectors(run: TrainedRun, histories: Any, user_rows: np.ndarray, *,
                          fixed_weights: bool = False) -> np.ndarray:
    """``[B, D]`` query vectors of known users read from input ``histories``
    (:class:`~twotower.pipeline.histories.InputHistories`), in the same fixed chunks of :data:`USER_CHUNK`
    as :func:`user_query_vectors`: ``recommend --history-from`` and ``serve --history-from`` embed a user in
    the same batch, so with an exact index they return identical lists. Each chunk is computed once per loaded
    run and histories object, and kept while both live, as :func:`user_query_vectors` keeps its chunks."""
    from twotower.pipeline.histories import HistoryScorer

    scorer = HistoryScorer(run, histories)  # checks the histories belong to this run
    cache = _run_cache(_history_chunks, run, weakref.WeakKeyDictionary, fixed_weights).setdefault(
        histories.sequences, {})
    rows = np.asarray(user_rows, dtype=np.int64)
    n_users = len(run.user_vocab)
    out = np.empty((rows.size, run.item_embeddings().shape[1]), dtype=np.float32)  # [B, D]
    for c in np.unique(rows // USER_CHUNK).tolist():
        start = c * USER_CHUNK
        if c not in cache:
            cache[c] = np.asarray(scorer.user_vectors(np.arange(start, min(start + USER_CHUNK, n_users))), np.float32)
        vecs = cache[c]
        sel = rows // USER_CHUNK == c
        out[sel] = vecs[rows[sel] - start]
    return out


def exclusions_from_files(run: TrainedRun, files: Iterable[str | Path], *, include_seen: bool) -> sp.csr_matrix:
    """[U, I] pairs never to recommend: the given interaction files (+ training history)."""
    U, I = len(run.user_vocab), run.n_items
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    if include_seen:
        lengths = run.history.lengths()
        rows.append(np.repeat(np.arange(U, dtype=np.int64), lengths))
        cols.append(run.history.items)
    for f in files:
        df = read_run_interactions(run, f, use="pairs to exclude from the recommendations")
        u = run.user_vocab.encode(df["user_id"].to_numpy())
        i = run.item_vocab.encode(df["item_id"].to_numpy())
        keep = (u >= 0) & (i >= 0)
        if not keep.all():  # dropped without a word: the pairs a file meant to exclude were then recommended
            log.warning("exclude %s: %s of %s dropped (%s of an unknown user, %s of an unknown item: not in this "
                        "run's vocabularies, so nothing of them is excluded)%s", f if isinstance(f, (str, Path)) else
                        f"<{type(f).__name__}>",
                        f"{int((~keep).sum()):,}", plural(len(df), "row"), plural(int((u < 0).sum()), "row"),
                        plural(int(((u >= 0) & (i < 0)).sum()), "row"),
                        unknown_examples(run, df["user_id"].to_numpy()[u < 0],
                                         df["item_id"].to_numpy()[(u >= 0) & (i < 0)]))
        rows.append(u[keep])
        cols.append(i[keep])
    if not rows:
        return sp.csr_matrix((U, I), dtype=np.float32)
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    m = sp.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(U, I))
    m.data[:] = 1.0
    return m


_EMPTY_ROWS = np.empty(0, np.int64)


def _csr_rows(m: sp.csr_matrix, rows: np.ndarray) -> list[np.ndarray]:
    return [m.indices[m.indptr[r] : m.indptr[r + 1]].astype(np.int64) for r in rows.tolist()]


def recommend_users(
    run: TrainedRun,
    user_rows: np.ndarray,
    k: int,
    exclude: sp.csr_matrix | None,
    batch: int = 1024,
    *,
    index: VectorIndex | None = None,
    histories: Any = None,
    log_every_s: float | None = None,
    allow: np.ndarray | None = None,
    listed: np.ndarray | None = None,
    filter_exact_max: int | None = None,
) -> Results:
    """Top-k item rows for known users -> ``Results[B, K]`` (``index`` defaults to exact search).

    ``exclude`` is a ``[U, I]`` sparse matrix of pairs never to return.
    ``histories`` (:class:`twotower.pipeline.histories.InputHistories`)
    replaces the training history as the users' input. A row shorter than
    ``k`` (padded with -1) means fewer than ``k`` items were left; see
    :func:`twotower.index.shortfall`. ``log_every_s``: seconds between progress log lines (users
    done, users/s, ETA; None: none), so that ``--users all`` in a redirected log is not silent. ``allow``: the item
    rows every list is drawn from (``--filter``, :func:`twotower.serving.service.filter_allow`), searched as the
    service searches a filtered request. ``listed``: item rows left out of every list on top of ``exclude``
    (``--exclude-items``, ``exclude=``; :mod:`twotower.pipeline.exclusions`). ``filter_exact_max``: a filter matching
    at most this many items ranks them exactly, a broader one widens the index's search (``--filter-exact-max``;
    None: :attr:`ServiceSettings.filter_exact_max`, the service's default).
    """
    from twotower.pipeline.exclusions import with_listed

    if index is None:
        index, _ = open_run_index(run, exact=True)
    user_rows = np.asarray(user_rows, np.int64)
    embed = (lambda rows: user_query_vectors(run, rows))
    if histories is not None:  # every user's vector at once: each USER_CHUNK chunk of users embedded once
        vectors = history_query_vectors(run, histories, user_rows)
        at = {int(r): n for n, r in enumerate(user_rows.tolist())}
        embed = (lambda rows: vectors[[at[int(r)] for r in rows.tolist()]])
    parts: list[Results] = []
    progress = RateLog(log, "recommending", len(user_rows), "users", log_every_s, rate_unit="users")
    for s in range(0, len(user_rows), batch):
        chunk = user_rows[s : s + batch]
        queries = embed(chunk)  # [B, D]
        excl = _csr_rows(exclude, chunk) if exclude is not None else [_EMPTY_ROWS] * chunk.size
        excl = [with_listed(e, listed) for e in excl]
        if not any(e.size for e in excl):
            excl = None
        parts.append(index.search(queries, k, exclude=excl, **_allowed(allow, chunk.size, filter_exact_max)))
        progress.update(s + chunk.size)
    if not parts:
        return Results(np.zeros((0, k), np.int64), np.zeros((0, k), np.float32))
    return Results(np.concatenate([p.ids for p in parts]), np.concatenate([p.scores for p in parts]))


def _allowed(allow: np.ndarray | None, n: int, filter_exact_max: int | None = None) -> dict[str, Any]:
    """``index.search`` arguments of a filter (``allow``: item rows; None: none) for ``n`` queries: the service's,
    with ``filter_exact_max`` (None: its default), so a filtered list is the one POST /recommend returns from a server
    with the same setting."""
    if allow is None:
        return {}
    return {"allow": [allow] * n, "exact_subset_max": _exact_subset_max(filter_exact_max)}


def _exact_subset_max(filter_exact_max: int | None) -> int:
    """The allow-list size up to which a filter is ranked exactly: ``filter_exact_max``, None the service's default.
    One rule for the search (:func:`_allowed`) and for what :func:`measured_recall_notes` says of it."""
    return ServiceSettings.filter_exact_max if filter_exact_max is None else filter_exact_max


def long_history_note(run: TrainedRun, n_given: int, *, exclude_seen: bool = True,
                      distinct: int | None = None, rows: Sequence[int] | None = None) -> str | None:
    """The warning for a new user's history of ``n_given`` items when the user tower reads fewer (its
    ``history_len`` newest), else None: the list then rests on fewer items than were given. One sentence for
    ``recommend --history`` (stderr, and ``--json``'s ``warnings``), ``tt.recommend`` (logged) and POST /recommend
    (the answer's ``warnings``), which read the newest ``history_len`` alike but said nothing. ``distinct``: how many
    different items those are (None: all); a history of 500 copies of one item said "all 500 are left out of the
    list" of the one item, and not that the list rests on that item alone. ``rows``: the history's item rows, when
    known: its items without training interactions are not counted against the window, which never holds them."""
    from twotower.pipeline.similar import history_as_read  # here: similar imports this module

    L = int(run.model.history_len)
    # the tower leaves such items out whatever its window (their own warning says so): 6 trained items and 4 untrained
    # ones were said to be read as "the newest 8" of 10, while all 6 were read
    if (n_given if rows is None else int(history_as_read(run, rows).size)) <= L:
        return None
    said = f"history: {n_given} items given; the user tower reads the newest {L} (model.user.history_len)"
    if distinct == 1 and n_given > 1:  # a client filling a list with one id: say that the list rests on it alone
        left_out = ", which is left out of it" if exclude_seen else ""
        return (f"history: {n_given} items given, all the same item; the user tower reads the newest {L} "
                f"(model.user.history_len), so the list rests on that one item{left_out}; if that is not what was "
                "meant, send the user's items, oldest first")
    if not exclude_seen:
        return said
    if distinct is not None and distinct < n_given:  # items come back (re-watches): each is left out once
        return said + f", and the {distinct} different items among them are left out of the list"
    return said + f", and all {n_given} are left out of the list"


def recommend_history(
    run: TrainedRun, history_ids: list[str], k: int, exclude_seen: bool = True, *, index: VectorIndex | None = None,
    user_features: dict[str, Any] | None = None, allow: np.ndarray | None = None, listed: np.ndarray | None = None,
    log_feature_notes: bool = True, log_history_note: bool = True, filter_exact_max: int | None = None,
) -> Results:
    """Top-k for a user never seen in training, from a list of item ids (oldest first).

    ``user_features``: that user's features, column -> value (:meth:`TrainedRun.encode_user_features`);
    None reads every feature as missing. ``allow``, ``listed``: as :func:`recommend_users`'. ``log_feature_notes``:
    log the features' values training never saw (False: the caller says them, as `twotower recommend` does).
    ``log_history_note``: log :func:`long_history_note` (False: the caller says it, as `twotower recommend` does).
    ``filter_exact_max``: as :func:`recommend_users`'.
    """
    # an unknown id: POST /recommend's message, naming every unknown one (the caller locates it: --history)
    rows = rows_naming_every_unknown(history_ids, run.item_vocab.index, lambda pos, e: e)
    if index is None:
        index, _ = open_run_index(run, exact=True)
    feats = run.encode_user_features([user_features]) if user_features is not None else None
    for note in run.new_user_feature_notes(user_features) if log_feature_notes else ():  # read, but never silently
        log.warning("%s", note)
    note = (long_history_note(run, len(rows), exclude_seen=exclude_seen, distinct=len(set(rows)), rows=rows)
            if log_history_note else None)
    if note:  # said, as the list then rests on fewer items than were given
        log.warning("%s", note)
    from twotower.pipeline.similar import untrained_history_note  # here: similar imports this module

    if log_history_note and (cold := untrained_history_note(run, rows)):
        log.warning("%s", cold)
    vec = np.asarray(run.history_vectors([np.asarray(rows, np.int64)], features=feats), np.float32)  # [1, D]
    if feats is not None:  # named here: the index would refuse a NaN query naming no field
        check_finite_user(vec)
    from twotower.pipeline.exclusions import with_listed

    excl = with_listed(np.asarray(rows if exclude_seen else [], np.int64), listed)
    return index.search(vec, k, exclude=[excl] if excl.size else None, **_allowed(allow, 1, filter_exact_max))


def recommend(
    run: TrainedRun,
    user_ids: Iterable[str] | None = None,
    *,
    history: list[str] | None = None,
    user_features: dict[str, Any] | None = None,
    k: int = 10,
    exclude_seen: bool = True,
    exact: bool = False,
    history_from: Any = None,
    filters: dict[str, list[str]] | None = None,
    exclude: list[str] | None = None,
    filter_exact_max: int = ServiceSettings.filter_exact_max,
    index: str | Path | None = None,
) -> list[list[dict[str, Any]]]:
    """Top-``k`` lists, as ``twotower recommend --json`` prints them: one per user of ``user_ids``, or one for a
    new user's ``history`` (item ids, oldest first, at least one; with ``user_features`` their
    features). On a run trained with user features, ``history=[]`` with ``user_features`` serves a user with no
    history yet from their features alone.

    Each list holds ``{"item_id", "score", "rank", ...metadata}``; items the user has seen are left out
    unless ``exclude_seen`` is false. Ranked with the run's built index (``RUN/index``) as the CLI and
    the service rank, or by exact search when ``exact`` or when none is built; ``index``: another index folder
    built for the run (``recommend --index DIR``). ``history_from`` (with
    ``user_ids``): interaction files or DataFrames whose rows are the users' input histories instead of
    the training history, as ``twotower recommend --history-from``; their items count as seen. ``filters``:
    item metadata field -> values, as POST /recommend's ``filters`` (``{"genres": ["Comedy", "Drama"]}``: items
    whose genres hold either; several fields: every one), with its checks and refusals
    (``filters.genres: no item has the value 'Comdy'; did you mean 'Comedy'?``). ``exclude``: item ids never to
    list (already in the cart, already shown), on top of the seen items, as POST /recommend's ``exclude_items``;
    an unknown one is named as a history's (``exclude[1]: unknown item ...``). ``filter_exact_max``: a filter matching
    at most this many items ranks them exactly, a broader one widens the index's search (``recommend
    --filter-exact-max``, ``serve --filter-exact-max``, with their default; an IVF index filters during its search,
    so it has no effect there). Example::

        run = tt.TrainedRun.load("runs/ml")
        for item in tt.recommend(run, ["42"], k=5)[0]:
            print(item["rank"], item["item_id"], item.get("title"))
    """
    check_loaded_run(run, "recommend")
    exclude_seen, exact = check_flag(exclude_seen, "exclude_seen"), check_flag(exact, "exact")
    check_index_argument(index, exact)
    if (user_ids is None) == (history is None):
        raise ConfigError("give exactly one of user_ids (known users) or history (item ids of a new user)")
    if (why := k_refusal(k)) is not None:  # the words of `recommend --k` and POST /recommend
        raise ConfigError(f"k: {why}")
    filter_exact_max = checked_filter_exact_max(filter_exact_max)  # `recommend --filter-exact-max`'s check
    if user_features is not None and history is None:
        # POST /recommend's words, with this function's argument
        raise ConfigError(f"user_features: {known_user_features_refusal('user_ids')}")
    # POST /recommend's bounds (64 columns, names of 64 characters), in its words: any size was taken from Python
    refuse_oversized_user_features(user_features)
    if history_from is not None and history is not None:
        raise ConfigError("history_from reads known users' histories; history describes one new user: use one "
                          "or the other")
    if history is not None:  # checked before the index is opened, as the CLI checks --history
        # an empty list: refused, as `recommend --history` and HTTP refuse it (before any lookup), unless
        # user_features alone describe the user on a run that reads them; a column the run does not read is named
        # after the filters and exclusions, as POST /recommend names it
        refuse_empty_history(history, run=run, user_features=user_features)
    if user_ids is not None:  # checked before the index is opened, as history above
        if not is_id_list(user_ids):  # user_ids=42: a bare TypeError ("'int' object is not iterable")
            # the words of history=, exclude= and POST /recommend's 422 (it said "user_ids is a list of user ids")
            raise ConfigError(f"user_ids: {id_list_refusal(python_type_words(user_ids), user_ids, what='user')}")
        user_ids = check_ids(list(user_ids), "user_ids", "user")  # a generator is read once: here and below
        # "" was "unknown user ''": named by its place in POST /recommend's words, before the index is opened
        empty = next((pos for pos, u in enumerate(user_ids) if isinstance(u, str) and not u.strip()), None)
        if empty is not None:
            raise ConfigError(f"user_ids[{empty}]: {empty_user_id_refusal()}")
    from twotower.serving.service import filter_allow, run_filter_mask

    mask = run_filter_mask(run, filters)  # checked before the index is opened, in POST /recommend's words
    from twotower.pipeline.exclusions import listed_rows

    listed = listed_rows(exclude, run.item_vocab.index, lambda pos, e: locate(e, f"exclude[{pos}]"))
    if history is not None:  # after the filters and exclusions, as POST /recommend and `recommend --history` look them up
        history = check_new_history(history, run=run, user_features=user_features)
        run.encode_new_user_features(user_features)  # a bad column or value named before an unknown history id
        # an unknown id named by its place, as POST /recommend names it, and every other unknown one after it
        rows_naming_every_unknown(history, run.item_vocab.index, lambda pos, e: locate(e, f"history[{pos}]"))
    histories = None
    if history_from is not None:  # read (and checked) before the index is opened
        from twotower.pipeline.histories import read_input_histories

        histories = read_input_histories(run, history_from)
    served = open_served_index(run, index, exact=exact, exact_flag="exact=True")
    index, used = served.index, served.description
    allow = filter_allow(mask, index)
    log.info("ranking with %s", used)  # the line `twotower recommend` prints and `serve` logs: which index answered
    for note in measured_recall_notes(served, int(k), allow, filter_exact_max, exact_flag="exact=True",
                                      filter_flag="filters"):
        log.warning("%s", note)
    if history is not None:
        res = recommend_history(run, history, int(k), exclude_seen, index=index, user_features=user_features,
                                allow=allow, listed=listed, filter_exact_max=filter_exact_max)
        log_shortfall(res, int(k), ["the history"], filtered=mask is not None, index_size=len(index))
        return [results_to_items(run, res)]
    assert user_ids is not None
    # an unknown id named by its place (user_ids[3]: unknown user ...), then every other unknown one, in the words of
    # `recommend --users` and POST /recommend
    rows = np.asarray(rows_naming_every_unknown(
        list(user_ids), run.user_row, lambda pos, e: locate(hint_unknown_user(e, run), f"user_ids[{pos}]"),
        what=USER_LIST), np.int64)
    exclude = exclusions_from_files(run, [], include_seen=exclude_seen) if exclude_seen else None
    if histories is not None and exclude_seen:
        from twotower.pipeline.histories import exclude_histories

        exclude = exclude_histories(exclude, histories)  # the input history counts as seen
    if (note := no_input_history_note(run, rows, histories, "history_from")) is not None:
        log.warning("%s", note)  # as `recommend` tells stderr and POST /recommend's warnings say
    res = recommend_users(run, rows, int(k), exclude, histories=histories, index=index, allow=allow, listed=listed,
                          filter_exact_max=filter_exact_max)
    log_shortfall(res, int(k), [f"user {u}" for u in user_ids], filtered=mask is not None, index_size=len(index))
    return [results_to_items(run, res, q) for q in range(len(rows))]


def no_input_history_note(run: TrainedRun, rows: Sequence[int], histories: Any, source: str) -> str | None:
    """``1 of 2 users have no rows of known items in the --history-from files (e.g. user 42): ...``, or None when
    every user of ``rows`` has one (or there are no input ``histories``): what `twotower recommend` tells stderr and
    ``tt.recommend`` logs, each naming its own argument (``source``). Such a user's list is the empty-history one,
    not one read from their training history, which a user who misspelt a file or its ids would otherwise take
    for an answer (from Python it came back without a word). A user whose rows are all of items without training
    interactions is one (:func:`~twotower.pipeline.histories.empty_as_read`): the tower reads none of them."""
    if histories is None:
        return None
    from twotower.pipeline.histories import empty_as_read

    empty, untrained = empty_as_read(run, histories, np.asarray(rows, dtype=np.int64))
    if not len(empty):
        return None
    return (f"{len(empty)} of {len(rows)} users have no rows of known items in the {source} files (e.g. user "
            f"{run.user_vocab.id_at(int(empty[0]))}{untrained}): each is ranked from an empty input history, not from "
            "their training history")


def shortfall_note(res: Results, k: int, who: list[str], *, filtered: str | None = None,
                   index_size: int | None = None) -> str | None:
    """``2 of 5 lists are shorter than k=10 because fewer items are left after exclusions (e.g. user 42: 7 of
    10)``, or None when every list holds ``k``: what `twotower recommend` tells stderr and ``tt.recommend`` logs.
    ``who``: each list's owner in words; ``filtered``: how the caller names its filters (``--filter``), when any;
    ``index_size``: the items the index searches, when known. A ``k`` above it is said as the cause: with nothing
    excluded, k=2000 on 1,677 items read "fewer items are left after exclusions", and the user looked for them."""
    from twotower.index import shortfall

    short = shortfall(res, k)
    if not short.any():
        return None
    worst = int(short.argmax())
    got = k - int(short[worst])
    after = f"after {f'{filtered} and ' if filtered else ''}exclusions"
    if index_size is not None and index_size < k:
        why = f"k is more than the {index_size:,} items in the index"
        if got < index_size:  # the worst list lost items to the exclusions (or filters) as well
            why += f", and fewer are left {after}"
    else:
        why = f"fewer items are left {after}"
    return (f"{int((short > 0).sum())} of {len(short)} lists are shorter than k={k} because {why} (e.g. "
            f"{who[worst]}: {got} of {k})")


def log_shortfall(res: Results, k: int, who: list[str], *, filtered: bool = False,
                  index_size: int | None = None) -> None:
    """:func:`shortfall_note` logged: from Python the short lists came back without a word."""
    if (note := shortfall_note(res, k, who, filtered="filters" if filtered else None,
                               index_size=index_size)) is not None:
        log.warning("%s", note)


def results_to_items(run: TrainedRun, res: Results, q: int = 0) -> list[dict[str, Any]]:
    """``[{"item_id", "score", "rank", ...metadata, "display_name"}]`` for query ``q``: the records, keys in their
    order, of the service's answers (:func:`twotower.serving.service.catalog_items`), so ``tt.recommend`` /
    ``tt.similar``, the CLI's ``--json`` and HTTP agree (``display_name`` was the service's alone). Row by row:
    the whole id list is never copied (tests/explain/test_id_lookups.py)."""
    from twotower.explain.explainer import run_item_names, run_title_column
    from twotower.explain.names import name_of

    names, col = run_item_names(run), run_title_column(run)  # worked out once per run
    ids, sc = res.row(q)
    out = []
    for r, (i, s) in enumerate(zip(ids, sc), start=1):
        meta = run.item_record(int(i))
        item_id = meta.pop("item_id")
        title = meta.get(col) if col else None
        out.append({"item_id": item_id, "score": answer_score(s), "rank": r, **meta,
                    "display_name": name_of(title, item_id, names)})
    return out
