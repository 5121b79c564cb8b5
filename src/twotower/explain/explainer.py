"""Explain one recommendation of a trained run: history attribution, shared metadata, heads, a sentence.

The result is a JSON-safe dict (what ``POST /explain`` and ``twotower explain
--json`` return)::

    {"user_id", "item_id", "item": {"display_name", ...metadata}, "score",  # metadata: a title where the run has one
     "history": [{"item_id", "display_name", "contribution", "age", ...metadata}],  # largest first
     "history_left_out": [{"item_id", "display_name", ...metadata}],  # given items the tower does not read
     "shared_metadata": {"genres": [{"value", "count"}], "year_range": {...}, "history_items"},
     "heads": {"alpha", "semantic", "collaborative"},     # dual-head item tower only
     "already_seen", "cold", "basis", "text",  # cold: the item had no training interactions
     "method", "history_window", "history_total", "empty_history_score",
     "rank", "empty_history_rank",  # the item's place in the user's list, with the history and without it
     "reads_history", "profile", "user_features"}

``basis`` says what the score rests on: ``history`` (the tower pooled at
least one history item), else ``features`` (a known user's feature row, when it
holds at least one value; ``user_features`` names the columns that do),
``id`` (a learned user-ID embedding) or ``popularity`` (the empty-history
representation every new user shares). A new user described by ``user_features``
(with a history, as ``POST /recommend`` takes them) has the profile ``features``
when at least one feature is given; every attribution variant re-runs the tower
with those same features, so leave-one-out stays exact. ``profile`` is the same chain without
the history: what is left when no history item raises the score.

``history_left_out`` lists the items of a given history (a new user's, or a known user's input history:
``--history-from``) that had no training interactions: the user tower leaves them out
(:func:`~twotower.pipeline.similar.history_as_read`), as that user's list does, so they have no contribution and are
never a reason; they still count as seen (``already_seen``, ``rank``). Empty for a known user's training history,
whose items are all trained.

``rank`` is the item's place (1 = first) among the catalogue's items outside the user's history -- the list
``/recommend`` gives without filters; a known user's with an input history (``--history-from``) leaves out their
training history too -- by these scores, and ``empty_history_rank`` its place in the same list
scored from the empty-history representation (None where the tower reads no history, or for an item in the
history). :func:`explain_recommendations` with ``exclude_seen=False`` counts over every item, the history's
included, as ``/recommend`` with ``exclude_seen`` false lists them (an item in the history has a place there too). A recommendation is a rank, not a score: a history can lower an item's score and still lift it up the
list by lowering the items above it more, and the sentence then says so rather than that the score "rests on" the
empty history.
"""
from __future__ import annotations

import dataclasses
import logging
import weakref
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import torch

from twotower.errors import ConfigError, NotFoundError
from twotower.explain.attribution import Attribution, Features, attribute_history_many, repeat_features
from twotower.explain.metadata import MetadataColumns, metadata_columns_of, shared_metadata
from twotower.explain.names import catalogue_names, name_of, title_column
from twotower.explain.text import explanation_text
from twotower.models.history import pad_histories
from twotower.pipeline.artifacts import check_finite_user, check_loaded_run, check_new_history
from twotower.pipeline.similar import history_as_read, untrained_history_rows
from twotower.utils.arguments import check_id

if TYPE_CHECKING:
    from twotower.pipeline.artifacts import TrainedRun

__all__ = ["explain_recommendation", "explain_recommendations", "explain_by_id", "user_window", "run_metadata_columns",
           "run_item_names"]

log = logging.getLogger(__name__)


def _check_row(row: int, n: int, kind: str) -> int:
    if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= int(row) < n:
        raise NotFoundError(f"{kind} row", row, f"rows run 0..{n - 1}; map external ids with the run's vocabulary")
    return int(row)


_COLUMNS: "weakref.WeakKeyDictionary[Any, MetadataColumns]" = weakref.WeakKeyDictionary()


def run_metadata_columns(run: Any) -> MetadataColumns:
    """Column roles of the run's item metadata (see :func:`metadata_columns`), worked out once per run."""
    cols = _COLUMNS.get(run)
    if cols is None:
        spec = run.item_encoder.spec if run.item_encoder is not None else None
        # the values item_record gives, by column (its added item_id and title are not roles)
        cols = metadata_columns_of(spec, run.item_meta_columns())
        cols = dataclasses.replace(cols, verb=run.config.data.history_verb)
        _COLUMNS[run] = cols
    return cols


