"""Input histories read from interaction files, for scoring a saved run without refitting.

``twotower recommend --history-from F...`` and ``twotower evaluate --history-from F...``
embed every known user from the history in the files ``F`` (e.g. ``train.csv
valid.csv`` for the leave-one-out test input), instead of the training history
stored with the run. The model is not refitted: the user tower simply reads a
longer (or different) window, which is how sequence models are evaluated.

Order within a user: by timestamp, ties by item (the vocabulary order of the
ids: numeric when the ids are integers — the rule the splits and the training
histories use), remaining ties by the order of the files and of their rows.
Rows whose user or item is not in the run's vocabularies are dropped and
counted in the report (an unknown item cannot be embedded; an unknown user
cannot be asked for). Exact duplicate ``(user, item, timestamp)`` rows across
the files are kept once, so overlapping files do not repeat an item.

From Python, a pandas DataFrame may stand where a file goes (``history_from=df`` or
``[df, "valid.csv"]``): it needs the columns the file would have and is checked the
same way; its errors name it by position, ``<DataFrame history_from[1]>``, with
the row as ``iloc N`` and the column.

Files without a timestamp column (or in the SASRec format, whose lines are in time order) give the order
only: the history is then the files one after another, each in row order, and no row is dropped as a
duplicate. Mixing such files with timestamped ones is refused, since their rows cannot be placed in time.
"""
from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from twotower.data.timeunits import align_date_units, detect_unit, has_times, unit_words
from twotower.pipeline.run_inputs import read_run_interactions
from twotower.errors import ConfigError, DataError
from twotower.models.history import UserSequences
from twotower.utils.wording import plural

__all__ = ["HistoryBaselineScorer", "HistoryScorer", "InputHistories", "empty_as_read", "exclude_histories",
           "read_input_histories", "sequences_as_read"]

log = logging.getLogger(__name__)

#: what a --history-from file is read as, in the warnings about its ratings (which it does not use)
HISTORY_USE = "input histories"


@dataclass(frozen=True)
class InputHistories:
    """Each run user's input history (item rows, oldest first) in CSR layout over the run's user rows.

    ``sequences`` has one (possibly empty) sequence per row of the run's user
    vocabulary; ``report`` counts rows read, kept and dropped.
    """

    sequences: UserSequences
    n_items: int
    files: tuple[str, ...]
    report: dict[str, Any] = field(default_factory=dict)

    def users(self) -> np.ndarray:
        """Rows of the users with a non-empty input history: [U']."""
        return np.flatnonzero(self.sequences.lengths() > 0).astype(np.int64)

    def matrix(self) -> sp.csr_matrix:
        """Binary ``[U, I]`` matrix of the input histories (what is excluded from ranking)."""
        seqs = self.sequences
        rows = np.repeat(np.arange(seqs.n_users, dtype=np.int64), seqs.lengths())
        m = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, seqs.items)), shape=(seqs.n_users, self.n_items))
        m.data[:] = 1.0  # an item repeated in a history counts once
        return m


def _check_one_unit(files: tuple[str, ...], units: list[str | None], frames: list[pd.DataFrame]) -> None:
    """Files whose timestamps are in different units (a split's epoch milliseconds beside a log in seconds)
    would be ordered decades apart, each file's rows before or after all of the other's: refused."""
    timed = {f: (u, df) for f, u, df in zip(files, units, frames) if u is not None}
    if len({u for u, _ in timed.values()}) > 1:
        named = ", ".join(f"{f}: {unit_words(df, u)}" for f, (u, df) in timed.items())
        raise DataError(f"--history-from: the files' timestamps are in different units ({named}, told from their "
                        "size), so their rows cannot be placed in one time order; convert them to one unit")


Source = str | os.PathLike | pd.DataFrame


