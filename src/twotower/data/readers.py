"""Read interaction and feature tables (CSV/TSV/Parquet/JSON lines) into canonical frames.

Canonical interactions have exactly the columns ``user_id`` (str), ``item_id``
(str), ``timestamp`` (int64: numbers as in the file, in whatever epoch unit it uses;
dates as epoch seconds; row order without a time column) and ``rating``
(float32). Every problem with the input raises :class:`DataError` naming the
file, the 1-based row (the header is row 1, the first data row is row 2) and
the column. How bytes become text is :mod:`twotower.data.text_files`; how one column becomes canonical values,
:mod:`twotower.data.columns`.
"""
from __future__ import annotations

import codecs
import csv
import difflib
import io
import json
import logging
import re
import stat
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from twotower.config import INTERACTION_FORMATS, TIME_UNITS
from twotower.data.columns import (
    CSV_ROWS,
    FRAME_ROWS,
    PANDAS_NA,
    _TS_LIMIT,
    RowNumbers,
    check_rows,
    counted,
    ids_to_str,
    parse_ratings,
    parse_timestamps,
    unit_mix,
)
from twotower.data.json_lines import RepeatedKey, json_line_chunks, read_json_lines
from twotower.data.timeunits import BAND_START_S, date_text, detect_unit, unit_of, units_of
from twotower.data.text_files import (
    ENCODING_SETTING,
    check_wide_bom,
    codec_for,
    decode_error,
    first_char,
    one_line,
    read_text,
    warn_if_utf8,
)
from twotower.errors import ConfigError, DataError
from twotower.utils.progress import RateLog
from twotower.utils.wording import json_error

__all__ = [
    "check_rows",  # re-exported: features and search/prepare read their columns with the same rules
    "ids_to_str",
    "ColumnMap",
    "read_table",
    "read_table_numbered",
    "check_head",
    "RowNumbers",
    "read_interactions",
    "EmptyInteractions",
    "read_sasrec",
    "is_sasrec_file",
    "pipe_refusal",
    "CANONICAL_COLUMNS",
    "INTERACTION_FORMATS",
]

class EmptyInteractions(DataError):
    """An interactions table with a header and no data rows: a caller that knows what the file was given as
    (`train --valid` of a time split with no valid part) adds what to do instead."""


#: what every "file not found" says (the readers' and the CLI's early input checks alike)
CHECK_PATH = "check the path (relative paths start at the working directory)"


def pipe_refusal(path: Path) -> str | None:
    """What is said of a pipe, FIFO or socket given as an input file (``--users /dev/stdin``, ``<(...)``), else None.
    An input file is read more than once (its encoding and header looked at, then its rows), which a pipe cannot
    be; its size, 0, read as "file is empty" however much was written to it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    return ("is a pipe, not a file: an input file is read more than once (its header, then its rows), which a pipe "
            "cannot be; write it to a file first and pass that file")

log = logging.getLogger(__name__)

#: Column names and order of a canonical interactions frame.
CANONICAL_COLUMNS = ("user_id", "item_id", "timestamp", "rating")

_CSV_SUFFIXES = {".csv", ".tsv", ".txt"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_JSON_SUFFIXES = {".jsonl", ".ndjson", ".json"}
_SUPPORTED = ".csv, .tsv, .txt, .parquet, .jsonl, .ndjson, .json (JSON lines or one array of records)"
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zip", ".zst", ".7z")

#: words of a column name that read as an event time (ts, event_time, createdAt, order_date, unix_epoch, ...)
_TIME_WORDS = frozenset({"ts", "time", "timestamp", "date", "datetime", "epoch", "created", "updated", "when"})


#: words of a column name that read as a rating or weight (weight, playCount, stars, ...)
_RATING_WORDS = frozenset({"rating", "ratings", "weight", "weights", "score", "scores", "stars", "clicks", "plays", "count",
                           "playcount", "quantity", "qty"})


def _named_like(column: str, words: frozenset[str]) -> bool:
    """Whether a word of ``column``'s name is one of ``words``."""
    found = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", str(column))  # snake_case, camelCase, kebab-case
    return any(w.lower() in words for w in found)


_INT_TEXT = r"[+-]?\d+"


@dataclass(frozen=True, kw_only=True)
class ColumnMap:
    """Which input columns hold the user, item, timestamp and rating.

    ``timestamp``/``rating`` set to ``None`` mean "not in the data": timestamps
    become the row order and ratings 1.0. When they keep their default names
    and the file lacks them, the same fallback applies (and is reported); a
    column you mapped to another name must exist.
    """

    user: str = "user_id"
    item: str = "item_id"
    timestamp: str | None = "timestamp"
    rating: str | None = "rating"

    def __post_init__(self) -> None:
        for field in ("user", "item"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"ColumnMap.{field}: must be a non-empty column name, got {value!r}")
        for field in ("timestamp", "rating"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(
                    f"ColumnMap.{field}: must be a non-empty column name or None (absent), got {value!r}"
                )
        used = [v for v in (self.user, self.item, self.timestamp, self.rating) if v is not None]
        if len(set(used)) != len(used):
            raise ConfigError(f"ColumnMap maps one column to two roles: {used}; each role needs its own column")


def _label(source: Any, name: str | None) -> str:
    if name is not None:
        return str(name)
    if isinstance(source, pd.DataFrame):
        return "<DataFrame>"
    return str(source)


def _sniff_sep(path: Path, label: str, encoding: str = "utf-8") -> str:
    with open(path, encoding=codec_for(encoding), errors="replace", newline="\n") as fh:
        text = fh.readline()
    if not text.strip():
        raise DataError("the first line is empty; expected a header row with column names", file=label, row=1)
    if re.fullmatch(r"\ufeff?sep=.?\s*", text, flags=re.I):
        # Excel's separator hint: read as the header, the columns were 'sep=' and 'Unnamed: 1'
        raise DataError(f"the first line {text.strip()!r} is Excel's separator hint, not a header; delete that line "
                        "(the separator is taken from the header row)", file=label, row=1, unit="line")
    # the header's most frequent of these; comma on a tie. Semicolons too: Excel in comma-decimal locales and
    # public dumps such as Book-Crossing's BX-Book-Ratings.csv use them, and read with commas such a file was one
    # column and failed far down ("Expected 1 fields in line 438648, saw 3") on the first title holding a comma.
    counts = {sep: text.count(sep) for sep in _SEPARATORS}
    best = max(_SEPARATORS, key=lambda sep: counts[sep])  # max keeps the first of equal counts: the comma
    return best if counts[best] > 0 else ","


#: the separators a header row is sniffed for, the default first
_SEPARATORS = (",", "\t", ";", "|")


def _json_lines_error(path: Path, label: str, encoding: str = "utf-8") -> DataError | None:
    """The first line of a JSON lines file that is not a JSON object (pandas names a character offset, or none)."""
    with open(path, encoding=codec_for(encoding), errors="replace", newline="\n") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line.rstrip("\r\n"))
            except ValueError as bad:
                what = json_error(bad) if isinstance(bad, json.JSONDecodeError) else one_line(bad)
                return DataError(f"not valid JSON ({what}); every line must be one JSON object",
                                 file=label, row=number, unit="line")
            # valid JSON but no record (an array, a string, null): pandas failed with a TypeError naming no line
            if not isinstance(value, dict):
                shown = line.strip()
                shown = shown if len(shown) <= 40 else shown[:37] + "..."
                return DataError(f"{shown} is not a JSON object; every line must be one JSON object "
                                 '(e.g. {"user_id": "u1", "item_id": "i1"})', file=label, row=number, unit="line")
    return None


def _json_array_error(path: Path, label: str, encoding: str = "utf-8") -> DataError | None:
    """The first record of a JSON array file that is not a JSON object (pandas named none), or None."""
    try:
        records = json.loads(read_text(path, encoding).getvalue().lstrip("\ufeff"))
    except ValueError:
        return None  # not JSON at all: pandas' own words say where
    if not isinstance(records, list):
        return None
    for number, value in enumerate(records, 1):
        if not isinstance(value, dict):
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            return DataError(f"{shown} is not a JSON object; every record of the array must be one JSON object "
                             '(e.g. {"user_id": "u1", "item_id": "i1"})', file=label, row=number, unit="record")
    return None


def read_table(
    source: str | Path | pd.DataFrame,
    *,
    name: str | None = None,
    dtype: dict[str, Any] | None = None,
    literal: Iterable[str] = (),
    literal_except: Iterable[str] | None = None,
    encoding: str = "utf-8",
) -> pd.DataFrame:
    """Read a table by file suffix, or copy a DataFrame.

    CSV/TSV/TXT files need a header row; the separator (comma, tab, semicolon or
    ``|``) is sniffed from it. ``.json`` files are read as JSON lines, falling back to a
    JSON array of records. ``dtype`` (CSV only) pins columns, e.g. ids to
    ``str`` so ``"007"`` keeps its zeros. ``literal`` (CSV only) names columns
    read as their text: ``NA``, ``null`` or ``None`` there are values (ids), only
    an empty cell is missing; ``literal_except`` (CSV only) reads every column but the ones it names so (a
    feature table: a film titled ``NA``, a brand ``None``), those keeping pandas' NA strings (numeric
    columns, where ``NA`` means unknown). ``name`` is the label used in errors. ``encoding`` (any Python codec name,
    ``data.encoding``) decodes CSV/TSV/TXT and JSON files; a UTF-8 byte-order mark is skipped.
    """
    return read_table_numbered(source, name=name, dtype=dtype, literal=literal, literal_except=literal_except,
                               encoding=encoding)[0]


