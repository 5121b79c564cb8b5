"""A JSON lines file as pandas reads it, in bounded memory.

``pd.read_json(lines=True)`` parses the whole file into one list of dicts before building the frame: 1.3 GB for
a 75 MB file of 1M four-field records (13 GB at 10M). This reads the lines in chunks, with pandas' own parser,
keeps each column's raw values, and infers each column's type once over the whole file, as pandas does: the
frame is the one ``pd.read_json(text, lines=True, dtype=False, convert_dates=False)`` returns (a column of
integers with one null in the last chunk is float64 in both; ids past int64 stay exact integers).
"""
from __future__ import annotations

import io
import json
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from twotower.data.text_files import codec_for, read_text

try:  # the parser pd.read_json uses, so numbers are read to the same values
    from pandas.io.json._json import ujson_loads
except ImportError:  # pragma: no cover - a pandas that moved it: the whole-file read below
    ujson_loads = None

__all__ = ["read_json_lines", "json_line_chunks", "RepeatedKey"]

#: lines parsed at once
CHUNK_LINES = 100_000


class _Unusual(Exception):
    """A record that is not a JSON object, or no record: left to pandas' own whole-file read."""


class RepeatedKey(ValueError):
    """A line whose JSON object names a key twice (``{"user_id": "1", ..., "user_id": "2"}``): every JSON parser
    keeps the last value, so the row was read as user 2 without a word (the config reader refuses a repeated key).
    ``line``: the file's 1-based line; ``key``: the key."""

    def __init__(self, line: int, key: str) -> None:
        super().__init__(f"line {line} repeats the key {key!r}")
        self.line, self.key = line, key


def read_json_lines(path: Path, encoding: str, nrows: int | None = None) -> pd.DataFrame:
    """``pd.read_json`` of the file's text with ``lines=True, dtype=False, convert_dates=False``, chunk by chunk.

    ``nrows``: read only the file's first that many lines (blank ones included). Raises what pandas raises on bad
    JSON (ValueError) and UnicodeDecodeError on undecodable bytes.
    """
    if ujson_loads is None:  # pragma: no cover
        return _whole(path, encoding, nrows)
    try:
        return _chunked(path, encoding, nrows)
    except _Unusual:
        return _whole(path, encoding, nrows)


def _whole(path: Path, encoding: str, nrows: int | None) -> pd.DataFrame:
    if nrows is None:
        text = read_text(path, encoding)
    else:
        with open(path, encoding=codec_for(encoding)) as fh:
            text = io.StringIO("".join(islice(fh, nrows)))
    return pd.read_json(text, lines=True, dtype=False, convert_dates=False)


def _chunked(path: Path, encoding: str, nrows: int | None) -> pd.DataFrame:
    chunks: list[pd.DataFrame] = []
    left = nrows  # lines still to read (None: all)
    start = 0  # lines before this chunk
    # text mode reads newlines as read_text does (\r\n and \r become \n), and the byte-order mark is skipped
    with open(path, encoding=codec_for(encoding)) as fh:
        while left is None or left > 0:
            lines = list(islice(fh, CHUNK_LINES if left is None else min(CHUNK_LINES, left)))
            if not lines:
                break
            if left is not None:
                left -= len(lines)
            text, records = _records(lines)
            if not all(type(r) is dict for r in records):
                raise _Unusual
            if records:  # raw values: missing keys are NaN, nothing is converted yet
                chunks.append(pd.DataFrame(records, dtype=object))
                if len(chunks) == 1:
                    _check_keys_once(text, records, chunks[-1].columns, lines, start)
            start += len(lines)
    if not chunks:
        raise _Unusual
    raw = pd.concat(chunks, ignore_index=True, sort=False) if len(chunks) > 1 else chunks[0]
    del chunks
    if len(raw.columns) == 0:  # only {} records
        raise _Unusual
    return _inferred(raw)


def _records(lines: list[str]) -> tuple[str, list[Any]]:
    """The text parsed and the JSON values of these lines (blank ones skipped), parsed as pandas parses them."""
    text = "[" + ",".join(s for s in (line.strip() for line in lines) if s) + "]"
    return text, ujson_loads(text, precise_float=False)


def _check_keys_once(text: str, records: list[dict], keys: Any, lines: list[str], start: int) -> None:
    """Raise :class:`RepeatedKey` for the first of ``lines`` (the file's lines after ``start``) whose object names a
    key twice. A parser keeps one value per key, so the records hold fewer keys than the text names: counted, and
    only when the text names them more often (a repeat, or a key's name as a value or a nested key) are the lines
    parsed again, one by one, to find the line or clear the chunk.

    Asked of the first chunk alone (the first 100,000 lines, as the head of a large file is checked first): a
    repeated key is its writer's habit, on every line, and counting every chunk's keys cost 7% of a read."""
    named = sum(text.count(json.dumps(k)) for k in keys if isinstance(k, str))
    if named <= sum(map(len, records)):
        return
    for number, line in enumerate(lines, start + 1):
        if line.strip():
            try:
                pairs = json.loads(line, object_pairs_hook=lambda p: p)  # each object as its list of (key, value)
            except ValueError:  # what pandas' parser read and this one does not: not ours to refuse
                continue
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise RepeatedKey(number, key)
                seen.add(key)


def _inferred(raw: pd.DataFrame) -> pd.DataFrame:
    """A frame of raw values (object columns) with each column's type inferred over all its rows, as pandas
    infers it when it builds the frame from the records (emptied as it goes: one column in memory twice)."""
    columns: dict[Any, pd.Series] = {}
    for name in list(raw.columns):
        col = pd.Series(raw[name].to_numpy(dtype=object).tolist())
        del raw[name]
        if col.isna().any():  # what read_json(dtype=False) does to a column holding missing values
            col = col.fillna(np.nan)
        columns[name] = col
    df = pd.DataFrame(columns, index=raw.index if not columns else None)
    df.columns = _labels(list(columns))
    return df


def json_line_chunks(path: Path, encoding: str, chunk_lines: int) -> Iterator[pd.DataFrame]:
    """The file's records ``chunk_lines`` lines at a time (chunks of blank lines alone are skipped), each chunk the
    frame ``pd.read_json(lines=True, dtype=False, convert_dates=False)`` reads from those lines alone: its column
    types are the chunk's (a column of integers with a null in another chunk is int64 here), its columns the keys
    its records have. Raises ValueError on bad JSON or a line that is no JSON object (the caller names the line),
    UnicodeDecodeError on undecodable bytes."""
    start = 0  # lines before this chunk
    checked = False  # the first chunk's keys (_check_keys_once)
    with open(path, encoding=codec_for(encoding)) as fh:  # newlines and the byte-order mark as in _chunked
        while lines := list(islice(fh, chunk_lines)):
            if ujson_loads is None:  # pragma: no cover - a pandas that moved it
                if any(line.strip() for line in lines):
                    yield pd.read_json(io.StringIO("".join(lines)), lines=True, dtype=False, convert_dates=False)
                continue
            text, records = _records(lines)
            if not all(type(r) is dict for r in records):
                raise ValueError("a line holds JSON that is not an object")
            if records:
                frame = pd.DataFrame(records, dtype=object)
                if not checked:
                    _check_keys_once(text, records, frame.columns, lines, start)
                    checked = True
                yield _inferred(frame)
            start += len(lines)


def _labels(keys: list[str]) -> pd.Index:
    """The column labels pandas makes of these keys (it converts them: keys "1" and "2" become 1 and 2)."""
    line = json.dumps({k: None for k in keys})
    return pd.read_json(io.StringIO(line), lines=True, dtype=False, convert_dates=False).columns
