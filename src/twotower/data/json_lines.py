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

__all__ = ["read_json_lines", "json_line_chunks"]

#: lines parsed at once
CHUNK_LINES = 100_000


class _Unusual(Exception):
    """A record that is not a JSON object, or no record: left to pandas' own whole-file read."""


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
    # text mode reads newlines as read_text does (\r\n and \r become \n), and the byte-order mark is skipped
    with open(path, encoding=codec_for(encoding)) as fh:
        while left is None or left > 0:
            lines = list(islice(fh, CHUNK_LINES if left is None else min(CHUNK_LINES, left)))
            if not lines:
                break
            if left is not None:
                left -= len(lines)
            records = _records(lines)
            if not all(type(r) is dict for r in records):
                raise _Unusual
            if records:  # raw values: missing keys are NaN, nothing is converted yet
                chunks.append(pd.DataFrame(records, dtype=object))
    if not chunks:
        raise _Unusual
    raw = pd.concat(chunks, ignore_index=True, sort=False) if len(chunks) > 1 else chunks[0]
    del chunks
    if len(raw.columns) == 0:  # only {} records
        raise _Unusual
    return _inferred(raw)


def _records(lines: list[str]) -> list[Any]:
    """The JSON values of these lines (blank ones skipped), parsed as pandas parses them."""
    return ujson_loads("[" + ",".join(s for s in (line.strip() for line in lines) if s) + "]", precise_float=False)


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
    with open(path, encoding=codec_for(encoding)) as fh:  # newlines and the byte-order mark as in _chunked
        while lines := list(islice(fh, chunk_lines)):
            if ujson_loads is None:  # pragma: no cover - a pandas that moved it
                if any(line.strip() for line in lines):
                    yield pd.read_json(io.StringIO("".join(lines)), lines=True, dtype=False, convert_dates=False)
                continue
            records = _records(lines)
            if not all(type(r) is dict for r in records):
                raise ValueError("a line holds JSON that is not an object")
            if records:
                yield _inferred(pd.DataFrame(records, dtype=object))


def _labels(keys: list[str]) -> pd.Index:
    """The column labels pandas makes of these keys (it converts them: keys "1" and "2" become 1 and 2)."""
    line = json.dumps({k: None for k in keys})
    return pd.read_json(io.StringIO(line), lines=True, dtype=False, convert_dates=False).columns
