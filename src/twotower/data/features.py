"""User/item feature tables and their encoding into arrays aligned with a vocabulary.

Encoding conventions (shared with the model towers):

* categorical: int64 ``[n, n_cat]``; 0 = missing/unknown, 1.. = values seen at fit time.
* multi-valued (e.g. ``"Action|Comedy"``): one int64 ``[n, max_len_c]`` per column,
  values 1.., padded with 0.
* numeric: float32 ``[n, 2 * n_num]``: standardised values (train mean/std, NaN -> 0)
  followed by one missing-indicator column per numeric column (see ``numeric_names``).
* text: raw strings per column, ``""`` when missing.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
import pandas as pd

from twotower.config import DataConfig
from twotower.data.columns import _numpy_times, decimal_comma_advice
from twotower.data.readers import (_double_colon_fields, check_head, check_rows, ids_to_str, missing_column_error,
                                    read_table_numbered)
from twotower.data.vocab import Vocabulary
from twotower.errors import ConfigError, DataError, IntegrityError

__all__ = ["FeatureSpec", "read_feature_table", "EncodedFeatures", "FeatureEncoder", "shown_value", "split_multi",
           "cell_values"]

SHOWN_CHARS = 80  # of a sent value quoted back in a message


def shown_value(value: Any) -> str:
    """A user-feature value a client sent, as it was typed, cut to :data:`SHOWN_CHARS`: a message naming a value
    (a refused 100 kB string, or one training never saw) must not send it back whole (HTTP validation errors echo
    no input). Text in quotes (``'F'``, as every message quotes an id or a value); anything else as JSON writes it,
    the form `--user-features` and POST /recommend's body took it in: ``true``, ``null``, ``["F"]``, ``{"a": 1}``,
    where Python's ``True``, ``None``, ``['F']`` and ``{'a': 1}`` were named."""
    text = repr(value)
    if not isinstance(value, str):
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):  # not JSON (a Python caller's set, a NaN): Python's words are the true ones
            pass
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 3]}... ({len(text):,} characters)"

log = logging.getLogger(__name__)

_FORMAT = "twotower.feature_encoder"
_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class FeatureSpec:
    """Which columns of a feature table are which kind of feature; ``key`` holds the entity id."""

    key: str
    categorical: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    multi: tuple[str, ...] = ()
    separator: str = DataConfig.multi_separator
    text: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.strip():
            raise ConfigError(f"FeatureSpec.key must be a non-empty column name, got {self.key!r}")
        seen: dict[str, str] = {}
        for group in ("categorical", "numeric", "multi", "text"):
            value = getattr(self, group)
            if isinstance(value, str):
                raise ConfigError(f"FeatureSpec.{group} must be a tuple of column names, got the string {value!r}")
            try:
                cols = tuple(value)
            except TypeError:
                raise ConfigError(f"FeatureSpec.{group} must be a tuple of column names, got {value!r}") from None
            for c in cols:
                if not isinstance(c, str) or not c:
                    raise ConfigError(f"FeatureSpec.{group} has an invalid column name {c!r}")
                if c == self.key:
                    raise ConfigError(f"FeatureSpec.{group}: {c!r} is the key column and cannot also be a feature")
                if c in seen:
                    raise ConfigError(f"FeatureSpec.{group}: column {c!r} is already listed under {seen[c]}")
                seen[c] = group
            object.__setattr__(self, group, cols)
        if not isinstance(self.separator, str) or not self.separator:
            raise ConfigError(f"FeatureSpec.separator must be a non-empty string, got {self.separator!r}")

    @property
    def columns(self) -> tuple[str, ...]:
        """Every feature column (not the key), in group order."""
        return self.categorical + self.numeric + self.multi + self.text

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "categorical": list(self.categorical),
            "numeric": list(self.numeric),
            "multi": list(self.multi),
            "separator": self.separator,
            "text": list(self.text),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FeatureSpec":
        if not isinstance(data, dict) or "key" not in data:
            raise ConfigError(f"a FeatureSpec needs at least a 'key', got {data!r}")
        unknown = set(data) - {"key", "categorical", "numeric", "multi", "separator", "text"}
        if unknown:
            raise ConfigError(f"unknown FeatureSpec settings {sorted(unknown)}")
        kwargs = {k: (tuple(v) if k not in ("key", "separator") else v) for k, v in data.items()}
        return cls(**kwargs)


def _missing_str(value: Any) -> bool:
    # NaT: a datetime column's gap (a DataFrame's or Parquet's), the category 'NaT' where its CSV holds an empty cell
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


_T = TypeVar("_T")


