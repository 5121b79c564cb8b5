"""Counts in messages: the noun agreeing with its number ("1 row", "2 rows"), so a message a user reads with a
count of 1 does not say "1 rows" or "1 users"."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``"1 row"``, ``"1,000 rows"``: ``n`` with thousands separators and ``noun``, or ``many`` (default
    ``noun + "s"``) when ``n`` is not 1. For a phrase ("held-out user"), the last word takes the ending."""
    return f"{n:,} {noun if n == 1 else (many if many is not None else noun + 's')}"
