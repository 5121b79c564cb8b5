"""Interactions as integer arrays: encoding with vocabularies, CSR matrices, per-user histories."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from twotower.data.vocab import Vocabulary
from twotower.errors import DataError
from twotower.utils.wording import plural

__all__ = ["EncodedInteractions", "encode_interactions", "to_csr", "Histories"]

log = logging.getLogger(__name__)

_EXAMPLES = 5


@dataclass(frozen=True)
class EncodedInteractions:
    """Interactions as rows: ``users[N]``, ``items[N]`` (int64), ``timestamps[N]`` (int64), ``ratings[N]`` (float32)."""

    users: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray
    ratings: np.ndarray
    n_users: int
    n_items: int

    def __post_init__(self) -> None:
        n = len(self.users)
        for field in ("items", "timestamps", "ratings"):
            if len(getattr(self, field)) != n:
                raise ValueError(f"EncodedInteractions.{field} has {len(getattr(self, field))} rows, users has {n}")

    def __len__(self) -> int:
        return int(len(self.users))


def encode_interactions(
    df: pd.DataFrame,
    user_vocab: Vocabulary,
    item_vocab: Vocabulary,
    *,
    name: str = "data",
    quiet: bool = False,
    rows_read: int | None = None,
) -> tuple[EncodedInteractions, dict[str, Any]]:
    """Encode a canonical interactions frame with the given vocabularies.

    Rows whose user or item is not in the vocabulary are dropped and counted in
    the returned report (``rows_in``, ``rows_kept``, ``rows_dropped``,
    ``unknown_users``/``unknown_items`` (distinct ids), ``unknown_user_rows``/
    ``unknown_item_rows`` and a few example ids) — never remapped. A drop is
    logged as a warning; ``quiet`` (a run's own split, reported when it was
    trained) logs it at debug level. ``rows_read``: the rows of the file ``df`` was read from, when its reader
    dropped repeated rows (``read_interactions``' report): the warning counts the file's rows and says how many
    were repeats ("dropped 1 of 100 rows" was said of a file of 140, 40 of them duplicates).
    """
    for col in ("user_id", "item_id"):
        if col not in df.columns:
            raise DataError(
                f"column {col!r} missing; encode_interactions needs a frame from read_interactions "
                f"(columns present: {list(df.columns)})",
                file=name,
                column=col,
            )
    users = user_vocab.encode(df["user_id"])
    items = item_vocab.encode(df["item_id"])
    n = len(df)
    ts = (
        df["timestamp"].to_numpy(dtype=np.int64)
        if "timestamp" in df.columns
        else np.arange(n, dtype=np.int64)
    )
    ratings = (
        df["rating"].to_numpy(dtype=np.float32) if "rating" in df.columns else np.ones(n, dtype=np.float32)
    )
    bad_u = users < 0
    bad_i = items < 0
    keep = ~(bad_u | bad_i)
    unknown_u = pd.unique(df["user_id"].to_numpy()[bad_u]) if bad_u.any() else np.array([], dtype=object)
    unknown_i = pd.unique(df["item_id"].to_numpy()[bad_i]) if bad_i.any() else np.array([], dtype=object)
    report = {
        "name": name,
        "rows_in": n,
        "rows_kept": int(keep.sum()),
        "rows_dropped": int((~keep).sum()),
        "unknown_users": int(len(unknown_u)),
        "unknown_user_rows": int(bad_u.sum()),
        "unknown_user_examples": [str(x) for x in unknown_u[:_EXAMPLES]],
        "unknown_items": int(len(unknown_i)),
        "unknown_item_rows": int(bad_i.sum()),
        "unknown_item_examples": [str(x) for x in unknown_i[:_EXAMPLES]],
    }
    if report["rows_dropped"]:
        notes = {"user": user_vocab.zeros_note(unknown_u), "item": item_vocab.zeros_note(unknown_i)}
        what = [f"{plural(report[f'unknown_{k}s'], k)} outside the run's vocabularies, e.g. "
                f"{report[f'unknown_{k}_examples']}{notes[k]}" for k in ("user", "item") if report[f"unknown_{k}s"]]
        repeats = 0 if rows_read is None else rows_read - n
        one = repeats == 1
        besides = (f"; {plural(repeats, 'other row')} {'repeats' if one else 'repeat'} an earlier row (its user, item "
                   f"and timestamp), dropped as {'a duplicate' if one else 'duplicates'}" if repeats else "")
        log.log(logging.DEBUG if quiet else logging.WARNING,
                "%s: dropped %d of %d rows: %s (unknown ids: counted, not remapped)%s",
                name, report["rows_dropped"], n + repeats, "; ".join(what), besides)
    enc = EncodedInteractions(
        users=users[keep].astype(np.int64),
        items=items[keep].astype(np.int64),
        timestamps=ts[keep].astype(np.int64),
        ratings=ratings[keep].astype(np.float32),
        n_users=len(user_vocab),
        n_items=len(item_vocab),
    )
    return enc, report


def to_csr(enc: EncodedInteractions) -> sp.csr_matrix:
    """Binary user-item matrix ``[U, I]`` (1.0 where a user interacted; repeats collapse)."""
    data = np.ones(len(enc), dtype=np.float32)
    m = sp.csr_matrix((data, (enc.users, enc.items)), shape=(enc.n_users, enc.n_items), dtype=np.float32)
    m.sum_duplicates()
    m.data[:] = 1.0
    m.sort_indices()
    return m


@dataclass(frozen=True)
class Histories:
    """Per-user item sequences in CSR layout, each sorted by (timestamp, item row).

    User ``u`` owns ``items[indptr[u]:indptr[u+1]]``; ``indptr`` has ``U+1`` entries.
    """

    indptr: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray

    @classmethod
    def from_interactions(cls, enc: EncodedInteractions) -> "Histories":
        order = np.lexsort((enc.items, enc.timestamps, enc.users))  # primary key last: user, then time, then item
        counts = np.bincount(enc.users, minlength=enc.n_users)  # [U]
        indptr = np.zeros(enc.n_users + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(
            indptr=indptr,
            items=enc.items[order].astype(np.int64),
            timestamps=enc.timestamps[order].astype(np.int64),
        )

    @property
    def n_users(self) -> int:
        return int(len(self.indptr) - 1)

    def of(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """``(items[L], timestamps[L])`` of user row ``u``, oldest first."""
        if not 0 <= u < self.n_users:
            raise IndexError(f"user row {u} out of range 0..{self.n_users - 1}")
        lo, hi = int(self.indptr[u]), int(self.indptr[u + 1])
        return self.items[lo:hi], self.timestamps[lo:hi]

    def lengths(self) -> np.ndarray:
        """History length per user, int64 ``[U]``."""
        return np.diff(self.indptr)
