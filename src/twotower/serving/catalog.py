"""Item metadata held column by column for the request path (no pandas per request).

Legend: ``I`` items.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from twotower.data.features import FeatureSpec, cell_values
from twotower.data.vocab import Vocabulary
from twotower.errors import ConfigError, NotFoundError
from twotower.serving.errors import UnknownIdAt

__all__ = ["ItemCatalog", "check_filters", "filters_at"]

log = logging.getLogger(__name__)

_MASK_CACHE = 256  # (field, value) masks kept for filters


def _matches(v: Any, value: str, sep: str) -> bool:
    """Does metadata value ``v`` hold the filter ``value``? Lists and ``sep``-joined strings match any member; a
    string is read as the model's feature encoding reads it (:func:`cell_values`: the spaces around each value
    dropped), so ``"Drama | Comedy"`` holds ``Comedy`` and ``" acme"`` is ``acme`` (they matched no filter)."""
    if isinstance(v, list):
        return any(str(x).strip() == value for x in v)
    if isinstance(v, str):
        # `value in v` first: a C substring test rules out nearly every cell of a large catalogue before it is split
        return v == value or (value in v and value in cell_values(v, sep))
    if v is None:
        return False
    if isinstance(v, bool):
        return str(v).lower() == value.lower()
    if isinstance(v, (int, float)):
        try:
            return float(value) == float(v)
        except ValueError:
            return False
    return str(v) == value


def filters_at(field: str) -> str:
    """Where a filter field is named in a refusal by HTTP (``filters.genres``, its JSON path) and Python (the
    ``filters=`` argument): the command line names it ``--filter genres`` (:meth:`ItemCatalog.filter_mask`'s
    ``field_at``), the words after it are the same."""
    return f"filters.{field}"


def check_filters(filters: Any, name: str = "filters") -> dict[str, list[str]] | None:
    """A Python caller's ``filters`` (``tt.recommend``, ``tt.similar``, :class:`RecRequest`) as POST /recommend's
    schema reads its JSON: a mapping of metadata field -> list of values, each value text or an integer (white
    space at the ends dropped, as an id's, and from each field name, as ``--filter 'genres =Drama'`` drops it: over
    HTTP ``{"genres ": [...]}`` was "not an item metadata field"; two names that are one field then are refused, as
    ``--filter`` refuses a field given twice). A string where a list belongs is refused: ``{"genres": "Comedy"}``
    was read letter by letter ("no item has the value 'C'"). None: no filter. Which fields and values exist is
    :meth:`ItemCatalog.filter_mask`'s to say, in the words HTTP and the CLI use."""
    if filters is None:
        return None
    from collections.abc import Mapping as _Mapping

    from twotower.utils.arguments import is_id_list

    from twotower.pipeline.refusals import filter_values_refusal, filters_shape_refusal, python_type_words

    if not isinstance(filters, _Mapping):  # the words of POST /recommend's 422
        raise ConfigError(f"{name}: {filters_shape_refusal(python_type_words(filters))}")
    out: dict[str, list[str]] = {}
    given: dict[str, str] = {}  # each stripped name -> the name as given
    for given_field, values in filters.items():
        if not isinstance(given_field, str):
            raise ConfigError(f"{name}: a field name is text, got {given_field!r}")
        field = given_field.strip()
        if field in given:
            raise ConfigError(f"{filters_at(field)} is given twice (as {given[field]!r} and {given_field!r}); list its "
                              f"values under one name, e.g. {{{field!r}: [...]}}")
        given[field] = given_field
        if isinstance(values, (str, bytes)) or not is_id_list(values):  # the words of POST /recommend's 422
            raise ConfigError(f"{filters_at(field)}: {filter_values_refusal(field, python_type_words(values), values)}")
        got = []
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                hint = (f": pass it as text ({repr(v)!r}), as filters compare values as text"
                        if isinstance(v, float) and v == v and abs(v) != float("inf") and not v.is_integer() else "")
                raise ConfigError(f"{filters_at(field)}: a value is text or an integer, got {v!r}{hint}")
            got.append(str(v).strip())
        out[field] = got
    return out


