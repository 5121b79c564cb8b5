"""Map external string ids (users, items) to internal rows 0..n-1 and back."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from twotower.errors import ConfigError, IntegrityError, NotFoundError
from twotower.utils.atomic import atomic_write_json, read_json

__all__ = ["Vocabulary", "sort_ids"]

_INT_RE = re.compile(r"^[+-]?\d+$")
_FORMAT = "twotower.vocabulary"
_VERSION = 1


def _to_id(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _loose_key(id: str) -> str:
    """``id`` without what an id loses on its way through JSON or a spreadsheet: leading zeros, case, spaces."""
    s = id.strip()
    return str(int(s)) if _INT_RE.match(s) else s.casefold()


def sort_ids(ids: Iterable[str]) -> list[str]:
    """Sorted unique ids: numerically when every id is an integer ("2" < "10"), else by text."""
    unique = set(ids)
    if unique and all(_INT_RE.match(i) for i in unique):
        return sorted(unique, key=lambda s: (int(s), s))
    return sorted(unique)


class Vocabulary:
    """A fixed, ordered set of external ids; row ``r`` holds ``ids[r]``.

    ``kind`` ("user", "item", ...) names the entity in :class:`NotFoundError`. Without it the errors say "id"
    (``unknown id 'u9' (not among the 3 known ids)``): they said "item" of a vocabulary of users built without a
    kind; ``kind`` still reads "item" then, as it always did (saved files, equality).
    """

    def __init__(self, ids: Sequence[str], *, kind: str | None = None) -> None:
        ids = [_to_id(i) for i in ids]
        index = {}
        for row, i in enumerate(ids):
            if i in index:
                raise ConfigError(f"Vocabulary ids must be unique; {i!r} appears twice (rows {index[i]} and {row})")
            index[i] = row
        if kind is not None and (not isinstance(kind, str) or not kind):
            raise ConfigError(f"Vocabulary kind must be a non-empty string, got {kind!r}")
        self._ids = ids
        self._index = index
        self._pd_index = pd.Index(ids, dtype=object)
        self._loose: dict[str, list[str]] | None = None  # near(): ids by _loose_key, built on the first miss
        self.kind = kind or "item"
        self._noun = kind  # what the errors call an id: None (no kind given) says "id", not "item"

    @property
    def _row_kind(self) -> str:
        return f"{self._noun} row" if self._noun else "row"

    @property
    def _said(self) -> str:
        return f"{self._noun} vocabulary" if self._noun else "vocabulary"

    @classmethod
    def from_ids(cls, ids: Iterable[Any], *, kind: str | None = None) -> "Vocabulary":
        """Sorted unique ids (deterministic; numeric order when all ids are integers)."""
        return cls(sort_ids(_to_id(i) for i in ids), kind=kind)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, id: object) -> bool:
        try:
            return _to_id(id) in self._index
        except Exception:  # unhashable and the like
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and other.kind == self.kind and other._ids == self._ids

    def __repr__(self) -> str:
        head = ", ".join(repr(i) for i in self._ids[:3])
        more = ", ..." if len(self) > 3 else ""
        return f"Vocabulary(kind={self.kind!r}, n={len(self)}, ids=[{head}{more}])"

    @property
    def ids(self) -> list[str]:
        """The ids in row order (a copy: O(n) a call, so never ``ids[row]`` in a loop; :meth:`id_at` is O(1))."""
        return list(self._ids)

    def id_at(self, row: int) -> str:
        """The id of one ``row`` without copying the list: ``ids[row]`` copied all of it per call, which made
        the first explanation over Book-Crossing's 331k items (one record per item) run for over ten minutes."""
        r = int(row)
        if not 0 <= r < len(self._ids):
            raise NotFoundError(self._row_kind, r, f"rows run 0..{len(self._ids) - 1}")
        return self._ids[r]

    def index(self, id: Any) -> int:
        """Row of ``id``; raises NotFoundError(kind, id) when unknown."""
        key = _to_id(id)
        try:
            return self._index[key]
        except KeyError:
            # white space at either end is dropped, as POST /recommend drops it from a body's ids, `--users` and
            # `--history` from their comma lists and the file readers from every stored id: `recommend --user ' 42'`
            # and tt.recommend(run, [" 42"]) were refused where {"user_id": " 42"} was served
            stripped = key.strip()
            if stripped != key and stripped in self._index:
                return self._index[stripped]
            raise NotFoundError.not_among(self._noun or "id", key, len(self), self.near(key)) from None

    def near(self, id: Any) -> list[str]:
        """Known ids equal to ``id`` but for leading zeros or case (``"000480"`` for ``480``, ``"C-7"`` for
        ``"c-7"``), in row order: what an unknown id most likely meant, since ids are text and an integer in JSON,
        or a column a spreadsheet read as numbers, has lost its zeros. Built once, on the first miss."""
        if self._loose is None:
            loose: dict[str, list[str]] = {}
            for i in self._ids:
                loose.setdefault(_loose_key(i), []).append(i)
            self._loose = loose
        key = _to_id(id)
        return [i for i in self._loose.get(_loose_key(key), []) if i != key]

    def zeros_note(self, unknown: Iterable[Any], limit: int = 100) -> str:
        """`` ('002' is known for '2': ids are text, so leading zeros and case count)`` for the first of the
        ``unknown`` ids (at most ``limit`` looked at) that a known id equals but for leading zeros or case (a file
        that went through a spreadsheet or ``pd.read_csv`` and lost its zeros); ``''`` where none does."""
        for n, id in enumerate(unknown):
            if n >= limit:
                break
            near = self.near(id)
            if near:
                return f" ({near[0]!r} is known for {_to_id(id)!r}: ids are text, so leading zeros and case count)"
        return ""

    def encode(self, ids: Iterable[Any]) -> np.ndarray:
        """Rows of ``ids`` as int64 ``[N]``; unknown ids give -1."""
        if isinstance(ids, (str, bytes)):
            raise TypeError("encode() takes a sequence of ids; use index() for a single id")
        if isinstance(ids, pd.Series):
            if len(ids) and not ids.hasnans and pd.api.types.infer_dtype(ids, skipna=False) == "string":
                # every id already text (_to_id keeps a str as it is): each distinct id looked up once, in C; the
                # row-by-row conversion below took 1.6 s on ML-1M's 1M interactions
                codes, uniques = pd.factorize(ids)
                rows = self._pd_index.get_indexer(pd.Index(np.asarray(uniques, dtype=object), dtype=object))
                return rows.astype(np.int64)[codes]
            values = ids.tolist()
        else:
            values = list(ids)
        if not values:
            return np.zeros(0, dtype=np.int64)
        keys = pd.Index([_to_id(v) for v in values], dtype=object)
        return self._pd_index.get_indexer(keys).astype(np.int64)

    def decode(self, rows: Iterable[int] | np.ndarray) -> list[str] | list[list[str]]:
        """Ids of ``rows``: a list for 1-D rows, one list per row for a 2-D array such as ``Results.ids``
        (``[B, k]`` gives B lists of k ids); a row outside 0..n-1 (the pad -1 included) raises NotFoundError."""
        if isinstance(rows, (int, np.integer, str, bytes)):  # an int was "'int' object is not iterable"
            raise ConfigError(f"{self._said}: decode takes a sequence of rows, got {rows!r}; one row's id "
                              "is id_at(row)")
        shaped = np.asarray(list(rows) if not isinstance(rows, np.ndarray) else rows)
        if shaped.ndim == 2:  # a [B, k] search result was flattened into one list of B * k ids, rows run together
            return [self._decode_flat(np.asarray(line)) for line in shaped]
        return self._decode_flat(shaped.ravel())

    def _decode_flat(self, raw: np.ndarray) -> list[str]:
        if raw.size and not np.issubdtype(raw.dtype, np.integer):
            # ids instead of rows gave numpy's "invalid literal for int() with base 10: 'a'", and 2.7 read as row 2
            raise ConfigError(f"{self._said}: decode takes integer rows, got {raw.dtype} values such as "
                              f"{raw[0]!r}; ids map to rows with index()")
        arr = raw.astype(np.int64, copy=False)
        bad = (arr < 0) | (arr >= len(self))
        if bad.any():
            raise NotFoundError(self._row_kind, int(arr[bad][0]), f"rows run 0..{len(self) - 1}")
        return [self._ids[r] for r in arr.tolist()]

    def to_dict(self) -> dict[str, Any]:
        """The vocabulary as JSON-ready data (its ids in row order and its kind), as :meth:`from_dict` reads it."""
        return {"format": _FORMAT, "version": _VERSION, "kind": self.kind, "ids": list(self._ids)}

    @classmethod
    def from_dict(cls, data: Any) -> "Vocabulary":
        """The vocabulary :meth:`to_dict` wrote; IntegrityError for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("ids"), list):
            raise IntegrityError("not a saved Vocabulary: expected a JSON object with an 'ids' list")
        if data.get("format", _FORMAT) != _FORMAT:
            raise IntegrityError(f"not a saved Vocabulary (format {data.get('format')!r})")
        if not all(isinstance(i, str) for i in data["ids"]):
            raise IntegrityError("saved Vocabulary has non-string ids; the file is corrupted")
        try:
            return cls(data["ids"], kind=str(data.get("kind", "item")))
        except ConfigError as e:
            raise IntegrityError(f"saved Vocabulary is invalid: {e}") from e

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write as JSON, atomically."""
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Vocabulary":
        """Read a saved vocabulary; corrupt JSON raises IntegrityError, a missing file NotFoundError."""
        path = Path(path)
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise NotFoundError("file", str(path), "no saved vocabulary there") from None
        try:
            return cls.from_dict(data)
        except IntegrityError as e:
            raise IntegrityError(f"{path}: {e}") from e