def read_table_numbered(
    source: str | Path | pd.DataFrame,
    *,
    name: str | None = None,
    dtype: dict[str, Any] | None = None,
    literal: Iterable[str] = (),
    literal_except: Iterable[str] | None = None,
    encoding: str = "utf-8",
    encoding_setting: str = ENCODING_SETTING,
    nrows: int | None = None,
    each_chunk: EachChunk | None = None,
    chunk_rows: int | None = None,
) -> tuple[pd.DataFrame, RowNumbers]:
    """:func:`read_table`, and how its data positions are numbered in errors (row, line or record).

    ``encoding_setting`` is how the caller's user sets ``encoding``, named in the warning about a UTF-8 file.
    ``nrows`` (CSV/TSV/TXT, JSON lines and Parquet): read only the first that many data rows (None: all of them).
    ``each_chunk(frame, rows)``, when given, turns the frame read (its names stripped) into the one returned;
    with ``chunk_rows`` a CSV/TSV/TXT, Parquet or JSON lines file is read that many rows (lines) at a time, each chunk passed to it as it is read
    (``rows`` numbering the chunk's positions as the file's) and the results concatenated, so that a bad row is
    named as soon as its chunk is read (its counts, "3 row(s) in total", said to be of the rows read).
    """
    label = _label(source, name)
    codec = codec_for(encoding)  # an unknown codec is named before the file is looked at
    if isinstance(source, pd.DataFrame):
        df = source.copy()
        df.attrs = {}
        if isinstance(df.columns, pd.MultiIndex):
            # columns are looked up by one name: a frame of two column levels (a groupby's .agg({...: [...]}), a
            # pivot) crashed with "'tuple' object has no attribute 'lower'" while suggesting a column name
            raise DataError(f"the DataFrame's columns are a MultiIndex ({df.columns.nlevels} levels, e.g. "
                            f"{df.columns[0]!r}), and columns are looked up by one name: flatten them first "
                            "(df.columns = ['_'.join(map(str, c)) for c in df.columns], or df.droplevel(0, axis=1))",
                            file=label)
        # named like a file's header: a frame with two 'user_id' columns failed deep in pandas
        # ("'DataFrame' object has no attribute 'dtype'"), and a feature table with two 'brand'
        # columns as "column 'tags' not found"
        _check_column_names(df, label)
        return (df if each_chunk is None else each_chunk(df, FRAME_ROWS)), FRAME_ROWS
    if not isinstance(source, (str, Path)):
        raise DataError(
            f"expected a file path or a pandas DataFrame, got {type(source).__name__}", file=label
        )
    path = Path(source)
    if not path.exists():
        raise DataError(f"file not found; {CHECK_PATH}", file=label)
    if path.is_dir():
        raise DataError("is a directory, expected a table file", file=label)
    if (pipe := pipe_refusal(path)) is not None:
        raise DataError(pipe, file=label)
    suffix = path.suffix.lower()
    if path.stat().st_size == 0:  # JSON lines have no header row to expect
        wanted = ("JSON records (an array, or one a line)" if suffix == ".json" else
                  "one JSON record a line" if suffix in _JSON_SUFFIXES else "a header row and data rows")
        raise DataError(f"file is empty; expected {wanted}", file=label)
    rows = CSV_ROWS
    json_array = False  # a .json file of one array of records, not JSON lines
    if suffix in _CSV_SUFFIXES or suffix in _JSON_SUFFIXES:
        check_wide_bom(path, label, encoding)
        warn_if_utf8(path, label, encoding, encoding_setting)
    try:
        if suffix in _CSV_SUFFIXES:
            sep = _sniff_sep(path, label, encoding)
            rows = RowNumbers(path=path, sep=sep, encoding=encoding)
            literal = set(literal)
            if literal_except is not None:
                literal_except = set(literal_except)
            # index_col=False: rows one field longer than the header (a trailing separator on every line, as
            # some exporters write) made pandas take the first column as the index, shifting every column one
            # to the left: user_id held the items, item_id the times, and a fourth value became the timestamp
            na: dict[str, Any] = {}
            if literal or literal_except is not None:
                # NA handling per column: literal (id, text) columns treat only an empty cell as missing,
                # every other column keeps pandas' default NA strings (and so its current messages)
                header = pd.read_csv(path, sep=sep, nrows=0, encoding=codec, index_col=False).columns
                if literal_except is not None:
                    literal |= {str(c).strip() for c in header} - literal_except
                na = {"keep_default_na": False,
                      "na_values": {c: ([""] if str(c).strip() in literal else list(PANDAS_NA)) for c in header}}
            if each_chunk is not None and chunk_rows is not None and nrows is None:
                df = _csv_in_chunks(path, label, sep, encoding, rows, each_chunk, chunk_rows,
                                    {"dtype": dtype, "skipinitialspace": False, "encoding": codec, "index_col": False,
                                     **na})
                return df, rows
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", pd.errors.ParserWarning)
                df = pd.read_csv(path, sep=sep, dtype=dtype, skipinitialspace=False, encoding=codec,
                                 index_col=False, nrows=nrows, **na)
            if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
                _check_no_unnamed_values(path, label, sep, encoding, len(df.columns))
            _check_header_repeats(path, label, sep, encoding)
        elif suffix in _PARQUET_SUFFIXES:
            rows = RowNumbers("record", 1)
            if each_chunk is not None and chunk_rows is not None and nrows is None:
                return _parquet_in_chunks(path, label, rows, each_chunk, chunk_rows), rows
            df = _index_as_columns(pd.read_parquet(path if nrows is None else _parquet_head(path, nrows)))
        elif suffix in _JSON_SUFFIXES:
            # a .json file opening with '[' is one array of records; read as lines, a compact array (what
            # DataFrame.to_json(orient="records") and JSON.stringify write) was one line of N columns
            json_array = suffix == ".json" and first_char(path, encoding) == "["
            if json_array:
                df = pd.read_json(read_text(path, encoding), orient="records", dtype=False, convert_dates=False)
                rows = RowNumbers("record", 1)
            else:  # in chunks: pandas' whole-file read took 1.3 GB for 1M records of four fields
                rows = RowNumbers("line", 1, path, encoding=encoding)
                if each_chunk is not None and chunk_rows is not None and nrows is None:
                    return _json_lines_in_chunks(path, label, encoding, rows, each_chunk, chunk_rows), rows
                df = read_json_lines(path, encoding, nrows)
        elif suffix in _COMPRESSED_SUFFIXES:
            raise DataError(f"a compressed file ({suffix!r}) is not read: unpack it first and pass the file inside "
                            f"(e.g. `gunzip -k data.csv.gz`, then data.csv); supported: {_SUPPORTED}", file=label)
        else:
            raise DataError(f"unknown table format {suffix!r}; supported: {_SUPPORTED}", file=label)
    except (DataError, _NoHead):
        raise
    except _ChunkFailed as e:  # each_chunk's own error, not the file's
        raise e.error from None
    except RepeatedKey as e:  # read as the last value, in silence; the config reader refuses a repeated key too
        raise DataError(f"the JSON object names the key {e.key!r} twice; a JSON parser keeps only the last value, "
                        "so give each key once", file=label, row=e.line, unit="line") from None
    except pd.errors.EmptyDataError as e:
        raise DataError("file is empty; expected a header row and data rows", file=label) from e
    except UnicodeDecodeError as e:
        raise decode_error(path, label, e, encoding) from e
    except Exception as e:  # parser errors of pandas/pyarrow/json
        if json_array and isinstance(e, (ValueError, TypeError)):
            record_error = _json_array_error(path, label, encoding)
            if record_error is not None:
                raise record_error from e
        elif suffix in _JSON_SUFFIXES and isinstance(e, (ValueError, TypeError)):
            line_error = _json_lines_error(path, label, encoding)
            if line_error is not None:
                raise line_error from e
        if suffix in _CSV_SUFFIXES and isinstance(e, pd.errors.ParserError):
            ragged = _ragged_row_error(path, label, sep, encoding, str(e))
            if ragged is not None:
                raise ragged from e
        # pandas names the file's line of a ragged row ("Expected 4 fields in line 91, saw 6")
        where = re.search(r"\bline (\d+)\b", str(e)) if isinstance(e, pd.errors.ParserError) else None
        raise DataError(
            f"could not read as {suffix.lstrip('.') or 'table'} ({type(e).__name__}: {_reader_words(e)}); "
            "check the format and the file suffix",
            file=label,
            row=int(where.group(1)) if where else None,
            unit="line",
        ) from e
    if not isinstance(df, pd.DataFrame):  # pragma: no cover - defensive
        raise DataError("did not parse into a table", file=label)
    _check_column_names(df, label, row=1)
    return (df if each_chunk is None else each_chunk(df, rows)), rows


def _reader_words(e: Exception) -> str:
    """The reader's message on one line, without pyarrow's "Could not open Parquet input source '<path>': " (a
    whole read's words; a chunked read's, pq.ParquetFile's, lack it): the file is named once, before them, and a
    corrupt file reads alike whole or in chunks."""
    return re.sub(r"^Could not open Parquet input source '.*?': ", "", one_line(e))


#: ``each_chunk`` of :func:`read_table_numbered`: (chunk, its row numbers) -> frame
EachChunk = Callable[[pd.DataFrame, RowNumbers], pd.DataFrame]


