"""The query vector of an item-to-item search (``/similar-items``, the demo's "items most similar to").

A warm item is queried with its own served vector. A cold item (no training interactions) of a dual-head item
tower is queried, by default, with its semantic head's vector against the same served vectors: its mixed vector
is half a collaborative head that read a zero ID vector, the same for every cold item, beside the item's features,
which pulled its neighbours towards other cold and rarely-rated items (bench/cold_similar.py: 74-80% of a cold anchor's top 10 were cold items, which are
16% of the catalogue; "The Godfather: Part II" made cold ranked "The Godfather" 3rd behind two cold items, its
semantic vector ranks it 1st; warm-neighbour HR@10 0.575 -> 0.631 on held-out anchors). The semantic head reads
the text alone, not the features: a cold Action film's semantic top 10 held 0-2 Action films where its mixed vector's
held 10 (``cold_similar="item"``).

:func:`similar_items` is the one search behind ``POST /similar-items``, ``twotower similar`` and
:func:`similar`: a block of items per index search, each item left out of its own list, so with an exact
index the three return identical lists (the exact index's scores do not depend on the batch, and a cold
item's semantic query is computed in the same fixed chunk whoever asks, :data:`COLD_CHUNK`).

An item with no training interactions whose item tower reads only the item ID (no features, no text) cannot be
placed at all: its vector is the zeroed ID embedding (pipeline/experiment.py), so it scores 0 against every item
and its "neighbours" were the first catalogue items in id order, all at score 0 (and, every score tying, the
exact index's tie scan took 1,081 ms instead of ~5 ms on a 41,981-item catalogue). Such an item is not searched:
its list is empty and its query space is :data:`UNPLACED` (:func:`unplaced_item_mask`, :func:`unplaced_note`).

Legend: ``I`` items, ``D`` dim, ``K`` top-k, ``B`` a block of query items.
"""
from __future__ import annotations

import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from twotower.config import COLD_SIMILAR
from twotower.errors import ConfigError
from twotower.pipeline.refusals import (ITEM_LIST, id_list_refusal, k_refusal, locate, python_type_words,
                                       rows_naming_every_unknown)
from twotower.utils.arguments import check_flag, check_ids, is_id_list
from twotower.results import PAD_ID, Results
from twotower.serving.settings import ServiceSettings  # the service's defaults (k, cold_similar), written once there
from twotower.utils.progress import RateLog

if TYPE_CHECKING:
    from twotower.pipeline.artifacts import TrainedRun

log = logging.getLogger(__name__)

__all__ = ["COLD_CHUNK", "SIMILAR_BLOCK", "UNPLACED", "cold_item_mask", "similar", "similar_items",
           "similar_queries", "similar_query", "unplaced_item_mask", "unplaced_item_note", "unplaced_list_note",
           "unplaced_note", "untrained_items", "untrained_history_note", "untrained_history_refusal",
           "untrained_history_rows", "history_as_read"]

#: Cold items' semantic query vectors are computed for every cold item of a chunk of this many item rows at
#: once (``[0, C)``, ``[C, 2C)``, ...), by the CLI and the service alike: a forward's batch shape can change
#: the last bits of a torch matmul, so one item's query is the same floats whether asked alone or in a block.
COLD_CHUNK = 4096
#: Query items per index search of :func:`similar_items` (one search per block, not one per item).
SIMILAR_BLOCK = 1024
#: The query space of an item the model cannot place (:func:`unplaced_item_mask`): it is not searched.
UNPLACED = "none"
# per loaded run: (its weights_state() the vectors came from, {chunk: {row: [Ds] semantic vector}})
_semantic: "weakref.WeakKeyDictionary[Any, tuple[Any, dict[int, dict[int, np.ndarray]]]]" = weakref.WeakKeyDictionary()