class ItemCatalog:
    """External item ids, their metadata columns and filter masks.

    ``columns`` maps a field name to a list of JSON-safe values aligned with
    ``ids`` (row ``r`` is item ``ids[r]``). A string value holding
    ``separator`` (``"Action|Comedy"``) is a multi-valued field for filters.
    ``title_col``: the column of titles (and, with the ``year`` column, of each record's ``display_name``).
    """

    def __init__(
        self,
        ids: Sequence[str],
        columns: Mapping[str, Sequence[Any]] | None = None,
        *,
        lookup: Callable[[str], int] | None = None,
        separator: str = FeatureSpec.separator,
        title_col: str | None = "title",
    ) -> None:
        self.ids = list(ids)
        self.columns: dict[str, list[Any]] = {}
        for name, values in (columns or {}).items():
            if name == "item_id":
                continue
            values = list(values)
            if len(values) != len(self.ids):
                raise ConfigError(f"item metadata column {name!r} has {len(values)} values for {len(self.ids)} items")
            self.columns[name] = values
        self._lookup = lookup
        self._rows: dict[str, int] | None = None
        self.separator = separator
        self._masks: dict[tuple[str, str], np.ndarray] = {}
        self._lock = threading.Lock()  # requests run in worker threads
        # every record's display_name, as explanation sentences and the demo name the item (explain/names.py):
        # two items with one title (18 pairs in MovieLens-100K) were two identical rows of the explorer page
        from twotower.explain.names import catalogue_names, name_of  # here: the package imports torch

        self._titles = self.columns.get(title_col)
        self._names = catalogue_names(self.columns, title_col, self.ids.__getitem__)
        self._name_of = name_of

    @classmethod
    def from_run(cls, run: Any) -> "ItemCatalog":
        """From a :class:`~twotower.pipeline.artifacts.TrainedRun` (JSON-safe values, NaN -> null)."""
        columns: dict[str, list[Any]] = {}
        title_col = getattr(run, "title_col", None)
        meta = run.item_meta
        if meta is not None:
            if len(meta) != run.n_items:
                raise ConfigError(f"item metadata has {len(meta)} rows for {run.n_items} items; retrain the run")
            # the run's own JSON-safe columns, shared with its item records and explanations (converted once)
            columns.update((c, values) for c, values in run.item_meta_columns().items() if c != "item_id")
            if title_col and title_col in columns and "title" not in columns:
                columns["title"] = columns[title_col]  # answers carry "title" whatever data.title_col named
        encoder = getattr(run, "item_encoder", None)  # the run's data.multi_separator splits filter values too
        separator = encoder.spec.separator if encoder is not None else FeatureSpec.separator
        # display names from the run's title column (not a "title" column beside it); a run without
        # data.title_col names by its "title" column. The explanations ask the same function, so they agree.
        from twotower.explain.names import title_column  # here: the package imports torch

        return cls(run.item_vocab.ids, columns, lookup=run.item_vocab.index, separator=separator,
                   title_col=title_column(title_col, columns))

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, item_id: str) -> int:
        """Row of ``item_id``; NotFoundError naming it when unknown."""
        if self._lookup is not None:
            return self._lookup(item_id)
        if self._rows is None:
            self._rows = {i: r for r, i in enumerate(self.ids)}
        try:
            return self._rows[item_id]
        except KeyError:
            near = Vocabulary(self.ids, kind="item").near(item_id)
            raise NotFoundError.not_among("item", item_id, len(self.ids), near) from None  # as the run's vocabulary

    def display_name(self, row: int) -> str:
        """Item ``row`` as the explanations name it (:func:`twotower.explain.names.name_of`): its title, told apart
        by year or id when another item has it too, else ``item <id>``."""
        title = self._titles[row] if self._titles is not None else None
        return self._name_of(title, self.ids[row], self._names)  # as an explanation's record holds it

    def record(self, row: int) -> dict[str, Any]:
        """``{"item_id", ...metadata, "display_name"}`` of one row. ``display_name`` is the service's own key, as
        ``score`` is: a metadata column of that name (a shop's name column given as ``data.title_col``) is replaced,
        by its value when no other item has it."""
        rec: dict[str, Any] = {"item_id": self.ids[row]}
        for name, values in self.columns.items():
            rec[name] = values[row]
        rec["display_name"] = self.display_name(row)
        return rec

    def _value_mask(self, field: str, value: str) -> np.ndarray:
        key = (field, value)
        mask = self._masks.get(key)
        if mask is None:
            col = self.columns[field]
            mask = np.fromiter((_matches(v, value, self.separator) for v in col), dtype=bool, count=len(col))  # [I]
            with self._lock:
                if len(self._masks) >= _MASK_CACHE:
                    self._masks.pop(next(iter(self._masks)))
                self._masks[key] = mask
        return mask

    def known_values(self, field: str) -> list[str]:
        """Distinct values of a metadata field as text (multi-valued cells split), sorted."""
        out: set[str] = set()
        for v in self.columns[field]:
            if isinstance(v, list):
                out.update(x for x in (str(x).strip() for x in v) if x)
            elif isinstance(v, str):  # as filters read them: "Drama | Comedy" holds "Comedy", not " Comedy"
                out.update(cell_values(v, self.separator))
            elif isinstance(v, float) and v.is_integer():
                out.add(str(int(v)))
            elif v is not None:
                out.add(str(v))
        return sorted(out)

    def _unknown_value(self, field: str, value: str, field_at: Callable[[str], str] = filters_at) -> str:
        """A 422 message for a filter value no item has, with the nearest known values."""
        import difflib

        known = self.known_values(field)
        near = difflib.get_close_matches(value, known, n=3, cutoff=0.5)
        if not near:
            lower = {k.lower(): k for k in known}
            near = [lower[value.lower()]] if value.lower() in lower else []
        hint = f"did you mean {', '.join(repr(n) for n in near)}?" if near else (
            f"known values include {', '.join(repr(k) for k in known[:8])}" + (" ..." if len(known) > 8 else ""))
        return f"{field_at(field)}: no item has the value {value!r}; {hint}"

    def _unknown_field(self, field: str, field_at: Callable[[str], str] = filters_at) -> str:
        """A 422 message for a filter field no item has, with the nearest field name, as a value's names the
        nearest values (`catgory` against `category` listed the fields without saying which was meant)."""
        import difflib

        fields = sorted(self.columns) + ["item_id"]
        near = difflib.get_close_matches(field, fields, n=1, cutoff=0.6) or [
            f for f in fields if f.lower() == field.lower()]
        hint = f"; did you mean {near[0]!r}?" if near else ""
        return f"{field_at(field)}: not an item metadata field; filterable fields: {fields}{hint}"

    def filter_mask(self, filters: Mapping[str, Sequence[str]], check: Callable[[], None] | None = None, *,
                    field_at: Callable[[str], str] = filters_at,
                    item_at: Callable[[int, int], str] | None = None) -> np.ndarray:
        """[I] bool: items matching every field, where a field matches when it holds any of the values.

        Every mistake is named by its field (``filters.genres: ...``): an unknown field or an empty list
        (422), a value no item has (422 with the nearest known values), an unknown ``item_id`` (404 naming
        it and its position, as in a history: an allow-list of a mistyped id silently held nothing).

        ``check`` is called before each metadata value's scan of the catalogue (O(items) each, and a request
        may send 16 fields x 1000 values) and may raise to abandon the work: the HTTP routes pass their time
        budget, which a request filtering on 1000 titles otherwise ran far past. ``field_at``: how the caller's
        interface names a field (:func:`filters_at`; ``--filter genres`` on the command line): the words after it
        are the same from HTTP, Python and the CLI. ``item_at(pos, n)``: how it names the ``pos``-th (0-based) of ``n``
        ``item_id`` values (default ``filters.item_id[1]``, the JSON path; the command line counts from 1)."""
        mask = np.ones(len(self.ids), dtype=bool)
        for field, values in filters.items():
            if field != "item_id" and field not in self.columns:
                raise ConfigError(self._unknown_field(field, field_at))
            if not values:
                raise ConfigError(f"{field_at(field)} is empty; give at least one value or drop the filter")
            mask &= (self._item_mask(values, field_at, item_at) if field == "item_id"
                     else self._field_mask(field, values, check, field_at))
        return mask

    def _item_mask(self, item_ids: Sequence[str], field_at: Callable[[str], str] = filters_at,
                   item_at: Callable[[int, int], str] | None = None) -> np.ndarray:
        """[I] bool: the listed items; an unknown one is a 404 naming ``filters.item_id[i]`` (or ``item_at``'s)."""
        from twotower.pipeline.refusals import ITEM_ID_FILTER, rows_naming_every_unknown

        def at(pos: int, e: NotFoundError) -> UnknownIdAt:
            return UnknownIdAt(item_at(pos, len(item_ids)) if item_at is not None else f"{field_at('item_id')}[{pos}]", e)

        allowed = np.zeros(len(self.ids), dtype=bool)
        # the first unknown id named by its place, then every other unknown one, as a history's
        allowed[rows_naming_every_unknown([str(v) for v in item_ids], self.row, at, what=ITEM_ID_FILTER)] = True
        return allowed

    def _field_mask(self, field: str, values: Sequence[str], check: Callable[[], None] | None = None,
                    field_at: Callable[[str], str] = filters_at) -> np.ndarray:
        """[I] bool: items whose ``field`` holds any of ``values``; a value no item has is a 422."""
        any_of = np.zeros(len(self.ids), dtype=bool)
        for v in values:
            if check is not None:
                check()
            m = self._value_mask(field, str(v))
            if not m.any():
                raise ConfigError(self._unknown_value(field, str(v), field_at))
            any_of |= m
        return any_of
