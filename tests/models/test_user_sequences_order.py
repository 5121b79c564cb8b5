"""UserSequences.from_arrays orders every user's rows by (time, item), stably, whatever order the rows come in."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.models.history import UserSequences


def _reference(users: np.ndarray, items: np.ndarray, ts: np.ndarray, n_users: int) -> tuple:
    order = np.lexsort((items, ts, users))
    indptr = np.zeros(n_users + 1, np.int64)
    np.cumsum(np.bincount(users, minlength=n_users), out=indptr[1:])
    return indptr, items[order], ts[order]


def _rows(layout: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    users = np.repeat(rng.permutation(7), rng.integers(1, 6, 7))  # blocks, users out of numeric order
    ts = np.concatenate([np.sort(rng.integers(0, 3, (users == u).sum())) for u in dict.fromkeys(users.tolist())])
    items = rng.integers(0, 5, len(users))
    if layout == "blocks, ties ordered":
        items = np.concatenate([items[users == u][np.lexsort((items[users == u], ts[users == u]))]
                                for u in dict.fromkeys(users.tolist())])  # each block by (time, item)
    elif layout == "a user's rows split":
        users = np.concatenate([users, users[:2]])
        ts = np.concatenate([ts, [9, 9]])
        items = np.concatenate([items, [0, 1]])
    elif layout == "shuffled":
        p = rng.permutation(len(users))
        users, ts, items = users[p], ts[p], items[p]
    return users, items, ts


@pytest.mark.parametrize("layout", ["blocks, ties ordered", "blocks, ties in any order", "a user's rows split",
                                    "shuffled"])
def test_from_arrays_equals_the_lexsort(layout: str) -> None:
    users, items, ts = _rows(layout)
    seqs = UserSequences.from_arrays(users, items, ts, 9)  # users 7 and 8 have no rows
    indptr, want_items, want_ts = _reference(users, items, ts, 9)
    assert seqs.indptr.tolist() == indptr.tolist()
    assert seqs.items.tolist() == want_items.tolist()
    assert seqs.timestamps.tolist() == want_ts.tolist()


def test_a_user_split_in_two_blocks_is_put_together_in_time_order() -> None:
    seqs = UserSequences.from_arrays(np.array([1, 0, 1]), np.array([5, 6, 7]), np.array([0, 0, 1]), 2)
    assert seqs.of(1).tolist() == [5, 7]
    seqs = UserSequences.from_arrays(np.array([0, 0, 1, 0]), np.array([5, 6, 7, 8]), np.array([0, 1, 0, 0]), 2)
    assert seqs.of(0).tolist() == [5, 8, 6]  # time 0 (items 5, 8), then time 1