def untrained_items(run: Any) -> np.ndarray:
    """``[I]`` bool, the items with no training interactions (worked out once per training history: each explanation
    counted every interaction again)."""
    history = run.history
    got = _untrained_cache.get(id(history))
    if got is None or got[0] is not history or len(got[1]) != run.n_items:
        mask = np.bincount(np.asarray(history.items, dtype=np.int64), minlength=run.n_items)[: run.n_items] == 0
        mask.flags.writeable = False
        got = (history, mask)
        if len(_untrained_cache) > 8:  # a few loaded runs at a time; the entry keeps its history alive
            _untrained_cache.clear()
        _untrained_cache[id(history)] = got
    return got[1]


_untrained_cache: dict[int, tuple[Any, np.ndarray]] = {}


def untrained_history_rows(run: Any, rows: Any) -> list[int]:
    """The items of a given history ``rows`` (a new user's, or a known user's input history) that had no training interactions, each once, in the order given
    ([] for a user tower that reads no history). Every user tower reads a history item through a table row only
    training updates: a pooled or sequence tower's own history table (random from the start: on MovieLens-100K such
    rows' mean norm was 0.40 against 0.56 for trained ones) or a sequence tower's tied item ID table (zero, a token
    the encoder never read in training). No tower reads a history item's features or text, so such an item carries
    nothing the model has learned."""
    rows = np.asarray(list(rows), dtype=np.int64)
    if rows.size == 0 or not getattr(run.model.user_tower, "uses_history", False):
        return []
    return list(dict.fromkeys(int(r) for r in rows[untrained_items(run)[rows]].tolist()))


def history_as_read(run: Any, rows: Any) -> np.ndarray:
    """A given history ``rows`` (oldest first; a new user's, or a known user's input history, as
    :func:`~twotower.pipeline.histories.sequences_as_read` reads those of every user) as the user tower reads it:
    without the items that had no training interactions (:func:`untrained_history_rows`). Read, their untrained rows moved the list (MovieLens-100K:
    ``--history 181`` and ``--history 2001,2002,181`` shared none of their top 4, 2001 and 2002 being such items),
    took places in the ``history_len`` window and diluted the pooled history. Left out here, where every new user's
    history is encoded (:meth:`TrainedRun.history_vectors`, explanations), the list is the one of the other items;
    the items stay in the history the list leaves out as seen. Every item left out reads as the empty history."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0 or not getattr(run.model.user_tower, "uses_history", False):
        return rows
    return rows[~untrained_items(run)[rows]]


def _named_untrained(run: Any, cold: list[int]) -> str:
    """``'2001', '2002'`` (the first three, then ``...``): the items :func:`untrained_history_rows` found."""
    return ", ".join(repr(run.item_vocab.id_at(r)) for r in cold[:3]) + (", ..." if len(cold) > 3 else "")


def untrained_history_note(run: Any, rows: Any, known_user: str | None = None) -> str | None:
    """The warning for a given history holding items without training interactions, else None: the user tower has
    not learned them, so they are left out of the history it reads (:func:`history_as_read`); the list and the score
    rest on the other items, as if they had not been given, and explanations list them as left out. It said they
    "carry no learned signal into the list" while their untrained rows were pooled in and changed it.
    ``known_user``: None for a new user's history (the warning starts with ``history``); for a known user's input
    history, its name in the words of its surface, e.g. ``user 94's history in the --history-from files``, whose
    all-untrained history reads as an empty input history, not as a new user's."""
    cold = untrained_history_rows(run, rows)
    if not cold:
        return None
    said = (f"{known_user or 'history'}: {len(cold)} of its items had no training interactions ({_named_untrained(run, cold)}): the user "
            "tower has not learned them, so it leaves them out of the history it reads")
    if not history_as_read(run, rows).size:
        if known_user is not None:  # a known user's input history: read as empty, as a user with no rows in the files
            return said + ("; none is left, so the user is ranked from an empty input history (as a user with no rows "
                           "there), not from their training history")
        # a new user: only one the features describe gets here (check_new_history)
        return said + ("; none is left, so the list and the score rest on the user's features alone, as for a user with "
                       "no history yet")
    return said + ("; the list and the score rest on the other items, and explanations list them as left out, not as "
                   "reasons")


