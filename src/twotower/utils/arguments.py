"""Checks of the Python API's arguments, worded alike in every public function."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from twotower.errors import ConfigError

__all__ = ["check_flag", "is_id_list"]


def is_id_list(value: Any) -> bool:
    """Whether ``value`` can be read as ids one by one: a list, tuple, 1-d array, Series, generator (not a string,
    a number, None or a 0-d / 2-d array, which failed with a bare TypeError or were read as something else)."""
    if value is None or isinstance(value, (str, bytes)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, Iterable)


def check_flag(value: Any, name: str, *, optional: bool = False) -> bool | None:
    """``value`` as a bool when it is True or False (a NumPy bool too; None where ``optional``), else ConfigError
    naming ``name``: ``tt.recommend(run, ['42'], exclude_seen='no')`` excluded the seen items (a non-empty string
    is true), and ``exact='yes'`` ranked exactly, without a word."""
    if value is None and optional:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    either = "True, False or None" if optional else "True or False"
    raise ConfigError(f"{name} must be {either}, got {value!r}")