#: per run: (the item_meta_columns() the names were worked out from, {item_id: name})
_NAMES: "weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, str]]]" = weakref.WeakKeyDictionary()


def run_item_names(run: Any) -> dict[str, str]:
    """``{item_id: name}`` for the run's items whose title another item has too (see :mod:`twotower.explain.names`),
    worked out once per item table; empty for a run without a title column (its items are named by id)."""
    columns = run.item_meta_columns()
    got = _NAMES.get(run)
    # again after `run.item_meta = edited`, whose columns are read anew: names worked out once per run gave the old
    # table's display_name ('Body Snatchers (1993) [item 573]') beside the new table's title
    if got is None or got[0] is not columns:
        got = _NAMES[run] = (columns, catalogue_names(columns, run_title_column(run), run.item_vocab.id_at))
    return got[1]


def run_title_column(run: Any) -> str | None:
    """The column the run's items are named by (:func:`~twotower.explain.names.title_column`), as its catalogue
    (serving/catalog.py) names them."""
    return title_column(getattr(run, "title_col", None), run.item_meta_columns())


def user_window(run: Any, user_row: int | None, history_rows: list[int] | None) -> np.ndarray:
    """The right-aligned history window [L] the user tower reads (padding = ``model.pad_item``)."""
    L, pad = run.model.history_len, run.model.pad_item
    if history_rows is not None:
        return pad_histories([np.asarray(history_rows, np.int64)], L, pad)[0]
    return run.history.last_windows(np.array([user_row]), L, pad)[0]


def _record(run: Any, row: int, names: Mapping[str, str]) -> dict[str, Any]:
    """Item metadata as the service's item records give it (``run.item_record``: a ``title`` only where the
    catalogue has one) plus ``display_name``: the item as the sentence names it (``names``:
    :func:`run_item_names`), as the service's item records and the explorer page name it (a metadata column of
    that name is replaced, as they replace it). The title column is :func:`run_title_column`'s:
    ``data.title_col``, else a ``title`` column."""
    rec = run.item_record(row)
    col = run_title_column(run)
    title = rec.get(col) if col else None
    # no title is invented: a run without titles gave explanation records "title": "<item id>" while the
    # /recommend, /items and /users records of the same item have no title (display_name says "item 42")
    rec["display_name"] = name_of(title, rec["item_id"], names)
    return rec


def _learned_user_id(run: Any, user_row: int | None) -> bool:
    """Whether the user's score rests on a learned user-ID row: a user without training rows has the zero row the
    model was built with (pipeline.experiment.build_model_for), which the sentence called "your learned user-ID
    embedding"."""
    return run.model.user_tower.id_emb is not None and user_row is not None and len(run.history.of(user_row)) > 0


def _profile(run: Any, user_row: int | None, given: list[str]) -> str:
    """What a user's score rests on without their history: ``given`` names the feature columns that hold a value."""
    tower = run.model.user_tower
    if given and tower.features.out_dim:
        return "features"
    if user_row is not None and tower.id_emb is not None:
        return "id"
    return "popularity"


def known_user_features(run: Any, user_row: int) -> list[str]:
    """The user-table columns that hold a value for known user ``user_row``, in the run's column order.

    A value missing from the table (or a user with no row in it) is encoded as missing, as every new user
    without features is: it says nothing of this user, so it is not cited as their profile (every column was,
    and a user with no row at all was told their score "rests only on your profile (user features: age)")."""
    columns = list(run.user_feature_columns)
    if not columns:
        return []
    spec = run.user_encoder.spec
    cat, multi, num = run.model.user_tower.features.rows(torch.tensor([user_row]))
    flags = num.shape[1] // 2  # numeric columns are [standardised values, missing flags]
    held = ([bool(cat[0, j] != 0) for j in range(len(spec.categorical))]  # 0 = missing or unknown
            + [bool((m[0] != 0).any()) for m in multi]  # all padding = no value
            + [bool(num[0, flags + j] == 0) for j in range(len(spec.numeric))])
    return [c for c, h in zip(columns, held) if h]