def _sources(files: Source | Iterable[Source]) -> tuple[list[Source], tuple[str, ...]]:
    """The inputs as a list, and their labels: a path as given, a frame by its position."""
    if isinstance(files, (str, os.PathLike, pd.DataFrame)):
        # a lone path or frame: one input (a path's characters were read as file names, a frame's column names)
        return [files], (str(files) if not isinstance(files, pd.DataFrame) else "<DataFrame history_from>",)
    if isinstance(files, (bytes, dict)) or not isinstance(files, Iterable):
        raise ConfigError(f"history_from takes interaction file paths or pandas DataFrames (one, or a list), "
                          f"got {type(files).__name__}")
    items = list(files)
    for n, f in enumerate(items):
        if not isinstance(f, (str, os.PathLike, pd.DataFrame)):
            raise ConfigError(f"history_from[{n}]: expected an interaction file path or a pandas DataFrame, "
                              f"got {type(f).__name__}")
    return items, tuple(f"<DataFrame history_from[{n}]>" if isinstance(f, pd.DataFrame) else str(f)
                        for n, f in enumerate(items))


def read_input_histories(run: Any, files: Source | Iterable[Source]) -> InputHistories:
    """Read ``files`` (in the given order) into per-user input histories over ``run``'s vocabularies.

    ``run`` is a :class:`~twotower.pipeline.artifacts.TrainedRun` (anything with
    ``user_vocab`` and ``item_vocab``); files are read with the run's columns and
    format (:func:`~twotower.pipeline.run_inputs.read_run_interactions`). Raises
    ConfigError when no file is given. One path may be given alone (``evaluate_run(run, history_from="train.csv")``),
    and a pandas DataFrame with a file's columns may stand for a file, alone or in the list
    (``history_from=[train_df, "valid.csv"]``); its errors name it ``<DataFrame history_from[N]>``.
    """
    sources, files = _sources(files)
    if not files:
        raise ConfigError("--history-from needs at least one interactions file (e.g. train.csv valid.csv)")
    parts, timed, units = [], [], []
    cfg = getattr(run, "config", None)
    declared = cfg.data.time_unit if cfg is not None else "auto"  # data.time_unit of the run: no guess
    for src, label in zip(sources, files):
        if isinstance(src, pd.DataFrame):
            df = read_run_interactions(run, src, name=label, use=HISTORY_USE)  # the same columns and checks as a file
        else:
            df = read_run_interactions(run, label, use=HISTORY_USE)
        parts.append(df)
    # files read from dates, some with milliseconds and some without, onto one scale before their units are compared
    frames, parts = align_date_units(parts), []
    for n, df in enumerate(frames):
        timed.append(has_times(df))
        units.append((declared if declared != "auto" else detect_unit(df["timestamp"].to_numpy())) if timed[-1]
                     else None)
        parts.append(df.assign(_file=n, _row=np.arange(len(df), dtype=np.int64)))
    _check_one_unit(files, units, frames)
    if any(timed) and not all(timed):
        # a file without timestamps numbers its rows 0, 1, 2, ...: compared with another file's epoch seconds (or
        # row numbers) those would shuffle the history, and a sequence tower reads the order
        untimed = [f for f, t in zip(files, timed) if not t]
        raise DataError(f"--history-from: {', '.join(untimed)} {'has' if len(untimed) == 1 else 'have'} no timestamp "
                        "column while the other files do, so the order of their rows among the others' is unknown; "
                        "give files that all have timestamps (as `twotower data split` writes them), or none")
    df = pd.concat(parts, ignore_index=True)
    rows_read = len(df)
    if all(timed):
        # a row repeating one of an earlier file (the same pair in train.csv and valid.csv); repeats within a file
        # are the reader's to drop, and the ones it kept (times apart by a floored fraction) are distinct events
        key = ["user_id", "item_id", "timestamp"]
        dup = (df.groupby(key, sort=False)["_file"].transform("min") < df["_file"]).to_numpy()
    else:  # order only: a history is the files one after another, each in row order; a repeat is a re-consumption
        df = df.assign(timestamp=0)
        dup = np.zeros(len(df), dtype=bool)
    df = df.loc[~dup]
    u = run.user_vocab.encode(df["user_id"].to_numpy())
    i = run.item_vocab.encode(df["item_id"].to_numpy())
    known_u, known_i = u >= 0, i >= 0
    keep = known_u & known_i
    u, i = u[keep], i[keep]
    ts = df["timestamp"].to_numpy(np.int64)[keep]
    file_no = df["_file"].to_numpy(np.int64)[keep]
    row_no = df["_row"].to_numpy(np.int64)[keep]
    n_users = len(run.user_vocab)
    if all(timed):
        order = np.lexsort((row_no, file_no, i, ts, u))  # primary key last: user, time, item, file, row
    else:
        order = np.lexsort((row_no, file_no, u))  # user, then the files in the order given, each in row order
    indptr = np.zeros(n_users + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n_users), out=indptr[1:])
    seqs = UserSequences(indptr, i[order], ts[order])
    report = {
        "files": list(files),
        "rows_read": int(rows_read),
        "duplicates_dropped": int(dup.sum()),
        "rows_unknown_user": int((~known_u).sum()),
        "rows_unknown_item": int((known_u & ~known_i).sum()),
        "rows": int(keep.sum()),
        "users_with_history": int((seqs.lengths() > 0).sum()),
    }
    dropped = report["rows_unknown_user"] + report["rows_unknown_item"]
    if dropped:
        log.warning(
            "history from %s: %s of %s dropped (%s of an unknown user, %s of an unknown item: not in this run's "
            "vocabularies)%s", ", ".join(files), f"{dropped:,}", plural(len(df), "row"),
            plural(report["rows_unknown_user"], "row"), plural(report["rows_unknown_item"], "row"),
            unknown_examples(run, df["user_id"].to_numpy()[~known_u], df["item_id"].to_numpy()[known_u & ~known_i]),
        )
    log.info("history from %s: %s for %s", ", ".join(files), plural(report["rows"], "row"),
             plural(report["users_with_history"], "user"))
    if (note := untrained_rows_note(run, seqs, files)) is not None:
        log.warning("%s", note)
    return InputHistories(seqs, len(run.item_vocab), files, report)


