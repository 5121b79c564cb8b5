"""Id lists on the command line: ``50,181,172``, or a JSON array for ids that hold a comma.

Ids are text and may hold anything, a comma included ("it,em"); a comma list cannot carry such an id, so a
value starting with ``[`` is read as a JSON array of ids (strings or integers, as the HTTP API takes them).
"""
from __future__ import annotations

import json

from twotower.errors import ConfigError

__all__ = ["parse_id_list"]


def parse_id_list(text: str, flag: str) -> list[str]:
    """The ids of ``text``: a JSON array when it starts with ``[``, else comma-separated (blanks skipped)."""
    if not text.lstrip().startswith("["):
        return [s.strip() for s in text.split(",") if s.strip()]
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{flag}: starts with '[' but is not a JSON array ({e.msg}); write it as "
                          f"'[\"it,em\", \"42\"]' (quote the whole value for the shell), or as a comma list") from None
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (str, int)) for v in values):
        raise ConfigError(f"{flag}: a JSON array must hold ids (strings or integers), got {text.strip()[:80]!r}")
    return [str(v) for v in values if str(v).strip()]
