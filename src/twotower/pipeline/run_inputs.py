"""Interaction files given to a trained run (``--exclude``, ``--history-from``, ``evaluate --test``).

They are read the way the run read its training data: the run's column names
(``data.user_col`` ...), file format, text encoding and time unit from its ``config.json``. A file in the
canonical layout (``user_id,item_id,...``, e.g. the run's own ``data/*.csv``) is
read as such, so both the user's original files and the run's copies work. The run's
copies are UTF-8 whatever ``data.encoding`` says (twotower wrote them), and are read so.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from twotower.data.readers import ColumnMap, read_interactions
from twotower.errors import DataError
from twotower.pipeline.sources import column_map

__all__ = ["run_columns", "run_file_encoding", "read_run_interactions"]


def run_columns(run: Any) -> ColumnMap:
    """The column map the run was trained with (its ``data.*_col`` settings); canonical without a config."""
    cfg = getattr(run, "config", None)  # a Prepared split (benchmarks) has vocabularies but no config
    return ColumnMap() if cfg is None else column_map(cfg.data)


def _in_run_folder(run: Any, source: Any) -> bool:
    """Whether ``source`` is a file inside the run's folder (its ``data/*.csv``, written as UTF-8)."""
    folder = getattr(run, "dir", None)
    if folder is None or not isinstance(source, (str, Path)):
        return False
    try:
        return Path(source).resolve().is_relative_to(Path(folder).resolve())
    except OSError:
        return False


def run_file_encoding(run: Any, source: Any) -> str:
    """The encoding a file given to ``run`` is read with: the run's ``data.encoding``, but UTF-8 for the run's
    own files (read as cp1252, its UTF-8 copy of an id "Café" became "CafÃ©", unknown to the run, and its rows
    were dropped from the exclusions or the history without a word)."""
    cfg = getattr(run, "config", None)
    if cfg is None or _in_run_folder(run, source):
        return "utf-8"
    return cfg.data.encoding


def read_run_interactions(run: Any, source: str | Path | pd.DataFrame, *, name: str | None = None,
                          use: str = "interactions given to a trained run") -> pd.DataFrame:
    """``read_interactions`` of ``source`` with ``run``'s columns and format, falling back to the canonical layout.

    ``source`` may be a DataFrame with the columns a file would have (``name`` labels it in errors). ``use`` says
    what the file is read as (``"held-out relevant pairs"``), in the warnings about its ratings: they are not used
    here, so a missing or non-numeric one is read as missing, not refused with a fix ("set data.rating_col=null")
    that a trained run does not take.

    A file readable neither way gets the error of the run's own settings; when a
    column is missing, its fix names the columns the run expects (overrides are
    not taken after training, so "set data.user_col" would be no help).
    """
    cfg = getattr(run, "config", None)
    columns, fmt = run_columns(run), (cfg.data.format if cfg is not None else "auto")
    encoding = run_file_encoding(run, source)
    time_unit = cfg.data.time_unit if cfg is not None else "auto"
    if isinstance(source, pd.DataFrame) and fmt == "sasrec":
        fmt = "table"  # a frame is a table already: its columns are the run's (or the canonical) ones
    try:
        return read_interactions(source, columns, name=name, format=fmt, encoding=encoding, time_unit=time_unit,
                                 use=use)
    except DataError as e:
        first = e
    # a bad value in a data row (past line 1): the file is in the run's layout, and read again canonically it would
    # only fail on its columns: a second whole read of the file before the same error
    past_header = first.row is not None and first.row > 1
    if (columns, fmt) != (ColumnMap(), "auto") and not past_header:
        try:
            return read_interactions(source, name=name, encoding=encoding, time_unit=time_unit, use=use)
        except DataError:
            pass
    if first.column not in (columns.user, columns.item, columns.timestamp, columns.rating) or "not found" not in first.message:
        raise first
    base = first.message.split(" Set data.", 1)[0].rstrip()
    if not base.endswith(("?", ".")):
        base += "."
    expected = f"{columns.user!r} (users) and {columns.item!r} (items)"
    where = f" in {Path(run.dir) / 'config.json'}" if getattr(run, "dir", None) is not None else ""
    what = "frame" if isinstance(source, pd.DataFrame) else "file"
    raise DataError(
        f"{base} This run reads {expected}, as set when it was trained (data.user_col / data.item_col{where}); "
        f"rename the {what}'s columns to match.",
        file=first.file, row=first.row, column=first.column, unit=first.unit, line=first.line,
    ) from first