class _ChunkFailed(Exception):
    """Carries an error ``each_chunk`` raised (not a DataError) past the translation of the reader's errors."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _csv_in_chunks(path: Path, label: str, sep: str, encoding: str, rows: RowNumbers, each_chunk: EachChunk,
                   chunk_rows: int, read: dict[str, Any]) -> pd.DataFrame:
    """A CSV file read ``chunk_rows`` rows at a time, each chunk checked by ``each_chunk`` as it is read.

    A bad value at row 200,000 of a 4M-row file was named after the whole file was read and its columns converted
    (3.9 s CPU and 750 MB); a chunk's error now stops the read.
    """
    _check_header_repeats(path, label, sep, encoding)  # before any chunk is looked at, as its names are
    parts: list[pd.DataFrame] = []
    start = 0
    unnamed_checked = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pd.errors.ParserWarning)
        with pd.read_csv(path, sep=sep, chunksize=chunk_rows, **read) as reader:
            for chunk in reader:
                if not unnamed_checked and any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
                    _check_no_unnamed_values(path, label, sep, encoding, len(chunk.columns))
                    unnamed_checked = True
                _check_column_names(chunk, label, row=1)
                try:
                    parts.append(_each(each_chunk, chunk, rows.shifted(start)))
                except DataError as e:  # its counts ("3 row(s) in total") are of the rows read, if rows follow
                    counted = _counted_in(e, start + len(chunk))
                    if counted is e or len(chunk) < chunk_rows or not _more(reader):
                        raise
                    raise counted from e
                start += len(chunk)
    if not parts:  # a header alone: no chunk
        header = pd.read_csv(path, sep=sep, nrows=0, **read)
        _check_column_names(header, label, row=1)
        parts.append(_each(each_chunk, header, rows))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _parquet_in_chunks(path: Path, label: str, rows: RowNumbers, each_chunk: EachChunk,
                       chunk_rows: int) -> pd.DataFrame:
    """A Parquet file read ``chunk_rows`` records at a time, each chunk converted as pandas converts the whole file
    and checked by ``each_chunk`` as it is read (:func:`_csv_in_chunks`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    schema = pf.schema_arrow  # with pandas' metadata: its index, its dtypes

    def frame(batches: list[Any]) -> pd.DataFrame:
        chunk = _index_as_columns(_arrow_to_pandas(pa.Table.from_batches(batches, schema=schema)))
        _check_column_names(chunk, label, row=1)
        return chunk

    parts: list[pd.DataFrame] = []
    start = 0
    for batch in pf.iter_batches(batch_size=chunk_rows):
        chunk = frame([batch])
        try:
            parts.append(_each(each_chunk, chunk, rows.shifted(start)))
        except DataError as e:  # its counts ("3 record(s) in total") are of the records read, if records follow
            counted = _counted_in(e, start + len(chunk))
            if counted is e or start + len(chunk) >= pf.metadata.num_rows:
                raise
            raise counted from e
        start += len(chunk)
    if not parts:  # no records: the columns alone
        parts.append(_each(each_chunk, frame([]), rows))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _json_lines_in_chunks(path: Path, label: str, encoding: str, rows: RowNumbers, each_chunk: EachChunk,
                          chunk_lines: int) -> pd.DataFrame:
    """A JSON lines file read ``chunk_lines`` lines at a time, each chunk's column types inferred over the chunk, and
    checked by ``each_chunk`` as it is read (:func:`_csv_in_chunks`): its first rows alone were checked, and a bad
    value past them was named after the whole file was read and converted, where a CSV file's was named at once.

    A key the first chunk's records have and a later chunk's lack is null there, as in a whole read; a key first
    met in a later chunk comes as a column of that chunk (``each_chunk`` tells whether it matters)."""
    parts: list[pd.DataFrame] = []
    start = 0
    keys: list[str] | None = None
    chunks = json_line_chunks(path, encoding, chunk_lines)
    for chunk in chunks:
        _check_column_names(chunk, label, row=1)
        if keys is None:
            keys = list(chunk.columns)
        else:
            absent = [k for k in keys if k not in chunk.columns]
            if absent:
                chunk = chunk.assign(**{k: np.nan for k in absent})
            keys += [k for k in chunk.columns if k not in keys]
        try:
            parts.append(_each(each_chunk, chunk, rows.shifted(start)))
        except DataError as e:  # its counts ("3 line(s) in total") are of the lines read, if records follow
            counted = _counted_in(e, rows.number(start + len(chunk) - 1))
            if counted is e or not _more(chunks):
                raise
            raise counted from e
        start += len(chunk)
    if not parts:  # no records (blank lines): pandas' whole-file read says what it makes of them
        whole = read_json_lines(path, encoding)
        _check_column_names(whole, label, row=1)
        parts.append(_each(each_chunk, whole, rows))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _arrow_to_pandas(table: Any) -> pd.DataFrame:
    """An Arrow table as :func:`pandas.read_parquet` converts the one it reads (its string dtype, its time zones)."""
    try:
        from pandas.io._util import arrow_table_to_pandas
    except ImportError:  # pandas before 2.3: read_parquet's own table.to_pandas()
        return table.to_pandas()
    return arrow_table_to_pandas(table)


def _more(reader: Any) -> bool:
    """Whether a chunked read has rows left (the error path only: it reads the next chunk)."""
    try:
        return len(next(reader)) > 0
    except StopIteration:
        return False
    except Exception:  # a next chunk that fails to parse is there
        return True


def _each(each_chunk: EachChunk, chunk: pd.DataFrame, rows: RowNumbers) -> pd.DataFrame:
    try:
        return each_chunk(chunk, rows)
    except DataError:
        raise
    except Exception as e:
        raise _ChunkFailed(e) from e


class _NoHead(Exception):
    """A Parquet file's first rows could not be taken apart from the file: the head check is left out."""


def _parquet_head(path: Path, nrows: int) -> io.BytesIO:
    """The first ``nrows`` records of a Parquet file as a Parquet file of its own (schema and pandas metadata kept),
    so that pandas converts them as it converts the whole file."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        batch = next(pf.iter_batches(batch_size=nrows), None)
        table = pa.Table.from_batches([] if batch is None else [batch], schema=pf.schema_arrow)
        out = io.BytesIO()
        pq.write_table(table, out)
    except Exception as e:  # whatever it is, the whole file's read says it in its words
        raise _NoHead from e
    out.seek(0)
    return out


def _index_as_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A Parquet file's named index as columns: pandas writes ``df.set_index("user_id")`` with the ids as the
    index and reads them back so, and the user column of that file was "not found" among the columns."""
    names = [n for n in df.index.names if n is not None]
    if not names or any(str(n) in map(str, df.columns) for n in names):
        return df
    return df.reset_index()


def _check_no_unnamed_values(path: Path, label: str, sep: str, encoding: str, width: int) -> None:
    """Refuse a row with values beyond the header's columns (pandas drops them with a warning).

    Such values belong to no column: a header missing a name, or a separator inside an unquoted value. Empty
    extra fields (a trailing separator) lose nothing and are let through.
    """
    with open(path, newline="", encoding=codec_for(encoding), errors="replace") as fh:
        for number, rec in enumerate(csv.reader(fh, delimiter=sep), 1):
            if number > 1 and len(rec) > width and any(v.strip() for v in rec[width:]):
                raise DataError(f"{len(rec)} fields, but the header names {width} columns: the value(s) "
                                f"{rec[width:]!r} belong to no column; give every column a name in the header, or "
                                "quote a value that holds the separator", file=label, row=number)


def _ragged_row_error(path: Path, label: str, sep: str, encoding: str, message: str) -> DataError | None:
    """The error for a row after the first with more fields than the header, from pandas' words, or None.

    pandas refuses such a row with "Error tokenizing data. C error: Expected 3 fields in line 4, saw 4", which was
    passed on with "check the format and the file suffix" under the name "line 4"; its number counts records (a
    quoted line break does not start one, a blank line does), so after a quoted line break it named a line above
    the row. The row's values and the editor's line it starts on are found here.
    """
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message)
    if m is None:
        return None
    width, number, seen = (int(g) for g in m.groups())
    extra: list[str] = []
    line = number
    with open(path, newline="", encoding=codec_for(encoding), errors="replace") as fh:
        reader = csv.reader(fh, delimiter=sep)
        for n, rec in enumerate(reader, 1):
            if n == number:
                extra = rec[width:]
                break
            line = reader.line_num + 1  # the physical line the next record starts on
    if any(v.strip() for v in extra):
        what = (f"the value(s) {extra!r} belong to no column; give every column a name in the header, or quote a "
                "value that holds the separator")
    else:  # a trailing separator on every row is read; on some rows only, pandas stops at the first
        what = "the extra field is empty, a separator at the end of this row: remove it (or end every row with one)"
    return DataError(f"{seen} fields, but the header names {width} columns: {what}", file=label, row=line,
                     unit="line")


def _check_header_repeats(path: Path, label: str, sep: str, encoding: str) -> None:
    """Refuse a header naming a column twice: pandas renames the second 'item_id' to 'item_id.1', so the check on
    the read names saw none, and the first was read as the items with the other left out without a word."""
    with open(path, newline="", encoding=codec_for(encoding), errors="replace") as fh:
        header = next(csv.reader(fh, delimiter=sep), [])
    names = [n.lstrip("\ufeff").strip() for n in header]
    dup = sorted({n for n in names if n and names.count(n) > 1})
    if dup:
        raise DataError(f"duplicate column name(s) {dup} (after stripping spaces); give every column its own name",
                        file=label, row=1)


def _check_column_names(df: pd.DataFrame, label: str, *, row: int | None = None) -> None:
    """Column names as text without surrounding spaces (in place); DataError naming any that repeat.

    ``row``: where the names are (a file's header line); None for a DataFrame, whose names are in no row.
    """
    df.columns = [str(c).strip() for c in df.columns]
    dup = sorted({c for c in df.columns if list(df.columns).count(c) > 1})
    if dup:
        raise DataError(
            f"duplicate column name(s) {dup} (after stripping spaces); give every column its own name", file=label, row=row
        )


def _close_matches(column: str, present: Iterable[str]) -> list[str]:
    present = list(present)
    lower = {c.lower(): c for c in present}
    out = [lower[column.lower()]] if column.lower() in lower else []
    out += [c for c in difflib.get_close_matches(column, present, n=3, cutoff=0.5) if c not in out]
    return out


#: the setting a user types to name the column of each role (what the error message points at)
ROLE_SETTINGS = {
    "user": "data.user_col", "item": "data.item_col", "timestamp": "data.timestamp_col", "rating": "data.rating_col",
    "title": "data.title_col", "key": "data.item_key / data.user_key",
    "item key": "data.item_key", "user key": "data.user_key",
    "categorical": "data.item_categorical / data.user_categorical", "numeric": "data.item_numeric / data.user_numeric",
    "multi-valued": "data.item_multi / data.user_multi", "text": "data.item_text",
    # a feature column of a table whose kind is known: the one setting that lists it
    "item categorical": "data.item_categorical", "user categorical": "data.user_categorical",
    "item numeric": "data.item_numeric", "user numeric": "data.user_numeric",
    "item multi-valued": "data.item_multi", "user multi-valued": "data.user_multi", "item text": "data.item_text",
    # twotower search prepare: its tables are named by flags
    "passage id": "--passage-id-col", "passage text": "--passage-text-col", "passage title": "--passage-title-col",
    "query": "--query-col", "relevant passage id": "--pair-passage-col", "query id": "--query-id-col",
    "score": "--score-col", "split": "--split-col",
}


#: roles of a feature table's columns, listed in a setting that holds several (data.item_numeric = ["year", ...])
_LIST_ROLES = ("categorical", "numeric", "multi-valued", "text")

#: a UTF-8 byte-order mark decoded as cp1252 or latin-1 (the same three characters in both)
_BOM_MISREAD = codecs.BOM_UTF8.decode("latin-1")