def _per_distinct(values: pd.Series | list[Any], fn: Callable[[Any], _T]) -> list[_T]:
    """``[fn(v) for v in values]``, with ``fn`` called once per distinct text value.

    A table's column of 100K cells held a few thousand distinct values, yet every cell went through
    :func:`_norm_value` and :func:`_missing_str` in Python (8 s for a 100K-item table). Text values are grouped
    first (two distinct ``str`` never compare equal, so nothing ``fn`` tells apart is merged); a missing cell
    (None, NaN, ``pd.NA``) goes through ``fn`` itself, and a column holding anything but text goes value by value.
    """
    column = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object)
    missing = column.isna().to_numpy(dtype=bool)
    present = column[~missing] if missing.any() else column
    if len(present) == 0 or pd.api.types.infer_dtype(present, skipna=False) != "string":
        return [fn(v) for v in column.tolist()]
    codes, uniques = pd.factorize(present)
    mapped = np.empty(len(uniques), dtype=object)
    for i, u in enumerate(uniques):
        mapped[i] = fn(u)
    out = np.empty(len(column), dtype=object)
    out[~missing] = mapped[codes]
    for pos, v in zip(np.flatnonzero(missing).tolist(), column[missing].tolist()):
        out[pos] = fn(v)
    return out.tolist()


def _is_nested(value: Any) -> bool:
    """A list-like or mapping cell (a Parquet list, a JSON array or object), not one value."""
    return isinstance(value, (list, tuple, set, dict, np.ndarray))


