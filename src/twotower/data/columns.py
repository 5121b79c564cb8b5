"""One column of a read table turned into canonical values (ids as text, epoch timestamps, float32 ratings), with
the row a bad value sits on named as the user finds it in the file (:class:`RowNumbers`).
"""
from __future__ import annotations

import codecs
import csv
import difflib
import json
import logging
import math
import re
from itertools import islice
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from twotower.data.text_files import codec_for
from twotower.data.timeunits import (UNIT_NAMES, convert, date_text, dates_in_unit, detect_unit, finer_for_dates, finest_unit,
                                     unit_of, units_of)
from twotower.errors import DataError

_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")

log = logging.getLogger("twotower.data.readers")  # the readers' logger: what users filter on stays the same

__all__ = ["CSV_ROWS", "FRAME_ROWS", "PANDAS_NA", "RowNumbers", "check_rows", "counted", "ids_to_str", "parse_ratings",
           "parse_timestamps", "unit_mix"]


try:  # pandas' default NA strings, so numeric columns keep exactly their default NA handling
    from pandas._libs.parsers import STR_NA_VALUES as PANDAS_NA
except ImportError:  # pragma: no cover - a pandas that moved it
    PANDAS_NA = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                  "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}


class RowNumbers:
    """Maps a 0-based data position to the number a user finds in the file, and names it.

    CSV/TSV: ``row`` with the header as row 1 (position 0 is row 2), counted as a spreadsheet
    counts them when the file is known: blank lines, which pandas skips, are rows too, and a
    quoted field spanning lines stays one row. JSON lines: the file's ``line`` (blank lines
    counted). Parquet and JSON arrays: the 1-based ``record``. A DataFrame: its 0-based
    ``iloc`` position.
    """

    def __init__(self, unit: str = "row", first: int = 2, path: Path | None = None, sep: str | None = None,
                 encoding: str = "utf-8") -> None:
        self.unit = unit
        self.first = first
        self._path = path  # the file's numbers are found on demand (the error path only)
        self._sep = sep  # a CSV/TSV file's separator: its rows are counted as records, not lines
        self._encoding = encoding
        self._numbers: np.ndarray | None = None
        self._lengths: np.ndarray | None = None  # a CSV file's fields per data record, beside _numbers
        self._lines: np.ndarray | None = None  # a CSV file's line each data record starts on, beside _numbers
        self._header: list[str] = []
        self._complete = False  # _numbers reaches the end of the file

    def number(self, pos: int) -> int:
        if self._path is None:
            return pos + self.first
        self._scan(pos)
        assert self._numbers is not None
        return int(self._numbers[pos]) if pos < len(self._numbers) else pos + self.first

    def line(self, pos: int) -> int | None:
        """The editor's line the CSV record at ``pos`` starts on (its row counts a quoted line break as no row, a
        line does); None when not a known CSV file. Found on the error path only, as :meth:`number` is."""
        if self._path is None or self._sep is None:
            return None
        self._scan(pos)
        assert self._lines is not None
        return int(self._lines[pos]) if pos < len(self._lines) else None

    def keys(self, pos: int) -> list[str] | None:
        """The keys of the JSON lines record at ``pos`` as its line writes them; None when not a known JSON lines
        file (or the line is not one object). Read on the error path only: the line is found and parsed again."""
        if self._path is None or self._sep is not None or self.unit != "line":
            return None
        number = self.number(pos)
        with open(self._path, encoding=codec_for(self._encoding), errors="replace", newline="\n") as fh:
            line = next(islice(fh, number - 1, None), "")
        try:
            value = json.loads(line)
        except ValueError:
            return None
        return [str(k) for k in value] if isinstance(value, dict) else None

    def at(self, pos: int) -> dict[str, Any]:
        """``row``, ``unit`` and ``line`` of data position ``pos`` for :class:`DataError`: ``DataError(..., **rows.at(pos))``."""
        return {"row": self.number(pos), "unit": self.unit, "line": self.line(pos)}

    def shifted(self, start: int) -> "RowNumbers":
        """The numbering of a chunk of the data that starts at data position ``start`` (its position 0)."""
        return _ShiftedRows(self, start) if start else self

    def fields(self, pos: int) -> tuple[int, list[str]] | None:
        """How many fields the CSV record at ``pos`` has, and the header's names; None when not a known CSV file.

        pandas reads a missing trailing field and a blank one alike (NaN): the record itself tells them apart."""
        if self._path is None or self._sep is None:
            return None
        self._scan(pos)
        assert self._lengths is not None
        return (int(self._lengths[pos]), self._header) if pos < len(self._lengths) else None

    def _scan(self, pos: int) -> None:
        """Number the file's records up to data position ``pos`` (the error path only).

        The scan stops at that record: it read the whole file first, so a bad row at line 5,000,000 of a 10M-row
        file was named after a pass over all 10M rows holding every row's number as a Python int.
        """
        if self._numbers is not None and (pos < len(self._numbers) or self._complete):
            return
        self._numbers = self._csv_rows(pos) if self._sep is not None else self._json_lines(pos)

    def _json_lines(self, pos: int) -> np.ndarray:
        assert self._path is not None
        numbers: list[int] = []
        self._complete = True
        # newline="\n": lines end where the bytes' lines end, as pandas counts them (a lone \r is no line end)
        with open(self._path, encoding=codec_for(self._encoding), errors="replace", newline="\n") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    numbers.append(n)
                    if len(numbers) > pos:
                        self._complete = False
                        break
        return np.array(numbers, dtype=np.int64)

    def _csv_rows(self, pos: int) -> np.ndarray:
        """The row number of each data record up to ``pos``: the non-blank records after the header."""
        assert self._path is not None and self._sep is not None
        plain = _unquoted_csv_rows(self._path, self._sep, self._encoding, pos)
        if plain is not None:
            numbers, self._lengths, self._header, self._complete = plain
            self._lines = numbers  # no quoted line break: each record is one line
            return numbers
        numbers: list[int] = []
        lengths: list[int] = []
        lines: list[int] = []
        self._complete = True
        self._header = []
        with open(self._path, newline="", encoding=codec_for(self._encoding), errors="replace") as fh:
            reader = csv.reader(fh, delimiter=self._sep)
            start = 1  # the line the next record starts on
            for n, rec in enumerate(reader, 1):
                first, start = start, reader.line_num + 1
                if not rec or (len(rec) == 1 and not rec[0].strip()):
                    continue
                if not self._header:
                    self._header = [name.strip().lstrip("\ufeff").strip() for name in rec]
                    continue
                numbers.append(n)
                lengths.append(len(rec))
                lines.append(first)
                if len(numbers) > pos:
                    self._complete = False
                    break
        self._lengths = np.array(lengths, dtype=np.int64)
        self._lines = np.array(lines, dtype=np.int64)
        return np.array(numbers, dtype=np.int64)