def _utf8_bom_misread(present: list[str]) -> str | None:
    """Why a header's first name starts with 'ï»¿': a UTF-8 file (Excel's "CSV UTF-8") read in a legacy encoding.

    The suggestion was that very name ("did you mean 'ï»¿question'? Set --query-col=NAME"), which would only
    have read the rest of the file's accents wrong too; the setting to change is the encoding.
    """
    if not present or not str(present[0]).startswith(_BOM_MISREAD):
        return None
    return (f"The first, {present[0]!r}, opens with a UTF-8 byte-order mark read in another encoding: the file is "
            "UTF-8 (Excel's 'CSV UTF-8'). Set data.encoding=utf-8 (it applies to every file: re-save the others "
            "in UTF-8 too), or re-save this one in the encoding set")


def missing_column_error(
    column: str, present: Iterable[str], *, file: str, role: str = "", taken: Iterable[str] = (),
    index_names: Iterable[Any] = (),
) -> DataError:
    """A DataError for an absent column, listing present columns and close matches.

    Columns in ``taken`` already play another role (the user column is no
    suggestion for the item column); the fix names the setting to type.
    ``index_names``: a DataFrame's ``df.index.names``; one named ``column``
    is where the values are, and the fix is ``df.reset_index()``.
    """
    present = list(present)
    taken = set(taken)
    what = f" (the {role} column)" if role else ""
    in_index = _index_holding(column, index_names)
    if in_index is not None:
        return DataError(f"column {column!r}{what} not found; columns present: {present}, but {in_index}", file=file,
                         column=column)
    misread = _utf8_bom_misread(present)
    if misread is not None:
        return DataError(f"column {column!r}{what} not found; columns present: {present}. {misread}", file=file,
                         column=column)
    close = _close_matches(column, [c for c in present if c not in taken])
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "."
    setting = ROLE_SETTINGS.get(role)
    if setting and role.endswith(_LIST_ROLES):  # a list of columns: the name is corrected in it, not set
        fix = f" Correct the name in {setting}, or rename the column."
    else:
        fix = f" Set {setting}=NAME to the right column, or rename the column." if setting else " Rename the column."
    fix += _no_column_hint(column, role)
    return DataError(
        f"column {column!r}{what} not found; columns present: {present}{hint}{fix}",
        file=file,
        column=column,
    )


#: roles whose column is optional (null: the data has none), by the setting naming it
_OPTIONAL_ROLES = {"timestamp": "timestamp_col", "rating": "rating_col", "title": "title_col",
                   "item key": "item_key", "user key": "user_key"}


#: `search prepare`'s optional column flags (PrepareConfig's None defaults): a flag left out reads no such column
_PREPARE_OPTIONAL_ROLES = {"passage title": "passages without a title", "query id": "one id per distinct query text",
                           "relevant passage id": "the --passage-id-col name", "score": "relevance 1 for every pair",
                           "split": "queries split by --test-share"}


def _no_column_hint(column: str, role: str) -> str:
    """How to say "no column" in each place a setting is written, when the column looked for is 'none' / 'null'
    (for `search prepare`'s flags: leave the flag out).

    `data.rating_col=none` on the command line is the text "none" (a column may be named so), and a YAML or JSON
    file's "none" in quotes too: the error only said to set the name, which the user believed they had done."""
    if str(column).lower() not in ("none", "null"):
        return ""
    if role in _PREPARE_OPTIONAL_ROLES:  # `search prepare --score-col none` looked for a column called 'none'
        flag = ROLE_SETTINGS[role]
        return f" To read no {role} column, leave {flag} out (its default: {_PREPARE_OPTIONAL_ROLES[role]})."
    key = _OPTIONAL_ROLES.get(role)
    if key is None:
        return ""
    return (f" To leave data.{key} unset: `data.{key}=null` on the command line, `{key} = \"none\"` under [data] in a "
            f"TOML file, `{key}: null` in YAML, `\"{key}\": null` in JSON.")


def _index_holding(column: str, index_names: Iterable[Any]) -> str | None:
    """The clause saying a DataFrame's index is named ``column`` (None when none of its levels is).

    ``df.set_index("user_id")`` (or a groupby's result) holds the ids in the index, which no column lookup sees:
    "column 'user_id' not found" left the user looking for a typo in a name that was right there."""
    names = list(index_names)
    if not any(n is not None and str(n) == column for n in names):
        return None
    if len(names) == 1:
        return f"the DataFrame's index is named {column!r}: call df.reset_index() to make it a column."
    return (f"the DataFrame's MultiIndex has a level named {column!r} (levels {names}): call df.reset_index() to "
            "make its levels columns.")


#: users with at least this many rows are checked for id-sorted "time" order; more than half of them, and at least
#: _SORTED_MIN_USERS, is a sort (ML-1M's SASRec file: 1 user of 6,040; Book-Crossing's ratings: 99.9%)
_SORTED_MIN_ROWS, _SORTED_MIN_USERS = 5, 20


# ``format`` choices of read_interactions (defined with data.format in config.py): ``auto`` (a
# ``.txt`` file whose first line is two integers is SASRec format, anything else a table),
# ``table`` (header row, by suffix) or ``sasrec`` (``user item`` integers, file order = time order).
_SASREC_LINE = re.compile(rb"^\s*[+-]?\d+\s+[+-]?\d+\s*$")


def is_sasrec_file(path: str | Path, encoding: str = "utf-8") -> bool:
    """True for a ``.txt`` file whose first non-empty line is two integers (``user item``, no header)."""
    p = Path(path)
    if p.suffix.lower() != ".txt" or not p.is_file():
        return False
    try:
        with open(p, encoding=codec_for(encoding), errors="replace", newline="\n") as fh:
            for line in fh:
                if line.strip():
                    return bool(_SASREC_LINE.match(line.encode("utf-8")))
    except UnicodeError:  # utf-16 without a byte-order mark ("errors" does not cover it): the reader names the fix
        return False
    return False


def _space_separated_pairs(header: list[str], label: str) -> DataError | None:
    """The error for a file of two (or more) white-space separated fields per line, or None.

    Read as a table, such a file is one column named after its first line ('u1 i1'), and the message was that
    column 'user_id' is missing, listing that one odd column; its maker needs to hear which two formats exist.
    Three fields ('user_id item_id timestamp', '1 1 978300760') got that message still, with "Set
    data.user_col=NAME", which no setting satisfies: white space is no table separator.
    """
    if len(header) != 1 or len(header[0].split()) < 2:
        return None
    fields = len(header[0].split())
    count = "two" if fields == 2 else str(fields)
    return DataError(f"{header[0]!r} is {count} fields separated by white space: a table needs a header row and comma, "
                     "tab, ';' or '|' between fields (ids may be any text), and headerless 'user item' lines "
                     "(SASRec format, file order = time order) are exactly two integer ids", file=label, row=1,
                     unit="line")


def _double_colon_fields(header: list[str], label: str) -> DataError | None:
    """The error for a file whose fields are separated by '::' (MovieLens-1M's ratings.dat), or None.

    Renamed to .csv, such a file read as one column named after its first line ('1::1193::5::978300760'), and the
    message said "Set data.user_col=NAME to the right column", which no setting satisfies.
    """
    if len(header) != 1 or "::" not in str(header[0]):
        return None
    fields = len(str(header[0]).split("::"))
    return DataError(f"{header[0]!r} is {fields} fields separated by '::' (as MovieLens' .dat files are): a table needs "
                     "comma, tab, ';' or '|' between fields and a header row naming them; convert the file first "
                     "(a first line naming its columns, and every '::' replaced by ',')",
                     file=label, row=1, unit="line")


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _headerless(header: list[str], label: str) -> DataError | None:
    """The error for a table whose first line is data (MovieLens' u.data as a .tsv), or None.

    Its "columns" are the first row's numbers, and the message was that column 'user_id' is missing, with
    "Set data.user_col=NAME to the right column" among columns named '196', '242', '3', '881250949'.
    """
    if len(header) < 2 or not all(_NUMBER.fullmatch(str(c).strip()) for c in header):
        return None
    shown = ", ".join(str(c) for c in header[:4]) + (", ..." if len(header) > 4 else "")
    return DataError(f"the first line ({shown}) holds numbers, not column names: the file has no header row; add a "
                     "first line naming its columns with the file's separator, e.g. user_id, item_id, rating, "
                     "timestamp for a file laid out as MovieLens' u.data (data.user_col=... and the like map other "
                     "names)", file=label, row=1, unit="line")


def _numbers_in_header(header: list[str]) -> str:
    """A hint for a header of which some names are numbers (``c196,sku-00242,881250949,3``), or "".

    A headerless file with text ids is not all numbers, so :func:`_headerless` let it through, and the message
    said "Set data.user_col=NAME to the right column" among the first row's values: following it (user_col=c196)
    read the first interaction as the header and dropped it, and the unnamed time column with it.
    """
    numbers = [str(c).strip() for c in header if _NUMBER.fullmatch(str(c).strip())]
    if not numbers:
        return ""
    shown = ", ".join(numbers[:4]) + (", ..." if len(numbers) > 4 else "")
    return (f" The first line holds numbers where column names go ({shown}): if it is the first row of data, the "
            "file has no header row; add a first line naming its columns with the file's separator (e.g. "
            "user_id, item_id, timestamp, rating) rather than naming its values in data.user_col and the like.")


