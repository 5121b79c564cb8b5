"""Catalogue text on the terminal: control characters escaped, and the item lists of `recommend` and `similar`."""
from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["printable"]


def printable(value: Any) -> str:
    """``str(value)`` with control characters and line breaks written as escapes (``\\n``, ``\\x1b``): a
    catalogue's title or genres printed raw split a list's line in two and sent terminal escapes through."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in ("Cc", "Zl", "Zp")
                   else c for c in text)


def _print_items(items: list[dict], as_json: bool, title: str, k: int) -> None:
    if as_json:
        answer: dict = {"items": items}
        if len(items) < k:  # as the HTTP answer says it: only on a short list
            answer["shortfall"] = {"missing": k - len(items), "reason": f"fewer than k={k} items are left after "
                                   f"the exclusions; all {len(items)} eligible items are returned"}
        print(json.dumps(answer, ensure_ascii=False, default=str))
        return
    print(title)
    for it in items:
        extra = f"  [{printable(it['genres'])}]" if isinstance(it.get("genres"), str) and it.get("genres") else ""
        if it.get("title"):
            print(f"{it['rank']:>3}. {printable(it['title'])} (item {printable(it['item_id'])}, "
                  f"score {it['score']:.3f}){extra}")
        else:  # a catalogue without titles: the id once, not "150 (item 150, ...)"
            print(f"{it['rank']:>3}. item {printable(it['item_id'])} (score {it['score']:.3f}){extra}")
