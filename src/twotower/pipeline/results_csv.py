"""The CSV of ``twotower recommend --users ... --out FILE``: one row per (user, recommended item).

``recommend --users all --k 10`` on a 300k-user run is 3M rows: built as one DataFrame (a Python loop over
every row) and one ``to_csv`` string, the write took 7.7 s (~20 s on a busier machine) with no line after
the ranking's last progress line. The rows are now built with array operations and written a block of
users at a time, each block's ``to_csv`` appended to the same file, with a progress line between blocks:
4.8 s, and the bytes are those of one ``to_csv`` of the whole frame (pandas writes each value on its own,
so a split between rows changes none).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from twotower.results import PAD_ID, Results, answer_score
from twotower.utils.progress import RateLog

__all__ = ["COLUMNS", "results_to_frame", "results_to_json", "write_results_csv"]

log = logging.getLogger(__name__)

#: Users per written block: ~1M rows at k=50, a few hundred MB of DataFrame and text at most, and a block
#: takes ~1 s, so progress lines come at about the rate asked for.
WRITE_BLOCK_USERS = 20_000


#: the columns of a results CSV by what its queries are: users (``recommend``) or items (``similar``)
COLUMNS = {"user": ("user_id", "item_id"), "item": ("item_id", "similar_item_id")}


def results_to_frame(run: Any, user_rows: np.ndarray, res: Results, *, query: str = "user") -> pd.DataFrame:
    """``user_id, item_id, rank, score`` rows of ``res`` (query ``q`` is user row ``user_rows[q]``), padding left
    out; ranks count each user's listed items from 1. ``query="item"``: the queries are item rows, and the
    columns ``item_id, similar_item_id, rank, score`` (``twotower similar``)."""
    return _frame(run, np.asarray(user_rows, np.int64), res.ids, res.scores, query)


def results_to_json(run: Any, user_rows: np.ndarray, res: Results, *, query: str = "user") -> str:
    """:func:`results_to_frame`'s rows as JSON records (``recommend --users ... --json``, ``similar --items ...
    --json``), each score rounded as every other answer gives it (pandas wrote 10 decimals)."""
    frame = results_to_frame(run, user_rows, res, query=query)
    return frame.assign(score=frame["score"].map(answer_score)).to_json(orient="records")


def _frame(run: Any, user_rows: np.ndarray, ids: np.ndarray, scores: np.ndarray, query: str = "user") -> pd.DataFrame:
    first, second = COLUMNS[query]
    keep = ids != PAD_ID  # [Q, K]; row-major order is the old loop's order (user by user, rank by rank)
    if not keep.any():  # the old lists-of-nothing frame: the header alone, whatever the column types
        return pd.DataFrame({first: [], second: [], "rank": [], "score": []})
    # decode looks up the rows asked for: Vocabulary.ids copies the whole list (1M items) per call
    vocab = run.user_vocab if query == "user" else run.item_vocab
    users = np.asarray(vocab.decode(user_rows), dtype=object)
    return pd.DataFrame({
        first: users[np.repeat(np.arange(user_rows.size), keep.sum(axis=1))],
        second: np.asarray(run.item_vocab.decode(ids[keep]), dtype=object),
        "rank": np.cumsum(keep, axis=1)[keep].astype(np.int64),
        "score": scores[keep].astype(np.float64),  # float(np.float32): the same double, printed by repr
    })


def write_results_csv(run: Any, user_rows: np.ndarray, res: Results, write: Callable[[str], Any], *,
                      log_every_s: float | None = None, query: str = "user") -> int:
    """Pass ``results_to_frame(run, user_rows, res, query=query).to_csv(index=False)`` to ``write`` (a text
    file's or stdout's ``write``) block by block, logging progress every ``log_every_s`` seconds (None:
    silent); returns the rows written."""
    user_rows = np.asarray(user_rows, np.int64)
    n = user_rows.size
    unit = "users" if query == "user" else "items"
    progress = RateLog(log, "writing the CSV", n, unit, log_every_s, rate_unit=unit)
    written = 0
    for start in range(0, max(n, 1), WRITE_BLOCK_USERS):  # an empty list still writes the header
        stop = min(start + WRITE_BLOCK_USERS, n)
        frame = _frame(run, user_rows[start:stop], res.ids[start:stop], res.scores[start:stop], query)
        write(frame.to_csv(index=False, header=start == 0))
        written += len(frame)
        progress.update(stop)
    return written