def read_sasrec(source: str | Path, *, name: str | None = None, encoding: str = "utf-8") -> pd.DataFrame:
    """Read a SASRec-format file into the canonical frame ``[user_id, item_id, timestamp, rating]``.

    The format (SASRec, BERT4Rec, SASRec+, gSASRec): one ``user item`` pair of
    integers per line, separated by white space, no header, each user's lines in
    time order. There are no timestamps, so ``timestamp`` is the line's ordinal
    within its user (0, 1, 2, ...): every split and history reader, which order
    by ``(user, timestamp)``, then keeps the file order exactly. Ratings are 1.0.
    Errors name the 1-based line (there is no header). ``encoding`` is ``data.encoding``.
    """
    label = _label(source, name)
    codec = codec_for(encoding)
    path = Path(source)
    if not path.exists():
        raise DataError(f"file not found; {CHECK_PATH}", file=label)
    if path.is_dir():
        raise DataError("is a directory, expected a SASRec-format file of 'user item' lines", file=label)
    if (pipe := pipe_refusal(path)) is not None:
        raise DataError(pipe, file=label)
    check_wide_bom(path, label, encoding)
    try:
        # dtype=str keeps "007" and huge ids verbatim; blank lines stay as all-NaN rows so positions are line numbers
        raw = pd.read_csv(path, sep=r"\s+", header=None, dtype=str, skip_blank_lines=False, engine="c",
                          encoding=codec)
    except pd.errors.EmptyDataError as e:
        raise DataError("file is empty; expected 'user item' lines (SASRec format)", file=label) from e
    except UnicodeDecodeError as e:
        raise decode_error(path, label, e, encoding) from e
    except pd.errors.ParserError as e:  # a line with more fields than the first: pandas names the line
        # in its own words ("Error tokenizing data. C error: Expected 2 fields in line 20, saw 3\n"): said as
        # the line-1 check says it, with the row
        m = re.search(r"Expected \d+ fields in line (\d+), saw (\d+)", str(e))
        if m is None:
            raise DataError(f"not SASRec format ({str(e).strip()}); every line must be exactly 'user item' "
                            "(two integers)", file=label) from e
        raise DataError(f"{m[2]} fields; SASRec format is exactly 'user item' (two integers) per line",
                        file=label, row=int(m[1]), unit="line") from e
    # trailing blank lines at the end of the file are harmless; any other blank line is an error below
    present = raw.notna().any(axis=1).to_numpy()
    last = int(np.flatnonzero(present)[-1]) + 1 if present.any() else 0
    raw = raw.iloc[:last]
    if len(raw) == 0:
        raise DataError("file is empty; expected 'user item' lines (SASRec format)", file=label)
    if raw.shape[1] != 2:
        raise DataError(f"{raw.shape[1]} fields; SASRec format is exactly 'user item' (two integers) per line",
                        file=label, row=1, unit="line")
    for col, role in ((0, "user"), (1, "item")):
        values = raw[col]
        bad = ~values.fillna("").str.fullmatch(_INT_TEXT).to_numpy(dtype=bool)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            got = values.iloc[pos]
            what = "missing" if not isinstance(got, str) else f"{got!r} is not an integer"
            if not isinstance(got, str) and raw.iloc[pos].isna().all():
                what += " (a blank line)"
            # "line", not "row": the file has no header, and the number is the line an editor shows
            raise DataError(f"{role} id {what}; SASRec format is 'user item' (two integers) per line",
                            file=label, row=pos + 1, column=role, unit="line")
    # "+7" and "007" name the same id as "7": canonical ids are the integers' decimal text
    users, items = _canonical_ints(raw[0]), _canonical_ints(raw[1])
    ordinal = users.groupby(users, sort=False).cumcount().to_numpy(dtype=np.int64)
    df = pd.DataFrame(
        {
            "user_id": users.astype(str).reset_index(drop=True),  # Arrow text as read: not rebuilt from NumPy's
            "item_id": items.astype(str).reset_index(drop=True),
            "timestamp": pd.Series(ordinal, dtype="int64"),
            "rating": pd.Series(np.ones(len(raw), np.float32), dtype="float32"),
        }
    )
    report = {
        "file": label,
        "format": "sasrec",
        "rows_read": len(df),
        "rows": len(df),
        "duplicates_dropped": 0,
        "conflicting_duplicates_dropped": 0,
        "users": int(df["user_id"].nunique()),
        "items": int(df["item_id"].nunique()),
        "timestamp_source": "line order within each user (SASRec format has no timestamps)",
        "rating_source": "constant 1.0 (SASRec format)",
    }
    df.attrs["report"] = report
    log.info("read %s (SASRec format): %d rows, %d users, %d items; timestamps = line order within each user",
             label, len(df), report["users"], report["items"])
    _warn_sorted_by_id(label, users, items)
    return df


#: integer text that is not its integer's decimal text: a sign '+', a leading zero, '-0'
_NOT_CANONICAL_INT = r"\+|-0|0\d"


def _canonical_ints(values: pd.Series) -> pd.Series:
    """Integer texts (checked) as their integers' decimal text, ``str(int(v))``: only those written otherwise
    ("+7", "007", "-0") are converted one by one; all of them so took 1.7 s of ML-1M's 3.3 s read."""
    odd = values.str.match(_NOT_CANONICAL_INT).to_numpy(dtype=bool)
    if not odd.any():
        return values
    values = values.astype(object)
    values[odd] = [str(int(v)) for v in values[odd].tolist()]
    return values


def _warn_nonpositive_ratings(label: str, column: str, rating: np.ndarray, rows: RowNumbers,
                              use: str | None = None) -> None:
    """A rating of 0 or less (a return as a negative quantity, a dislike, an order of 0) is read like any other,
    and training counts every row as a positive: an e-commerce log's returns trained as purchases without a word.
    A file read as ``use`` (a run's held-out pairs, a history) is told what its rows count as there: "these train
    as positives too" was said of a test file's rows, which are held out, not trained on."""
    low = rating <= 0
    if not low.any():
        return
    pos = int(np.flatnonzero(low)[0])
    if use is None:
        counts = ("training counts every row as a positive interaction and does not read ratings, so these train as "
                  "positives too: drop them first if they are not (returns, dislikes), or set data.rating_col=null "
                  "to read no rating")
    else:
        counts = (f"the file is read as {use}, which does not read ratings, so these count as the others do: drop "
                  "them from the file first if they should not (returns, dislikes)")
    log.warning("%s: %d row(s) of column %r hold a rating of 0 or less (e.g. %s %d: %g); %s",
                label, int(low.sum()), column, rows.unit, rows.number(pos), float(rating[pos]), counts)


def _warn_sorted_by_id(label: str, users: pd.Series, items: pd.Series) -> None:
    """File order stands in for time: say so when most users' rows are sorted by item id, not by time.

    Leave-last would then hold out each user's largest id rather than their latest item, and the
    sequence towers would learn id order.
    """
    item_codes, distinct = pd.factorize(items)  # ids are compared per distinct value: a million rows, few ids
    numbers = pd.to_numeric(pd.Series(distinct), errors="coerce")
    key = (numbers.to_numpy() if not numbers.isna().any() else np.asarray(distinct, dtype=object))[item_codes]
    codes, _ = pd.factorize(users)
    order = np.argsort(codes, kind="stable")  # each user's rows together, in file order
    c, k = codes[order], key[order]
    same = c[1:] == c[:-1]
    rises = np.asarray(k[1:] > k[:-1], dtype=bool)
    unsorted = np.zeros(codes.max() + 1 if len(codes) else 0, dtype=bool)
    unsorted[c[1:][same & ~rises]] = True
    checked = np.bincount(codes) >= _SORTED_MIN_ROWS
    n_sorted, n_checked = int((checked & ~unsorted).sum()), int(checked.sum())
    if n_checked >= _SORTED_MIN_USERS and n_sorted * 2 > n_checked:
        log.warning("%s: %d of %d users with %d+ rows list their items in increasing id order, so the file looks "
                    "sorted by item id, and file order is taken as time order here: leave-last would hold out each "
                    "user's largest id, not their latest item. Add a timestamp column, or shuffle each user's rows "
                    "(a random leave-one-out) if the data has no time", label, n_sorted, n_checked, _SORTED_MIN_ROWS)


def _warn_float_spelled_ids(label: str, column: str, ids: pd.Series) -> None:
    """Say so when one column holds an id both as ``12`` and as ``12.0`` (rows that went through a float column,
    e.g. pandas' export of an id column with a blank): ids are text, so they are two users or items."""
    # the distinct ids, in order of first appearance, found on the column itself: pd.unique of its Python strings
    # took 5 s per column at 10M rows (0.3 s on the Arrow strings); the few distinct ones are matched as objects
    uniq = pd.Series(ids.unique(), dtype=object)
    spelled = uniq[uniq.str.fullmatch(r"[+-]?\d+\.0+").fillna(False).to_numpy(dtype=bool)]
    if spelled.empty:
        return
    whole = spelled.str.split(".", n=1).str[0]
    twins = whole.isin(set(uniq)).to_numpy(dtype=bool)
    if twins.any():
        first = int(np.flatnonzero(twins)[0])
        log.warning("%s, column %r: %d id(s) are written both as an integer and with a trailing .0 (e.g. %r and %r); "
                    "ids are text, so they are read as different ids: write each id one way", label, column,
                    int(twins.sum()), whole.iloc[first], spelled.iloc[first])


def _warn_constant_time(label: str, users: pd.Series, ts: np.ndarray, column: str) -> None:
    """A timestamp column that gives most users one time for all their rows orders nothing: say so.

    Their rows are then ordered by the tie-break, item id (splits, histories): a temporal or leave-last
    split holds out each user's largest ids rather than their latest items, and the sequence towers learn id
    order -- silently, where a missing column or an id-sorted file is warned about.
    """
    codes, _ = pd.factorize(users)
    if len(codes) == 0:
        return
    per_user = pd.Series(ts).groupby(codes).agg(["min", "max", "size"])
    checked = per_user["size"].to_numpy() >= _SORTED_MIN_ROWS
    constant = checked & (per_user["min"].to_numpy() == per_user["max"].to_numpy())
    n_constant, n_checked = int(constant.sum()), int(checked.sum())
    if n_checked >= _SORTED_MIN_USERS and n_constant * 2 > n_checked:
        log.warning("%s: %d of %d users with %d+ rows have one %r value for all their rows, so nothing orders their "
                    "rows in time and ties go by item id: a temporal or leave-last split holds out each user's "
                    "largest item ids, not their latest items, and histories are read in id order. If each user's "
                    "rows are in time order in the file, set data.timestamp_col=null to use that order; if the data "
                    "has no order, use a random split (data.split=random; data split --method random)", label, n_constant, n_checked,
                    _SORTED_MIN_ROWS, column)


