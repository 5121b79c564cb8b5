"""One sentence from the facts of an explanation, by template (no language model).

Every word that is not template text comes from the explanation dict: titles
of the history items with the largest positive contributions, metadata values
they share with the item, counts from ``shared_metadata``, the basis and the
dual-head split. The same dict always gives the same sentence.
"""
from __future__ import annotations

from typing import Any

from twotower.explain.metadata import MetadataColumns, split_values

__all__ = ["explanation_text", "BASIS_TEXT", "NAMED"]

#: what a score rests on when no history item explains it
BASIS_TEXT = {
    "features": "your profile (user features: {features})",
    "id": "your learned user-ID embedding",
    "popularity": (
        "the model's empty-history representation, which is the same for every new user and acts as a popularity prior"
    ),
}

NAMED = 2  # history items named in the sentence


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _heads_clause(heads: dict[str, Any] | None) -> str:
    if not heads:
        return ""
    sem, col = float(heads["semantic"]), float(heads["collaborative"])
    if sem <= 0 or col <= 0:
        return ""
    return f"; {round(100 * sem / (sem + col))}% of the score comes from the item's text (semantic head)"


def _rests_on(expl: dict[str, Any]) -> str:
    basis = expl["basis"]
    if basis == "history":
        basis = expl.get("fallback_basis") or "popularity"
    if basis == "features":
        return BASIS_TEXT["features"].format(features=", ".join(expl.get("user_features") or []) or "none")
    return BASIS_TEXT.get(basis, BASIS_TEXT["popularity"])


def explanation_text(expl: dict[str, Any], cols: MetadataColumns) -> str:
    """The sentence for an explanation dict (everything but ``text`` filled in)."""
    title = expl["item"].get("title") or expl["item_id"]
    if expl["already_seen"]:
        return f"You already watched {title}: it is in your history, so this is not a new recommendation."
    heads = _heads_clause(expl.get("heads"))
    if expl["basis"] != "history":
        why = "You have no history yet" if expl["reads_history"] else "This model does not read your history"
        return f"{why}, so the score of {title} rests only on {_rests_on(expl)}{heads}."
    named = [h for h in expl["history"] if h["contribution"] > 0][:NAMED]
    if not named:
        return (
            f"Removing any single item from your history would not lower the score of {title}; "
            f"it rests on {_rests_on(expl)}{heads}."
        )
    names = _join([str(h.get("title") or h["item_id"]) for h in named])
    parts = [f"Because you watched {names}"]
    primary = cols.multi[0] if cols.multi else None
    if primary is not None:
        mine = split_values(expl["item"].get(primary), cols.separator)
        common = [v for v in mine if all(v in split_values(h.get(primary), cols.separator) for h in named)]
        if common:
            parts.append(f" ({'both ' if len(named) == 2 else ''}{', '.join(common)})")
        shared = expl["shared_metadata"].get(primary) or []
        if shared:
            top = shared[0]
            others = top["count"] - sum(1 for h in named if top["value"] in split_values(h.get(primary), cols.separator))
            if others > 0:
                sep = "," if len(named) > 1 and not common else ""
                parts.append(f"{sep} and {others} other {top['value']} title{'s' if others != 1 else ''}")
    return "".join(parts) + heads + "."
