"""Comparison tables as plain text (terminal, bench logs) or Markdown (docs).

Rows are dicts such as ``{"model": "EASE", "Recall@20": 0.31, ...}``.
Floats use ``floatfmt`` (seconds columns, named ``*_s``, one decimal); ints print
as ints; a missing value prints ``-``.
``mark_best`` appends ``*`` to the best value of the named numeric columns
(every tied value is marked).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping, Sequence

from twotower.errors import ConfigError

__all__ = ["format_table", "to_markdown"]

_MISSING = "-"
_SECONDS_FMT = ".1f"  # columns named *_s hold seconds: 52.5, not 52.5476 (``formats`` overrides it)


def _columns(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None) -> list[str]:
    if isinstance(columns, str):  # read letter by letter: a table of columns "m", "o", "d", ... full of "-"
        raise ConfigError(f"columns takes a list of column names, e.g. [{columns!r}], got the string {columns!r}")
    if columns is not None:
        return list(columns)
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def _directions(mark_best: Iterable[str] | Mapping[str, str] | None, columns: list[str]) -> dict[str, str]:
    """Normalise ``mark_best`` to ``{column: "max" | "min"}``; a plain list means "max"."""
    if mark_best is None:
        return {}
    if isinstance(mark_best, str):
        raise ConfigError(f"mark_best takes a list of columns or {{column: 'max'|'min'}}, got the string {mark_best!r}")
    pairs = mark_best.items() if isinstance(mark_best, Mapping) else ((c, "max") for c in mark_best)
    out = {}
    for col, direction in pairs:
        if direction not in ("max", "min"):
            raise ConfigError(f"mark_best[{col!r}] must be 'max' or 'min', got {direction!r}")
        if col not in columns:
            raise ConfigError(f"mark_best names column {col!r}, which is not among the columns {columns}")
        out[col] = direction
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _best_values(rows: Sequence[Mapping[str, Any]], directions: dict[str, str]) -> dict[str, float]:
    best = {}
    for col, direction in directions.items():
        values = [float(r[col]) for r in rows if _is_number(r.get(col)) and not math.isnan(float(r[col]))]
        if values:
            best[col] = max(values) if direction == "max" else min(values)
    return best


def _cell(value: Any, floatfmt: str) -> str:
    if value is None:
        return _MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return format(float(value), floatfmt)
    return str(value)


def _cells(
    rows: Sequence[Mapping[str, Any]],
    columns: list[str],
    floatfmt: str,
    mark_best: Iterable[str] | Mapping[str, str] | None,
    formats: Mapping[str, str] | None = None,
) -> tuple[list[list[str]], list[bool]]:
    """Formatted cells ``[row][col]`` and whether each column is numeric (right-aligned)."""
    best = _best_values(rows, _directions(mark_best, columns))
    body = []
    for row in rows:
        line = []
        for col in columns:
            value = row.get(col)
            text = _cell(value, (formats or {}).get(col, _SECONDS_FMT if col.endswith("_s") else floatfmt))
            if col in best and _is_number(value):
                text += "*" if float(value) == best[col] else " "
            line.append(text)
        body.append(line)
    numeric = [
        any(_is_number(r.get(c)) for r in rows)
        and all(_is_number(r.get(c)) or r.get(c) is None for r in rows)
        for c in columns
    ]
    return body, numeric


def format_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    title: str | None = None,
    floatfmt: str = ".4f",
    mark_best: Iterable[str] | Mapping[str, str] | None = None,
    formats: Mapping[str, str] | None = None,
) -> str:
    """A fixed-width plain-text table of ``rows``.

    ``columns`` defaults to every key in first-seen order. Numeric columns are
    right-aligned, the rest left-aligned. ``mark_best=["Recall@20"]`` marks
    the highest value with ``*``; ``{"MeanPop@20": "min"}`` marks the lowest.
    ``formats={"fit_s": ".1f"}`` overrides ``floatfmt`` for the named columns
    (seconds read better as 1020.4 than 1020.4084).

    >>> print(format_table([{"model": "pop", "R@20": 0.1}, {"model": "ease", "R@20": 0.25}]))
    model    R@20
    -----  ------
    pop    0.1000
    ease   0.2500
    """
    cols = _columns(rows, columns)
    body, numeric = _cells(rows, cols, floatfmt, mark_best, formats)
    widths = [max([len(c)] + [len(line[j]) for line in body]) for j, c in enumerate(cols)]

    def fmt(line: Sequence[str]) -> str:
        parts = [t.rjust(w) if num else t.ljust(w) for t, w, num in zip(line, widths, numeric)]
        return "  ".join(parts).rstrip()

    lines = []
    if title:
        lines.append(title)
    lines.append(fmt(cols))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt(line) for line in body)
    return "\n".join(lines)


def to_markdown(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    floatfmt: str = ".4f",
    mark_best: Iterable[str] | Mapping[str, str] | None = None,
) -> str:
    """The same table as GitHub-flavoured Markdown (numeric columns right-aligned)."""
    cols = _columns(rows, columns)
    body, numeric = _cells(rows, cols, floatfmt, mark_best)

    def esc(text: str) -> str:
        return text.strip().replace("|", "\\|").replace("*", "\\*")

    lines = ["| " + " | ".join(esc(c) for c in cols) + " |"]
    lines.append("|" + "|".join("---:" if num else "---" for num in numeric) + "|")
    lines.extend("| " + " | ".join(esc(t) for t in line) + " |" for line in body)
    return "\n".join(lines)