def new_user_features(
    run: Any, user_row: int | None, user_features: Mapping[str, Any] | None, encoded: Features | None = None
) -> tuple[Features | None, list[str]]:
    """A new user's ``user_features`` (column -> raw value) encoded as ``POST /recommend`` encodes them, and
    the columns given a value (in the run's column order). ``encoded``: those tensors, already encoded by
    the caller (``TrainedRun.encode_user_features`` of this one user), so they are not encoded twice."""
    if user_features is None:
        return None, []
    if encoded is None or user_row is not None:  # the checks and messages of POST /recommend (TrainedRun)
        encoded = run.encode_new_user_features(user_features, with_user_id=user_row is not None)
    # a value training never saw reads as unknown and says nothing of this user: not cited as its profile
    unknown = run.new_user_unknown_columns(user_features)
    given = [c for c in run.user_feature_columns if user_features.get(c) not in (None, "", [], ()) and c not in unknown]
    return encoded, given


@torch.no_grad()
def _heads(run: Any, user_row: int | None, window: np.ndarray, item_row: int,
           features: Features | None = None) -> dict[str, float] | None:
    """Each head's share of the score: alpha*<u,sem>/norm and (1-alpha)*<u,collab>/norm (they sum to it)."""
    model = run.model
    if getattr(model.item_tower, "semantic", None) is None:
        return None  # single-head item tower: nothing to split (and no tower pass spent on it)
    _, h = model.item_tower.forward_heads(torch.tensor([item_row]))
    if h is None:
        return None
    rows = None if user_row is None else torch.tensor([user_row])
    u = model.user_tower(rows, torch.as_tensor(window).unsqueeze(0), features=repeat_features(features, 1))[0]  # [D]
    a, norm = float(h.alpha), float(h.norm[0])
    return {
        "alpha": a,
        "semantic": a * float(u @ h.semantic[0]) / norm,
        "collaborative": (1 - a) * float(u @ h.collaborative[0]) / norm,
    }


def _item_reads(tower: Any) -> tuple[str, ...]:
    """What the item tower reads of an item besides its ID: ``"text"`` (frozen text embeddings), ``"features"``."""
    text = getattr(tower, "text", None) is not None and (tower.config.text_embeddings or tower.config.dual_head)
    return (("text",) if text else ()) + (("features",) if tower.features.out_dim else ())


@torch.no_grad()
def _list_ranks(run: Any, user_row: int | None, window: np.ndarray, features: Features | None, item_rows: list[int],
                seen: np.ndarray, vectors: np.ndarray | None, users: np.ndarray | None = None
                ) -> list[tuple[int | None, int | None]]:
    """``(rank, empty_history_rank)`` of each item (module docstring): 1 + the items outside ``seen`` that a list
    places above it (:func:`_listed_above`), from the user's vector and, where the tower reads a history, the vector of the empty history (its
    weights all zero, the ``empty_history_score``'s variant). ``vectors``: the catalogue's served vectors (the
    service's, which may be memory-mapped); default the run's own. ``users``: those two vectors [2, D] where the
    attribution's pass computed them (:attr:`Attribution.user_vectors`); else one pass here."""
    model = run.model
    reads = bool(model.user_tower.uses_history)
    if users is None or not reads:
        hist = torch.as_tensor(np.asarray(window, np.int64)).unsqueeze(0)  # [1, L]
        b = 2 if reads else 1
        w = model.user_tower.history_weights(hist) if reads else None  # [1, L]
        weights = None if w is None else torch.cat([w, torch.zeros_like(w)])  # [2, L]: full, empty
        rows = None if user_row is None else torch.full((b,), int(user_row), dtype=torch.long)
        users = model.user_tower(rows, hist.repeat(b, 1), history_weights=weights,
                                 features=repeat_features(features, b)).numpy()  # [b, D]
    users = np.asarray(users, dtype=np.float32)
    items = run.item_embeddings() if vectors is None else vectors  # [I, D]
    # one matrix-vector product a user vector, each row contiguous for the counts below: [I, 2] products and
    # their strided columns took 250 ms for 10 items of a 1M x 80 catalogue, this ~45 ms (the catalogue read twice)
    scores = [np.asarray(items @ u, dtype=np.float32) for u in users]  # b x [I]
    seen = np.unique(seen[(seen >= 0) & (seen < len(scores[0]))])
    out: list[tuple[int | None, int | None]] = []
    for r in item_rows:
        if np.isin(r, seen):
            out.append((None, None))
            continue
        # the items above it, less the history's (no copy of the unseen rows)
        ranks = [1 + _listed_above(s, int(r)) - _listed_above(s, int(r), seen) for s in scores]
        out.append((ranks[0], ranks[1] if reads else None))
    return out


