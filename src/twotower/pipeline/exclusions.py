"""Items a caller lists as never to return in one answer: ``exclude_items`` of POST /recommend (and of each
/recommend/batch request), ``exclude=`` of ``tt.recommend``, ``--exclude-items`` of `twotower recommend`.

One code for the three: the ids are looked up as a history's are (an unknown one named by its place, every
other unknown one after it, in the words of ``history[1]: unknown item ...``), and the rows join the seen items
in the index search's ``exclude``, so a listed item is left out exactly as a seen one is. No torch here.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from twotower.errors import ConfigError, NotFoundError

__all__ = ["listed_rows", "with_listed", "LISTED"]

#: what a shortfall's reason calls the listed items
LISTED = "the listed exclude_items"


def listed_rows(ids: Sequence[Any] | None, row: Callable[[Any], int],
                at: Callable[[int, NotFoundError], BaseException], name: str = "exclude") -> np.ndarray | None:
    """``[L]`` item rows of the listed ids (None for None); an unknown id raised through ``at(pos, e)``, which
    names its place in the caller's words (``exclude_items[1]``, ``exclude[1]``, ``--exclude-items: item 2 of 3``).
    ``name``: the argument, named when ``ids`` is no list of ids (a string was read letter by letter)."""
    if ids is None:
        return None
    from twotower.pipeline.refusals import id_list_refusal, python_type_words, rows_naming_every_unknown
    from twotower.utils.arguments import check_ids, is_id_list

    if isinstance(ids, (str, bytes)) or not is_id_list(ids):  # the words of POST /recommend's 422
        raise ConfigError(f"{name}: {id_list_refusal(python_type_words(ids), ids)}")
    ids = check_ids(list(ids), name)  # exclude=[50.0] was "unknown item '50.0'" where history=[50.0] read '50'
    rows = rows_naming_every_unknown([str(i).strip() for i in ids], row, at, what="exclusion list")
    return np.unique(np.asarray(rows, dtype=np.int64))


def with_listed(seen: np.ndarray, listed: np.ndarray | None) -> np.ndarray:
    """The rows a search leaves out: ``seen`` (the seen items, or none) and the ``listed`` ones."""
    if listed is None or not listed.size:
        return seen
    return np.union1d(seen, listed).astype(np.int64, copy=False)
