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
from typing import Any

import numpy as np
import pandas as pd

from twotower.data.text_files import codec_for, read_text

try:  # the parser pd.read_json uses, so numbers are read to the same values
    from pandas.io.json._json import ujson_loads
except ImportError:  # pragma: no cover - a pandas that moved it: the whole-file read below
    ujson_loads = None

__all__ = ["read_json_lines"]

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
            records = ujson_loads("[" + ",".join(s for s in (line.strip() for line in lines) if s) + "]",
                                  precise_float=False)
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
    columns: dict[Any, pd.Series] = {}
    for name in list(raw.columns):
        # one inference over all the rows, as pandas makes it when it builds the frame from the records
        col = pd.Series(raw[name].to_numpy(dtype=object).tolist())
        del raw[name]
        if col.isna().any():  # what read_json(dtype=False) does to a column holding missing values
            col = col.fillna(np.nan)
        columns[name] = col
    df = pd.DataFrame(columns)
    df.columns = _labels(list(columns))
    return df


def _labels(keys: list[str]) -> pd.Index:
    """The column labels pandas makes of these keys (it converts them: keys "1" and "2" become 1 and 2)."""
    line = json.dumps({k: None for k in keys})
    return pd.read_json(io.StringIO(line), lines=True, dtype=False, convert_dates=False).columns
