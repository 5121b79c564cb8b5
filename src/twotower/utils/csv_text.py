"""``frame_to_csv(df)``: the text of ``df.to_csv(index=False)``, built faster for an interactions table.

A run keeps a copy of its split (``RUN/data/train.csv``) and ``data split`` writes one: on ML-1M (988k rows of
``user_id, item_id, timestamp, rating``) pandas' ``to_csv`` took 1.5 s on an idle core (1.7-2.3 s in the
walkthroughs), formatting every value of every row on its own. Here each column becomes a list of strings at
once (an integer's ``str``, a float column's distinct values formatted by pandas itself, id strings as they are)
and the rows are joined: 0.5 s, and the same bytes. Any column this does not handle exactly as pandas would
(a string needing quotes, an empty or missing value, booleans, categories, datetimes, ...) sends the whole
frame to ``to_csv``, so the text is always that of ``df.to_csv(index=False)``.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import numpy as np
import pandas as pd

__all__ = ["csv_sha256", "frame_to_csv", "frame_to_csv_blocks"]

#: rows formatted at a time by :func:`frame_to_csv_blocks`: a block's strings take ~100 MB
CSV_BLOCK_ROWS = 500_000

#: characters that make Python's csv writer (pandas' writer) quote a field
_QUOTED = (",", '"', "\r", "\n")


def _column_strings(col: pd.Series) -> list[str] | None:
    """Each value of ``col`` as ``to_csv`` writes it, or None where this cannot promise the same text."""
    dtype = col.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return list(map(str, col.to_numpy().tolist()))
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        # factorized by bit pattern, so -0.0 and 0.0 (equal as floats, written differently) stay apart
        values = col.to_numpy()
        bits = values.view(np.dtype(f"u{values.itemsize}"))
        codes, uniq = pd.factorize(bits)
        # beside a second column: a row of a lone missing value is written '""', in a wider table as nothing
        shown = pd.DataFrame({"v": uniq.view(dtype), "w": 0}).to_csv(index=False, header=False, lineterminator="\n")
        strings = np.array([line[:-2] for line in shown.split("\n")[:-1]], dtype=object)
        return strings[codes].tolist() if len(strings) == len(uniq) else None
    if (isinstance(dtype, np.dtype) and dtype.kind == "O") or isinstance(dtype, pd.StringDtype):
        if col.isna().any():
            return None
        values = col.to_numpy(dtype=object)
        codes, uniq = pd.factorize(values)
        for v in uniq:
            if type(v) is not str or not v or any(c in v for c in _QUOTED):
                return None
        return values.tolist()
    return None


def csv_sha256(df: pd.DataFrame) -> str:
    """The sha256 of :func:`frame_to_csv`'s UTF-8 bytes, formatted a block at a time (never the whole text)."""
    digest = hashlib.sha256()
    for text in frame_to_csv_blocks(df):
        digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def frame_to_csv(df: pd.DataFrame) -> str:
    """The text of ``df.to_csv(index=False)``, byte for byte."""
    if len(df) == 0 or len(df.columns) < 2 or not df.columns.is_unique:
        return df.to_csv(index=False)
    columns = []
    for name in df.columns:
        strings = _column_strings(df[name])
        if strings is None:
            return df.to_csv(index=False)
        columns.append(strings)
    header = df.iloc[:0].to_csv(index=False)
    return header + os.linesep.join(map(",".join, zip(*columns))) + os.linesep  # to_csv's line ending


def frame_to_csv_blocks(df: pd.DataFrame, rows: int | None = None) -> Iterator[str]:
    """:func:`frame_to_csv`'s text in pieces (the header, then ``rows`` rows at a time, :data:`CSV_BLOCK_ROWS` unless
    given): joined, the same text.

    The whole text of a 16M-row split file held a string per cell, then the text, then its bytes: `data split` of
    20M rows peaked at 7.7 GB where reading and splitting them took 1.7 GB.
    """
    header = df.iloc[:0].to_csv(index=False)
    if len(df) == 0:
        yield frame_to_csv(df)
        return
    yield header
    step = CSV_BLOCK_ROWS if rows is None else rows
    for start in range(0, len(df), step):
        yield frame_to_csv(df.iloc[start:start + step])[len(header):]
