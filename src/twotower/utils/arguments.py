"""Checks of the Python API's arguments, worded alike in every public function."""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Set, ValuesView
from typing import Any

import numpy as np

from twotower.errors import ConfigError

__all__ = ["check_flag", "check_seed", "is_id_list", "check_history", "check_ids", "check_id"]


def is_id_list(value: Any) -> bool:
    """Whether ``value`` can be read as ids one by one: a list, tuple, 1-d array, Series, generator (not a string,
    a number, None or a 0-d / 2-d array, which failed with a bare TypeError or were read as something else)."""
    if value is None or isinstance(value, (str, bytes)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, Iterable)


def check_history(value: Any, name: str = "history") -> list[Any]:
    """A new user's history (item ids, oldest first) as a list; ConfigError naming ``name`` for a string (its
    letters were read as ids), a value that is not a list of ids, or a set or dict (view), which has no order:
    ``tt.recommend(run, history={'50', '181'})`` pooled the items in whatever order the set iterated, so the
    recency weights and a sequence tower read them oldest-last at random. Lists, tuples, 1-d arrays, Series and
    generators are taken."""
    from twotower.pipeline.refusals import id_list_refusal, python_type_words  # the words of POST /recommend's 422

    if isinstance(value, (Set, Mapping, ValuesView)):
        raise ConfigError(f"{name}: must be a list of item ids, oldest first, got {python_type_words(value)}, which "
                          f"has no order: pass a list in time order, e.g. {name}=['50', '181']")
    if isinstance(value, (str, bytes)) or not is_id_list(value):
        raise ConfigError(f"{name}: {id_list_refusal(python_type_words(value), value, oldest_first=True)}")
    return check_ids(list(value), name)


def check_ids(ids: list[Any], name: str, what: str = "item") -> list[Any]:
    """``ids`` as given, or ConfigError naming ``name[pos]`` for the first float among them (see :func:`check_id`)."""
    for pos, value in enumerate(ids):
        check_id(value, f"{name}[{pos}]", what)
    return ids


def check_id(value: Any, name: str, what: str = "item") -> Any:
    """``value`` as given, unless it is a float: ConfigError naming ``name``, what was given and what to pass.

    Ids are the data's id strings (the vocabularies map them; an integer is taken as its digits). A float was
    turned into an id without a word: ``3.0`` looked up user '3' (but ``exclude=[50.0]`` item '50.0', unknown), and
    ``3.5`` or NaN (a missing id in a float column) was "unknown user '3.5'", which did not say ids are text. POST
    /recommend refuses a float id too (serving/schemas.coerce_id), and a boolean, which ``[True]`` looked up as
    "unknown user 'True'"."""
    if isinstance(value, (bool, np.bool_)):
        article = "an" if what == "item" else "a"
        raise ConfigError(f"{name}: must be {article} {what} id as text (or an integer), got the boolean {bool(value)}")
    if not isinstance(value, (float, np.floating)):
        return value
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        fix = f"pass {str(int(number))!r}"
    elif number != number:  # NaN: a missing id (a float column with an empty cell)
        fix = "a missing id? pass the id's text"
    else:
        fix = f"pass the id's text as the data writes it, e.g. {repr(number)!r}"
    article = "an" if what == "item" else "a"  # "a user" is said with a consonant
    raise ConfigError(f"{name}: must be {article} {what} id as text (or an integer), got the float {number!r}: ids "
                      f"are the data's id strings; {fix}")


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


def check_seed(value: Any, name: str = "seed") -> int:
    """``value`` as a seed of NumPy's generators, an integer >= 0 (a NumPy integer too), else ConfigError naming
    ``name``: ``tt.random_split(df, seed=-1)`` failed in NumPy with a bare "expected non-negative integer", and
    a float failed in its SeedSequence or was cut to another seed."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
        raise ConfigError(f"{name}: must be an integer >= 0, got {value!r}")
    return int(value)