def untrained_history_refusal(run: Any, rows: Any) -> str | None:
    """Why a new user's history whose every item had no training interactions is read as empty (None when one item
    has some): the start of the refusal an empty history gets (:func:`check_new_history
    <twotower.pipeline.artifacts.check_new_history>`), so that it says why a history of items reads as none."""
    cold = untrained_history_rows(run, rows)
    if not cold or history_as_read(run, rows).size:
        return None
    return (f"every item had no training interactions ({_named_untrained(run, cold)}): the user tower has not learned "
            "them and leaves them out, so the history it reads is empty")


def cold_item_mask(run: Any) -> np.ndarray | None:
    """``[I]`` bool, the items with no training interactions and some text, for a dual-head run; None for any
    other (its cold items are queried as warm ones). A cold item without text (an empty title or description)
    has the semantic head of the empty string, shared by every such item: queried by it, its list was the same
    unrelated one for all of them, while its served vector still reads its own features. A dual head without an
    ID embedding (``model.item.use_id = false``) has no such item: its collaborative head reads a cold item's
    features as it reads a warm one's, with no zero ID vector that every cold item shares to pull them together,
    so the mixed vector, which keeps what the features say, is the query (its cold items were queried by the
    semantic head for a reason that did not hold)."""
    tower = run.model.item_tower
    if getattr(tower, "semantic", None) is None or getattr(tower, "id_emb", None) is None:
        return None
    from twotower.pipeline.run import item_has_text

    has_text = item_has_text(run)
    return untrained_items(run) if has_text is None else untrained_items(run) & has_text


def reads_only_id(tower: Any) -> bool:
    """Whether an item tower reads nothing but the item ID: no feature block, no text (a dual head's included)."""
    return (getattr(tower, "id_emb", None) is not None and getattr(tower, "text", None) is None
            and not getattr(getattr(tower, "features", None), "out_dim", 0))


def unplaced_item_mask(run: Any) -> np.ndarray:
    """``[I]`` bool, the items the model cannot place: no training interactions and an item tower that reads only
    the item ID, so their vector is the zeroed ID embedding shared by all of them (all False for any other tower:
    features or text place a cold item)."""
    if not reads_only_id(run.model.item_tower):
        return np.zeros(run.n_items, dtype=bool)
    return untrained_items(run)


def _cannot_place(item_ids: Sequence[str]) -> str:
    """The start of every sentence about items the model cannot place: which, and why."""
    named = ", ".join(repr(i) for i in item_ids[:5]) + (f" and {len(item_ids) - 5} more" if len(item_ids) > 5 else "")
    one = len(item_ids) == 1
    return (f"item{'' if one else 's'} {named} had no training interactions and the item tower reads only the item "
            f"ID (no features or text), so the model cannot place {'it' if one else 'them'}")


def unplaced_note(item_id: str) -> str:
    """Why an item the model cannot place has no similar items (an answer's ``warnings`` entry)."""
    # "its vector is zero" held only without a hidden layer: the zeroed ID through an MLP is a vector, the same for
    # every such item
    return (f"{_cannot_place([item_id])}: its vector comes from the zeroed ID embedding, not from any interaction, "
            "and no similar items are returned")


def unplaced_item_note(item_id: str) -> str:
    """``GET /items/{id}`` and ``/explain`` of an item the model cannot place: what its score means."""
    return (f"{_cannot_place([item_id])}: its score comes from the zeroed ID embedding, not from any interaction, "
            "and /similar-items returns no items for it")


def unplaced_list_note(item_ids: Sequence[str]) -> str:
    """A ``/recommend`` list holding items the model cannot place (only where fewer than ``k`` items score above
    them: a narrow filter, a small catalogue): their rank comes from no learnt vector."""
    return f"{_cannot_place(item_ids)}: their scores come from the zeroed ID embedding, not from any interaction"


