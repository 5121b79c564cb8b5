"""JSON whose objects name each key once: a key written twice is refused, not quietly replaced by its later value.

RFC 8259 leaves an object with a repeated name to the reader; Python's reader keeps the last value, so
``{"k": 5, "k": 500}`` asked for 500 without a word about the 5 (in a config file, a second ``"train"`` table
replaced the whole first one). The config files (JSON and YAML) and the HTTP service's request bodies refuse it.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKey", "unique_object", "loads_unique"]


class DuplicateKey(ValueError):
    """A key written twice in one JSON object or YAML mapping; ``key`` is the key."""

    def __init__(self, message: str, key: Any) -> None:
        super().__init__(message)
        self.key = key


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: the object as a dict, refusing a repeated key."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"key {key!r} appears twice in one object", key)
        out[key] = value
    return out


def loads_unique(text: str | bytes) -> Any:
    """``json.loads(text)`` refusing a key repeated in one object (:class:`DuplicateKey`)."""
    return json.loads(text, object_pairs_hook=unique_object)