def _warn_placeholder_times(label: str, ts: np.ndarray, raw: pd.Series, column: str, rows: RowNumbers,
                            time_unit: str, written: dict[int, Any] | None = None) -> None:
    """Say so when a column of times after 1973 holds some before it: a 0 for "unknown", or a date written as a
    number (19980301 is August 1970 in seconds). They were read as times of 1970 without a word, and each such row
    became its user's oldest event (the first in train, the first of every history). ``written``: values as the
    file writes them where ``raw`` holds them parsed (a chunked read's dates), by data position."""
    if len(ts) == 0:
        return
    unit = time_unit if time_unit != "auto" else detect_unit(ts)
    start = BAND_START_S * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    if np.median(ts) < start:  # data of 1970-1973 (or ordinals): nothing to tell apart
        return
    early = np.flatnonzero(ts < start)
    if early.size:
        pos = int(early[0])
        log.warning("%s: %d timestamp(s) in column %r are before 1973 (e.g. %s %d: %s, read as %s) while the column's "
                    "median is %s: a placeholder such as 0 for an unknown time, or a date written as a number (19980301 "
                    "for 1998-03-01), sorts as its user's oldest event; fix or drop those rows", label, early.size,
                    column, rows.unit, rows.number(pos), (written or {}).get(pos, raw.iloc[pos]), date_text(int(ts[pos]), unit),
                    date_text(int(np.median(ts)), unit))


#: What the interactions' reader does without a column of a role, and what a column named like one is told:
#: (the words of such a name, what is done instead, what they look like, what setting it shows, what null says)
_UNMAPPED = {
    "timestamp": (_TIME_WORDS, "each user's rows are taken in file order as their time order", "times", "use it",
                  "keep the file order"),
    # a `weight` column beside data.rating_col's default `rating` was replaced by 1.0 in the split files
    "rating": (_RATING_WORDS, "every row is given the rating 1.0 (what the split files keep)", "ratings or weights",
               "keep it", "say there is none"),
}


def _warn_unmapped_like(label: str, present: list[str], used: set[str | None], looked_for: str, role: str) -> None:
    """No ``role`` column under the name looked for: say so when a column the user may have meant is right there."""
    words, instead, kind, use, none = _UNMAPPED[role]
    like = [c for c in present if c not in used and _named_like(c, words)]
    if like:
        log.warning("%s: no %r column, so %s; %s look%s like %s: set data.%s_col=%s to %s, or data.%s_col=null to %s",
                    label, looked_for, instead, ", ".join(repr(c) for c in like), "s" if len(like) == 1 else "", kind,
                    role, like[0], use, role, none)


