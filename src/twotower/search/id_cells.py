"""Cells that hold several passage ids (``search prepare --pair-passage-list``): one pair per listed id.

SciFact's raw claims files write a claim's relevant abstracts in one cell as a printed NumPy array,
``[ 5152028 11705328]`` (the ``cited_doc_ids`` column BEIR's qrels come from); JSON writes ``[1, 2]``, Python
``['a', 'b']``, other exports ``a;b``. Each listed id becomes its own
pair with the row's query, score and split; errors still name the row of the file the id came from.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from twotower.config import PAIR_LIST_BRACKETS as BRACKETS
from twotower.data.readers import RowNumbers, check_rows, ids_to_str

__all__ = ["BRACKETS", "ExpandedRows", "expand_id_lists", "looks_like_a_list"]

_USUAL_SEPARATORS = ";|,"  # named in the hint about cells that look like lists


class ExpandedRows(RowNumbers):
    """The numbering of a table whose rows were repeated, one per listed id: position -> the source row's number."""

    def __init__(self, rows: RowNumbers, origin: np.ndarray) -> None:
        super().__init__(rows.unit, rows.first)
        self._rows = rows
        self._origin = origin

    def number(self, pos: int) -> int:
        return self._rows.number(int(self._origin[pos]))

    def fields(self, pos: int) -> tuple[int, list[str]] | None:
        return self._rows.fields(int(self._origin[pos]))

    def line(self, pos: int) -> int | None:
        return self._rows.line(int(self._origin[pos]))


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


#: one token of a bracketed list: a double- or single-quoted id (which may hold spaces and commas), a bare id, a
#: comma, or anything else (a stray quote or bracket: the cell is not such a list)
_TOKEN = re.compile(r"""\s*(?:"([^"]*)"|'([^']*)'|([^\s,'"\[\]]+)|(,)|(\S))""")


def _bracket_items(text: str) -> list[str] | None:
    """The ids of ``[a, b]`` (JSON), ``['a', 'b']`` (Python) or ``[a b]`` (NumPy), or None when ``text`` is not
    such a list. Blank items (``[a,,b]``) are skipped."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    items: list[str] = []
    for double, single, bare, _comma, other in _TOKEN.findall(text[1:-1]):
        if other:
            return None
        item = double or single or bare
        if item.strip():
            items.append(item.strip())
    return items


def _items(value: Any, mode: str) -> list[Any] | None:
    """The ids one cell lists (``[]`` for an empty cell or list), or None when a cell is not the bracketed list
    ``mode`` asks for."""
    if isinstance(value, (list, tuple, np.ndarray)):  # a JSONL or Parquet list: already a list, whatever the mode
        return list(value)
    if _is_missing(value) or not str(value).strip():
        return []
    if not isinstance(value, str):  # a JSONL number: one id
        return [value] if mode != BRACKETS else None
    if mode == BRACKETS:
        return _bracket_items(value)
    return [part for part in value.split(mode) if part.strip()]  # "a;b;" ends with a separator, not an empty id


def expand_id_lists(df: pd.DataFrame, column: str, mode: str, *, file: str,
                    rows: RowNumbers) -> tuple[pd.DataFrame, ExpandedRows]:
    """``df`` with one row per id listed in ``column`` (ids as text; an empty list is one row with the id ``""``,
    dropped or refused as an empty id is), and its numbering by the file's rows."""
    cells = df[column].tolist()
    lists = [_items(v, mode) for v in cells]
    check_rows(np.array([items is None for items in lists], dtype=bool),
               lambda pos: f"{str(cells[pos]).strip()[:80]!r} is not a list in brackets (--pair-passage-list "
               f"{BRACKETS}: [1, 2], ['a', 'b'] or [1 2], an id holding a space or a comma quoted); a cell without "
               "brackets is read with the character between its ids, e.g. --pair-passage-list ';' for 1;2",
               file=file, column=column, rows=rows)
    counts = np.array([max(len(items), 1) for items in lists], dtype=np.int64)  # type: ignore[arg-type]
    origin = np.repeat(np.arange(len(df)), counts)
    ids = [item for items in lists for item in (items or [None])]  # type: ignore[union-attr]
    expanded = ExpandedRows(rows, origin)
    out = df.iloc[origin].reset_index(drop=True)
    out[column] = ids_to_str(pd.Series(ids, dtype=object), file=file, column=column, rows=expanded,
                             allow_empty=True).to_numpy(dtype=object)
    return out, expanded


def looks_like_a_list(value: str) -> str | None:
    """The --pair-passage-list value that would read ``value`` as a list of ids, or None."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        return BRACKETS
    return next((sep for sep in _USUAL_SEPARATORS if sep in text), None)