def untrained_rows_note(run: Any, sequences: UserSequences, files: Iterable[str]) -> str | None:
    """The warning for input histories holding items without training interactions (None without any): the user
    tower leaves them out of what it reads (:func:`sequences_as_read`), as it does of a new user's history, so the
    rows, users and items are counted (what `evaluate --history-from` measures rests on the other items)."""
    from twotower.pipeline.similar import untrained_items

    tower = getattr(getattr(run, "model", None), "user_tower", None)  # a stand-in run (vocabularies only) has none
    if tower is None or not tower.uses_history:
        return None
    cold = untrained_items(run)[sequences.items]
    if not cold.any():
        return None
    users = np.repeat(np.arange(sequences.n_users), sequences.lengths())[cold]
    items = pd.unique(sequences.items[cold])
    return (f"history from {', '.join(files)}: {plural(int(cold.sum()), 'row')} of {plural(np.unique(users).size, 'user')}"
            f" are of {plural(items.size, 'item')} with no training interactions (e.g. item "
            f"{str(run.item_vocab.id_at(int(items[0])))!r}): the user tower has not learned them, so it leaves them out "
            "of the histories it reads, as it does of a new user's history; they still count as seen")


#: input histories as the user tower reads them, per histories and run (the run's training history, whose items are
#: the trained ones): worked out once, where a service embeds a chunk of users a request. None: read as they are
#: (most histories: no untrained item); the value never holds its key, which kept every such history alive
_as_read: "weakref.WeakKeyDictionary[UserSequences, tuple[Any, UserSequences | None]]" = weakref.WeakKeyDictionary()


def sequences_as_read(run: Any, sequences: UserSequences) -> UserSequences:
    """Known users' input histories as the user tower reads them: without the items that had no training
    interactions, by the rule of a new user's history (:func:`~twotower.pipeline.similar.history_as_read`). Read,
    the same history ranked otherwise from a known user's id than from a new user's list (ML-1M, a GRU: a different
    first item), through rows training never updated. A training history holds trained items only."""
    from twotower.pipeline.similar import untrained_items

    if not run.model.user_tower.uses_history:
        return sequences
    got = _as_read.get(sequences)
    if got is not None and got[0] is run.history:
        return sequences if got[1] is None else got[1]
    keep = ~untrained_items(run)[sequences.items]
    read = None
    if not keep.all():
        owner = np.repeat(np.arange(sequences.n_users), sequences.lengths())  # the user of each row
        indptr = np.zeros_like(sequences.indptr)
        np.cumsum(np.bincount(owner[keep], minlength=sequences.n_users), out=indptr[1:])
        read = UserSequences(indptr, sequences.items[keep], sequences.timestamps[keep])
    _as_read[sequences] = (run.history, read)
    return sequences if read is None else read