def _plain_cell(value: Any) -> Any:
    """A cell as the Python value for messages: ``inf``, not ``np.float64(inf)``; a list, not an array."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value


def _joined_lists(values: pd.Series, separator: str, *, file: str, column: str, rows: Any) -> pd.Series:
    """A multi-valued column with its list cells (Parquet list columns, JSON arrays) as ``separator``-joined text.

    Such a cell was read as the one value "['x' 'y']": every distinct list its own token, no value shared. Joined,
    it reads exactly as the CSV cell "x|y" does; a value holding the separator would be split, so it is refused.
    """
    if not any(_per_distinct(values, _is_nested)):
        return values

    def join(pos: int, value: Any) -> Any:
        if not _is_nested(value):
            return value
        if isinstance(value, dict):
            raise DataError(f"holds a JSON object {value!r}; a multi-valued cell is a list of values or "
                            f"{separator!r}-separated text", file=file, column=column, **rows.at(pos))
        for p in list(value):
            if _is_nested(p):  # "['a']" was made a category of its own, as an id column's nested value is refused
                raise DataError(f"list value {_plain_cell(p)!r} is not a string or a number (a nested list or "
                                f"object); a multi-valued cell is a list of values or {separator!r}-separated text",
                                file=file, column=column, **rows.at(pos))
        parts = [p for p in map(_norm_value, list(value)) if p]
        for p in parts:
            if separator in p:
                raise DataError(f"list value {p!r} holds the separator {separator!r} (data.multi_separator), so it "
                                "would be split in two; set data.multi_separator to a character no value holds",
                                file=file, column=column, **rows.at(pos))
        return separator.join(parts) if parts else None

    return pd.Series([join(pos, v) for pos, v in enumerate(values.tolist())], index=values.index, dtype=object)


def split_multi(value: Any, separator: str) -> list[str]:
    """The values of a multi-valued cell as the model reads them (``"Action | Comedy"`` -> ``["Action", "Comedy"]``):
    split on ``separator``, each stripped, empty and repeated ones dropped; [] when the cell is missing."""
    if _missing_str(value):
        return []
    out: list[str] = []
    for p in str(value).split(separator):
        p = p.strip()
        if p and p not in out:
            out.append(p)
    return out


def cell_values(value: str, separator: str) -> list[str]:
    """The values a text metadata cell holds as the model's encoding reads them: a cell holding ``separator`` is
    multi-valued (:func:`split_multi`), any other is one category with the spaces at its ends dropped (as
    :func:`_norm_value` reads it). Item filters match on these, so an item whose cell is ``"Drama | Comedy"`` or
    ``" acme"`` is found by ``Comedy`` / ``acme``, the values the model (and ``explain``) names."""
    if separator in value:
        return split_multi(value, separator)
    value = value.strip()
    return [value] if value else []


def _norm_value(value: Any) -> str | None:
    """A categorical value as text; ints and integral floats render without ``.0``."""
    if _missing_str(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _as_number(text: str) -> float | None:
    """``text`` as the number it spells (``'8.0'`` -> 8.0), None when it spells none."""
    try:
        return float(text)
    except ValueError:
        return None


def _spelling_hint(value: str, given: Any, known: list[str]) -> str:
    """`` (did you mean 'F'?)`` for a category ``value`` (the text ``given`` is looked up as) that training never
    saw: the known spelling differing only in case, else one of the same number, else the closest.

    A number is looked up as training reads a number cell (8.0 as '8'), but a CSV table's cells are text, and
    pandas writes a numeric column with a gap as "8.0": that category is the text '8.0', which a number never
    matches (a JSON-lines table may hold both 8.0 and "8.0", two categories), and too far from '8' for difflib.
    """
    import difflib

    near = [k for k in known if k.lower() == value.lower()]
    if near:
        return f" (did you mean {near[0]!r}?)"
    number = _as_number(value)
    near = [k for k in known if _as_number(k) == number] if number is not None and math.isfinite(number) else []
    if near and not isinstance(given, str):
        return f" (did you mean {near[0]!r}? send it as the string {json.dumps(near[0])})"
    near = near or difflib.get_close_matches(value, known, 1, 0.75)
    return f" (did you mean {near[0]!r}?)" if near else ""


def read_feature_table(
    source: str | Path | pd.DataFrame, spec: FeatureSpec, *, name: str | None = None, key_role: str = "key",
    encoding: str = "utf-8",
) -> pd.DataFrame:
    """Read a feature table and check it against ``spec``.

    Missing columns, empty or duplicate keys and non-numeric values in numeric
    columns raise DataError naming the file, row and column. The key becomes
    str; numeric columns float64 (empty -> NaN); other columns are kept. ``key_role`` ("item key" / "user
    key") picks the setting a missing key column's error points at; ``encoding`` is ``data.encoding``.
    """
    # a large file's first rows are read and checked first: a bad cell at row 12 of a 3M-row item table was named
    # after the whole table was read and converted (5.9 s CPU and 920 MB)
    check_head(source, lambda n: _read_feature_table(source, spec, name=name, key_role=key_role, encoding=encoding,
                                                     nrows=n), encoding=encoding, loggers=(log,))
    return _read_feature_table(source, spec, name=name, key_role=key_role, encoding=encoding)


def _read_feature_table(source: str | Path | pd.DataFrame, spec: FeatureSpec, *, name: str | None, key_role: str,
                        encoding: str, nrows: int | None = None) -> pd.DataFrame:
    """:func:`read_feature_table` (``nrows``: of the file's first that many rows, see :func:`check_head`)."""
    label = name if name is not None else ("<DataFrame>" if isinstance(source, pd.DataFrame) else str(source))
    pinned = {c: str for c in (spec.key, *spec.categorical, *spec.multi, *spec.text)}
    # the key is an id, read as its text like the interactions' ids (so item "NA" matches item "NA"); so is every
    # column but the numeric ones: read with pandas' NA strings, the film "NA" and the brand "None" lost their
    # titles and values (only an empty cell is missing there)
    df, rows = read_table_numbered(source, name=name, dtype=pinned, literal=(spec.key,), literal_except=spec.numeric,
                                   encoding=encoding, nrows=nrows)
    present = list(df.columns)
    for role, cols in ((key_role, (spec.key,)), ("categorical", spec.categorical), ("numeric", spec.numeric),
                       ("multi-valued", spec.multi), ("text", spec.text)):
        for c in cols:
            if c not in df.columns:
                # a '::'-separated table (MovieLens-1M's movies.dat) is one column: no setting names its key
                table = key_role.split()[0] if key_role in ("item key", "user key") else None
                named = f"{table} {role}" if table and role != key_role else role  # data.item_numeric, not "/ user"
                raise _double_colon_fields(present, label) or missing_column_error(c, present, file=label, role=named,
                                                                                   index_names=df.index.names)
    if len(df) == 0:
        # refused like an empty interactions table: an item table of only a header was read as "no item has
        # features" and the run trained on all-missing features without a word
        kind = key_role.split()[0] if key_role in ("item key", "user key") else None
        without = f"{kind} features" if kind else "its features"
        raise DataError(f"no data rows (only a header); the {kind or 'feature'} table is empty: give its rows, or "
                        f"leave the table out to train without {without}", file=label)
    df = df.reset_index(drop=True)
    df[spec.key] = ids_to_str(df[spec.key], file=label, column=spec.key, rows=rows).to_numpy(dtype=object)
    dup = df[spec.key].duplicated(keep="first").to_numpy()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        key = df[spec.key].iloc[pos]
        first = int(np.flatnonzero((df[spec.key] == key).to_numpy())[0])
        raise DataError(
            f"duplicate key {key!r} (first at {rows.unit} {rows.number(first)}); each entity needs exactly one row",
            file=label,
            column=spec.key,
            **rows.at(pos),
        )
    kind = key_role.split()[0] if key_role in ("item key", "user key") else "item"
    for c in (*spec.categorical, *spec.numeric, *spec.text):
        nested = np.array(_per_distinct(df[c], _is_nested), dtype=bool)
        check_rows(nested, lambda pos: _not_one_value(_plain_cell(df[c].iloc[pos]), kind), file=label, column=c,
                   rows=rows)
    for c in spec.multi:
        df[c] = _joined_lists(df[c], spec.separator, file=label, column=c, rows=rows)
    for c in spec.numeric:
        raw = df[c]
        times = _times_as_numbers(raw)
        if times is not None:
            df[c] = times
            continue
        if raw.dtype == object:  # JSON true/false beside numbers: `"year": true` became a year of 1.0 in silence
            flags = np.fromiter((isinstance(v, (bool, np.bool_)) for v in raw.tolist()), dtype=bool, count=len(raw))
            numbers = ~flags & ~np.array(_per_distinct(raw, _missing_str), dtype=bool)
            if flags.any() and numbers.any():  # a column of true/false alone is a 0/1 feature, as the service reads it
                check_rows(flags, lambda pos: f"{raw.iloc[pos]!r} is a true/false value among numbers (first number at "
                           f"{rows.unit} {rows.number(int(np.flatnonzero(numbers)[0]))}); a numeric column holds "
                           "numbers, or true/false alone (read as 1 and 0)", file=label, column=c, rows=rows)
        num = pd.to_numeric(raw, errors="coerce")
        _check_numbers(raw, num, file=label, column=c, rows=rows)
        df[c] = num.astype("float64")
    for c in spec.multi:
        _warn_other_separator(df[c], spec.separator, file=label, column=c, rows=rows)
    for c in (*spec.categorical, *spec.multi):
        _warn_missing_as_text(df[c], spec.separator if c in spec.multi else None, file=label, column=c, rows=rows)
    return df


def _times_as_numbers(values: pd.Series) -> pd.Series | None:
    """A datetime or duration column (a DataFrame's or Parquet's) given as numeric, as numbers in the column's own
    unit (epoch microseconds for a Parquet file's dates: standardising leaves no trace of the unit), which is how
    runs trained on such a column read it, and a missing one (NaT) as missing; None for any other column. NaT was
    read as -9.2e18, a value, that standardising then squeezed every real date towards (0.5773 / 0.5774). An
    Arrow-backed column reads as its NumPy twin (it read as no number at all)."""
    if getattr(values.dtype, "kind", "O") not in "mM":
        return None
    times = _numpy_times(values)
    return pd.to_numeric(times, errors="coerce").astype("float64").where(times.notna())


def _not_one_value(value: Any, kind: str) -> str:
    """Why a nested cell of a single-valued feature column is refused. A list may be the values of a multi-valued
    column; an object is no list of values either (a multi-valued column refuses it too), so it is not sent there."""
    if isinstance(value, dict):
        return f"holds a JSON object ({value!r}), not one value; give the cell the value itself (a string or a number)"
    return (f"holds a list ({value!r}), not one value; a column of lists (Parquet list, JSON array) is multi-valued: "
            f"list it under data.{kind}_multi")


def _check_numbers(raw: pd.Series, num: pd.Series, *, file: str, column: str, rows: Any) -> None:
    """Refuse the first cell of a numeric column that is text or past float32 (``num``: ``raw`` as numbers, NaN
    where not one). One check in row order: a column of titles was refused at its title 'Infinity' in row 1356
    (read as a number too large), while its first title, at row 2, went unnamed."""
    values = num.to_numpy(dtype=np.float64)
    infinite = np.isinf(values) | (np.abs(np.nan_to_num(values)) > np.finfo(np.float32).max)
    text = num.isna().to_numpy() & ~np.array(_per_distinct(raw, _missing_str), dtype=bool)
    bad = infinite | text
    if not bad.any():
        return
    # the kind of the first bad cell alone: the rows said to hold "the same" must hold the same fault (a title
    # after a 1e39 was listed as another number too large)
    kind = text if text[int(np.flatnonzero(bad)[0])] else infinite
    check_rows(kind, lambda pos: _not_a_number(raw.iloc[pos]) if text[pos] else
               f"{_plain_cell(raw.iloc[pos])!r} is not a finite number (float32 range); leave the cell empty when "
               "unknown", file=file, column=column, rows=rows)


def _not_a_number(value: Any) -> str:
    """Why a numeric feature cell is refused; a decimal comma (``year`` = ``1995,0`` in a ';'-separated table) is
    told as the rating's is, not as any other text."""
    advice = decimal_comma_advice(value)
    if advice is not None:
        return f"{value!r} is not a number: {advice}; leave the cell empty when unknown"
    return f"{_plain_cell(value)!r} is not a number; numeric features need numbers (leave empty when unknown)"


#: Separators a multi-valued cell is commonly written with; one other than data.multi_separator in a cell that
#: lacks the configured one is most likely a list read as one value (see _warn_other_separator).
_COMMON_SEPARATORS = ("|", ";", ",")


def _warn_other_separator(values: pd.Series, separator: str, *, file: str, column: str, rows: Any) -> None:
    """Warn when cells of a multi-valued column hold another common separator and not the configured one.

    ``"a;b"`` split on ``|`` is the single value ``"a;b"``: nothing fails, the column just embeds whole lists as
    values no other cell shares. A warning, not an error: a value may contain the character itself.
    """
    text = pd.Series(_per_distinct(values, lambda v: "" if _missing_str(v) else str(v)), index=values.index,
                     dtype=object)
    lacks = ~text.str.contains(separator, regex=False).to_numpy(dtype=bool)
    for other in _COMMON_SEPARATORS:
        if other == separator:
            continue
        hit = lacks & text.str.contains(other, regex=False).to_numpy(dtype=bool)
        if hit.any():
            pos = int(np.flatnonzero(hit)[0])
            log.warning("%s, column %r (multi-valued, split on %r): %d cells hold %r but no %r (first: %s %d, %r); "
                        "each is read as one value. If %r separates the values, set data.multi_separator=%r (one "
                        "separator for every multi-valued column of the item and user tables)", file, column,
                        separator, int(hit.sum()), other, separator, rows.unit, rows.number(pos), text.iloc[pos],
                        other, other)


#: how pandas writes a missing value as text (``df.astype(str)``: NaN, None, pd.NA) before it is saved
_MISSING_AS_TEXT = ("nan", "NaN", "None", "<NA>")


def _warn_missing_as_text(values: pd.Series, separator: str | None, *, file: str, column: str, rows: Any) -> None:
    """Warn when cells of a categorical (or values of a multi-valued) column read "nan", "NaN", "None" or "<NA>".

    Such a cell is the category of that name (only an empty cell is missing: a brand may be called "None"), and
    a table exported with ``df.astype(str)`` writes every missing value so: they all became one trained category
    without a word. A warning, not a change of reading.
    """
    def spelled(value: Any) -> str | None:
        if _missing_str(value):
            return None
        parts = str(value).split(separator) if separator is not None else [str(value)]
        return next((p.strip() for p in parts if p.strip() in _MISSING_AS_TEXT), None)

    found = pd.Series(_per_distinct(values, spelled), index=values.index, dtype=object)
    hit = found.notna().to_numpy(dtype=bool)
    if hit.any():
        pos = int(np.flatnonzero(hit)[0])
        spellings = " / ".join(repr(v) for v in _MISSING_AS_TEXT if (found == v).any())
        log.warning("%s, column %r: %d cells hold the text %s (first: %s %d, %r), each read as a category of that "
                    "name; pandas' astype(str) writes a missing value so. Only an empty cell is missing: if they mean "
                    "no value, leave them empty (df.to_csv() without astype(str) writes missing values empty)", file,
                    column, int(hit.sum()), spellings, rows.unit, rows.number(pos), values.iloc[pos])


@dataclass(frozen=True)
class EncodedFeatures:
    """Encoded features for ``n`` entities (see the module docstring for the layout)."""

    categorical: np.ndarray  # int64 [n, n_cat]
    categorical_names: tuple[str, ...]
    categorical_sizes: tuple[int, ...]  # embedding table size per column, incl. 0 = missing
    multi: list[np.ndarray]  # per column int64 [n, max_len_c]
    multi_names: tuple[str, ...]
    multi_sizes: tuple[int, ...]
    numeric: np.ndarray  # float32 [n, 2 * n_num]
    numeric_names: tuple[str, ...]
    text: dict[str, list[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.categorical.shape[0])


class FeatureEncoder:
    """Fit value vocabularies and numeric statistics on a table; encode rows consistently.

    ``fit(table, vocab)`` learns from the rows whose key is in ``vocab`` (pass
    the training entities' vocabulary to keep valid/test out).
    ``transform(table, vocab)`` returns features aligned with ``vocab`` rows;
    entities missing from the table get all-missing features.
    ``encode_rows(rows)`` encodes a frame row by row (e.g. a new item at serving time).
    """

    def __init__(self, spec: FeatureSpec) -> None:
        if not isinstance(spec, FeatureSpec):
            raise ConfigError(f"FeatureEncoder needs a FeatureSpec, got {type(spec).__name__}")
        self.spec = spec
        self.categories: dict[str, list[str]] = {}
        self.multi_values: dict[str, list[str]] = {}
        self.multi_max_len: dict[str, int] = {}
        self.numeric_stats: dict[str, tuple[float, float]] = {}
        self._lookup: dict[str, dict[str, int]] = {}
        self.fitted = False

    # -- fitting -----------------------------------------------------------
    def _split_multi(self, value: Any) -> list[str]:
        return split_multi(value, self.spec.separator)

    def _rows_in_vocab(self, table: pd.DataFrame, vocab: Vocabulary | None) -> pd.DataFrame:
        self._check_columns(table, "table")
        if vocab is None:
            return table
        keys = pd.Series(_per_distinct(table[self.spec.key], _norm_value), index=table.index, dtype=object)
        return table[keys.isin(set(vocab.ids)).to_numpy()]

    def _check_columns(self, table: pd.DataFrame, label: str) -> None:
        for c in (self.spec.key, *self.spec.columns):
            if c not in table.columns:
                raise missing_column_error(c, list(table.columns), file=label, role="feature",
                                           index_names=table.index.names)

    def fit(self, table: pd.DataFrame, vocab: Vocabulary | None = None, *,
            trained: Collection[str] | None = None) -> "FeatureEncoder":
        """Learn the columns' values and numeric statistics from the rows whose key is in ``vocab`` (every row
        without one).

        ``trained``: the keys whose rows training reads (the entities with training interactions). Only their
        categorical and multi-valued values get a code: a value that no such row holds would keep its random
        initial embedding, never trained, and place the entities holding it at random; left out, it reads as
        unknown (row 0, the zero vector), as a value never seen does. Numeric statistics stay those of every row.
        """
        rows = self._rows_in_vocab(table, vocab)
        spec = self.spec
        coded = rows
        if trained is not None:
            keep = set(trained)
            coded = rows[pd.Series(_per_distinct(rows[spec.key], _norm_value), dtype=object).isin(keep).to_numpy()]
        for c in spec.categorical:
            vals = {v for v in _per_distinct(coded[c], _norm_value) if v is not None}
            self.categories[c] = sorted(vals)
        for c in spec.multi:
            lists = _per_distinct(rows[c], self._split_multi)
            self.multi_values[c] = sorted({v for lst in _per_distinct(coded[c], self._split_multi) for v in lst})
            self.multi_max_len[c] = max([len(lst) for lst in lists] + [1])
        for c in spec.numeric:
            x = pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=np.float64)
            x = x[np.isfinite(x)]
            mean = float(x.mean()) if len(x) else 0.0
            std = float(x.std()) if len(x) else 1.0
            if not math.isfinite(std) or std < 1e-12:
                std = 1.0
            self.numeric_stats[c] = (mean, std)
        self._build_lookup()
        self.fitted = True
        log.info(
            "fitted features on %d rows: categorical %s, multi %s, numeric %s, text %s",
            len(rows), {c: len(v) for c, v in self.categories.items()},
            {c: len(v) for c, v in self.multi_values.items()}, list(spec.numeric), list(spec.text),
        )
        kind = "item" if vocab is None else vocab.kind
        self._warn_empty_columns(rows, kind)
        if trained is not None:
            self._note_untrained_values(rows, coded, kind)
        return self

    def _note_untrained_values(self, rows: pd.DataFrame, coded: pd.DataFrame, kind: str) -> None:
        """Log the values read as unknown because only entities without training interactions hold them."""
        for group, names, known in (("categorical", self.spec.categorical, self.categories),
                                    ("multi", self.spec.multi, self.multi_values)):
            for c in names:
                if group == "categorical":
                    every = {v for v in _per_distinct(rows[c], _norm_value) if v is not None}
                else:
                    every = {v for lst in _per_distinct(rows[c], self._split_multi) for v in lst}
                cold = sorted(every - set(known[c]))
                if cold:
                    log.info("%s features: %s of the %s values of column %r (data.%s_%s) occur only on %ss without "
                             "training interactions (e.g. %r); no training example reads them, so they read as "
                             "unknown", kind, f"{len(cold):,}", f"{len(every):,}", c, kind, group, kind, cold[0])

    def _warn_empty_columns(self, rows: pd.DataFrame, kind: str) -> None:
        """Name a listed column no fitted row has a value in: it was trained on as missing everywhere, so it
        tells the tower nothing (an emptied export, the wrong column), and the log only counted "0" values."""
        spec = self.spec
        empty = [(c, "categorical") for c in spec.categorical if not self.categories[c]]
        empty += [(c, "multi") for c in spec.multi if not self.multi_values[c]]
        empty += [(c, "numeric") for c in spec.numeric
                  if not np.isfinite(pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=np.float64)).any()]
        empty += [(c, "text") for c in spec.text if all(_per_distinct(rows[c], _missing_str))]
        for c, group in empty:
            if group in ("categorical", "multi") and self._has_values(rows[c], group):
                # the values are there, on rows without training interactions only (the categories are fitted on
                # trained rows): "has no value in any of the 85 items fitted ... fill it in" beside the note that
                # its 5 values occur only on items without training interactions told the user to fill in a
                # filled column
                log.warning("%s features: column %r (data.%s_%s) has values only on %ss without training "
                            "interactions, so no training example reads them and it tells the tower nothing (do the "
                            "table's ids match the interactions'?); drop it from data.%s_%s, or give values for "
                            "trained %ss too", kind, c, kind, group, kind, kind, group, kind)
                continue
            log.warning("%s features: column %r (data.%s_%s) has no value in any of the %d %ss fitted, so it tells "
                        "the tower nothing; fill it in, or drop it from data.%s_%s", kind, c, kind, group,
                        len(rows), kind, kind, group)
        for c in spec.numeric:
            self._warn_flat_numeric(rows, c, kind)

    def _has_values(self, column: pd.Series, group: str) -> bool:
        """Whether any row of a categorical or multi-valued column holds a value (trained on or not)."""
        if group == "categorical":
            return any(v is not None for v in _per_distinct(column, _norm_value))
        return any(lst for lst in _per_distinct(column, self._split_multi))

    def _warn_flat_numeric(self, rows: pd.DataFrame, column: str, kind: str) -> None:
        """Name a numeric column whose standardised values cannot tell the rows apart.

        A column with one value in every row (and no empty cell) encodes to 0 everywhere. A few extreme values (a
        price of 1e15 among prices of 20) set the standard deviation so high that every other value standardises
        to the same number: the column reads as constant, and nothing said so. A warning: the data may mean it.
        """
        x = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=np.float64)
        present = np.isfinite(x)
        values = x[present]
        if len(values) < 2:
            return  # no value at all: _warn_empty_columns names it
        setting = f"data.{kind}_numeric"
        if values.min() == values.max():
            if present.all():
                log.warning("%s features: column %r (%s) holds the one value %g in every one of the %d %ss fitted, "
                            "so it tells the tower nothing; drop it from %s", kind, column, setting,
                            float(values[0]), len(values), kind, setting)
            return
        mean, std = self.numeric_stats[column]
        low, high = np.quantile(values, [0.01, 0.99])
        if (high - low) / std >= 1e-3:
            return
        far = int(np.argmax(np.abs(values - mean)))
        keys = rows[self.spec.key].to_numpy(dtype=object)[present]
        log.warning("%s features: column %r (%s): a few extreme values (%s %r has %g) make its standard deviation "
                    "%.4g, so 98%% of the %d %ss fitted (%g to %g) all standardise to within %.2g of one another: the "
                    "column reads as nearly constant to the tower; clip or empty the extreme values, or store a "
                    "logarithm", kind, column, setting, kind, keys[far], float(values[far]), std, len(values), kind,
                    float(low), float(high), float((high - low) / std))

    def _build_lookup(self) -> None:
        self._lookup = {c: {v: i + 1 for i, v in enumerate(vals)} for c, vals in self.categories.items()}
        for c, vals in self.multi_values.items():
            self._lookup["multi:" + c] = {v: i + 1 for i, v in enumerate(vals)}

    # -- encoding ----------------------------------------------------------
    @property
    def categorical_sizes(self) -> tuple[int, ...]:
        return tuple(len(self.categories[c]) + 1 for c in self.spec.categorical)

    @property
    def multi_sizes(self) -> tuple[int, ...]:
        return tuple(len(self.multi_values[c]) + 1 for c in self.spec.multi)

    @property
    def numeric_names(self) -> tuple[str, ...]:
        return tuple(self.spec.numeric) + tuple(f"{c}__missing" for c in self.spec.numeric)

    def value_notes(self, row: dict[str, Any], *, far_sd: float = 6.0) -> list[str]:
        """What ``row`` (column -> raw value) holds that training never saw, one line a column, for a caller to
        show: a category outside the fitted vocabulary (read as unknown, with the nearest known spelling), and
        a number more than ``far_sd`` standard deviations from the training mean (read, but far outside what
        the tower was fitted on). Nothing is refused here; :meth:`encode_rows` encodes the row as it is."""
        notes = []
        for c, value, lut in self._unseen_values(row):
            # a categorical value as it was given (3, not '3'), and the text it is looked up as where that differs
            # (8.0 is looked up as '8'): "8.0 never occurs" was said of a table whose CSV held the text '8.0'
            given = row.get(c) if c in self.spec.categorical else value
            named = shown_value(given)
            if not isinstance(given, str) and named != value:
                named += f" (looked up as {shown_value(value)})"
            notes.append(f"{c}: {named} never occurs in training, so it reads as unknown"
                         f"{_spelling_hint(value, given, [k for k in lut if isinstance(k, str)])}")
        for c in self.spec.numeric:
            x = row.get(c)
            if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x)):
                mean, std = self.numeric_stats[c]
                if std > 0 and abs(float(x) - mean) > far_sd * std:
                    notes.append(f"{c}: {x:g} is {abs(float(x) - mean) / std:.0f} standard deviations from the "
                                 f"training mean ({mean:.4g}); the tower was not fitted on such values")
        return notes

    def unknown_columns(self, row: dict[str, Any]) -> set[str]:
        """Columns of ``row`` whose given value training never saw (a categorical outside the vocabulary, a
        multi-valued column none of whose values it knows): encoded as unknown, so they say nothing of the user."""
        unseen: dict[str, set[str]] = {}
        for c, v, _ in self._unseen_values(row):
            unseen.setdefault(c, set()).add(v)
        return {c for c, values in unseen.items()
                if c not in self.spec.multi or values >= set(self._split_multi(row.get(c)))}

    def _unseen_values(self, row: dict[str, Any]) -> list[tuple[str, str, dict[str, int]]]:
        """``(column, value, the column's vocabulary)`` for each categorical / multi-valued value of ``row`` that
        is outside what was fitted (encoded as unknown)."""
        out = []
        for c in self.spec.categorical:
            v = _norm_value(row.get(c)) if row.get(c) is not None else None
            if v is not None and v not in self._lookup[c]:
                out.append((c, v, self._lookup[c]))
        for c in self.spec.multi:
            lut = self._lookup["multi:" + c]
            out += [(c, v, lut) for v in self._split_multi(row.get(c)) if v not in lut]
        return out

    def encode_rows(self, rows: pd.DataFrame) -> EncodedFeatures:
        """Encode ``rows`` in order; absent feature columns count as missing."""
        if not self.fitted:
            raise ConfigError("FeatureEncoder is not fitted; call fit() first or load a saved one")
        spec = self.spec
        n = len(rows)

        def col(c: str) -> list[Any]:
            return rows[c].tolist() if c in rows.columns else [None] * n

        def code(lut: dict[str, int]) -> Callable[[Any], int]:
            def one(value: Any) -> int:
                v = _norm_value(value)
                return lut.get(v, 0) if v is not None else 0
            return one

        def codes(lut: dict[str, int]) -> Callable[[Any], list[int]]:
            def known(value: Any) -> list[int]:
                return [lut[v] for v in self._split_multi(value) if v in lut]
            return known

        cat = np.zeros((n, len(spec.categorical)), dtype=np.int64)  # [n, n_cat]
        for j, c in enumerate(spec.categorical):
            cat[:, j] = _per_distinct(col(c), code(self._lookup[c]))
        multi = []
        for c in spec.multi:
            found = _per_distinct(col(c), codes(self._lookup["multi:" + c])) if n else []
            # the table's longest list, or a longer one given here (a new user's): every value is read, as the
            # ONNX export reads them; cut to the table's width, a new user's 3rd value was dropped without a word
            width = max([self.multi_max_len[c], *map(len, found)])
            padded: dict[int, list[int]] = {}  # by list: _per_distinct gives one list per distinct cell

            def pad(values: list[int], width: int = width) -> list[int]:
                out = padded.get(id(values))
                if out is None:
                    out = padded[id(values)] = values + [0] * (width - len(values))
                return out
            arr = np.zeros((n, width), dtype=np.int64)  # [n, width], padded with 0 (a zero vector)
            if n:
                arr[:] = np.array([pad(v) for v in found], dtype=np.int64)
            multi.append(arr)
        n_num = len(spec.numeric)
        num = np.zeros((n, 2 * n_num), dtype=np.float32)  # [n, 2 * n_num]
        for j, c in enumerate(spec.numeric):
            x = pd.to_numeric(pd.Series(col(c), dtype=object), errors="coerce").to_numpy(dtype=np.float64)
            mean, std = self.numeric_stats[c]
            missing = ~np.isfinite(x)
            num[:, j] = np.where(missing, 0.0, (np.where(missing, mean, x) - mean) / std)
            num[:, n_num + j] = missing.astype(np.float32)
        text = {c: _per_distinct(col(c), lambda v: "" if _missing_str(v) else str(v)) for c in spec.text}
        return EncodedFeatures(
            categorical=cat,
            categorical_names=tuple(spec.categorical),
            categorical_sizes=self.categorical_sizes,
            multi=multi,
            multi_names=tuple(spec.multi),
            multi_sizes=self.multi_sizes,
            numeric=num,
            numeric_names=self.numeric_names,
            text=text,
        )

    def transform(self, table: pd.DataFrame, vocab: Vocabulary) -> EncodedFeatures:
        """Features aligned with ``vocab`` rows; entities not in ``table`` get all-missing features."""
        self._check_columns(table, "table")
        keys = pd.Series(_per_distinct(table[self.spec.key], _norm_value), index=table.index, dtype=object)
        indexed = table.assign(**{self.spec.key: keys}).drop_duplicates(subset=[self.spec.key])
        indexed = indexed.set_index(self.spec.key)
        aligned = indexed.reindex(pd.Index(vocab.ids, dtype=object))  # [len(vocab) rows]
        covered = int(aligned.index.isin(indexed.index).sum())
        if covered < len(vocab):
            log.info("features: %d of %d %ss have no row in the table; they get missing features",
                     len(vocab) - covered, len(vocab), vocab.kind)
        aligned = aligned.astype(object).where(aligned.notna(), None)
        return self.encode_rows(aligned.reset_index(drop=True))

    def fit_transform(self, table: pd.DataFrame, vocab: Vocabulary) -> EncodedFeatures:
        return self.fit(table, vocab).transform(table, vocab)

    # -- persistence -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        if not self.fitted:
            raise ConfigError("FeatureEncoder is not fitted; nothing to save")
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "spec": self.spec.to_dict(),
            "categorical": {c: list(self.categories[c]) for c in self.spec.categorical},
            "multi": {c: {"values": list(self.multi_values[c]), "max_len": int(self.multi_max_len[c])}
                      for c in self.spec.multi},
            "numeric": {c: {"mean": self.numeric_stats[c][0], "std": self.numeric_stats[c][1]}
                        for c in self.spec.numeric},
        }

    @classmethod
    def from_dict(cls, data: Any) -> "FeatureEncoder":
        try:
            if not isinstance(data, dict) or data.get("format") != _FORMAT:
                raise IntegrityError("not a saved FeatureEncoder (missing format marker)")
            spec = FeatureSpec.from_dict(data["spec"])
            enc = cls(spec)
            enc.categories = {c: [str(v) for v in data["categorical"][c]] for c in spec.categorical}
            enc.multi_values = {c: [str(v) for v in data["multi"][c]["values"]] for c in spec.multi}
            enc.multi_max_len = {c: int(data["multi"][c]["max_len"]) for c in spec.multi}
            enc.numeric_stats = {
                c: (float(data["numeric"][c]["mean"]), float(data["numeric"][c]["std"])) for c in spec.numeric
            }
        except IntegrityError:
            raise
        except (KeyError, TypeError, ValueError, ConfigError) as e:
            raise IntegrityError(f"saved FeatureEncoder is incomplete or corrupted ({type(e).__name__}: {e})") from e
        enc._build_lookup()
        enc.fitted = True
        return enc
