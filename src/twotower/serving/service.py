"""The recommender behind the HTTP routes: plain Python, no web framework.

Legend: ``B`` requests in a batch, ``D`` embedding dim, ``K`` top-k, ``I`` items,
``U`` users, ``L`` history length.

Loaded once (model, vocabularies, item metadata, index); each request
resolves to a query vector (a cached known-user vector, or the user tower run
on an ad-hoc history), searches the index once per batch with per-query
exclusions, and turns rows into ``{"item_id", "score", "rank", ...metadata}``.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from functools import partial, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from twotower.errors import ConfigError, DataError, IntegrityError, NotFoundError
from twotower.index import VectorIndex
from twotower.pipeline.refusals import empty_user_id_refusal, hint_unknown_user, k_refusal, refuse_oversized_user_features, too_long, too_many
from twotower.pipeline.similar import (UNPLACED, cold_item_mask, similar_items, unplaced_item_mask, unplaced_item_note,
                                       unplaced_list_note, unplaced_note, untrained_history_note)
from twotower.serving.catalog import ItemCatalog, filters_at
from twotower.serving.settings import (MAX_FIELD_NAME_CHARS, MAX_FILTER_FIELDS, MAX_FILTER_VALUES, MAX_ID_CHARS,
                                       ServiceSettings)
from twotower.serving.errors import FeatureUnavailable, UnknownIdAt
from twotower.serving.threads import service_threads
from twotower.results import answer_score

if TYPE_CHECKING:
    from twotower.models.history import UserSequences
    from twotower.pipeline.artifacts import TrainedRun

__all__ = ["RecommenderService", "RecRequest", "catalog_items", "filter_allow", "recommend_answer", "run_filter_mask", "similar_answer"]

log = logging.getLogger(__name__)

_EMPTY = np.empty(0, dtype=np.int64)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RecRequest:
    """One recommendation request: a known ``user_id`` or an ad-hoc ``history`` of item ids (oldest first)."""

    user_id: str | None = None
    history: tuple[str, ...] | None = None
    user_features: Mapping[str, Any] | None = None
    # None: the service's default_k (at most its max_k), the k POST /recommend answers a body without one with;
    # the class's 10 served Python callers 10 items where the same service's HTTP answered its default_k
    k: int | None = None
    exclude_seen: bool = True
    # item ids never to list in this answer (in the cart, shown already), on top of the seen items
    exclude_items: tuple[str, ...] | None = None
    filters: Mapping[str, Sequence[str]] | None = field(default=None)
    explain: bool = False
    # with explain: how many of the first items get an explanation; None = the service's explain_k.
    # Each explanation costs a tower pass per history item, so it is bounded for Python callers too.
    explain_k: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.user_id, str) and self.user_id != self.user_id.strip():
            # the id POST /recommend reads (coerce_id) and echoes: user_id=' 42' served user 42 and answered
            # "user_id": " 42", where HTTP answered "42" for the same body
            object.__setattr__(self, "user_id", self.user_id.strip())
        if self.user_id == "":  # POST /recommend's 422 (its schema refuses it): it was "unknown user ''" here
            raise ConfigError(f"user_id: {empty_user_id_refusal()}")
        if (self.user_id is None) == (self.history is None):
            raise ConfigError("give exactly one of user_id (a known user) or history (item ids, oldest first)")
        if isinstance(self.filters, Mapping) and not self.filters:
            # {} is no filter, as POST /recommend applies none for "filters": {}: its shortfall said "after the filters"
            object.__setattr__(self, "filters", None)
        # the filters' shape ({"genres": "Comedy"} is refused: it was read letter by letter) is checked by the service
        # (check_filters), after the fields POST /recommend's schema reads before them: checked here, as the request
        # was made, a 501-id history sent with {"genres": "Comedy"} was refused for the filters, over HTTP for the history
        if self.history is not None and not isinstance(self.history, (str, bytes)):  # a string: history_rows says it
            from twotower.utils.arguments import check_history

            check_history(self.history)  # its type: a set has no order
        # an empty history is refused by the service, with its run (a user with no history yet is served from
        # user_features alone on a run reading them), after the schema's checks as POST /recommend refuses it: here it
        # came before k=0, an over-long exclude_items or explain_k without explain, which HTTP names first.
        # k (k=0, k="5") is refused by the service (check_sizes), in the words of POST /recommend's 422, after a too long
        # history or too many user_features, as the schema checks its fields in that order: k="5" was refused here,
        # as the request was made, where HTTP named the history first
        # explain_k is checked by the service (check_explain_k), after k, as POST /recommend's schema reads its fields


def check_explain_k(req: RecRequest, cap: int) -> None:
    """A request's ``explain_k``: a positive integer, at most the service's ``explain_k`` (``cap``), and only with
    ``explain``. Checked by the service after the request's sizes and ``k``, as POST /recommend's schema checks it
    (its last field): RecRequest refused it as it was made, so with k=0 Python named explain_k and HTTP k."""
    explain_k = req.explain_k
    if explain_k is None:
        return
    # the words and order of POST /recommend's 422 (its value's bounds, then explain): it said "must be at most 10
    # (this server's explain_k: ...)" where Python said "explain_k 11 is above this service's explain_k 10 ..."
    if (why := k_refusal(explain_k, cap, server_setting="explain_k")) is not None:
        raise ConfigError(f"explain_k: {why}")
    if not req.explain:  # as POST /recommend's 422: never silently ignored
        raise ConfigError("explain_k needs explain=True (it says how many of the first items get an explanation, "
                          "and without explain none do); pass both, or neither")


#: :meth:`RecommenderService.check_sizes` without a ``k`` to check (None is a k it refuses)
_NOT_GIVEN: Any = object()


def _index_ids(index: VectorIndex) -> np.ndarray | None:
    ids = getattr(index, "ids", None)
    if ids is None:
        ids = getattr(index, "_ids", None)  # FaissIndex keeps them privately
    return None if ids is None else np.asarray(ids, dtype=np.int64)


def _in_index(index: VectorIndex, n_items: int) -> np.ndarray:
    """``[I]`` bool, the item rows ``index`` holds."""
    ids = _index_ids(index)
    in_index = np.zeros(n_items, dtype=bool)
    if ids is None:
        in_index[: len(index)] = True
    else:
        if ids.size and (ids.min() < 0 or ids.max() >= n_items):
            raise IntegrityError(f"the index holds item rows outside 0..{n_items - 1}; rebuild it for this run")
        in_index[ids] = True
    return in_index


def run_filter_mask(run: Any, filters: Mapping[str, Sequence[str]] | None, *,
                    field_at: Callable[[str], str] | None = None,
                    item_at: Callable[[int, int], str] | None = None) -> np.ndarray | None:
    """``[I]`` bool, the items of ``run`` that ``filters`` allow (None: no filter): the service's filter code
    (:meth:`ItemCatalog.filter_mask`, its checks and words) for `twotower recommend/similar --filter` and
    ``tt.recommend/tt.similar(filters=...)``, so the three interfaces filter alike. ``field_at``: how the caller
    names a field in a refusal (``filters.genres`` by default, ``--filter genres`` on the command line); ``item_at``:
    an ``item_id`` value's place (:meth:`ItemCatalog.filter_mask`'s).
    Needs no index: a mistyped field or value is refused before one is opened."""
    from twotower.serving.catalog import check_filters, filters_at

    filters = check_filters(filters)
    if not filters:  # {}: no filter, as POST /recommend reads "filters": {}
        return None
    return ItemCatalog.from_run(run).filter_mask(filters, field_at=field_at or filters_at, item_at=item_at)


def filter_allow(mask: np.ndarray | None, index: VectorIndex) -> np.ndarray | None:
    """The item rows of ``mask`` (:func:`run_filter_mask`) that ``index`` holds, the ``allow`` list of its search,
    as the service makes it; None for no filter."""
    return None if mask is None else np.flatnonzero(mask & _in_index(index, len(mask)))


def _on_service_threads(method: Callable[..., T]) -> Callable[..., T]:
    """``method`` computed on the service's thread counts (``settings.threads``), the caller's back after it."""

    @wraps(method)
    def call(self: "RecommenderService", *args: Any, **kwargs: Any) -> T:
        with service_threads(self.settings.threads):
            return method(self, *args, **kwargs)

    return call


#: the end of a batch error's message: one bad request refuses the whole batch
BATCH_NOTE = "the other requests were not answered"


def _at_request(b: int, n: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` for request ``b`` of a batch of ``n``; in a batch an error names its request
    (``requests[3].filters.genres: ...``, ``requests[1].history[2]: ...``): "filters.genres" alone does
    not say which of 256 requests to fix. ``n`` is 0 for a request sent alone (``POST /recommend``,
    :meth:`RecommenderService.recommend`), whose errors are unchanged (``history[2]: ...``). A batch of one
    names ``requests[0]`` too: a client reading ``field`` got ``history[2]`` or no field at all from a batch
    only when it held one request."""
    try:
        return fn(*args)
    except NotFoundError as e:
        if n < 1:
            raise
        field = e.field if isinstance(e, UnknownIdAt) else "user_id"  # the one id looked up without a place
        raise UnknownIdAt(f"requests[{b}].{field}", e, BATCH_NOTE if n > 1 else "") from None
    except (ConfigError, DataError) as e:
        if n < 1:
            raise
        note = f"; {BATCH_NOTE}" if n > 1 else ""  # a batch of one has no other requests
        raise type(e)(f"requests[{b}].{e.message if isinstance(e, DataError) else e}{note}") from None


