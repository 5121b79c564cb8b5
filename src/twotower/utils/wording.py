"""Words of messages: counts whose noun agrees with their number ("1 row", "2 rows"), so a message a user reads
with a count of 1 does not say "1 rows" or "1 users"; where a line of JSON went wrong."""

from __future__ import annotations

import json

__all__ = ["plural", "json_error"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``"1 row"``, ``"1,000 rows"``: ``n`` with thousands separators and ``noun``, or ``many`` (default
    ``noun + "s"``) when ``n`` is not 1. For a phrase ("held-out user"), the last word takes the ending."""
    return f"{n:,} {noun if n == 1 else (many if many is not None else noun + 's')}"


def json_error(e: json.JSONDecodeError) -> str:
    """``"Expecting ',' delimiter at character 32"``: the decoder's words and the character (counted from 1, as an
    editor's column) of a one-line JSON text. ``e.msg`` alone said "Invalid control character at" and stopped
    there, and a message that added the place to it read "... at at character 29"."""
    what = e.msg[: -len(" at")] if e.msg.endswith(" at") else e.msg
    return f"{what} at character {e.colno}"