def _semantic_vectors(run: Any, cold: np.ndarray, rows: Iterable[int]) -> dict[int, np.ndarray]:
    """Item row -> ``[Ds]`` semantic head vector of the cold ``rows``, each computed with every cold item of
    its :data:`COLD_CHUNK` chunk (cached per run and item tower)."""
    import torch

    tower = run.model.item_tower
    try:
        state = run.weights_state() if hasattr(run, "weights_state") else tower
        cached_state, cache = _semantic.get(run, (None, {}))
        if cached_state != state:  # a model swapped in, or its weights edited, after the run was loaded
            cache = {}
            _semantic[run] = (state, cache)
    except TypeError:  # an object read as a run that takes no weak reference: computed afresh, the same floats
        cache = {}
    out: dict[int, np.ndarray] = {}
    for r in rows:
        c = r // COLD_CHUNK
        if c not in cache:
            members = np.flatnonzero(cold[c * COLD_CHUNK : (c + 1) * COLD_CHUNK]) + c * COLD_CHUNK
            was = tower.training
            tower.eval()
            with torch.inference_mode():
                sem = tower.forward_heads(torch.as_tensor(members, dtype=torch.long))[1].semantic  # [n, Ds]
            tower.train(was)
            sem = sem.numpy().astype(np.float32)
            cache[c] = {int(m): sem[j] for j, m in enumerate(members.tolist())}
        out[r] = cache[c][r]
    return out


def similar_queries(run: Any, vectors: np.ndarray, rows: np.ndarray, cold: np.ndarray | None,
                    cold_similar: str = ServiceSettings.cold_similar) -> tuple[np.ndarray, list[str]]:
    """``([B, D] queries, spaces)`` for the neighbours of items ``rows`` among ``vectors`` [I, D]: a space is
    "item" (the row of ``vectors``) or "semantic" (a cold item's semantic head, zero-padded to ``D`` where the
    vectors carry item-item factors, which add nothing to an item without interactions' scores)."""
    if cold_similar not in COLD_SIMILAR:
        raise ValueError(f"cold_similar must be one of {', '.join(COLD_SIMILAR)}, got {cold_similar!r}")
    rows = np.asarray(rows, np.int64)
    queries = np.array(vectors[rows], dtype=np.float32)  # [B, D], a copy: cold rows are replaced
    spaces = ["item"] * rows.size
    if cold_similar == "item" or cold is None:
        return queries, spaces
    picked = [b for b, r in enumerate(rows.tolist()) if 0 <= r < len(cold) and cold[r]]
    if picked:
        sem = _semantic_vectors(run, cold, [int(rows[b]) for b in picked])
        for b in picked:
            v = sem[int(rows[b])]
            queries[b] = 0.0
            queries[b, : v.shape[0]] = v
            spaces[b] = "semantic"
    return queries, spaces


def similar_query(run: Any, vectors: np.ndarray, row: int, cold: np.ndarray | None,
                  cold_similar: str = ServiceSettings.cold_similar) -> tuple[np.ndarray, str]:
    """``([1, D] query, space)`` of one item: :func:`similar_queries` of ``[row]``."""
    queries, spaces = similar_queries(run, vectors, np.asarray([row], np.int64), cold, cold_similar)
    return queries, spaces[0]