def _listed_above(scores: np.ndarray, row: int, among: np.ndarray | None = None) -> int:
    """How many items (of the rows ``among``; None: all) a list by ``scores`` places above ``row``: those scoring
    higher, and those of the same score with a smaller row, as the index breaks ties (index/base.py). Counting the
    higher ones alone explained each of four items of one score, listed 37th to 40th, as ranking 37th."""
    mine = scores[row]
    if among is None:  # no copy of the catalogue's scores: a 1M-item catalogue is counted once a user vector
        return int(np.count_nonzero(scores > mine)) + int(np.count_nonzero(scores[:row] == mine))
    s = scores[among]
    return int(np.count_nonzero(s > mine)) + int(np.count_nonzero((s == mine) & (among < row)))


def _seen_rows(run: Any, user_row: int | None, history_rows: list[int] | None) -> np.ndarray:
    """The items the user's list leaves out as seen: the history given (those the tower leaves out too) and, for a
    known user, their training history, as ``recommend --history-from`` and ``serve --history-from`` leave out both:
    counted against the input history alone, an item below a training item was explained one place lower than
    listed, and a training item (never listed) as unseen."""
    trained = np.zeros(0, np.int64) if user_row is None else np.asarray(run.history.of(user_row), np.int64)
    if history_rows is None:
        return trained
    return np.union1d(trained, np.asarray(history_rows, np.int64)).astype(np.int64, copy=False)


def _history_entries(run: Any, window: np.ndarray, att: Attribution, records: dict[int, dict[str, Any]],
                     untrained: np.ndarray) -> list[dict[str, Any]]:
    """Every pooled history item, largest contribution first (ties: the more recent first), with metadata; an item
    without training interactions (``untrained``) carries ``"cold": true`` (the tower has not learned it, so its
    contribution is its untrained vector's, and the sentence does not name it as a reason)."""
    L = len(window)
    order = sorted(range(len(att.positions)), key=lambda k: (-att.contributions[k], -int(att.positions[k])))
    out = []
    for k in order:
        pos = int(att.positions[k])
        row = int(window[pos])
        out.append({**records[row], "contribution": float(att.contributions[k]), "age": L - 1 - pos,
                    **({"cold": True} if untrained[row] else {})})
    return out


def explain_recommendation(
    run: TrainedRun,
    *,
    user_row: int | None = None,
    history_rows: list[int] | None = None,
    item_row: int,
    top: int = 5,
    method: str = "loo",
    user_features: Mapping[str, Any] | None = None,
    encoded_features: Features | None = None,
    check: Callable[[], None] | None = None,
    item_vectors: np.ndarray | None = None,
) -> dict[str, Any]:
    """Why ``item_row`` scores what it does for a user (see the module docstring for the dict).

    Pass ``user_row`` for a training user (their stored history), or
    ``history_rows`` (item rows, oldest first) for an ad-hoc user; with both,
    the given history replaces the stored one. ``user_features`` (with
    ``history_rows`` only): the new user's features, column -> value, as
    ``POST /recommend`` and ``tt.recommend`` take them. ``top`` bounds the history
    list; ``method`` is ``"loo"`` (exact leave-one-out) or ``"gradxinput"``.
    Deterministic for a fixed run. ``check`` and ``item_vectors``: as :func:`explain_recommendations`'.
    """
    return explain_recommendations(
        run, user_row=user_row, history_rows=history_rows, item_rows=[item_row], top=top, method=method,
        user_features=user_features, encoded_features=encoded_features, check=check, item_vectors=item_vectors,
    )[0]


