"""Real ids to try first: the users with the longest training history and one of their recent histories.

The explorer's bare page lists them (``GET /examples``) so a newcomer does not
have to guess which ids the run knows.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["example_ids"]


def example_ids(run: Any, n_users: int = 5, n_history: int = 3) -> dict[str, Any]:
    """``{"users": [{"user_id", "n_history"}], "history": [item ids, oldest first]}``.

    ``users``: the ``n_users`` users with the most training interactions (ties:
    the earlier row). ``history``: the last ``n_history`` items of the first
    of them, a realistic ad-hoc history for someone the model has never seen.
    Users without history are never listed; a run with none gives empty lists.
    """
    lengths = run.history.lengths()  # [U]
    have = int(np.count_nonzero(lengths))
    rows = np.argsort(-lengths, kind="stable")[: min(n_users, have)]  # longest first, ties by row
    user_ids = run.user_vocab.ids
    users = [{"user_id": str(user_ids[r]), "n_history": int(lengths[r])} for r in rows]
    history: list[str] = []
    if rows.size:
        item_ids = run.item_vocab.ids
        history = [str(item_ids[int(i)]) for i in run.history.of(int(rows[0]))[-n_history:]]
    return {"users": users, "history": history}