def similar_items(
    run: Any,
    rows: np.ndarray,
    k: int,
    index: Any,
    *,
    vectors: np.ndarray | None = None,
    cold: np.ndarray | None = None,
    cold_similar: str = ServiceSettings.cold_similar,
    unplaced: np.ndarray | None = None,
    allow: np.ndarray | None = None,
    exact_subset_max: int | None = None,
    block: int = SIMILAR_BLOCK,
    log_every_s: float | None = None,
    listed: np.ndarray | None = None,
) -> tuple[Results, list[str]]:
    """Top-``k`` neighbours of item ``rows`` -> ``(Results[B, K], spaces)``, each item left out of its own list.

    ``index`` (a :class:`~twotower.index.VectorIndex` over item rows) is searched once per ``block`` items;
    ``vectors`` [I, D] default to the run's item embeddings, ``cold`` to :func:`cold_item_mask`; ``allow``
    (item rows, one list for every query) is the service's filters. A row shorter than ``k`` (padded with -1)
    means fewer than ``k`` items were left. An item of ``unplaced`` (default :func:`unplaced_item_mask`) is not
    searched: its row is all padding and its space :data:`UNPLACED`. ``log_every_s``: seconds between progress
    log lines (None: none). ``listed``: item rows left out of every list on top of the query item itself
    (``exclude_items``, ``exclude=``, ``--exclude-items``; :mod:`twotower.pipeline.exclusions`).
    """
    vectors = run.item_embeddings() if vectors is None else vectors
    cold = cold_item_mask(run) if cold is None else cold  # the service passes its own (None: a single-head run)
    unplaced = unplaced_item_mask(run) if unplaced is None else unplaced
    rows = np.asarray(rows, np.int64)
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    spaces: list[str] = []
    progress = RateLog(log, "finding similar items", rows.size, "items", log_every_s, rate_unit="items")
    for s in range(0, rows.size, block):
        chunk = rows[s : s + block]
        res, chunk_spaces = _search_placed(run, vectors, chunk, k, index, cold, cold_similar, unplaced, allow,
                                           exact_subset_max, listed)
        ids.append(res.ids)
        scores.append(res.scores)
        spaces += chunk_spaces
        progress.update(s + chunk.size)
    if not ids:
        return Results(np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)), []
    return Results(np.concatenate(ids), np.concatenate(scores)), spaces


def _search_placed(run: Any, vectors: np.ndarray, chunk: np.ndarray, k: int, index: Any, cold: np.ndarray | None,
                   cold_similar: str, unplaced: np.ndarray, allow: np.ndarray | None,
                   exact_subset_max: int | None, listed: np.ndarray | None = None) -> tuple[Results, list[str]]:
    """:func:`similar_items` of one block: the items the model places are searched, the others get a row of
    padding (their zero query tied every score, and its list was the first items in id order)."""
    inside = (chunk >= 0) & (chunk < len(unplaced))
    skip = np.zeros(chunk.size, dtype=bool)
    skip[inside] = unplaced[chunk[inside]]
    ids = np.full((chunk.size, k), PAD_ID, dtype=np.int64)
    scores = np.full((chunk.size, k), -np.inf, dtype=np.float32)
    spaces = [UNPLACED] * chunk.size
    todo = np.flatnonzero(~skip)
    if todo.size:
        placed = chunk[todo]
        queries, placed_spaces = similar_queries(run, vectors, placed, cold, cold_similar)
        from twotower.pipeline.exclusions import with_listed

        excl = [with_listed(placed[b : b + 1], listed) for b in range(placed.size)]
        res = index.search(queries, k, exclude=excl,
                           allow=None if allow is None else [allow] * placed.size, exact_subset_max=exact_subset_max)
        width = min(k, res.ids.shape[1])
        ids[todo, :width], scores[todo, :width] = res.ids[:, :width], res.scores[:, :width]
        for b, space in zip(todo.tolist(), placed_spaces):
            spaces[b] = space
    return Results(ids, scores), spaces