def explain_recommendations(
    run: TrainedRun,
    *,
    user_row: int | None = None,
    history_rows: list[int] | None = None,
    item_rows: list[int],
    top: int = 5,
    method: str = "loo",
    check: Callable[[], None] | None = None,
    user_features: Mapping[str, Any] | None = None,
    encoded_features: Features | None = None,
    item_vectors: np.ndarray | None = None,
    list_ranks: Sequence[int] | None = None,
    exclude_seen: bool = True,
) -> list[dict[str, Any]]:
    """:func:`explain_recommendation` for several items of one user, in order.

    ``list_ranks``: each item's place in the list the caller served (``POST /recommend`` with ``explain``), taken as
    its ``rank``: from an approximate index the list can differ from the exact count (65 of 400 demo items under
    IVF), and the sentence quoted a place the list beside it did not show.

    ``exclude_seen``: whether the list the ranks count in leaves the user's history out (``/recommend``'s field of
    that name); False counts every item, as that list holds the history's items too: counted without them, every
    item below a seen one was explained one place above where the list showed it.

    ``encoded_features``: ``user_features`` already encoded by the caller (the service encodes a
    request's features once, for its list and its explanations).

    The user-side work (the ``n + 2`` history variants, the history's
    metadata) is done once, so M items cost one tower pass plus M small dicts.
    ``check`` is called before each block of the tower's pass and before each item; it may raise to abandon
    the work (a time budget, a client that went away). ``item_vectors``: the catalogue's vectors the ranks are
    taken over (a service's served vectors); default the run's own (:meth:`TrainedRun.item_embeddings`).
    """
    check_loaded_run(run, "explain")
    # a numpy integer as the rows take one (user_row=np.int64(5) was read, top=np.int64(3) refused)
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)):
        raise ConfigError(f"explain top: expected an integer >= 0, got {top!r}")
    from twotower.pipeline.refusals import top_refusal

    if (why := top_refusal(top)) is not None:  # the words of `explain --top` and POST /explain
        raise ConfigError(f"explain top: {why}")
    top = int(top)
    if user_row is None and history_rows is None:
        raise ConfigError("explain needs a user: pass user_row (a known user) or history_rows (an ad-hoc history)")
    if isinstance(item_rows, (str, bytes)) or np.ndim(item_rows) != 1:
        # item_rows=5 failed with "TypeError: 'int' object is not iterable"; one item is explain_recommendation's
        raise ConfigError(f"explain item_rows: expected a sequence of item rows, e.g. [5] (or explain_recommendation("
                          f"..., item_row=5) for one item), got {item_rows!r}")
    model = run.model
    item_rows = [_check_row(r, run.n_items, "item") for r in item_rows]
    if user_row is not None:
        user_row = _check_row(user_row, len(run.user_vocab), "user")
    elif model.user_tower.id_emb is not None:
        raise ConfigError(
            "this run's user tower uses user-ID embeddings, so an ad-hoc history cannot be explained; pass a known user"
        )
    feats, given = new_user_features(run, user_row, user_features, encoded_features)
    if history_rows is not None:
        history_rows = [_check_row(r, run.n_items, "item") for r in history_rows]
    described = history_rows if history_rows is not None else run.history.of(user_row)  # before any is left out
    seen = _seen_rows(run, user_row, history_rows)
    left_out: list[int] = []
    if history_rows is not None:  # a given history (a new user's, a known user's input one), as their list reads it
        left_out = untrained_history_rows(run, history_rows)
        history_rows = [int(r) for r in history_as_read(run, history_rows)]
    window = user_window(run, user_row, history_rows)  # [L]
    full = history_rows if history_rows is not None else run.history.of(user_row)
    # a history longer than the window: the item a deletion lets in (explain/attribution.loo_variants)
    entering = int(full[-len(window) - 1]) if len(full) > len(window) else None
    atts = attribute_history_many(model, user_row, window, item_rows, method=method, features=feats, check=check,
                                  entering=entering)
    if feats is not None:  # features that overflow the tower gave "score": NaN (the CLI printed it, JSON has none)
        check_finite_user([v for a in atts for v in (a.score, a.empty_score)])

    reads = bool(model.user_tower.uses_history)
    cols = run_metadata_columns(run)
    names = run_item_names(run)  # a title two items share is named apart in the sentence
    if user_row is not None:
        given = known_user_features(run, user_row)
    profile = _profile(run, user_row, given)
    pad = model.pad_item
    records = {int(r): _record(run, int(r), names) for r in set(window.tolist()) if r != pad}
    left_records = [_record(run, r, names) for r in left_out]
    # the pooled items are the same for every item of this user (the window's valid columns)
    pooled = [int(window[p]) for p in atts[0].positions] if reads and atts else [int(r) for r in described]
    # each item once: a history repeating an item ("i17,i17,i17,i39") said "Action (4 items) ... with the 4 items of
    # your history window" of 2 items, where the warm sentence names and counts each item once
    pooled_records = [run.item_record(r) for r in dict.fromkeys(pooled)]
    # training interactions per item: a cold item (none) was explained "Because you watched ..." with a head
    # split whose collaborative half is the zero-ID vector every cold item shares
    from twotower.pipeline.similar import untrained_items  # once per loaded run: a request counted every interaction

    untrained = untrained_items(run)
    reads_of_item = _item_reads(model.item_tower)
    from twotower.pipeline.run import item_has_text

    has_text = item_has_text(run) if "text" in reads_of_item else None
    if check is not None:
        check()
    listed_out = seen if exclude_seen else np.zeros(0, np.int64)  # what the list the ranks count in leaves out
    ranks = _list_ranks(run, user_row, window, feats, item_rows, listed_out, item_vectors,
                        atts[0].user_vectors if atts else None)
    if list_ranks is not None:  # the served list's places (an approximate index's list, as the client sees it)
        ranks = [(int(listed), empty) for listed, (_, empty) in zip(list_ranks, ranks)]
    out = []
    for item_row, att, (rank, empty_rank) in zip(item_rows, atts, ranks):
        if check is not None:
            check()
        entries = _history_entries(run, window, att, records, untrained)
        item = _record(run, item_row, names)
        expl: dict[str, Any] = {
            "user_id": None if user_row is None else run.user_vocab.id_at(user_row),
            "item_id": run.item_vocab.id_at(item_row),
            "item": item,
            "score": att.score,
            "history": entries,
            "history_left_out": [dict(r) for r in left_records],
            "shared_metadata": shared_metadata(item, pooled_records, cols),
            "already_seen": bool(np.isin(item_row, seen)),
            "cold": bool(untrained[item_row]),
            "basis": "history" if reads and len(att.positions) else profile,
            "method": att.method,
            "history_window": int(len(att.positions)),
            "history_total": att.score - att.empty_score,
            "empty_history_score": att.empty_score,
            "rank": rank,
            # an empty window is the empty history: the same place (null said the tower reads no history)
            "empty_history_rank": empty_rank if reads else None,
            "reads_history": reads,
            "profile": profile,
            "user_features": given if profile == "features" else [],
        }
        heads = _heads(run, user_row, window, item_row, feats)
        if heads is not None:
            expl["heads"] = heads
        # a tower with features and a user-ID embedding rests on both; "profile" names the features only
        expl["text"] = explanation_text(expl, cols, entries, names=names,
                                        with_user_id=profile == "features" and _learned_user_id(run, user_row),
                                        cold_reads=reads_of_item if has_text is None or has_text[item_row]
                                        else tuple(r for r in reads_of_item if r != "text"),
                                        item_text=has_text is None or bool(has_text[item_row]))
        expl["history"] = entries[:top]
        out.append(expl)
    return out


