"""What an item has in common with a user's history, from item metadata only.

Columns are typed by the run's item feature spec (multi-valued columns such as
``genres`` split on its separator, categorical ones such as ``decade``, numeric
ones such as ``year``); a column the spec does not declare is read as
multi-valued when some value contains the separator, and ``year`` as numeric. Nothing is inferred from
the model here: these are counts over the metadata table.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from twotower.config import DataConfig

__all__ = ["MetadataColumns", "metadata_columns", "metadata_columns_of", "split_values", "shared_metadata"]

#: columns never compared (ids and free text)
_SKIP = {"item_id", "title"}


@dataclass(frozen=True)
class MetadataColumns:
    """Which metadata columns hold multi-valued, categorical and numeric facts."""

    multi: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    separator: str = "|"
    verb: str = DataConfig.history_verb  # "Because you <verb> X": the run's data.history_verb


def metadata_columns(spec: Any | None, records: list[dict[str, Any]]) -> MetadataColumns:
    """Column roles: the run's ``FeatureSpec`` where it says, plus columns it does not declare:
    a string column with a ``|`` in any value is multi-valued, a numeric ``year`` column is numeric."""
    names = list(dict.fromkeys(k for rec in records[:1] for k in rec))
    return metadata_columns_of(spec, {c: [rec.get(c) for rec in records] for c in names})


def metadata_columns_of(spec: Any | None, columns: Mapping[str, Sequence[Any]]) -> MetadataColumns:
    """:func:`metadata_columns` of the values column by column (``{name: [value per item]}``, Python values):
    a million-item run's roles without a million per-item records (the first ``/explain`` spent 1.7 s on them)."""
    sep = spec.separator if spec is not None else "|"
    multi = list(spec.multi) if spec is not None else []
    categorical = list(spec.categorical) if spec is not None else []
    numeric = list(spec.numeric) if spec is not None else []
    declared = {*multi, *categorical, *numeric, *(spec.text if spec is not None else ())} | _SKIP
    for c, values in columns.items():
        if c in declared:
            continue
        if any(isinstance(v, str) and sep in v for v in values):
            multi.append(c)
        elif c == "year" and any(_number(v) is not None for v in values):
            numeric.append(c)
    return MetadataColumns(tuple(multi), tuple(categorical), tuple(numeric), sep)


def split_values(value: Any, separator: str) -> list[str]:
    """Values of a multi-valued cell (``"Action|Comedy"`` -> ``["Action", "Comedy"]``); [] when missing."""
    if not isinstance(value, str):
        return []
    return [v.strip() for v in value.split(separator) if v.strip()]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        return None
    return float(value)


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else round(float(x), 4)


def shared_metadata(item: dict[str, Any], history: list[dict[str, Any]], cols: MetadataColumns) -> dict[str, Any]:
    """Facts shared by ``item`` and the ``history`` records.

    Returns, for each multi-valued column ``c``, ``c: [{"value", "count"}]``
    (the item's values, most shared first, values no history item has left
    out); for each categorical column ``c: {"value", "count"}`` (left out when no history item has
    the item's value); for each
    numeric column ``c_range: {"min", "max", "count", "item", "among"}`` over the
    history items that share the facet the sentence names first: the item's value of the first categorical
    column some history item has (its ``category``), else a value of the first multi-valued column, else all
    history items (``among`` says which); and ``history_items``, the number of records compared.
    """
    out: dict[str, Any] = {"history_items": len(history)}
    for c in cols.multi:
        mine = split_values(item.get(c), cols.separator)
        counts: Counter[str] = Counter()
        for rec in history:
            theirs = set(split_values(rec.get(c), cols.separator))
            counts.update(v for v in mine if v in theirs)
        ranked = sorted((v for v in dict.fromkeys(mine) if counts[v] > 0), key=lambda v: (-counts[v], mine.index(v)))
        out[c] = [{"value": v, "count": int(counts[v])} for v in ranked]
    for c in cols.categorical:
        v = item.get(c)
        if isinstance(v, str) or _number(v) is not None:
            n = sum(1 for rec in history if rec.get(c) == v)
            if n:  # as for multi-valued columns: a value no history item has is not a shared fact
                out[c] = {"value": v, "count": n}
    if cols.numeric:
        pool, among = _range_pool(item, history, cols, out)
        for c in cols.numeric:
            vals = [x for x in (_number(r.get(c)) for r in pool) if x is not None]
            mine_v = _number(item.get(c))
            out[f"{c}_range"] = {
                "min": _plain(min(vals)) if vals else None,
                "max": _plain(max(vals)) if vals else None,
                "count": len(vals),
                "item": None if mine_v is None else _plain(mine_v),
                "among": among,
            }
    return out


def _range_pool(item: dict[str, Any], history: list[dict[str, Any]], cols: MetadataColumns,
                shared: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The history items a numeric range is taken over, and how to say which. A shared categorical value comes
    first, as in the sentence ("(both cat toys, bundle)"): the range was taken over the items sharing a tags value
    only, so an e-commerce item whose category was the shared fact had an empty price_range."""
    for c in cols.categorical:
        if c in shared:
            v = shared[c]["value"]
            said = str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
            return [r for r in history if r.get(c) == v], f"history items with {c} {said}"
    if cols.multi:
        first = cols.multi[0]
        mine = set(split_values(item.get(first), cols.separator))
        pool = [r for r in history if mine & set(split_values(r.get(first), cols.separator))]
        return pool, f"history items sharing a {first} value"
    return history, "history items"
