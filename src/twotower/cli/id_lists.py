"""Id lists on the command line: ``50,181,172``, or a JSON array for ids that hold a comma.

Ids are text and may hold anything, a comma included ("it,em"); a comma list cannot carry such an id, so a
value starting with ``[`` is read as a JSON array of ids (strings or integers, as the HTTP API takes them).
"""
from __future__ import annotations

import json

from twotower.errors import ConfigError
from twotower.utils.wording import json_error

__all__ = ["parse_id_list", "split_comma_list"]


def _empty_item(flag: str, position: int, text: str) -> ConfigError:
    return ConfigError(f"{flag}: item {position} of {text.strip()[:80]!r} is empty (two commas in a row, or a comma "
                       f"at an end); leave it out or name it")


def split_comma_list(text: str, flag: str) -> list[str]:
    """The items of the comma list ``text``, stripped; a blank ``text`` (or commas alone) is the empty list.

    An empty item among others (``10,,20``, ``10,20,``) is refused naming ``flag`` and its position (1-based):
    it was dropped without a word, so a list missing what the user meant to write ran as if complete.
    """
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        return []
    blank = next((i for i, s in enumerate(items, 1) if not s), None)
    if blank is not None:
        raise _empty_item(flag, blank, text)
    return items


def parse_id_list(text: str, flag: str) -> list[str]:
    """The ids of ``text``: a JSON array when it starts with ``[``, else comma-separated (see
    :func:`split_comma_list`: an empty id among others is refused, naming its position)."""
    if not text.lstrip().startswith("["):
        return split_comma_list(text, flag)
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{flag}: starts with '[' but is not a JSON array ({json_error(e)}); write it as "
                          f"'[\"it,em\", \"42\"]' (quote the whole value for the shell), or as a comma list") from None
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (str, int)) for v in values):
        raise ConfigError(f"{flag}: a JSON array must hold ids (strings or integers), got {text.strip()[:80]!r}")
    # stripped as a comma list's ids are (and POST /recommend's): '["7", " 7"]' is one id twice, which --users and
    # --items then list once with their "2 ids, 1 distinct" warning (they wrote two identical rows in silence)
    ids = [str(v).strip() for v in values]
    blank = next((i for i, v in enumerate(ids, 1) if not v.strip()), None)
    if blank is not None:  # was dropped without a word, as in a comma list
        raise ConfigError(f"{flag}: item {blank} of the JSON array is empty; leave it out or name it")
    return ids