def similar(
    run: TrainedRun,
    item_ids: Iterable[str],
    k: int = ServiceSettings.default_k,
    *,
    exact: bool = False,
    cold_similar: str = ServiceSettings.cold_similar,
    filters: dict[str, list[str]] | None = None,
    exclude: list[str] | None = None,
    filter_exact_max: int = ServiceSettings.filter_exact_max,
    index: str | Path | None = None,
) -> list[list[dict[str, Any]]]:
    """The ``k`` items most similar to each of ``item_ids`` (the item itself left out), as ``POST /similar-items``
    and ``twotower similar`` rank them: one list of ``{"item_id", "score", "rank", ...metadata}`` per id (empty,
    with a logged warning, for an item the model cannot place: :func:`unplaced_item_mask`).

    Ranked with the run's built index (``RUN/index``), or by exact search when ``exact`` or when none is
    built; ``index``: another index folder built for the run (``similar --index DIR``); a cold item of a dual-head run is queried by its semantic head unless ``cold_similar="item"``
    (``serve --cold-similar``). ``filters``: item metadata field -> values, as POST /similar-items' ``filters``
    (``{"genres": ["Comedy"]}``), with its checks and refusals. ``exclude``: item ids never to list (already
    shown, already in the cart), on top of the item itself, as POST /similar-items' ``exclude_items``; an unknown
    one is named as an item id is (``exclude[1]: unknown item ...``). ``filter_exact_max``: a filter matching at most
    this many items ranks them exactly, a broader one widens the index's search (``similar --filter-exact-max``,
    ``serve --filter-exact-max``, with their default; an IVF index filters during its search, so it has no effect
    there). Example::

        run = tt.TrainedRun.load("runs/ml")
        for item in tt.similar(run, ["50"], k=5)[0]:
            print(item["rank"], item["item_id"], item.get("title"))
    """
    from twotower.pipeline.artifacts import check_loaded_run
    from twotower.pipeline.recommend import check_index_argument, open_run_index, results_to_items

    check_loaded_run(run, "similar")
    exact = check_flag(exact, "exact")
    check_index_argument(index, exact)
    if item_ids is None:  # a bare TypeError ("'NoneType' object is not iterable"), where recommend's is a ConfigError
        raise ConfigError("give item_ids, the items to find similar ones for: a list of item ids, e.g. ['50']")
    if not is_id_list(item_ids):  # a string or one id: the words of history=, exclude= and POST /similar-items' 422
        raise ConfigError(f"item_ids: {id_list_refusal(python_type_words(item_ids), item_ids)}")
    if (why := k_refusal(k)) is not None:  # the words of `similar --k` and POST /similar-items
        raise ConfigError(f"k: {why}")
    if cold_similar not in COLD_SIMILAR:
        raise ConfigError(f"cold_similar must be one of {', '.join(COLD_SIMILAR)}, got {cold_similar!r}")
    from twotower.serving.settings import checked_filter_exact_max

    filter_exact_max = checked_filter_exact_max(filter_exact_max)  # `similar --filter-exact-max`'s check
    # an unknown id named by its place (item_ids[3]: unknown item ...), then every other unknown one
    item_ids = check_ids(list(item_ids), "item_ids")  # 50.0 was item '50', 50.5 "unknown item '50.5'"
    rows = np.asarray(rows_naming_every_unknown(item_ids, run.item_vocab.index,
                                                lambda pos, e: locate(e, f"item_ids[{pos}]"), what=ITEM_LIST), np.int64)
    from twotower.serving.service import filter_allow, run_filter_mask

    mask = run_filter_mask(run, filters)  # checked before the index is opened, in POST /similar-items' words
    from twotower.pipeline.exclusions import listed_rows

    listed = listed_rows(exclude, run.item_vocab.index, lambda pos, e: locate(e, f"exclude[{pos}]"))
    index, used = open_run_index(run, index, exact=exact, exact_flag="exact=True", item_queries=True)
    log.info("ranking with %s", used)  # the line `twotower similar` prints: which index answered
    allow = filter_allow(mask, index)
    res, spaces = similar_items(run, rows, int(k), index, cold_similar=cold_similar, allow=allow, listed=listed,
                                exact_subset_max=None if allow is None else filter_exact_max)
    for row, space in zip(rows.tolist(), spaces):
        if space == UNPLACED:  # its empty list, said where a script's log shows it
            log.warning("%s", unplaced_note(run.item_vocab.id_at(row)))
    from twotower.pipeline.recommend import log_shortfall

    placed = np.asarray([space != UNPLACED for space in spaces], bool)  # an unplaced item's empty list is said above
    if placed.any():  # lists shorter than k logged, as tt.recommend logs them (they came back without a word)
        log_shortfall(Results(res.ids[placed], res.scores[placed]), int(k),
                       [f"item {run.item_vocab.id_at(r)}" for r in rows[placed].tolist()], filtered=filters is not None,
                      index_size=len(index))
    return [results_to_items(run, res, q) for q in range(len(rows))]