#: bytes :func:`_unquoted_csv_rows` reads at a time (then on to the end of the line)
_SCAN_BYTES = 1 << 24


def _unquoted_csv_rows(path: Path, sep: str, encoding: str, pos: int
                       ) -> tuple[np.ndarray, np.ndarray, list[str], bool] | None:
    """:meth:`RowNumbers._csv_rows` of a file whose records are its lines, counted on the bytes: each data record's
    row (its line) and fields up to data position ``pos``, the header's names and whether the file ended first.

    The csv module's scan of a 20M-row file to a bad row at 15,000,001, after the chunked read had found it, held
    three Python ints a record: `data split` refused the file after 21.5 s at 2.5 GB, now 15.6 s at 1.4 GB (50 s of 88
    on a busy machine). None where a record need not be a line (a quote, a lone carriage return) or the text is not
    ASCII-compatible bytes: the csv module's scan.
    """
    if codecs.lookup(encoding).name not in ("utf-8", "utf-8-sig", "ascii") or len(sep.encode("utf-8")) != 1:
        return None
    numbers: list[np.ndarray] = []
    fields: list[np.ndarray] = []
    header: list[str] | None = None
    lines_before = found = 0
    with open(path, "rb") as fh:
        while block := fh.read(_SCAN_BYTES):
            block += b"" if block.endswith(b"\n") else fh.readline()  # whole lines only
            if b'"' in block or block.count(b"\r") != block.count(b"\r\n"):
                return None
            line, width, blank = _line_fields(block, ord(sep))
            keep = ~blank
            if header is None and keep.any():
                first = int(np.flatnonzero(keep)[0])
                text = block.split(b"\n", first + 1)[first].rstrip(b"\r").decode("utf-8", "replace")
                header = [name.strip().lstrip("\ufeff").strip() for name in text.split(sep)]
                keep[first] = False
            numbers.append(lines_before + 1 + line[keep])
            fields.append(width[keep])
            lines_before += len(line)
            found += int(keep.sum())
            if found > pos:
                break
    rows, widths = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (numbers, fields))
    return rows[:pos + 1], widths[:pos + 1], header or [], found <= pos