#: what a recommendation list leaves out (``exclude_seen``), in a shortfall's reason
SEEN = "the excluded (seen) items"


def _shortfall(k: int, got: int, *, filtered: bool, excluded: str | None) -> dict[str, Any]:
    """Why a list holds fewer than ``k`` items: the index returns ``k`` whenever ``k`` are eligible.
    ``excluded`` names what the search left out (None: nothing): /similar-items leaves out its own item, which
    is no one's "seen" item."""
    why = [w for w, on in (("the filters", filtered), (excluded, excluded is not None)) if on]
    left = f"are left in the index after {' and '.join(why)}" if why else "are in the index"  # not "after nothing"
    return {"missing": k - got, "reason": f"fewer than k={k} items {left}; all {got} eligible items are returned"}


def catalog_items(catalog: ItemCatalog, rows: np.ndarray, scores: np.ndarray) -> list[dict[str, Any]]:
    """``[{"item_id", "score", "rank", ...metadata, "display_name"}]`` of ranked item ``rows``: an answer's items."""
    out = []
    for rank, (row, score) in enumerate(zip(rows.tolist(), scores.tolist()), start=1):
        item = {"item_id": catalog.ids[row], "score": answer_score(score), "rank": rank}
        for name, values in catalog.columns.items():
            item[name] = values[row]
        item["display_name"] = catalog.display_name(row)  # as ItemCatalog.record gives it
        out.append(item)
    return out


def similar_answer(catalog: ItemCatalog, item_id: str, k: int, rows: np.ndarray, scores: np.ndarray, space: str,
                   *, filtered: bool = False, unplaced: np.ndarray | None = None,
                   listed: bool = False) -> dict[str, Any]:
    """The answer of ``POST /similar-items`` (and ``twotower similar --json``): ``{"items", "item_id", "k",
    "query_space"[, "warnings"][, "shortfall"]}`` for the neighbours ``rows`` (valid ones, best first) of
    ``item_id``; an item the model cannot place (space ``"none"``) has none, and a warning says why. ``unplaced``
    ``[I]``: such items; a list that holds one says so, as ``/recommend``'s does. ``listed``: the request listed
    items to leave out (``exclude_items``), named in a shortfall's reason."""
    answer = {"items": catalog_items(catalog, rows, scores), "item_id": item_id, "k": k, "query_space": space}
    hit = np.asarray(rows, np.int64)[unplaced[rows]] if unplaced is not None and len(rows) else np.empty(0, np.int64)
    if space == UNPLACED:  # the warning is the reason: "fewer than k items are left in the index" is not
        answer["warnings"] = [unplaced_note(item_id)]
    elif hit.size:  # a tower with a hidden layer maps the zeroed ID to a vector near many items: such items ranked
        answer["warnings"] = [unplaced_list_note([catalog.ids[int(r)] for r in hit])]  # 3rd-5th on a tiny run
    if space != UNPLACED and len(rows) < k:
        answer["shortfall"] = _shortfall(k, len(rows), filtered=filtered, excluded=similar_excluded(item_id, listed))
    return answer


