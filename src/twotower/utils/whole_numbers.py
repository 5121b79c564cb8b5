"""Whole numbers read as floats, given back as integers: pandas reads an integer column with an empty cell
(MovieLens' ``year``, ``age``) as float, so every answer said ``"year": 1995.0`` and every written table ``1995.0``.
One rule for the JSON answers (``TrainedRun.item_meta_columns``) and the tables ``twotower data split`` writes.

:func:`cell_text` is a cell of a text column as the text a CSV gives: a Parquet, JSON lines or DataFrame table
holds numbers where a CSV (read as text) holds their digits, and the item texts and titles kept only strings."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["cell_text", "is_whole_number_column", "whole_numbers", "whole_numbers_as_integers"]

#: the largest whole number a float holds exactly (2**53): past it a float column's values are kept as floats
_EXACT_WHOLE = 2**53


def is_whole_number_column(column: pd.Series) -> bool:
    """Whether ``column`` is a float column whose values (missing ones aside) are all whole numbers a float holds
    exactly. A column holding one real fraction is not (``9.0`` beside ``9.99``), nor one holding inf."""
    if not pd.api.types.is_float_dtype(column.dtype):
        return False
    x = column.to_numpy(dtype=np.float64, na_value=np.nan)
    x = x[~np.isnan(x)]
    return bool(np.all(np.isfinite(x) & (np.abs(x) <= _EXACT_WHOLE) & (x == np.floor(x))))


def whole_numbers(column: pd.Series, values: list[Any]) -> list[Any]:
    """``values`` (``column``'s JSON values, missing ones None) as integers when :func:`is_whole_number_column`."""
    if not is_whole_number_column(column):
        return values
    return [None if v is None else int(v) for v in values]


def whole_numbers_as_integers(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each :func:`is_whole_number_column` as a nullable integer column (written ``1995``, a missing
    value still an empty cell); ``df`` itself when it has none."""
    whole = [c for c in df.columns if is_whole_number_column(df[c])]
    if not whole or not df.columns.is_unique:
        return df
    return df.astype({c: "Int64" for c in whole})


def cell_text(value: Any) -> str | None:
    """A text cell (an item's text column, its title, a passage's text) as text; None when missing (None, NaN,
    pd.NA, NaT). A string is kept as it is; a number reads as the digits a CSV holds for it: an integer, and a
    float holding a whole number (up to 2**53), as the integer (``1995`` and ``1995.0`` -> ``"1995"``: pandas
    reads an integer column with an empty cell as float, ``data split`` writes it ``1995``, and a categorical
    value reads alike), any other float as Python writes it (``9.5`` -> ``"9.5"``), anything else as ``str()``
    gives it. So one table read from CSV, Parquet, JSON lines or a DataFrame gives the same texts."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return None
        return str(int(number)) if number.is_integer() and abs(number) <= _EXACT_WHOLE else repr(number)
    return str(value)