def explain_by_id(
    run: TrainedRun,
    *,
    item_id: str,
    user_id: str | None = None,
    history: list[str] | None = None,
    top: int = 5,
    method: str = "loo",
    user_features: Mapping[str, Any] | None = None,
    history_ids: list[str] | None = None,
    history_from: Any = None,
) -> dict[str, Any]:
    """:func:`explain_recommendation` with external ids; an unknown id raises NotFoundError naming it.

    Give exactly one of ``user_id`` (a known user, their training history) or ``history``: a new user's item ids,
    oldest first, the keyword ``tt.recommend`` takes them by (and POST /explain's field); ``history_ids`` is its
    older name, still taken. ``user_features`` go with ``history``
    (a new user), as in ``POST /recommend``. ``history_from`` (with ``user_id``): interaction files or DataFrames
    whose rows are the user's input history instead of the training history, as ``twotower explain
    --history-from`` and ``tt.recommend(history_from=...)`` read them."""
    check_loaded_run(run, "explain")
    if history_from is not None and (history is not None or history_ids is not None):  # tt.recommend's rule and words
        raise ConfigError("history_from reads known users' histories; history describes one new user: use one or the "
                          "other")
    if history_ids is not None:
        if history is not None:
            raise ConfigError("give history or history_ids, not both: history_ids is the older name of history")
        history, name = history_ids, "history_ids"
    else:
        name = "history"
    if (user_id is None) == (history is None):
        # the words of POST /explain (and `twotower explain`, whose --user and --history exclude each other): with
        # both, the history silently replaced the user's; with neither, the refusal named user_row and history_rows
        raise ConfigError(f"give exactly one of user_id (a known user) or {name} (item ids, oldest first)")
    from twotower.pipeline.refusals import empty_user_id_refusal, refuse_oversized_user_features

    check_id(user_id, "user_id", "user")  # a float: 3.0 was user '3', 3.5 "unknown user '3.5'"
    check_id(item_id, "item_id")
    if isinstance(user_id, str) and not user_id.strip():  # was "unknown user ''": the words of tt.recommend
        raise ConfigError(f"user_id: {empty_user_id_refusal()}")
    refuse_oversized_user_features(user_features)  # POST /explain's bounds and words, before its other checks
    # a string ("12" was read as the history [1, 2]) or an empty list (explained from the empty-history state,
    # where `explain --history`, POST /explain and tt.recommend refuse it) is refused, unless user_features alone
    # describe a user with no history yet on a run that reads them (as tt.recommend serves that user)
    history_ids = None if history is None else check_new_history(history, name, run=run, user_features=user_features)
    # the features' columns and values before the ids are looked up, as POST /explain and `twotower explain` check
    # them: a bad value sent with an unknown history id was refused for the id here alone
    encoded = run.encode_new_user_features(user_features, with_user_id=user_id is not None)
    # index() spells ids as the vocabulary does (50.0 -> "50"); str() made 50.0 an unknown item '50.0'
    from twotower.pipeline.refusals import hint_unknown_user, locate, located, rows_naming_every_unknown

    # an unknown id named by its argument, as POST /explain names its field: with a history, "unknown item"
    # alone could be item_id or any of history
    with located("user_id"):
        try:
            user_row = None if user_id is None else run.user_vocab.index(user_id)
        except NotFoundError as e:  # the words of `explain --user` and POST /explain
            raise hint_unknown_user(e, run) from None
    history_rows = None
    if history_ids is not None:  # every unknown id named, as recommend's history refusal names them
        history_rows = rows_naming_every_unknown(history_ids, run.item_vocab.index,
                                                 lambda pos, e: locate(e, f"{name}[{pos}]"))
    # the item after who asks about it (user_id or history), as `twotower explain` and POST /explain look them up
    with located("item_id"):
        item_row = run.item_vocab.index(item_id)
    if history_from is not None:  # the input history replaces the stored one, as `explain --history-from` reads it
        from twotower.pipeline.histories import read_input_histories

        history_rows = [int(r) for r in read_input_histories(run, history_from).sequences.of(user_row)]
        if not history_rows:  # the words of `explain --history-from`
            log.warning("user %s has no rows of known items in the history_from files: the item is explained from "
                        "an empty input history, not from their training history", user_id)
    explanation = explain_recommendation(
        run, user_row=user_row, history_rows=history_rows, item_row=item_row, top=top, method=method,
        user_features=user_features, encoded_features=encoded,
    )
    # what POST /explain answers in warnings and `twotower explain` prints: from here they went nowhere. The cold
    # history items of a given history (a new user's, or the input history), as POST /explain warns of them
    subject = None if history_from is None else f"user {user_id}'s history in history_from"
    for note in explain_notes(run, item_row, user_features, history_rows, subject):
        log.warning("%s", note)
    return explanation


def explain_notes(run: TrainedRun, item_row: int, user_features: Mapping[str, Any] | None = None,
                  history_rows: Sequence[int] | None = None, known_user: str | None = None) -> list[str]:
    """The warnings of an explanation, as POST /explain answers them: a new user's feature values training never saw
    (read all the same, as tt.recommend logs them), an item the model cannot place (no training interactions
    and an item tower that reads only the ID: its score comes from no interaction), and a given history
    ``history_rows`` (a new user's, or a known user's input history, named by ``known_user``) holding items
    without training interactions (left out of the history the tower reads)."""
    from twotower.pipeline.similar import unplaced_item_mask, unplaced_item_note, untrained_history_note

    notes = run.new_user_feature_notes(user_features)
    if unplaced_item_mask(run)[int(item_row)]:
        notes.append(unplaced_item_note(run.item_vocab.id_at(int(item_row))))
    if history_rows is not None and (cold := untrained_history_note(run, history_rows, known_user)):
        notes.append(cold)
    return notes