def read_interactions(
    source: str | Path | pd.DataFrame,
    columns: ColumnMap = ColumnMap(),
    *,
    name: str | None = None,
    format: str = "auto",
    encoding: str = "utf-8",
    time_unit: str = "auto",
    use: str | None = None,
    log_every_s: float | None = None,
) -> pd.DataFrame:
    """Read interactions into the canonical frame ``[user_id, item_id, timestamp, rating]``.

    Rows repeating an earlier row's ``(user_id, item_id, timestamp)``, the time as the file writes it (before
    a fraction is floored), are dropped (first kept): exact duplicates are counted in ``duplicates_dropped``, repeats
    with a different rating in ``conflicting_duplicates_dropped`` and logged as a
    warning naming the file and rows. ``df.attrs["report"]`` holds ``rows_read``,
    ``rows``, ``duplicates_dropped``, ``conflicting_duplicates_dropped``,
    ``users``, ``items``, ``timestamp_source`` and ``rating_source``.

    ``format`` is one of :data:`INTERACTION_FORMATS`: ``"sasrec"`` reads
    headerless ``user item`` lines (:func:`read_sasrec`; ``columns`` is not
    used), ``"table"`` a table with a header, and ``"auto"`` picks SASRec for a
    ``.txt`` file whose first line is two integers.

    ``encoding`` (``data.encoding``) decodes text files. ``time_unit`` (``data.time_unit``): ``auto`` keeps
    dates in the unit of the column's numbers (seconds without numbers); ``s``/``ms``/``us``/``ns`` puts them
    in that unit, the one the numbers are declared to be in.

    ``use`` says what the file is read as where its ratings are not used (a trained run's held-out pairs or input
    history, e.g. ``"held-out relevant pairs"``): a rating that is missing or not a number is then read as missing
    (NaN) with a warning, not refused. None (training data, a split's input): such a rating is refused.

    ``log_every_s``: seconds between progress lines (rows read, ETA) while a file large enough to be read in chunks
    is read (a bar on a terminal); None: none.
    """
    if not isinstance(columns, ColumnMap):
        raise ConfigError(f"columns must be a ColumnMap, got {type(columns).__name__}")
    if format not in INTERACTION_FORMATS:
        raise ConfigError(f"format must be one of {', '.join(INTERACTION_FORMATS)}, got {format!r}")
    if time_unit not in TIME_UNITS:
        raise ConfigError(f"time_unit must be one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    codec_for(encoding)
    if format == "sasrec" or (format == "auto" and isinstance(source, (str, Path)) and is_sasrec_file(source, encoding)):
        if isinstance(source, pd.DataFrame):
            raise ConfigError("format='sasrec' reads a file; a DataFrame is already a table (use format='table')")
        return read_sasrec(source, name=name, encoding=encoding)
    return _read_table_interactions(source, columns, name=name, encoding=encoding, time_unit=time_unit, use=use,
                                    log_every_s=log_every_s)


#: an interactions file (CSV/TSV, Parquet, JSON lines) of more than this many bytes is read and checked CHUNK_ROWS
#: rows (JSON lines: lines) at a time, so that a bad row anywhere is named soon after it is read; a feature table
#: (:func:`check_head`) has its first HEAD_ROWS rows read and checked before the whole file is read
HEAD_CHECK_BYTES = 64 << 20
HEAD_ROWS = 100_000
CHUNK_ROWS = 250_000

#: the time below which :func:`_warn_placeholder_times` calls a time a placeholder, as a date
_BAND_START = pd.Timestamp(BAND_START_S, unit="s", tz="UTC")


class _ThisThread(logging.Filter):
    """Drops the records this thread logs (the head check's warnings: the whole file's read gives them)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


def check_head(source: Any, read_head: Callable[[int], object], *, encoding: str = "utf-8", csv_too: bool = True,
               parquet_too: bool = True, loggers: Iterable[logging.Logger] = ()) -> None:
    """``read_head(HEAD_ROWS)`` (a read of the file's first rows that checks them) when ``source`` is a CSV/TSV
    (with ``csv_too``), JSON lines or Parquet (with ``parquet_too``) file of more than :data:`HEAD_CHECK_BYTES`,
    raising the DataError it gives, its counts ("3 row(s) in total") said to be of the rows read. What it logs here
    and on ``loggers`` is dropped: the whole file's read says it."""
    if not isinstance(source, (str, Path)):
        return
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix not in _JSON_SUFFIXES and not (parquet_too and suffix in _PARQUET_SUFFIXES) \
            and not (csv_too and suffix in _CSV_SUFFIXES):
        return
    try:
        if not path.is_file() or path.stat().st_size <= HEAD_CHECK_BYTES:
            return
        if suffix == ".json" and first_char(path, encoding) == "[":
            return  # one JSON array: no head without reading it all
    except (OSError, UnicodeError, ValueError):
        return  # the whole file's read names it
    quiet = _ThisThread()
    loggers = [log, *loggers]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        read_head(HEAD_ROWS)
    except _NoHead:
        return
    except DataError as e:
        counted = _counted_in(e, HEAD_ROWS)
        if counted is e:
            raise
        raise counted from e
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


_BANDS = ("s", "ms", "us", "ns")


class _UnitTally:
    """The epoch units of a chunked read's timestamps, chunk by chunk, to refuse a column of mixed units (seconds
    beside milliseconds) as soon as the whole column's refusal is certain: it was told only after the last chunk.

    The whole column's unit is its median's (:func:`parse_timestamps`), which a file's later rows may move: a
    number outside the median unit of the rows read is refused only once no rows that may follow could change that
    unit (:meth:`_settled`); then the error is the whole column's, naming its first row. A good file's numbers are
    all of one unit, and cost a min and a max per chunk."""

    def __init__(self, label: str, column: str, rows: RowNumbers) -> None:
        self.label, self.column, self.rows = label, column, rows  # rows: the first chunk's, the file's numbering
        self.count = dict.fromkeys(_BANDS, 0)  # numbers of each unit's size, zeros among the seconds (as a median)
        self.low = dict.fromkeys(_BANDS, np.inf)  # each unit's smallest and largest |number|
        self.high = dict.fromkeys(_BANDS, -np.inf)
        self.seen: set[str] = set()  # the units of nonzero numbers (a zero is no unit: never refused)
        self.chunks: list[tuple[int, int, Any]] = []  # (start, length, unit or per-row codes) of each chunk's numbers
        self.shown: dict[int, tuple[Any, int]] = {}  # the first nonzero numbers of each unit: position -> as written
        self.read = 0
        self.most: int | None = None  # at most this many records in the file (-1: not known)

    def add(self, written: pd.Series, start: int, most: Callable[[], int | None]) -> None:
        """Tally a chunk's numbers (``start``: its first data position); DataError once the column is bad for sure."""
        self.read = start + len(written)
        times, is_num = _epoch_numbers(written)
        if not is_num.any():
            return
        size = np.abs(times.astype(np.float64))
        lo, hi = float(size[is_num].min()), float(size[is_num].max())
        if unit_of(lo) == unit_of(hi) and lo > 0 and is_num.all():  # the usual chunk: one unit, nothing else
            band = unit_of(lo)
            self._tally(band, len(written), lo, hi)
            self.chunks.append((start, len(written), band))
            self._show(np.arange(min(6, len(written))), written, times, start)
        else:
            codes = np.full(len(written), -1, dtype=np.int8)  # the unit of each nonzero number; -1: none
            codes[is_num] = pd.Categorical(units_of(times[is_num]), categories=_BANDS).codes
            codes[is_num & (times == 0)] = -1
            for b, band in enumerate(_BANDS):
                mine = is_num & (codes == b) | (is_num & (times == 0) if band == "s" else False)
                if mine.any():
                    self._tally(band, int(mine.sum()), float(size[mine].min()), float(size[mine].max()),
                                nonzero=bool((codes == b).any()))
                self._show(np.flatnonzero(codes == b)[:6], written, times, start)
            self.chunks.append((start, len(written), codes))
        unit = self._median_unit()
        if self.seen <= {unit}:
            return  # every unit read is the median's: nothing refused yet, whatever follows
        if self.most is None:
            self.most = most() or -1
        if self.most >= 0 and self._settled(max(self.most - self.read, 0)):
            self._refuse(unit)

    def _tally(self, band: str, n: int, lo: float, hi: float, nonzero: bool = True) -> None:
        self.count[band] += n
        self.low[band], self.high[band] = min(self.low[band], lo), max(self.high[band], hi)
        if nonzero:
            self.seen.add(band)

    def _show(self, where: np.ndarray, written: pd.Series, times: np.ndarray, start: int) -> None:
        """Keep the first six nonzero numbers of each unit as written: the error shows the first and names five more."""
        for pos in where.tolist():
            if sum(1 for p in self.shown if unit_of(self.shown[p][1]) == unit_of(int(times[pos]))) >= 6:
                return
            self.shown[start + pos] = (written.iloc[pos], int(times[pos]))

    def _median_unit(self, below: int = 0, above: int = 0) -> str:
        """The unit of the median of the numbers read, with ``below`` more of 0 and ``above`` more past every unit."""
        count = {**self.count, "s": self.count["s"] + below, "ns": self.count["ns"] + above}
        low = {**self.low, "s": 0.0 if below else self.low["s"]}
        high = {**self.high, "ns": np.inf if above else self.high["ns"]}
        ends = np.cumsum([count[b] for b in _BANDS])  # the numbers in sorted order: each unit's after the last's
        i, j = (int(np.searchsorted(ends, k, side="right")) for k in ((ends[-1] - 1) // 2, ends[-1] // 2))
        if i == j:
            return _BANDS[i]
        return unit_of((high[_BANDS[i]] + low[_BANDS[j]]) / 2)  # the two middle numbers: the largest, the smallest

    def _settled(self, left: int) -> bool:
        """Whether no ``left`` numbers more, however small or large, move the median out of its unit."""
        return self._median_unit(below=left) == self._median_unit(above=left)

    def _refuse(self, unit: str) -> None:
        """The whole column's error for the numbers read: its first number of another unit than ``unit``."""
        code = _BANDS.index(unit)
        bad = np.zeros(self.read, dtype=bool)
        for start, length, codes in self.chunks:
            if isinstance(codes, str):
                bad[start:start + length] = codes != unit
            else:
                bad[start:start + length] = (codes >= 0) & (codes != code)
        check_rows(bad, lambda pos: unit_mix(self.shown[pos][0], self.shown[pos][1], unit), file=self.label,
                   column=self.column, rows=self.rows)


def _epoch_numbers(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's timestamps as :func:`parse_timestamps` floors them (int64), and which are numbers (not dates)."""
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu":
        return values.to_numpy(dtype=np.int64), np.ones(len(values), dtype=bool)
    if pd.api.types.is_datetime64_any_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
        return np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
    numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    is_num = np.isfinite(numeric)
    times = np.zeros(len(values), dtype=np.int64)
    times[is_num] = np.floor(numeric[is_num]).astype(np.int64)
    return times, is_num


def _records_at_most(path: Path, suffix: str, encoding: str) -> int | None:
    """More records than the file can hold (None: not known): a Parquet file's count, a text file's lines (a CSV
    file's header one of them); read only when a chunked read meets numbers of two units."""
    try:
        if suffix in _PARQUET_SUFFIXES:
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows)
        codec = codec_for(encoding)
        if b"\n" not in "\n".encode(codec) or b"\r" not in "\r".encode(codec):
            return None  # line ends not written as the bytes counted below (EBCDIC)
        lf = cr = crlf = 0
        last = b""
        with open(path, "rb") as fh:
            while block := fh.read(1 << 24):
                lf, cr = lf + block.count(b"\n"), cr + block.count(b"\r")
                crlf += block.count(b"\r\n") + (last == b"\r" and block[:1] == b"\n")
                last = block[-1:]
        return lf + cr - crlf + 1  # \n, \r\n and \r each end a line; the last may end none
    except Exception:  # whatever it is, the read after the last chunk checks the whole column
        return None


def _json_array(path: Path, encoding: str) -> bool:
    """A .json file of one JSON array of records (read whole: no chunk of it is a file of records)."""
    try:
        return path.suffix.lower() == ".json" and first_char(path, encoding) == "["
    except (OSError, UnicodeError, ValueError):
        return False  # the read names it


def _refuse_late_columns(raw: pd.DataFrame, columns: ColumnMap, optional: dict[str, str | None], start: int,
                         rows: RowNumbers, label: str, time_unit: str) -> None:
    """A chunk of a JSON lines file bringing the timestamp or rating column that the first chunk's records lacked
    (which read as "no such column": row order, ratings of 1.0): a whole read has that column, null in every record
    before, and refuses the first. The same error, from the records read (``start`` of them before this chunk)."""
    for role in ("timestamp", "rating"):
        col = getattr(columns, role)
        if col is None or optional[role] is not None or col not in raw.columns:
            continue
        values = pd.concat([pd.Series([np.nan] * start, dtype=object), raw[col].astype(object)], ignore_index=True)
        if role == "rating":
            parse_ratings(values, file=label, column=col, rows=rows)
        else:
            _checked_times(values, file=label, column=col, rows=rows, time_unit=time_unit)


def _reading_progress(path: Path, suffix: str, encoding: str, label: str, every_s: float | None) -> RateLog | None:
    """Progress of a chunked read, its total the file's records (lines less the header, Parquet's count): a 20M-row
    CSV file (462 MB) was read for 142 s between "reading" and "read" with no line in a redirected log."""
    if every_s is None:
        return None
    total = _records_at_most(path, suffix, encoding)
    if total is None:
        return None
    if suffix not in _PARQUET_SUFFIXES:  # a header line, and the empty "line" after a file's last line end
        total -= (suffix in _CSV_SUFFIXES) + _ends_with_line_end(path)
    return RateLog(log, f"reading {label}", max(total, 1), "rows", every_s, rate_unit="rows")


def _ends_with_line_end(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) in (b"\n", b"\r")


def _large(path: Path) -> bool:
    """A file of more than :data:`HEAD_CHECK_BYTES` (its first rows are checked before the rest is read)."""
    try:
        return path.is_file() and path.stat().st_size > HEAD_CHECK_BYTES
    except OSError:
        return False  # the read names it


def _may_be_bad_times(values: pd.Series) -> bool:
    """False where :func:`parse_timestamps` has nothing to refuse: NumPy integers within its range (a chunk of a
    column of epoch numbers, the usual case, is not converted twice)."""
    if not isinstance(values.dtype, np.dtype) or values.dtype.kind not in "iu" or len(values) == 0:
        return len(values) > 0
    numbers = values.to_numpy()
    return bool(max(abs(float(numbers.min())), abs(float(numbers.max()))) >= _TS_LIMIT)


def _checked_times(values: pd.Series, *, file: str, column: str, rows: RowNumbers, time_unit: str) -> pd.Series:
    """A chunk of a time column, checked (:func:`parse_timestamps`' DataError for a bad time): as read, or a chunk
    of dates alone as the dates (the whole column's conversion then does not parse them again: it read a 4M-row
    file of ISO dates 50% slower than a whole read)."""
    if not _may_be_bad_times(values):
        return values
    if values.dtype == object or isinstance(values.dtype, pd.StringDtype):
        if not pd.to_numeric(values, errors="coerce").notna().any():
            dates = pd.to_datetime(values, errors="coerce", utc=True, format="ISO8601")  # as parse_timestamps does
            if not dates.isna().any():
                return dates
    quiet = _ThisThread()
    log.addFilter(quiet)
    try:
        parse_timestamps(values, file=file, column=column, rows=rows, time_unit=time_unit, check_units=False)
    finally:
        log.removeFilter(quiet)
    return values


def _or_error(errors: list[DataError], convert: Callable[[], Any], instead: Any) -> Any:
    """``convert()``, or ``instead`` with its DataError added to ``errors``."""
    try:
        return convert()
    except DataError as e:
        errors.append(e)
        return instead


def _first_bad_row(errors: list[DataError]) -> DataError:
    """Of the errors of one read's columns, the one naming the row that comes first in the file (a bad id before a
    bad time on one row): a chunked read, which stops at the first chunk holding a bad value, and a whole read
    name the same row."""
    return min(errors, key=lambda e: float("inf") if e.row is None else e.row)


def _counted_in(e: DataError, end: int) -> DataError:
    """``e`` from the first ``end`` rows (records, lines: ``e.unit``'s) of a file: its counts ("3 row(s) in total",
    "the same holds for rows ...") are of those rows, not of the file, and say so, in the count's own word (a
    Parquet file's "2 record(s) in total" was "counted in the first 15 rows")."""
    if not re.search(r"in total|the same holds for|in all\)", e.message):
        return e
    return DataError(f"{e.message} (counted in the first {end:,} {counted(e.unit)}; the rest of the file was not read)",
                     file=e.file, row=e.row, column=e.column, unit=e.unit, line=e.line)


def _interaction_columns(raw: pd.DataFrame, columns: ColumnMap, label: str, text_table: bool) -> dict[str, str | None]:
    """The timestamp and rating columns read (None: not in the data), or the DataError for a missing column."""
    present = list(raw.columns)
    missing = [(role, col) for role, col in (("user", columns.user), ("item", columns.item)) if col not in raw.columns]
    data_line = _numbers_in_header(present) if text_table else ""
    if missing:
        pairs = (_space_separated_pairs(present, label) or _double_colon_fields(present, label)
                 or (_headerless(present, label) if text_table else None))
        if pairs is not None:
            raise pairs
        named = {columns.user, columns.item, columns.timestamp, columns.rating}
        errors = [missing_column_error(col, present, file=label, role=role, taken=named - {col},
                                       index_names=raw.index.names) for role, col in missing]
        if len(errors) == 1:
            if not data_line:
                raise errors[0]
            raise DataError(errors[0].message + data_line, file=label, column=errors[0].column)
        # both at once: naming only the user column sent the user back to rerun and meet the item column next
        second = errors[1].message.replace(f"; columns present: {present}", "")  # listed once is enough
        raise DataError(f"{errors[0].message} Also {second}{data_line}", file=label, column=columns.user)
    if data_line:  # the ids' columns named after the first row's values: that row is read as the header, not data
        log.warning("%s: column names %s are read from the first line.%s", label, present, data_line)
    defaults = ColumnMap()
    optional: dict[str, str | None] = {}
    for role in ("timestamp", "rating"):
        col = getattr(columns, role)
        if col is None:
            optional[role] = None
        elif col in raw.columns:
            optional[role] = col
        elif col == getattr(defaults, role):
            optional[role] = None  # default name absent: fall back, reported below
        else:
            raise missing_column_error(col, present, file=label, role=role, index_names=raw.index.names)
    return optional


def _read_table_interactions(source: Any, columns: ColumnMap, *, name: str | None, encoding: str, time_unit: str,
                             nrows: int | None = None, use: str | None = None,
                             log_every_s: float | None = None) -> pd.DataFrame:
    """:func:`read_interactions` of a table (``nrows``: its first that many rows).

    A CSV/TSV, Parquet or JSON lines file of more than :data:`HEAD_CHECK_BYTES` is read and checked
    :data:`CHUNK_ROWS` rows (lines) at a time (ids, ratings, timestamps; what needs the whole column, such as the
    time unit, after the last chunk).
    """
    label = _label(source, name)
    id_cols = {columns.user: str, columns.item: str}
    suffix = Path(source).suffix.lower() if isinstance(source, (str, Path)) else ""
    text_table = suffix in _CSV_SUFFIXES
    chunked = nrows is None and (text_table or suffix in _PARQUET_SUFFIXES or suffix in _JSON_SUFFIXES) \
        and _large(Path(source)) and not _json_array(Path(source), encoding)
    found: dict[str, Any] = {}  # the columns, from the first chunk's header
    progress = _reading_progress(Path(source), suffix, encoding, label, log_every_s) if chunked else None

    def convert(raw: pd.DataFrame, rows: RowNumbers) -> pd.DataFrame:
        """Ids converted, and ratings in chunks; the time column as read (converted as a whole below)."""
        if "present" not in found:
            found["present"] = list(raw.columns)
            found["optional"] = _interaction_columns(raw, columns, label, text_table)
            found["rows"] = rows  # the first chunk's: the file's numbering
        optional = found["optional"]
        _refuse_late_columns(raw, columns, optional, found["start"], found["rows"], label, time_unit)
        out: dict[str, Any] = {}
        errors: list[DataError] = found.setdefault("errors", [])  # the first bad row is named, whatever its column
        for role, col in (("user_id", columns.user), ("item_id", columns.item)):
            out[role] = _or_error(errors, lambda c=col: ids_to_str(raw[c], file=label, column=c, rows=rows),
                                  raw[col])
        if optional["timestamp"] is not None:
            times = raw[optional["timestamp"]].reset_index(drop=True)
            if chunked:  # a bad time named now; the warnings come from the whole column's conversion
                written, before = times, len(errors)
                times = _or_error(errors, lambda: _checked_times(written, file=label, column=optional["timestamp"],
                                                                 rows=rows, time_unit=time_unit), written)
                if isinstance(times.dtype, pd.DatetimeTZDtype) and "early" not in found:
                    # the first date before 1973 as the file writes it, for the warning below (the parsed date
                    # read '1970-01-01 00:00:00+00:00' where the file and a whole read say '1970-01-01T00:00:00')
                    early = np.flatnonzero((times < _BAND_START).to_numpy())
                    if early.size:
                        found["early"] = {found["start"] + int(early[0]): written.iloc[int(early[0])]}
                if time_unit == "auto" and len(errors) == before:  # its times read: are they of one unit?
                    units = found.setdefault("units", _UnitTally(label, optional["timestamp"], rows))
                    _or_error(errors, lambda: units.add(written, found["start"], lambda: _records_at_most(
                        Path(source), suffix, encoding)), None)
                found["dates"] = found.get("dates", False) or isinstance(times.dtype, pd.DatetimeTZDtype)
                found["other"] = found.get("other", False) or not isinstance(times.dtype, pd.DatetimeTZDtype)
            out["timestamp"] = times
        if optional["rating"] is not None:
            rating = raw[optional["rating"]].reset_index(drop=True)
            out["rating"] = _or_error(errors, lambda: parse_ratings(rating, file=label, column=optional["rating"],
                                                                    rows=rows, use=use), rating) if chunked else rating
        if errors and chunked:
            raise _first_bad_row(errors)
        found["start"] += len(raw)
        if progress is not None:
            progress.update(found["start"])
        return pd.DataFrame(out)

    found["start"] = 0  # the data position of the next chunk's first row
    try:
        raw, rows = read_table_numbered(source, name=name, dtype=id_cols, literal=id_cols, encoding=encoding,
                                        nrows=nrows, each_chunk=convert, chunk_rows=CHUNK_ROWS if chunked else None)
    finally:
        if progress is not None:
            progress.close()
    present, optional = found["present"], found["optional"]
    if len(raw) == 0:
        raise EmptyInteractions("no data rows (only a header); the interactions table is empty", file=label)
    if found.get("dates") and found.get("other"):  # chunks of dates beside chunks of numbers: the dates as text
        raw["timestamp"] = raw["timestamp"].map(lambda v: v.isoformat() if isinstance(v, pd.Timestamp) else v)

    errors = found["errors"]  # a whole read's bad ids: named after the times and ratings if those go wrong earlier
    quiet = _ThisThread()
    if errors:  # the warnings of a file refused are not said
        log.addFilter(quiet)
    try:
        if optional["timestamp"] is not None:
            converted = _or_error(errors, lambda: parse_timestamps(raw["timestamp"], file=label,
                                                                   column=optional["timestamp"], rows=rows,
                                                                   time_unit=time_unit, check_units=nrows is None),
                                  None)
        if optional["rating"] is not None and not chunked:
            raw["rating"] = _or_error(errors, lambda: parse_ratings(raw["rating"], file=label,
                                                                    column=optional["rating"], rows=rows, use=use),
                                      None)
    finally:
        log.removeFilter(quiet)
    if errors:
        raise _first_bad_row(errors)

    users, items = raw["user_id"], raw["item_id"]
    _warn_float_spelled_ids(label, columns.user, users)
    _warn_float_spelled_ids(label, columns.item, items)
    if optional["timestamp"] is not None:
        ts, dates_unit, floored_off = converted
        ts_source = f"column {optional['timestamp']!r}"
        _warn_constant_time(label, users, ts, optional["timestamp"])
        _warn_placeholder_times(label, ts, raw["timestamp"], optional["timestamp"], rows, time_unit,
                                found.get("early", {}))
    else:
        ts, dates_unit, floored_off = np.arange(len(raw), dtype=np.int64), None, None
        ts_source = "row order (no timestamp column)"
        if columns.timestamp is not None:  # the default name was looked for; data.timestamp_col=null says "none"
            _warn_unmapped_like(label, present, {columns.user, columns.item, optional["rating"]}, columns.timestamp,
                                "timestamp")
        _warn_sorted_by_id(label, users, items)
    if optional["rating"] is not None:
        rating = raw["rating"].to_numpy()
        rating_source = f"column {optional['rating']!r}"
        _warn_nonpositive_ratings(label, optional["rating"], rating, rows, use)
    else:
        rating = np.ones(len(raw), dtype=np.float32)
        rating_source = "constant 1.0 (no rating column)"
        if columns.rating is not None:  # the default name was looked for; data.rating_col=null says "none"
            _warn_unmapped_like(label, present, {columns.user, columns.item, optional["timestamp"]}, columns.rating,
                                "rating")

    df = pd.DataFrame(
        {
            "user_id": users.astype(str),
            "item_id": items.astype(str),
            "timestamp": pd.Series(ts, dtype="int64"),
            "rating": pd.Series(rating, dtype="float32"),
        }
    )
    rows_read = len(df)
    key = ["user_id", "item_id", "timestamp"]
    # duplicates are compared on the times as written: 100.25 and 100.75 both floor to 100, and as two clicks of
    # one item were dropped as an "exact duplicate" (the fraction is a key beside the floored time, not a column)
    exact = df if floored_off is None else df.assign(_floored_off=floored_off)
    dup_key = key if floored_off is None else [*key, "_floored_off"]
    dup = exact.duplicated(subset=dup_key, keep="first").to_numpy()
    # a repeat with another rating is not an exact duplicate: it is dropped too (one row per user, item and
    # time, the first kept), but counted apart and warned about, since a rating the user gave is lost
    conflict = np.zeros(len(df), dtype=bool)
    if dup.any():  # the group-by is 6% of a 10M-row split: only where there is something to compare
        # the first row's position, not its rating's "first": that skips a missing rating (a file read with ``use``)
        kept = exact.assign(_pos=np.arange(len(df))).groupby(dup_key, sort=False)["_pos"].transform("first")
        ratings = df["rating"].to_numpy()
        kept_rating = ratings[kept.to_numpy()]
        conflict = dup & (ratings != kept_rating) & ~(np.isnan(ratings) & np.isnan(kept_rating))
    n_conflict = int(conflict.sum())
    n_dup = int(dup.sum()) - n_conflict
    if n_conflict:
        pos = int(np.flatnonzero(conflict)[0])
        first = int(np.flatnonzero((exact[dup_key] == exact[dup_key].iloc[pos]).all(axis=1).to_numpy())[0])
        log.warning(
            "%s: %d row(s) repeat the user, item and timestamp of an earlier row with a different rating; dropped, "
            "the first row kept (e.g. %s %d repeats %s %d: rating %g, kept %g)",
            label, n_conflict, rows.unit, rows.number(pos), rows.unit, rows.number(first),
            float(df["rating"].iloc[pos]), float(df["rating"].iloc[first]),
        )
    if dup.any():
        df = df.loc[~dup].reset_index(drop=True)
    report = {
        "file": label,
        "rows_read": rows_read,
        "rows": len(df),
        "duplicates_dropped": n_dup,
        "conflicting_duplicates_dropped": n_conflict,
        "users": int(df["user_id"].nunique()),
        "items": int(df["item_id"].nunique()),
        "timestamp_source": ts_source,
        "rating_source": rating_source,
    }
    if dates_unit is not None:  # a unit of ours (dates, sub-second parts): align_date_units may move it finer
        report["dates_unit"] = dates_unit
    df.attrs["report"] = report
    log.info(
        "read %s: %d rows (%d exact duplicates dropped), %d users, %d items; timestamps from %s, ratings from %s",
        label, rows_read, n_dup, report["users"], report["items"], ts_source, rating_source,
    )
    return df