def empty_as_read(run: Any, histories: InputHistories, rows: np.ndarray) -> tuple[np.ndarray, str]:
    """``(empty[E], clause)``: the users of ``rows`` whose input history the user tower reads as empty, and for the
    warnings that name them, ``; N of them holds only items without training interactions, ...`` (or ``''``).

    One rule for every surface (:func:`sequences_as_read`): a history of only such items was counted as a history,
    while the tower read none; `recommend --user` alone said so."""
    rows = np.asarray(rows, dtype=np.int64)
    empty = rows[sequences_as_read(run, histories.sequences).lengths()[rows] == 0]
    untrained = int((histories.sequences.lengths()[empty] > 0).sum())
    clause = (f"; {untrained:,} of them {'holds' if untrained == 1 else 'hold'} only items without training "
              "interactions, which the user tower leaves out" if untrained else "")
    return empty, clause


def unknown_examples(run: Any, users: np.ndarray, items: np.ndarray) -> str:
    """``, e.g. user '2' ('002' is known for '2': ...)``: the first unknown user (or, with none, item) of rows a
    file gave, with the known id it most likely meant (a file that lost its ids' leading zeros); ``''`` for none."""
    for kind, ids, vocab in (("user", users, run.user_vocab), ("item", items, run.item_vocab)):
        if len(ids):
            return f", e.g. {kind} {str(ids[0])!r}{vocab.zeros_note(pd.unique(ids))}"
    return ""


def exclude_histories(exclude: sp.csr_matrix | None, histories: InputHistories) -> sp.csr_matrix:
    """``exclude[U, I]`` plus every (user, item) of the input histories: an input item is never recommended."""
    m = histories.matrix()
    out = m if exclude is None else (sp.csr_matrix(exclude) + m).tocsr()
    out.data[:] = 1.0
    return out


class HistoryScorer:
    """Scorer of a run's two-tower model whose user vectors read the input histories.

    ``user_vectors(users) -> [B, D]`` embeds the last ``history_len`` items of
    each user's input history (the user's ID embedding too, when the tower has
    one); ``score(users) -> [B, I]`` is their dot product with every item.
    """

    def __init__(self, run: Any, histories: InputHistories) -> None:
        if len(histories.sequences.indptr) - 1 != len(run.user_vocab):
            raise ConfigError("input histories were read for another run (user count differs)")
        self.run = run
        self.histories = histories

    def user_vectors(self, users: np.ndarray) -> np.ndarray:
        rows = np.asarray(users, np.int64)
        model = self.run.model
        read = sequences_as_read(self.run, self.histories.sequences)  # without the items training never saw
        hist = read.last_windows(rows, model.history_len, model.pad_item)  # [B, L]
        return model.user_embeddings(rows, hist).numpy()

    def score(self, users: np.ndarray) -> np.ndarray:
        return self.user_vectors(users) @ self.run.item_embeddings().T  # [B, I]


class HistoryBaselineScorer:
    """A fitted history baseline (Popularity, EASE, ItemKNN) scoring from the input histories."""

    def __init__(self, baseline: Any, histories: InputHistories) -> None:
        self.baseline = baseline
        self.matrix = histories.matrix()  # [U, I]
        if hasattr(baseline, "rank_history"):
            # evaluate() takes a scorer's ``rank`` over dense score rows: without it ItemKNN and Popularity were
            # scored through one [I] row per user (1M items: ~12 users/s), where plain ``evaluate`` ranks them
            self.rank = self._rank

    def score(self, users: np.ndarray) -> np.ndarray:
        return self.baseline.score_history(self.matrix[np.asarray(users, np.int64)])  # [B, I]

    def _rank(self, users: np.ndarray, k: int, exclude: Any) -> np.ndarray:
        """Top-``k`` item rows ``[B, k]`` of the input histories of ``users`` (``exclude`` aligned with them)."""
        return self.baseline.rank_history(self.matrix[np.asarray(users, np.int64)], k, exclude)