def recommend_answer(items: list[dict[str, Any]], user_id: str | None, k: int, *, filtered: bool = False,
                     exclude_seen: bool = True, listed: bool = False, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The answer of ``POST /recommend`` (and ``twotower recommend --user/--history --json``): ``{"items",
    "user_id", "k"[, "warnings"][, "shortfall"]}`` around one request's :func:`catalog_items`. ``listed``: the
    request listed items to leave out (``exclude_items``), named in a shortfall's reason."""
    from twotower.pipeline.exclusions import LISTED

    answer: dict[str, Any] = {"items": items, "user_id": user_id, "k": k}
    if notes:
        answer["warnings"] = list(notes)
    if len(items) < k:
        excluded = " and ".join(w for w, on in ((SEEN, exclude_seen), (LISTED, listed)) if on) or None
        answer["shortfall"] = _shortfall(k, len(items), filtered=filtered, excluded=excluded)
    return answer


def similar_excluded(item_id: str, listed: bool = False) -> str:
    """What /similar-items leaves out, in a shortfall's reason: the query item itself (and, ``listed``, the
    request's ``exclude_items``)."""
    from twotower.pipeline.exclusions import LISTED

    return f"leaving out item {item_id!r} itself" + (f" and {LISTED}" if listed else "")


def served_index_source(run_dir: str | Path | None, index_dir: str | Path | None) -> dict[str, Any]:
    """What GET /readyz says of the saved index served from ``index_dir`` (None: exact search over the item
    vectors, or an index handed over from Python: every value None, ``in_run`` false).

    ``path``: the folder relative to the run when it lies inside it (``"index"``), else its name alone; as
    /users' ``history_source``, the server's file system layout (home folder, user name, mounts) is not shown to
    an unauthenticated client (``twotower serve`` prints the full path). ``in_run``: whether it is the run's own.
    ``created``, ``meta_sha256`` (the digest of meta.json, which holds every file's sha256: it tells one build from
    another, as ``index info --json`` shows it) and ``twotower_version`` (None for an index saved before it was
    recorded) are meta.json's."""
    if index_dir is None:
        return {"path": None, "in_run": False, "created": None, "meta_sha256": None, "twotower_version": None}
    from twotower.index.storage import read_meta
    from twotower.utils.version import VERSION_KEY

    folder = Path(index_dir).resolve()
    try:
        path, in_run = folder.relative_to(Path(run_dir).resolve()).as_posix(), True
    except (TypeError, ValueError):  # no run folder, or the index lies outside it
        path, in_run = folder.name, False
    meta = read_meta(folder)  # checked already by the load that opened the index
    return {"path": path, "in_run": in_run, "created": meta.get("created"), "meta_sha256": meta.get("meta_sha256"),
            VERSION_KEY: meta.get(VERSION_KEY)}


def check_run_arg(run_dir: Any) -> None:
    """``run_dir`` of ``create_app`` / ``RecommenderService.load``: a run folder or a loaded ``TrainedRun``."""
    from twotower.pipeline.artifacts import TrainedRun

    if not isinstance(run_dir, (TrainedRun, str, os.PathLike)):  # was pathlib's bare TypeError at startup
        raise ConfigError(f"run_dir: a run folder (str or Path) or a run loaded with tt.TrainedRun.load, "
                          f"not {type(run_dir).__name__}")


class RecommenderService:
    """Recommendations, similar items, item lookups and explanations over one run and one index.

    ``catalog`` and ``item_vectors`` default to the run's items; a benchmark
    may pass a larger synthetic catalogue (the index must hold its rows).
    ``user_vectors`` ``[U, D]`` are the known users' query vectors when the
    caller has them already (``twotower serve --workers N`` hands every worker
    the same memory-mapped file); else they are computed here. ``histories``
    (:class:`~twotower.pipeline.histories.InputHistories`, ``twotower serve
    --history-from F...``): known users are embedded from these input histories
    instead of the training history, and their items count as seen, exactly as
    ``twotower recommend --history-from F...`` ranks them.
    """

    def __init__(
        self,
        run: Any,
        index: VectorIndex,
        *,
        settings: ServiceSettings | None = None,
        catalog: ItemCatalog | None = None,
        item_vectors: np.ndarray | None = None,
        user_vectors: np.ndarray | None = None,
        histories: Any = None,
    ) -> None:
        import torch

        self.run = run
        if histories is not None and len(histories.sequences.indptr) - 1 != len(run.user_vocab):
            raise ConfigError("input histories were read for another run (user count differs)")
        self.histories = histories
        self.index = index
        self.settings = settings or ServiceSettings()
        self.catalog = catalog if catalog is not None else ItemCatalog.from_run(run)
        vectors = run.item_embeddings() if item_vectors is None else item_vectors
        self.item_vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # [I, D]
        n_items = len(self.catalog)
        if self.item_vectors.shape[0] != n_items:
            raise IntegrityError(f"{self.item_vectors.shape[0]} item vectors for {n_items} catalogue items")
        if index.dim != self.item_vectors.shape[1]:
            raise IntegrityError(
                f"the index holds vectors of dim {index.dim} but the model embeds items in dim "
                f"{self.item_vectors.shape[1]}; rebuild it with `twotower index build --run DIR`"
            )
        self.in_index = _in_index(index, n_items)  # [I]
        self.fingerprint = run.fingerprint()
        #: Which index answers, in words (set by :meth:`load`; printed by `twotower serve`).
        self.index_description = f"{type(index).__name__} over {len(index):,} items"
        self.index_recall: dict[str, Any] | None = None  # the index's recall measured at build (pipeline.recommend)
        #: Which saved index answers (GET /readyz's index path and build; set by :meth:`load`): none read here.
        self.index_source: dict[str, Any] = served_index_source(None, None)
        self.model_items = int(run.n_items)  # rows the item tower (and so a history) knows
        self.cold_items = cold_item_mask(run)  # [I] of a dual-head run: queried by their semantic head
        # [I] the model cannot place: no /similar-items list; a catalogue larger than the run's items (a benchmark's
        # synthetic one) has rows the model never named, which are not such items
        self.unplaced_items = np.zeros(n_items, dtype=bool)
        unplaced = unplaced_item_mask(run)[:n_items]
        self.unplaced_items[: len(unplaced)] = unplaced
        self.supports_history = getattr(run.model.user_tower, "id_emb", None) is None
        self.user_vectors: np.ndarray | None = None  # [U, D] cache of known users
        self.precompute_s: float | None = None  # seconds the start-up took to compute user_vectors
        n_users = len(run.user_vocab)
        if user_vectors is not None:
            if user_vectors.shape != (n_users, self.item_vectors.shape[1]):
                raise IntegrityError(f"user vectors of shape {user_vectors.shape} for {n_users} users of dim "
                                     f"{self.item_vectors.shape[1]}")
            self.user_vectors = user_vectors
        elif n_users <= self.settings.precompute_users_max:
            # kept: a known user's vector is computed in its USER_CHUNK of users (the floats `twotower recommend`
            # gets), so without it the first request of each chunk would embed up to 65,536 users itself (a
            # sequence tower: seconds); `twotower serve` names this time in its start-up line
            started = time.perf_counter()
            with torch.inference_mode():  # the same chunks as `twotower recommend`, so the same vectors
                self.user_vectors = self._known_user_vectors(np.arange(n_users))
            self.precompute_s = time.perf_counter() - started
        self._warm_index()
        log.info("service ready: %d items (%d indexed, %s), %d users%s, fingerprint %s",
                 n_items, int(self.in_index.sum()), type(index).__name__, n_users, self.precompute_note(),
                 self.fingerprint)

    def precompute_note(self) -> str:
        """``"; N users' vectors precomputed in S s"`` when the service cached them at start-up, else ``""``."""
        if self.precompute_s is None or self.user_vectors is None:
            return ""
        return f"; {len(self.user_vectors):,} users' vectors precomputed in {self.precompute_s:.1f} s"

    def _warm_index(self) -> None:
        """One search at start-up, so that the first request does not pay the index's one-off work: exact search
        computes the catalogue's largest vector norm on its first call (190 ms over 42,000 items) and imports
        FAISS; a first POST /recommend took 186-244 ms against 5-8 ms for the next ones."""
        if len(self.index) and self.item_vectors.shape[0]:
            self.index.search(self.item_vectors[:1], 1)
        self._warm_explain()

    def _warm_explain(self) -> None:
        """One explanation at start-up, for the same reason: the first POST /explain imported the explainer and built
        its lookups (88-206 ms against 5-12 ms for the next ones on MovieLens-100K; a 503 under a 0.1 s budget)."""
        users = np.flatnonzero(self.run.history.lengths() > 0)
        if not len(users) or not self.run.n_items:
            return
        try:
            self.explain(item_id=self.run.item_vocab.id_at(0), user_id=self.run.user_vocab.id_at(int(users[0])))
        except Exception as e:  # noqa: BLE001 - a warm-up only: a request that meets the same error is told of it
            log.debug("explanation warm-up skipped: %s", e)

    def _known_user_vectors(self, rows: np.ndarray) -> np.ndarray:
        """``[B, D]`` query vectors of known users: from the input histories when served with them, else as
        `twotower recommend` computes them (its chunks, so the same floats)."""
        from twotower.pipeline.recommend import history_query_vectors, user_query_vectors

        if self.histories is not None:  # the run is loaded once and never edited: its weights are not re-checked
            return history_query_vectors(self.run, self.histories, rows, fixed_weights=True)
        return user_query_vectors(self.run, rows, fixed_weights=True)

    def _no_input_history(self, row: int | None) -> bool:
        """A known user (``row``) with no rows in the ``serve --history-from`` files (or only rows of unknown items): read from an empty history."""
        return row is not None and self.histories is not None and self.histories.sequences.lengths()[row] == 0

    @property
    def read_histories(self) -> UserSequences:
        """The known users' histories the user tower reads: the ``--history-from`` files', else the training one."""
        return self.histories.sequences if self.histories is not None else self.run.history

    def seen_of(self, row: int) -> np.ndarray:
        """``[S]`` item rows a known user's list leaves out as seen: the training history and the input history,
        as `recommend --history-from` excludes them."""
        seen = np.asarray(self.run.history.of(row), dtype=np.int64)
        if self.histories is None:
            return seen
        return np.union1d(seen, self.histories.sequences.of(row)).astype(np.int64, copy=False)

    def _input_history_note(self, row: int | None, user_id: str | None) -> str | None:
        """The warning for a known user whose ``serve --history-from`` history holds items without training
        interactions, which the tower leaves out as it does of a new user's ``history`` (None otherwise)."""
        if row is None or self.histories is None:
            return None
        return untrained_history_note(self.run, self.histories.sequences.of(row),
                                      f"user_id: {user_id!r}, history in the serve --history-from files")

    def _known_history(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """``(items[L], timestamps[L])``, oldest first: what the user tower reads for a known user."""
        seqs = self.read_histories
        start, end = int(seqs.indptr[row]), int(seqs.indptr[row + 1])
        return seqs.items[start:end], seqs.timestamps[start:end]

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        run_dir: str | Path | TrainedRun,
        index_dir: str | Path | None = None,
        *,
        settings: ServiceSettings | None = None,
        allow_low_recall: bool = False,
        exact: bool = False,
        history_from: Any = None,
        exact_flag: str = "exact=True",
        allow_flag: str = "allow_low_recall=True",
    ) -> "RecommenderService":
        """Load a run and its index (``index_dir``, else ``RUN/index`` if built, else exact search;
        ``exact=True``: exact search whatever is built). ``run_dir`` may be a run already loaded
        (``tt.TrainedRun.load(RUN)``): it is served as it is, not read again.

        A saved index built for another model raises IntegrityError; one whose
        recall measured at build time missed its target raises ConfigError
        (saying what was measured) unless ``allow_low_recall``. ``history_from``: interaction files (or
        DataFrames) read as the known users' input histories, as ``twotower recommend --history-from``.
        ``exact_flag`` / ``allow_flag``: how those refusals name the way around them, this method's own arguments
        unless the caller's user gives others (`twotower serve` passes ``--exact`` / ``--allow-low-recall``).
        """
        settings = settings or ServiceSettings()
        with service_threads(settings.threads):  # the user vectors and the warm-up computed on the service's counts
            return cls._load(run_dir, index_dir, settings, allow_low_recall=allow_low_recall, exact=exact,
                             history_from=history_from, exact_flag=exact_flag, allow_flag=allow_flag)

    @classmethod
    def _load(cls, run_dir: str | Path | TrainedRun, index_dir: str | Path | None, settings: ServiceSettings, *,
              allow_low_recall: bool, exact: bool, history_from: Any, exact_flag: str,
              allow_flag: str) -> "RecommenderService":
        from twotower.pipeline.artifacts import TrainedRun
        from twotower.pipeline.recommend import open_served_index

        check_run_arg(run_dir)
        run = run_dir if isinstance(run_dir, TrainedRun) else TrainedRun.load(run_dir)
        histories = None
        if history_from is not None:  # read (and checked) before the index is opened, as `recommend` does
            from twotower.pipeline.histories import read_input_histories

            histories = read_input_histories(run, history_from)
        served = open_served_index(run, index_dir, exact=exact, allow_low_recall=allow_low_recall,
                                   exact_flag=exact_flag, allow_flag=allow_flag, item_queries=True)
        log.info("serving from %s", served.description)
        service = cls(run, served.index, settings=settings, histories=histories)
        service.index_description = served.description
        service.index_recall = served.recall  # from the tune.json the index was checked against, read once
        service.index_source = served_index_source(run.dir, served.directory)
        return service

    # ------------------------------------------------------------------ facts
    def index_info(self) -> dict[str, Any]:
        return {
            "backend": self.index.backend,
            "factory": getattr(self.index, "factory", None),
            "params": self.index.search_params,
            "count": len(self.index),
            "dim": self.index.dim,
            "is_exact": bool(self.index.is_exact),
            "model_fingerprint": self.index.model_fingerprint,
            # measured against exact search when built; met_target false only under serve --allow-low-recall
            "recall": self.index_recall,
            # which index this is: /readyz named its model, never its folder or build, so two servers of one
            # model (a rebuilt index, another --index) could not be told apart
            "kind": "exact" if self.index.is_exact else "approximate",
            **self.index_source,
        }

    def readiness(self) -> dict[str, Any]:
        match = self.index.model_fingerprint == self.fingerprint
        return {
            "ready": bool(match),
            "model_fingerprint": self.fingerprint,
            "fingerprint_match": bool(match),
            "n_items": len(self.catalog),
            "n_users": len(self.run.user_vocab),
            "index": self.index_info(),
        }

    def item(self, item_id: str) -> dict[str, Any]:
        row = self.catalog.row(item_id)
        rec = self.catalog.record(row)
        rec["in_index"] = bool(self.in_index[row])
        if self.unplaced_items[row]:
            rec["warnings"] = [unplaced_item_note(item_id)]
        return rec

    def unplaced_in(self, rows: np.ndarray) -> list[str]:
        """A list's ``warnings`` entry when its item ``rows`` hold items the model cannot place (none: [])."""
        rows = np.asarray(rows, np.int64)
        hit = rows[self.unplaced_items[rows]]
        return [unplaced_list_note([self.catalog.ids[int(r)] for r in hit])] if hit.size else []

    def user(self, user_id: str, limit: int = 50) -> dict[str, Any]:
        """A known user's history as the user tower reads it (the training history, or the input history of
        ``--history-from``: ``history_source``, the files' names without their folders), newest first (at most ``limit`` items)."""
        row = self._user_row(user_id)
        items, stamps = self._known_history(row)  # oldest first
        history = []
        for item_row, ts in zip(items[::-1][:limit], stamps[::-1][:limit]):
            rec = self.catalog.record(int(item_row))
            rec["timestamp"] = int(ts)
            history.append(rec)
        # the files' names only: the paths given to `serve --history-from` are the server's file system layout
        # (home folder, user name, data mounts), which an unauthenticated client has no need of
        source = [Path(f).name for f in self.histories.files] if self.histories is not None else "training"
        return {"user_id": user_id, "n_history": int(len(items)), "history": history, "history_source": source}

    # ------------------------------------------------------------------ queries
    def _user_row(self, user_id: str, field: str | None = None) -> int:
        """The row of a known user; ``field``: the request body's field that sent the id, named by an unknown one
        (``"field": "user_id"``, as an unknown ``item_id`` or ``history[2]`` is; POST /recommend and /explain
        answered an unknown user_id without it). A path's id (GET /users/{user_id}) has no field, as GET /items'."""
        try:
            return self.run.user_vocab.index(user_id)
        except NotFoundError as e:
            if field is None:
                raise
            # the words of `recommend --user`: a history tower serves a user unseen in training from their items
            raise UnknownIdAt(field, hint_unknown_user(e, self.run)) from None

    def history_rows(self, history: Sequence[str]) -> np.ndarray:
        """``[L]`` catalogue rows of an ad-hoc history. An unknown id (404) or one the item tower does not
        know (422) is named with its position, ``history[2]: ...``: a history holds up to max_history ids."""
        from twotower.utils.arguments import check_history

        # from Python: a string ("181" was read as the history "1", "8", "1"), refused in POST /recommend's words; a
        # set has no order, and history[pos] below failed on it
        history = check_history(history)
        from twotower.pipeline.refusals import rows_naming_every_unknown

        # an unknown id named by its place, and every other unknown one after it (the words of Python and the CLI)
        rows = np.asarray(rows_naming_every_unknown(
            history, self.catalog.row, lambda pos, e: UnknownIdAt(f"history[{pos}]", e)), dtype=np.int64)  # [L]
        if rows.size and rows.max() >= self.model_items:
            pos = int(np.argmax(rows >= self.model_items))
            raise DataError(f"history[{pos}]: item {history[pos]!r} is not known to the model's item tower, "
                            "so it cannot be used in a history")
        return rows

    def _encode_features(self, user_id: str | None, user_features: Mapping[str, Any] | None) -> Any:
        """A new user's ``user_features`` encoded as training encoded the user table (None without them);
        a bad column or value is named (``user_features.age: ...``), before any work."""
        return self.run.encode_new_user_features(user_features, with_user_id=user_id is not None)

    def _request_rows(self, r: RecRequest) -> tuple[int | None, np.ndarray | None, Any]:
        """The user row of a known-user request, or the history rows of an ad-hoc one (one of them is None),
        and an ad-hoc user's encoded ``user_features`` (None without them)."""
        feats = self._encode_features(r.user_id, r.user_features)
        if r.user_id is not None:
            return self._user_row(r.user_id, "user_id"), None, None
        if not self.supports_history:
            raise ConfigError(
                "this run's user tower uses user-ID embeddings, so it cannot embed an unseen user from a "
                "history; send a known user_id, or train with model.user.use_id=false"
            )
        from twotower.pipeline.artifacts import check_new_history

        # empty: only for user_features that describe a user with no history yet, on a run that reads them
        hist = r.history or ()
        if not isinstance(hist, (str, bytes)):  # a string: history_rows refuses it in its own words
            hist = check_new_history(hist, run=self.run, user_features=r.user_features)
        return None, self.history_rows(hist), feats

    def _query_vectors(
        self, reqs: Sequence[RecRequest], n: int, check: Callable[[], None] | None = None
    ) -> tuple[np.ndarray, list[int | None], list[np.ndarray | None], dict[int, Any]]:
        """``queries[B, D]``, the user row of each request (or None), its history rows (or None) and the
        encoded ``user_features`` of the requests that have them (request -> tensors). ``n``: as
        :func:`_at_request` names errors (the batch's size, 0 for a request sent alone). ``check``: called
        between blocks of a sequence tower's ad-hoc histories (seconds of passes for 256 long ones)."""
        import torch

        from twotower.pipeline.artifacts import check_finite_user  # the CLI's check, lazily as torch

        users: list[int | None] = []
        hists: list[np.ndarray | None] = []
        feats: dict[int, Any] = {}  # request -> its encoded user_features
        for b, r in enumerate(reqs):
            if check is not None and r.history:  # its ids are looked up one by one (256 x 1,000 ids: ~0.7 s)
                check()
            user, hist, f = _at_request(b, n, self._request_rows, r)
            users.append(user)
            hists.append(hist)
            if f is not None:
                feats[b] = f
        d = self.item_vectors.shape[1]
        queries = np.empty((len(reqs), d), dtype=np.float32)  # [B, D]
        known = [b for b, u in enumerate(users) if u is not None]
        adhoc = [b for b, h in enumerate(hists) if h is not None]
        with torch.inference_mode():
            if known:
                rows = np.asarray([users[b] for b in known], dtype=np.int64)
                queries[known] = (self.user_vectors[rows] if self.user_vectors is not None
                                  else self._known_user_vectors(rows))
            plain = [b for b in adhoc if b not in feats]
            if plain:
                queries[plain] = self.run.history_vectors([hists[b] for b in plain], check=check)
            described = [b for b in adhoc if b in feats]
            if described:  # new users with features: the tower reads them as training encoded the user table
                cat, multi, num = zip(*(feats[b] for b in described))
                stacked = (torch.cat(cat), [torch.cat(m) for m in zip(*multi)], torch.cat(num))
                queries[described] = self.run.history_vectors([hists[b] for b in described], features=stacked)
                for b in described:  # named per request, before the index refuses the batch for one NaN row
                    _at_request(b, n, check_finite_user, queries[b])  # a DataError is a 422
        return queries, users, hists, feats

    def listed_rows(self, ids: Sequence[str] | None) -> np.ndarray | None:
        """``[L]`` rows of a request's ``exclude_items`` (None for None); an unknown id is a 404 named by its place,
        ``exclude_items[1]: unknown item ...``, in a history id's words (pipeline/exclusions.py)."""
        from twotower.pipeline.exclusions import listed_rows

        return listed_rows(ids, self.catalog.row, lambda pos, e: UnknownIdAt(f"exclude_items[{pos}]", e),
                           "exclude_items")

    def _excluded(self, req: RecRequest, user: int | None, hist: np.ndarray | None,
                  listed: np.ndarray | None = None) -> np.ndarray:
        from twotower.pipeline.exclusions import with_listed

        return with_listed(self._seen(req, user, hist), listed)

    def _seen(self, req: RecRequest, user: int | None, hist: np.ndarray | None) -> np.ndarray:
        if not req.exclude_seen:
            return _EMPTY
        if user is not None:
            return self.seen_of(user)
        return hist if hist is not None else _EMPTY

    # ------------------------------------------------------------------ search
    def _topk(
        self, queries: np.ndarray, ks: Sequence[int], excludes: Sequence[np.ndarray], masks: Sequence[np.ndarray | None]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: ``(rows[<=K], scores[<=K])`` from one index search for the whole batch.

        Filters become allow-lists (item rows) that the index applies, so
        filtered and unfiltered requests take the same path as the CLI.
        """
        k_max = max(ks)
        allow = [None if m is None else np.flatnonzero(m & self.in_index) for m in masks]
        res = self.index.search(
            queries,
            k_max,
            exclude=list(excludes) if any(e.size for e in excludes) else None,
            allow=allow if any(a is not None for a in allow) else None,
            # the service's setting decides when a filter is scored exactly over its items (it did nothing before)
            exact_subset_max=self.settings.filter_exact_max,
        )
        out = []
        for b, k in enumerate(ks):
            rows, scores = res.row(b)
            out.append((rows[:k], scores[:k]))
        return out

    # ------------------------------------------------------------------ answers
    def _items(self, rows: np.ndarray, scores: np.ndarray) -> list[dict[str, Any]]:
        return catalog_items(self.catalog, rows, scores)

    def recommend(self, req: RecRequest, *, check: Callable[[], None] | None = None) -> dict[str, Any]:
        """``{"items": [...], "user_id": ..., "k": ...}`` for one request."""
        return self._answers([req], check=check, n=0)[0]

    def check_sizes(self, *, user_id: Any = None, item_id: Any = None, history: Any = None, exclude_items: Any = None,
                    filters: Any = None, user_features: Any = None, k: Any = _NOT_GIVEN) -> None:
        """Refuse what POST /recommend's (/similar-items', /explain's) schema bounds: a list over ``max_history``,
        ``max_exclude``, a filter's fields and values (``history: must hold at most 500 item ids (this server's
        max_history: ...), got 501``), an id or filter value over :data:`MAX_ID_CHARS` characters, a filter field's
        name over :data:`MAX_FIELD_NAME_CHARS` (``history[2]: must be at most 256 characters, got 257``), a new user's
        ``user_features`` over :data:`MAX_USER_FEATURES` columns or with a column name over
        :data:`MAX_FIELD_NAME_CHARS` (:func:`~twotower.pipeline.refusals.user_features_refusal`, which
        ``--user-features`` reads too), in its 422's words: a Python caller of the service got any length, which only
        HTTP bounded. ``k``, when given, as :meth:`check_k`.

        In the order the HTTP schemas read their fields (user_id, history, user_features, item_id, k, exclude_items,
        filters), so a request breaking two bounds is refused for the same one by both: a 501-id history sent with
        k=0 or 65 user_features columns was refused for k (or the features) by the service, for the history over
        HTTP."""
        def sized(x: Any) -> bool:  # a string or another wrong type is refused by the checks of its own
            return x is not None and not isinstance(x, (str, bytes)) and hasattr(x, "__len__")

        def check_id(where: str, x: Any) -> None:  # as HTTP reads an id (coerce_id): text or an integer, stripped
            if isinstance(x, (str, int)) and not isinstance(x, bool) and len(got := str(x).strip()) > MAX_ID_CHARS:
                raise ConfigError(f"{where}: {too_long(MAX_ID_CHARS, len(got))}")

        def check_ids(name: str, got: Any, upper: int, setting: str) -> None:
            if sized(got) and len(got) > upper:
                raise ConfigError(f"{name}: {too_many(upper, 'item ids', len(got), setting)}")
            for i, x in enumerate(got if sized(got) else ()):
                check_id(f"{name}[{i}]", x)

        s = self.settings
        check_id("user_id", user_id)
        check_ids("history", history, s.max_history, "max_history")
        refuse_oversized_user_features(user_features)
        check_id("item_id", item_id)
        if k is not _NOT_GIVEN:
            self.check_k(k)
        check_ids("exclude_items", exclude_items, s.max_exclude, "max_exclude")
        if not isinstance(filters, Mapping):
            return
        if len(filters) > MAX_FILTER_FIELDS:
            raise ConfigError(f"filters: {too_many(MAX_FILTER_FIELDS, 'fields', len(filters))}")
        for name, values in filters.items():
            if isinstance(name, str) and len(name) > MAX_FIELD_NAME_CHARS:  # the name is not echoed, as HTTP's
                raise ConfigError(f"filters: {too_long(MAX_FIELD_NAME_CHARS, len(name), 'a field name')}")
            if sized(values) and len(values) > MAX_FILTER_VALUES:
                raise ConfigError(f"{filters_at(str(name))}: {too_many(MAX_FILTER_VALUES, 'values', len(values))}")
            for i, x in enumerate(values if sized(values) else ()):
                check_id(f"{filters_at(str(name))}[{i}]", x)

    def check_batch(self, n: int) -> None:
        """Refuse more requests than ``max_batch`` in one :meth:`recommend_batch`, in POST /recommend/batch's words."""
        if n > self.settings.max_batch:
            raise ConfigError(f"requests: {too_many(self.settings.max_batch, 'requests', n, 'max_batch')}")

    def check_k(self, k: int) -> None:
        """Refuse a list longer than ``settings.max_k``: the bound POST /recommend's schema sets (422 there),
        held for Python callers too, who otherwise got any length up to what memory allowed."""
        why = k_refusal(k, self.settings.max_k, server_setting="max_k")  # POST /recommend's 422 says the same
        if why is not None:
            raise ConfigError(f"k: {why}")

    def _with_k(self, req: RecRequest) -> RecRequest:
        """``req`` with its list length: a request without ``k`` gets this service's ``default_k`` (at most its
        ``max_k``), as the HTTP schema built from the same settings gives a body without one."""
        return req if req.k is not None else replace(req, k=min(self.settings.default_k, self.settings.max_k))

    def explain_count(self, req: RecRequest) -> int:
        """Items of ``req``'s answer that get an explanation: 0 without ``explain``, else ``min(k, explain_k)``."""
        if not req.explain:
            return 0
        req = self._with_k(req)
        cap = self.settings.explain_k
        check_explain_k(req, cap)
        return min(req.k, req.explain_k if req.explain_k is not None else cap)

    def recommend_batch(
        self, reqs: Sequence[RecRequest], *, check: Callable[[], None] | None = None
    ) -> list[dict[str, Any]]:
        """One answer per request; unfiltered requests share one index search.

        A request with ``explain`` gets explanations on its first :meth:`explain_count` items only,
        from Python as over HTTP. ``check`` is called between filter values and between explanation
        steps, and may raise to abandon the work (the HTTP routes pass their time budget / disconnect check).
        """
        self.check_batch(len(reqs))
        return self._answers(reqs, check=check, n=len(reqs))

    @_on_service_threads
    def _answers(
        self, reqs: Sequence[RecRequest], *, check: Callable[[], None] | None, n: int
    ) -> list[dict[str, Any]]:
        """:meth:`recommend_batch`; ``n``: the batch's size, or 0 for one request sent alone (its errors
        name no ``requests[b]``, see :func:`_at_request`)."""
        if not reqs:
            return []
        reqs = [self._with_k(r) for r in reqs]
        from twotower.serving.catalog import check_filters

        for b, r in enumerate(reqs):
            _at_request(b, n, partial(self.check_sizes, user_id=r.user_id, history=r.history, k=r.k,
                                      exclude_items=r.exclude_items, user_features=r.user_features))
            # the schema's order: the filters' shape and sizes after exclude_items ({"genres": "Comedy"} refused)
            reqs[b] = r = replace(r, filters=_at_request(b, n, check_filters, r.filters) or None)
            _at_request(b, n, partial(self.check_sizes, filters=r.filters))
            _at_request(b, n, check_explain_k, r, self.settings.explain_k)  # the schema's last field
        from twotower.pipeline.artifacts import refuse_empty_history

        for b, r in enumerate(reqs):  # after every request's schema checks, before any lookup, as POST /recommend(/batch)
            _at_request(b, n, partial(refuse_empty_history, r.history, run=self.run, user_features=r.user_features))
        masks = [_at_request(b, n, self.catalog.filter_mask, r.filters, check) if r.filters else None
                 for b, r in enumerate(reqs)]
        listed = [_at_request(b, n, self.listed_rows, r.exclude_items) for b, r in enumerate(reqs)]
        queries, users, hists, feats = self._query_vectors(reqs, n, check)
        excludes = [self._excluded(r, u, h, x) for r, u, h, x in zip(reqs, users, hists, listed)]
        if check is not None:  # the towers' passes are done: over budget already, the search is not started
            check()
        hits = self._topk(queries, [r.k for r in reqs], excludes, masks)
        # refuse a bad explain_k before any explanation work
        explain_ks = [_at_request(b, n, self.explain_count, r) for b, r in enumerate(reqs)]
        explain = self._batch_explainer() if any(explain_ks) else None
        done: dict[tuple[Any, ...], list[dict[str, Any]]] = {}  # a batch repeating one user explains it once
        answers = []
        for b, (r, u, h, (rows, scores), ek) in enumerate(zip(reqs, users, hists, hits, explain_ks)):
            items = self._items(rows, scores)
            if ek and explain is not None:
                if check is not None:
                    check()
                first = [int(x) for x in rows[:ek].tolist()]
                hist = None if h is None else [int(x) for x in np.asarray(h).tolist()]
                if hist is None and u is not None and self.histories is not None:
                    hist = [int(x) for x in self._known_history(u)[0].tolist()]  # the history the list read
                # a new user's features are part of who is explained: the same history with other features is
                # another user (repr: the values as given, so two requests with equal features share the work)
                described = None if b not in feats else repr(sorted(dict(r.user_features or {}).items()))
                # each item's rank is its place in this list: an approximate index's list differs from the exact
                # count the explanation made, and the sentence quoted a place the list did not show (where the list
                # is the one `rank` describes: no filters, nothing else left out; the history left out or not, as
                # exclude_seen says, which the ranks count alike)
                plain = masks[b] is None and (listed[b] is None or len(listed[b]) == 0)
                key = (u, None if hist is None else tuple(hist), described, tuple(first), plain, r.exclude_seen)
                if key not in done:
                    kw = {} if b not in feats else {"user_features": r.user_features, "encoded_features": feats[b]}
                    done[key] = explain(self.run, user_row=u, history_rows=hist, item_rows=first, check=check,
                                        item_vectors=self.item_vectors, exclude_seen=r.exclude_seen, **kw,
                                        **({"list_ranks": list(range(1, len(first) + 1))} if plain else {}))
                for item, e in zip(items, done[key]):
                    item["explanation"] = e
            notes = self.run.new_user_feature_notes(r.user_features) if b in feats else []
            if h is not None:  # as `recommend --history` says it: the tower read the newest history_len only
                from twotower.pipeline.recommend import long_history_note

                long = long_history_note(self.run, len(h), exclude_seen=r.exclude_seen, distinct=int(np.unique(h).size),
                                         rows=h)
                notes += [long] if long else []
                if r.history is not None and (cold := untrained_history_note(self.run, h)):  # a new user's, as given
                    notes.append(cold)
            if (cold := self._input_history_note(u, r.user_id)) is not None:
                notes.append(cold)
            notes += self.unplaced_in(rows)
            if self._no_input_history(u):
                # as `recommend --history-from` says it: the list is the empty-history one, which a client would
                # otherwise take for this user's
                notes = [*notes, f"user_id: {r.user_id!r} has no rows of known items in the serve --history-from files, so the "
                                 "list is ranked from an empty input history, not from their training history"]
            answers.append(recommend_answer(items, r.user_id, r.k, filtered=masks[b] is not None,
                                            exclude_seen=r.exclude_seen, listed=bool(r.exclude_items),
                                            notes=notes))
        return answers

    @_on_service_threads
    def similar_items(self, item_id: str, k: int, filters: Mapping[str, Sequence[str]] | None = None, *,
                      exclude_items: Sequence[str] | None = None,
                      check: Callable[[], None] | None = None) -> dict[str, Any]:
        """Items whose embeddings are closest to ``item_id``'s (the item itself excluded, and ``exclude_items``,
        as :class:`RecRequest`'s). ``check``: as :meth:`recommend_batch`'s, called between filter values."""
        from twotower.serving.catalog import check_filters

        # the schema's bounds (a 300-character id, 501 exclude_items), from Python too, before any lookup, as HTTP's
        # 422 comes first: an unknown item_id sent with too many exclude_items was a 404 from Python, a 422 over HTTP;
        # in the schema's order, item_id, k, exclude_items, filters (k was checked before the item id)
        self.check_sizes(item_id=item_id, k=k, exclude_items=exclude_items)
        filters = check_filters(filters)  # from Python: {"genres": "Comedy"} is refused, as RecRequest's
        self.check_sizes(filters=filters)
        try:
            row = self.catalog.row(item_id)
        except NotFoundError as e:  # named, as /explain and /recommend name the field that sent an unknown id
            raise UnknownIdAt("item_id", e) from None
        mask = self.catalog.filter_mask(filters, check) if filters else None
        listed = self.listed_rows(exclude_items)
        allow = None if mask is None else np.flatnonzero(mask & self.in_index)
        # the search `twotower similar` and tt.similar run (pipeline/similar.py), so the lists cannot drift
        res, spaces = similar_items(self.run, np.asarray([row], np.int64), int(k), self.index,
                                    vectors=self.item_vectors, cold=self.cold_items,
                                    cold_similar=self.settings.cold_similar, unplaced=self.unplaced_items,
                                    allow=allow, listed=listed,
                                    exact_subset_max=self.settings.filter_exact_max)
        rows, scores = res.row(0)
        return similar_answer(self.catalog, item_id, k, rows, scores, spaces[0], filtered=mask is not None,
                              unplaced=self.unplaced_items, listed=bool(exclude_items))

    @_on_service_threads
    def explain(self, *, item_id: str, user_id: str | None = None, history: Sequence[str] | None = None,
                user_features: Mapping[str, Any] | None = None,
                check: Callable[[], None] | None = None, top: int = 5, method: str = "loo") -> dict[str, Any]:
        """Why ``item_id`` for this user: delegated to :func:`twotower.explain.explain_recommendation` (``top``
        history items listed, contributions by ``method``, as its own arguments).

        ``user_features`` (with ``history``): a new user's features, read as ``POST /recommend`` reads them,
        so the explained score is the one that user's list holds. ``check``: as :meth:`recommend_batch`'s,
        called between blocks of a sequence tower's pass (``POST /explain`` passes its time budget)."""
        if (user_id is None) == (history is None):
            raise ConfigError("give exactly one of user_id (a known user) or history (item ids, oldest first)")
        if isinstance(user_id, str) and not user_id.strip():  # POST /explain's 422 (its schema refuses it), as RecRequest
            raise ConfigError(f"user_id: {empty_user_id_refusal()}")
        # POST /explain's schema's bounds
        self.check_sizes(user_id=user_id, item_id=item_id, history=history, user_features=user_features)
        if history is not None and not isinstance(history, (str, bytes)):  # a string: history_rows says it
            # as POST /explain (a 422) and tt.explain_by_id: an empty history is refused, unless user_features
            # alone describe a user with no history yet on a run that reads them
            from twotower.pipeline.artifacts import check_new_history

            history = check_new_history(history, run=self.run, user_features=user_features)
        feats = self._encode_features(user_id, user_features)  # the same checks and messages as /recommend
        explain = self._explainer()
        # who is asking (user_id, or history's ids) before the item asked about, as `twotower explain` and
        # tt.explain_by_id look them up: an unknown user with an unknown item was "unknown item" here alone
        user_row = self._user_row(user_id, "user_id") if user_id is not None else None
        hist = self.history_rows(history) if history is not None else None
        try:
            item_row = self.catalog.row(item_id)
        except NotFoundError as e:  # named: with a history, "unknown item" alone could mean either field
            raise UnknownIdAt("item_id", e) from None
        if hist is None and user_row is not None and self.histories is not None:
            hist = self._known_history(user_row)[0]  # the input history /recommend read for this user
        kw = {} if feats is None else {"user_features": user_features, "encoded_features": feats}
        hist_rows = None if hist is None else [int(x) for x in hist.tolist()]
        # features that overflow the tower are refused by explain itself (check_finite_user), as from the CLI
        result = explain(self.run, user_row=user_row, history_rows=hist_rows, item_row=item_row, check=check,
                         item_vectors=self.item_vectors, top=top, method=method, **kw)
        answer = {"user_id": user_id, "item_id": item_id, "explanation": result}
        notes = self.run.new_user_feature_notes(user_features) if feats is not None else []
        if self._no_input_history(user_row):
            # "You have no history yet" is said of the input history; /recommend warns that it is not the
            # training one, and /explain said it to a user with a training history without a word
            notes = [*notes, f"user_id: {user_id!r} has no rows of known items in the serve --history-from files, so the item is "
                             "explained from an empty input history, not from their training history"]
        if self.unplaced_items[item_row]:  # `cold: true` says no interactions; this says its score means nothing
            notes = [*notes, unplaced_item_note(item_id)]
        if history is not None and hist is not None and (cold := untrained_history_note(self.run, hist)):
            notes = [*notes, cold]
        if (cold := self._input_history_note(user_row, user_id)) is not None:
            notes = [*notes, cold]
        if notes:
            answer["warnings"] = notes
        return answer

    @staticmethod
    def _batch_explainer() -> Callable[..., list[dict[str, Any]]]:
        try:
            from twotower.explain import explain_recommendations
        except ImportError:
            raise FeatureUnavailable(
                "explanations need twotower.explain.explain_recommendations, which is not installed in this version"
            ) from None
        return explain_recommendations

    @staticmethod
    def _explainer() -> Callable[..., dict[str, Any]]:
        try:
            from twotower.explain import explain_recommendation  # type: ignore[attr-defined]
        except ImportError:
            raise FeatureUnavailable(
                "explanations need twotower.explain.explain_recommendation, which is not installed in this version"
            ) from None
        return explain_recommendation