def _line_fields(block: bytes, sep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each line of ``block`` (whole lines): its 0-based index, its fields, and whether it is blank as the csv module
    reads one (no field, or one of whitespace)."""
    arr = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    if not block.endswith(b"\n"):  # the file's last line, without a line end
        ends = np.append(ends, len(arr))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    seps = np.add.reduceat((arr == sep).view(np.uint8), starts, dtype=np.int64)
    blank = seps == 0
    for i in np.flatnonzero(blank):  # a one-field line: blank only when its text is whitespace
        blank[i] = not block[starts[i]:ends[i]].decode("utf-8", "replace").strip()
    return np.arange(len(starts), dtype=np.int64), seps + 1, blank


class _ShiftedRows(RowNumbers):
    """:meth:`RowNumbers.shifted`: positions of a chunk, numbered as the whole file's."""

    def __init__(self, base: RowNumbers, start: int) -> None:
        super().__init__(base.unit, base.first)
        self._base = base
        self._start = start

    def number(self, pos: int) -> int:
        return self._base.number(self._start + pos)

    def fields(self, pos: int) -> tuple[int, list[str]] | None:
        return self._base.fields(self._start + pos)

    def line(self, pos: int) -> int | None:
        return self._base.line(self._start + pos)

    def keys(self, pos: int) -> list[str] | None:
        return self._base.keys(self._start + pos)

    def shifted(self, start: int) -> RowNumbers:
        return self._base.shifted(self._start + start)


#: the numbering of a CSV file
CSV_ROWS = RowNumbers()


#: a DataFrame's rows are named by position, ``df.iloc[i]``: counting a header it does not have would name
#: the row two further on (and its index labels need not be positions at all, e.g. after filtering)
FRAME_ROWS = RowNumbers("iloc", 0)


_BAD_ID = object()  # marks a value that cannot be an id (nested JSON, undecodable bytes)


_TS_LIMIT = 2.0**62  # epoch seconds beyond this overflow int64 arithmetic (year ~1.5e11)


_F32_MAX = float(np.finfo(np.float32).max)


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value (``1e+30``, not ``np.float64(1e+30)``) for messages."""
    return value.item() if isinstance(value, np.generic) else value


def _bad_number(what: str, value: Any) -> str:
    """``non-finite timestamp inf`` (a missing one is :func:`_missing_timestamp`)."""
    return f"non-finite {what} {_plain(value)!r}"


def counted(unit: str) -> str:
    """What a count of a file's data positions is of, in its numbering's word: ``rows`` (CSV, and a DataFrame's,
    whose ``iloc`` is only how they are numbered), ``records`` (Parquet, JSON arrays), ``lines`` (JSON lines)."""
    return "rows" if unit == "iloc" else f"{unit}s"


def _missing_timestamp(unit: str) -> str:
    """A missing timestamp, in the words of the file's kind, with the ways out (as a missing rating says them).

    A Parquet or JSON record has no fields to miss: "a row with fewer fields than the header" sent the user looking
    for a CSV fault, and "; expected epoch seconds" after it told them nothing they could do.
    """
    why = "an empty field, or a row with fewer fields than the header" if unit == "row" else "null, NaN or NaT"
    return (f"missing timestamp ({why}); fill or drop such {counted(unit)}, or set data.timestamp_col=null to take each "
            "user's rows in file order")


def check_rows(
    bad: np.ndarray, message: Callable[[int], str], *, file: str, column: str, rows: RowNumbers = CSV_ROWS
) -> None:
    """Raise DataError at the first True of ``bad[N]`` (0-based data position -> the file's row).

    ``message(pos)`` builds the text for that position; ``rows`` numbers it as the
    file does: CSV rows count the header as row 1, so data position ``pos`` is row
    ``pos + 2``; JSON lines name the line, Parquet the 1-based record.
    """
    if bad.any():
        where = np.flatnonzero(bad)
        pos = int(where[0])
        text = message(pos)
        if len(where) > 1 and "in total" not in text:  # fixing one row per rerun wastes a run per row
            shown = ", ".join(str(rows.number(int(p))) for p in where[1:6])
            more = f", ... ({len(where) - 1} in all)" if len(where) > 6 else ""
            text += f"; the same holds for {rows.unit}s {shown}{more}" if len(where) > 2 else \
                f"; the same holds for {rows.unit} {shown}"
        raise DataError(text, file=file, column=column, **rows.at(pos))


def _one_id_to_str(value: Any) -> str | None | object:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return None
        if math.isfinite(value) and float(value).is_integer():
            return str(int(value))
        return repr(float(value))
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return _BAD_ID
    if isinstance(value, (dict, list, tuple, set, np.ndarray)):
        return _BAD_ID  # a JSON object/array is not an id; refused by ids_to_str
    text = str(value).strip()
    return text if text else None


#: the largest integer below which a float64 holds every integer exactly (2**53)
FLOAT_EXACT_INT = 2**53


def _warn_inexact_float_ids(values: pd.Series, *, file: str, column: str, rows: RowNumbers) -> None:
    """Warn when a float id column holds integers of 2**53 or more: a float cannot hold every such integer,
    so such ids lost digits before they reached us (a 19-digit id read into a float column, e.g. a JSON or
    Parquet column with a null in it), and two different ids may now be one. Their text was written as if exact."""
    if values.dtype.kind != "f":
        return
    with np.errstate(invalid="ignore"):
        big = np.abs(values.to_numpy(dtype=float, na_value=np.nan)) >= FLOAT_EXACT_INT
    if not big.any():
        return
    pos = int(np.flatnonzero(big)[0])
    log.warning(
        "file %s, %s %s, column %r: id %r is a float of 2**53 or more (%d such ids), where a float cannot hold every "
        "integer: these ids may have lost digits, and different ids may have become one. Keep the ids as text or "
        "integers where they are written (strings in JSON, a string or int64 column in Parquet, a DataFrame column "
        "of str or Int64)", file, rows.unit, rows.number(pos), column, float(values.iloc[pos]), int(big.sum()))


#: a string that str.strip() changes: one with a character str.isspace() calls white space at either end
_SPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
          "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_EDGE_SPACE = f"^[{_SPACE}]|[{_SPACE}]$"


def ids_to_str(values: pd.Series, *, file: str, column: str, rows: RowNumbers = CSV_ROWS,
               allow_empty: bool = False) -> pd.Series:
    """Turn an id column into stripped strings; ints render as ``"42"`` never ``"42.0"``.

    NaN/None/empty ids raise DataError naming the first bad row, or with ``allow_empty`` come back as ``""``
    (for a caller that drops or refuses them with its own advice).
    """
    values = values.reset_index(drop=True)
    if pd.api.types.is_integer_dtype(values.dtype) and not values.isna().any():
        # as the integers' own text: through int64, a uint64 id above 2**63 (a JSON id such as
        # 12345678901234567890, a Parquet uint64 hash) wrapped to a negative number, another id, silently
        out = values.map(lambda v: str(int(v))) if values.dtype.kind == "u" else values.astype("int64").astype(str)
    elif isinstance(values.dtype, pd.StringDtype) and not values.isna().any():
        # a text column (CSV ids are read as text, so that "007" stays "007"): what _one_id_to_str does to a
        # string, column-wise: only ids with white space at an end are stripped one by one (str.strip's white
        # space, which the Arrow kernels' differs from), and an id left empty is missing. Row by row it took
        # 2.4 s for 10M ids, most of it making Python strings of the Arrow column
        edge = values.str.contains(_EDGE_SPACE, regex=True).to_numpy(dtype=bool)
        if edge.any():
            values = values.copy()
            values[edge] = [v.strip() for v in values[edge].tolist()]
        out = values.where(values != "")
    else:
        raw = values.tolist()
        if all(type(v) is str for v in raw):
            # an object column of strings: as above, without _one_id_to_str's type checks
            out = pd.Series([v.strip() or None for v in raw], dtype=object)
        else:
            _warn_inexact_float_ids(values, file=file, column=column, rows=rows)
            out = pd.Series([_one_id_to_str(v) for v in raw], dtype=object)
            wrong = np.fromiter((v is _BAD_ID for v in out), dtype=bool, count=len(out))
            check_rows(wrong, lambda pos: f"id {values.iloc[pos]!r} is not a string or a number (a nested JSON value "
                       "or undecodable bytes)", file=file, column=column, rows=rows)
    bad = out.isna().to_numpy()
    if allow_empty:
        return pd.Series(["" if b else v for v, b in zip(out.tolist(), bad.tolist())], dtype=object).astype(str)
    check_rows(bad, lambda pos: f"empty id ({int(bad.sum())} {counted(rows.unit)[:-1]}(s) in total; {_why_empty(rows, pos, column)}); "
               f"every {counted(rows.unit)[:-1]} needs a {column!r} value", file=file, column=column, rows=rows)
    return out.astype(str)


def _why_empty(rows: RowNumbers, pos: int, column: str) -> str:
    """Why the id at ``pos`` is empty, in the file's words.

    A CSV row that ends before the column and one whose field is blank both read as empty: "a row with fewer
    fields than the header reads as empty" sent the user counting commas in a row that had them all. Where the
    file is at hand its record says which; a Parquet or JSON record has a null (a float id column's NaN) instead.
    """
    if rows.unit == "line":  # a JSON lines record: null, or no such key (a misspelt one, as a CSV header's)
        keys = rows.keys(pos)
        if keys is not None and column not in keys:
            near = difflib.get_close_matches(column, keys, n=1, cutoff=0.5) or [
                k for k in keys if k.lower() == column.lower()]
            return (f"the line has no key {column!r}" + (f"; did you mean {near[0]!r}?" if near else
                                                          f"; its keys: {keys}"))
    if rows.unit != "row":
        return "null, NaN or empty"
    shape = rows.fields(pos)
    if shape is None or column not in shape[1]:
        return "a blank field, or a row with fewer fields than the header"
    got, header = shape
    if shape[1].index(column) >= got:
        return f"the row has {got} field{'s' if got != 1 else ''} where the header has {len(header)}"
    return "the field is blank"


def _warn_yyyymmdd_times(times: np.ndarray, *, file: str, column: str) -> None:
    """A column whose every time is an 8-digit number spelling a date (20200101) is read as epoch seconds, in
    August 1970, without a word: the rows' order is right, but a date cut-off (`--valid-start 2020-03-01`) or a
    time gap is not. Said once; the data is read as written (nothing is guessed)."""
    if len(times) == 0 or times.min() < 19000101 or times.max() > 21001231:
        return
    month, day = times // 100 % 100, times % 100
    if ((month >= 1) & (month <= 12) & (day >= 1) & (day <= 31)).all():
        first = int(times[0])
        iso = f"{first // 10000:04d}-{first // 100 % 100:02d}-{first % 100:02d}"
        log.warning("%s: every timestamp in column %r is an 8-digit number that spells a date as YYYYMMDD (%d: "
                    "%s), and is read as epoch seconds (%s): the rows' order is kept, but date cut-offs and time gaps "
                    "are not what they mean; write the dates as ISO dates (%s) to read them as dates", file, column,
                    first, iso, pd.Timestamp(first, unit="s").strftime("%Y-%m-%d %H:%M:%S"), iso)


def parse_timestamps(values: pd.Series, *, file: str, column: str, rows: RowNumbers = CSV_ROWS,
                     time_unit: str = "auto", check_units: bool = True
                     ) -> tuple[np.ndarray, str | None, np.ndarray | None]:
    """Epoch times as int64, the unit the column was stored in when it is ours, not its numbers' (dates alone and
    no unit set, or numbers moved to a finer unit for their own or the dates' sub-second parts; None otherwise:
    numbers are kept as given, in their own unit), and what flooring took off each time
    (float64, 0 where nothing; None when no time was floored): rows whose times differ only there are distinct
    events, not duplicates.

    Dates go into ``time_unit``, beside numbers into the numbers' unit, and alone (``auto``) into seconds, or the
    finer unit their sub-second parts need (:func:`~twotower.data.timeunits.finest_unit`). ``check_units=False``
    leaves out the check that numbers are all in one unit (told from the median: a file's head may not say it)."""
    values = _numpy_times(values.reset_index(drop=True))
    n = len(values)
    out = np.zeros(n, dtype=np.int64)
    if pd.api.types.is_bool_dtype(values.dtype):
        raise DataError("timestamps are true/false values; expected epoch seconds or ISO dates", file=file,
                        column=column, **rows.at(0))
    # DataFrame-only dtypes that to_numeric turned into numbers of another unit without a word: a timedelta
    # column into nanoseconds / 1000, a monthly Period into months since 1970
    if pd.api.types.is_timedelta64_dtype(values.dtype):
        raise DataError(f"timestamps are durations ({values.dtype}), not points in time; expected epoch seconds, "
                        "ISO dates or datetimes (e.g. start + durations)", file=file, column=column)
    if isinstance(values.dtype, pd.PeriodDtype):
        raise DataError(f"timestamps are periods ({values.dtype}); expected epoch seconds, ISO dates or datetimes "
                        "(convert with .dt.to_timestamp())", file=file, column=column)
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        dt = pd.to_datetime(values, utc=True)
        check_rows(dt.isna().to_numpy(), lambda pos: _missing_timestamp(rows.unit), file=file, column=column,
                   rows=rows)
        unit = _dates_unit(dt, time_unit, file)
        return dates_in_unit(dt, unit), unit if time_unit == "auto" else None, _floored_off(dt, unit)
    if values.dtype == object:
        # one JSON true among numbers (a column of mixed Python objects): to_numeric read it as 1, the first second
        # of 1970, in silence, where a column of booleans alone is refused above
        flags = np.fromiter((isinstance(v, (bool, np.bool_)) for v in values.tolist()), dtype=bool, count=n)
        check_rows(flags, lambda pos: f"timestamp {_plain(values.iloc[pos])!r} is a true/false value; expected epoch seconds "
                   "or an ISO date", file=file, column=column, rows=rows)
    numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    is_num = np.isfinite(numeric)
    huge = is_num & (np.abs(numeric) >= _TS_LIMIT)
    check_rows(huge, lambda pos: f"timestamp {_plain(values.iloc[pos])!r} is out of range; expected epoch seconds "
               "(|t| < 2**62)", file=file, column=column, rows=rows)
    out[is_num] = np.floor(numeric[is_num]).astype(np.int64)
    if time_unit == "auto" and check_units:
        _check_one_unit(out, is_num, values, file=file, column=column, rows=rows)
    _warn_rounded_float_times(values, numeric, is_num, out, file=file, column=column, rows=rows, time_unit=time_unit)
    if time_unit == "auto":
        _warn_yyyymmdd_times(out[is_num], file=file, column=column)
    rest = ~is_num
    dt = None
    if not pd.api.types.is_numeric_dtype(values.dtype) and rest.any():
        dt = _read_dates(values, rest, file=file, column=column, rows=rows)
    lost = np.zeros(n, dtype=np.float64)
    lost[is_num] = numeric[is_num] - out[is_num]
    # the numbers' unit, told from their median only where it is needed (not on whole numbers alone)
    fractions = bool(lost.any())
    unit = time_unit if time_unit != "auto" or (dt is None and not fractions) else detect_unit(out[is_num])
    moved = None
    if (dt is not None or fractions) and is_num.any() and time_unit == "auto":
        # dates with sub-second parts beside epoch seconds: the column moves to the unit the dates need, as a
        # column of such dates alone does (they were floored to seconds in silence, clicks within a second tied
        # and put in item-id order); the numbers scaled exactly, their own fractions kept to the finer unit.
        # Numbers with fractions of their unit move one unit finer alike: floored, the files written from them
        # (the split, a run's data/*.csv) held 881250951 for .5 and .7, and each later read dropped a "duplicate"
        needed = finest_unit(dt) if dt is not None else unit
        if fractions:
            needed = max(needed, _FINER.get(unit, unit), key=lambda u: convert(1, "s", u))
        finer = finer_for_dates(out[is_num], unit, needed)
        if finer != unit:
            moved = finer
            factor = convert(1, unit, finer)
            fraction = _whole_within_precision(lost[is_num] * factor, numeric[is_num], factor)
            out[is_num] = out[is_num] * factor + np.floor(fraction).astype(np.int64)
            lost[is_num] = fraction - np.floor(fraction)
            log.info("%s: times with sub-second parts are kept as %s, so events within a second keep their order "
                     "(the epoch %s %s scaled to it)", file, UNIT_NAMES[finer], UNIT_NAMES[unit].split()[-1],
                     "beside them" if dt is not None else "with fractions")
            unit = finer
    fractional = int((lost != 0).sum())
    if fractional:  # floored: events within one unit tie, and ties are ordered by item id
        log.warning("%s: %d timestamps in column %r have a fractional part and are floored to whole %s, so events "
                    "less than one apart tie (ties are ordered by item id; rows that differ only in the fraction "
                    "are kept, not dropped as duplicates); write integer milliseconds or ISO times "
                    "(2024-05-01T12:30:00.250) to keep their order", file, fractional, column,
                    UNIT_NAMES[unit if unit != "auto" else detect_unit(out[is_num])].split()[-1])
    if pd.api.types.is_numeric_dtype(values.dtype):
        check_rows(~is_num, lambda pos: _missing_timestamp(rows.unit) if np.isnan(numeric[pos]) else
                   _bad_number("timestamp", values.iloc[pos]) + "; expected epoch seconds", file=file, column=column,
                   rows=rows)
        return out, moved, lost if fractional else None
    if dt is not None:
        # dates beside numbers join them in the numbers' unit (moved above to the one the dates need): beside epoch
        # milliseconds a date read as seconds would sort decades earlier; a column of dates alone is epoch seconds,
        # as it always was, or the finer unit its sub-second parts need
        # (data.time_unit, when set, is the unit of the whole column: dates join the numbers in it)
        if not is_num.any():
            unit = _dates_unit(dt, time_unit, file)
        out[rest] = dates_in_unit(dt, unit)
        dates_lost = _floored_off(dt, unit)
        if dates_lost is not None:
            lost[np.flatnonzero(rest)] = dates_lost
            fractional += 1
            if is_num.any() and time_unit == "auto":  # the numbers could not move to a finer unit: said, not silent
                log.warning("%s: %d dates in column %r have parts finer than the whole %s of the numbers beside them "
                            "(which cannot be moved to a finer unit) and are floored, so events less than one apart "
                            "tie (ties are ordered by item id); write every time as an ISO date to keep them", file,
                            int((dates_lost != 0).sum()), column, UNIT_NAMES[unit].split()[-1])
        if not is_num.any() and time_unit == "auto":
            return out, unit, lost if fractional else None
    return out, moved, lost if fractional else None


def _whole_within_precision(fraction: np.ndarray, numbers: np.ndarray, factor: int) -> np.ndarray:
    """``fraction`` (a number's fraction of a unit, times ``factor``) with the values within the numbers' float
    precision of a whole number made whole: 891717742.7 s is 891717742700.0000477 ms in binary, and rounded to six
    decimals it was still "floored to whole milliseconds" in the warning, though written exactly as 891717742700."""
    near = np.round(fraction)
    return np.where(np.abs(fraction - near) <= np.spacing(np.abs(numbers)) * factor, near, fraction)


def _read_dates(values: pd.Series, rest: np.ndarray, *, file: str, column: str, rows: RowNumbers) -> pd.Series:
    """The cells of ``values`` at ``rest`` (not numbers) as UTC dates; a cell that is no ISO date refused by its
    row, a blank one as missing."""
    n = len(values)
    raw = values[rest]
    blank = raw.isna() | (raw.astype(str).str.strip() == "")
    dt = pd.to_datetime(raw.where(~blank), errors="coerce", utc=True, format="ISO8601")
    unreadable = np.zeros(n, dtype=bool)
    unreadable[np.flatnonzero(rest)] = dt.isna().to_numpy()
    # a blank beside dates read "cannot read timestamp nan": it is missing, said as for a numeric column
    missing = np.zeros(n, dtype=bool)
    missing[np.flatnonzero(rest)] = blank.to_numpy(dtype=bool)
    check_rows(unreadable, lambda pos: _missing_timestamp(rows.unit) if missing[pos] else
               f"cannot read timestamp {values.iloc[pos]!r}; expected epoch seconds (int/float) or an ISO date "
               "like 2024-05-01 or 2024-05-01T12:30:00", file=file, column=column, rows=rows)
    return dt


def _warn_rounded_float_times(values: pd.Series, numeric: np.ndarray, is_num: np.ndarray, out: np.ndarray, *,
                              file: str, column: str, rows: RowNumbers, time_unit: str) -> None:
    """Warn when a float column is too narrow to hold its times to the unit: float32 keeps whole numbers exactly only
    up to 2**24, so epoch seconds of 1997 come in steps of 64 s (float64 epoch nanoseconds: 256 ns). The times were
    rounded before they reached us, and events closer than a step were read as ties, put in item-id order (a
    leave-last split's "last" item among them chosen by id), in silence."""
    dtype = getattr(values.dtype, "numpy_dtype", values.dtype)  # Float32 and Arrow floats say theirs
    if not isinstance(dtype, np.dtype) or dtype.kind != "f" or not is_num.any():
        return
    exact = 2.0 ** (np.finfo(dtype).nmant + 1)
    big = is_num & (np.abs(numeric) > exact)
    if not big.any():
        return
    pos = int(np.flatnonzero(big)[0])
    step = float(np.spacing(dtype.type(np.abs(numeric[big]).max())))
    unit = time_unit if time_unit != "auto" else detect_unit(out[is_num])
    log.warning("file %s, %s %d, column %r: timestamps are %s, which holds whole numbers exactly only up to 2**%d; "
                "these times (e.g. %r) came rounded to steps of up to %g %s, so events closer than that tie (ties are "
                "ordered by item id) and their order is lost (%d such times); store times as int64 or datetimes", file,
                rows.unit, rows.number(pos), column, dtype, np.finfo(dtype).nmant + 1, _plain(values.iloc[pos]), step,
                UNIT_NAMES[unit].split()[-1], int(big.sum()))


def _numpy_times(values: pd.Series) -> pd.Series:
    """An Arrow-backed datetime or duration column (``dtype_backend="pyarrow"``, ``astype("timestamp[ns][pyarrow]")``)
    as its NumPy twin, in its own unit and zone: a nanosecond one failed in pandas' arithmetic ("mod not
    implemented."), and an Arrow duration passed the check for durations and was read as epoch nanoseconds. An
    Arrow date (date32, date64) has no unit to keep: it becomes a millisecond datetime, date64's own resolution."""
    dtype = values.dtype
    if not isinstance(dtype, pd.ArrowDtype) or dtype.kind not in "mM":
        return values
    if not hasattr(dtype.pyarrow_dtype, "unit"):  # a date: it crashed here, while its Parquet file read fine
        return values.astype("datetime64[ms]")
    unit, tz = dtype.pyarrow_dtype.unit, getattr(dtype.pyarrow_dtype, "tz", None)
    if dtype.kind == "m":
        return values.astype(f"timedelta64[{unit}]")
    return values.astype(pd.DatetimeTZDtype(unit=unit, tz=tz) if tz else f"datetime64[{unit}]")


def _check_one_unit(times: np.ndarray, is_num: np.ndarray, values: pd.Series, *, file: str, column: str,
                    rows: RowNumbers) -> None:
    """Refuse numbers whose size puts them in another epoch unit than the column's (told from its median).

    Two exports pasted together (one in seconds, one in milliseconds) were read in the median's unit: the
    millisecond rows as seconds of the year ~56,000, so each user's oldest events became their newest and a
    temporal or leave-last split held them out as test, without a word. Zeros (a common "unknown") are no unit;
    with data.time_unit set every number is taken in it and this is not asked.
    """
    if not is_num.any():
        return
    unit = detect_unit(times[is_num])
    each = np.full(len(times), unit, dtype=object)
    each[is_num] = units_of(times[is_num])
    other = is_num & (times != 0) & (each != unit)
    check_rows(other, lambda pos: unit_mix(values.iloc[pos], int(times[pos]), unit), file=file, column=column,
               rows=rows)


def unit_mix(value: Any, time: int, unit: str) -> str:
    """Why a timestamp (``value`` as written, ``time`` its epoch number) is refused in a column of ``unit`` numbers."""
    its = unit_of(time)
    return (f"timestamp {_plain(value)!r} has the size of {UNIT_NAMES[its]} ({date_text(time, its)} in them), while the "
            f"column's numbers are {UNIT_NAMES[unit]} (told from their median size); mixed in one column, such rows "
            f"sort decades away from the others: convert them to {UNIT_NAMES[unit]}, or set "
            "data.time_unit=s|ms|us|ns to take every number in that unit")


#: the next finer unit, where numbers with fractions of their own unit are kept
_FINER = {"s": "ms", "ms": "us", "us": "ns"}


def _floored_off(dates: pd.Series, unit: str) -> np.ndarray | None:
    """What :func:`dates_in_unit` floors off each date, in nanoseconds (None when nothing: the usual case)."""
    rest = ((dates - _EPOCH) % pd.Timedelta(1, unit=unit)).to_numpy(dtype="timedelta64[ns]").astype(np.int64)
    return rest.astype(np.float64) if rest.any() else None


def _dates_unit(dates: pd.Series, time_unit: str, file: str) -> str:
    """The unit a column of dates is stored in: ``data.time_unit`` when set, else :func:`finest_unit` (said when it
    is not seconds, since the split files then hold epoch milliseconds ...)."""
    if time_unit != "auto":
        return time_unit
    unit = finest_unit(dates)
    if unit != "s":
        log.info("%s: times with sub-second parts are kept as %s, so events within a second keep their order",
                 file, UNIT_NAMES[unit])
    return unit


def parse_ratings(values: pd.Series, *, file: str, column: str, rows: RowNumbers = CSV_ROWS,
                  use: str | None = None) -> np.ndarray:
    values = values.reset_index(drop=True)
    numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(numeric) | (np.abs(np.nan_to_num(numeric)) > _F32_MAX) | _booleans(values, numeric)
    if bad.any() and use is not None:
        return _unread_ratings(values, numeric, bad, file=file, column=column, rows=rows, use=use)
    if bad.any():  # looked into only then: no cost on a clean column
        # an empty or NaN rating read as "rating nan is not a finite number": say it is missing, how many rows
        # are, and that training does not need ratings at all (every row is a positive), so the column can go
        missing = values.isna().to_numpy() | values.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(bool)
        n_missing = int(missing.sum())
        # in the file's words, as an empty id says them: a Parquet file's "2 record(s)" said "2 row(s)"
        noun = counted(rows.unit)
        check_rows(missing, lambda pos: f"missing rating ({n_missing} {noun[:-1]}(s) in total); fill or drop those {noun}, or "
                   f"set data.rating_col=null: training treats every row as a positive and does not read ratings",
                   file=file, column=column, rows=rows)
    check_rows(bad, lambda pos: _bad_rating(values.iloc[pos]), file=file, column=column, rows=rows)
    return numeric.astype(np.float32)


def _unread_ratings(values: pd.Series, numeric: np.ndarray, bad: np.ndarray, *, file: str, column: str,
                    rows: RowNumbers, use: str) -> np.ndarray:
    """The ratings of a file read as ``use`` (held-out pairs, a history), its bad ones missing (NaN), with a warning.

    Nothing reads a rating there, and `evaluate --test` stopped on one with advice it refuses ("set
    data.rating_col=null": the run's columns are fixed when it is trained); a missing rating still tells a repeated
    row apart from the first one (the conflicting-duplicates count).
    """
    pos = int(np.flatnonzero(bad)[0])
    log.warning("%s: %d %s of column %r hold no usable rating (e.g. %s %d: %r), read as missing: the file is read "
                "as %s, which does not use ratings", file, int(bad.sum()), counted(rows.unit)[:-1] + "(s)", column,
                rows.unit, rows.number(pos), _plain(values.iloc[pos]), use)
    return np.where(bad, np.nan, numeric).astype(np.float32)


#: a number written with a decimal comma ("5,0", "-0,25"): Excel's in comma-decimal locales, beside ';' separators
_DECIMAL_COMMA = re.compile(r"\s*[+-]?\d*,\d+\s*")
#: ... whose comma may as well separate thousands ("1,299")
_THOUSANDS = re.compile(r"\s*[+-]?\d{1,3},\d{3}\s*")


def decimal_comma_advice(value: Any) -> str | None:
    """``"write decimals with a point ('5.0'); the separator ... is always '.'"`` when ``value`` is a number
    written with a decimal comma, else None: said for a rating and a numeric feature cell alike."""
    if not (isinstance(value, str) and _DECIMAL_COMMA.fullmatch(value)):
        return None
    thousands = (f" (or, if the comma separates thousands, leave it out: {value.strip().replace(',', '')!r})"
                 if _THOUSANDS.fullmatch(value) else "")
    return (f"write decimals with a point ({value.strip().replace(',', '.')!r}){thousands}; the separator (comma, "
            "';', tab or '|') is taken from the header, but the decimal mark is always '.'")


def _booleans(values: pd.Series, numeric: np.ndarray) -> np.ndarray:
    """Where ``values`` hold true/false (a JSON file's ``true``): to_numeric reads them as 1 and 0 without a word,
    while a CSV's ``true`` is text, refused as no number; they are refused alike. Only the cells read as 0 or 1
    (``numeric``) are looked at: a CSV's ratings are text, and a look at each of millions of cells cost seconds."""
    if pd.api.types.is_bool_dtype(values.dtype):  # bool, and pandas' nullable boolean
        return np.ones(len(values), dtype=bool)
    out = np.zeros(len(values), dtype=bool)
    if values.dtype != object:
        return out
    maybe = np.flatnonzero((numeric == 0) | (numeric == 1))
    out[maybe] = [isinstance(v, (bool, np.bool_)) for v in values.to_numpy()[maybe]]
    return out


def _bad_rating(value: Any) -> str:
    """Why a rating is refused: a decimal comma read as "'5,0' is not a finite number (float32 range)", as if
    the number were too large, while the file's only fault is its decimal mark."""
    if isinstance(value, (bool, np.bool_)):
        return f"rating {str(value).lower()} is true or false, not a number; write the rating as a number"
    advice = decimal_comma_advice(value)
    if advice is not None:
        return (f"rating {value!r} is not a number: {advice}; "
                "or set data.rating_col=null: training treats every row as a positive and does not read ratings")
    return f"rating {_plain(value)!r} is not a finite number (float32 range)"
