"""One sentence from the facts of an explanation, by template (no language model).

Every word that is not template text comes from the explanation dict: titles
of the history items with the largest *positive* contributions (a title that
several items of the catalogue share is made distinct by the item's year or id,
see :mod:`twotower.explain.names`), metadata values
that the item and every named history item have, the number of further
history items with a positive contribution that share one of those values,
the basis and the dual-head split. A history item that lowered the score is
never credited, and a history that lowers the score as a whole is said to (not
"Because you ..."). Where the history lowers the item's score yet lifts it up the user's list (it lowers the
items above it more), the sentence gives both ranks rather than saying the score rests on the empty history; and
where the named items raise its score but the history puts it lower in the list than no history would, it says so.
The same dict always gives the same sentence.
"""
from __future__ import annotations

from typing import Any, Mapping

from twotower.explain.metadata import MetadataColumns, split_values
from twotower.explain.names import name_of

__all__ = ["explanation_text", "sentence_facts", "one_item", "BASIS_TEXT", "NAMED"]

#: what a score rests on when no history item explains it
BASIS_TEXT = {
    "features": "your profile (user features: {features})",
    "id": "your learned user-ID embedding",
    "popularity": (
        # "every new user" was said to known users too: without user features or an ID embedding, the representation
        # of an empty history is every user's, known or new
        "the model's empty-history representation, which is the same for every user and acts as a popularity prior"
    ),
}

NAMED = 2  # history items named in the sentence


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _semantic_share(heads: dict[str, Any] | None) -> int | None:
    """The dual-head split's semantic share of the score in percent; None without heads or where either head's
    part is not positive (a share of a difference says nothing)."""
    if not heads:
        return None
    sem, col = float(heads["semantic"]), float(heads["collaborative"])
    return round(100 * sem / (sem + col)) if sem > 0 and col > 0 else None


def _heads_clause(heads: dict[str, Any] | None, item_text: bool = True) -> str:
    share = _semantic_share(heads)
    if share is None:
        return ""
    if not item_text:  # its semantic head read the empty string: "from the item's text" credited text it lacks
        return f"; {share}% of the score comes from the semantic head's vector for items without text (this one has none)"
    return f"; {share}% of the score comes from the item's text (semantic head)"


def _name(rec: dict[str, Any], item_id: Any, names: Mapping[str, str] | None = None) -> str:
    """An item as the sentence names it: its title, or ``item 42`` when the run has no title for it (the
    record's title is then the id itself, and "Because you watched 20." read like a number). ``names``: the
    items whose title another item has too, named apart (:func:`twotower.explain.names.distinct_names`)."""
    return name_of(rec.get("title"), item_id, names)


def _rests_on(expl: dict[str, Any], with_user_id: bool = False) -> str:
    basis = expl["basis"]
    if basis == "history":
        # what is left without the history: the dict's "profile" (it read a key "fallback_basis" no dict has,
        # so a new user's features or a known user's ID embedding were called the popularity prior)
        basis = expl.get("profile") or "popularity"
    if basis == "features":
        text = BASIS_TEXT["features"].format(features=", ".join(expl.get("user_features") or []) or "none")
        return f"{text} and {BASIS_TEXT['id']}" if with_user_id else text
    return BASIS_TEXT.get(basis, BASIS_TEXT["popularity"])


def _places(expl: dict[str, Any]) -> tuple[int, int] | None:
    """``(rank, empty_history_rank)``: the item's place in the user's list with the history and without it; None
    where either is unknown (an item in the history, a tower that reads none)."""
    r, r0 = expl.get("rank"), expl.get("empty_history_rank")
    return None if r is None or r0 is None else (r, r0)


def _lifted(expl: dict[str, Any]) -> str:
    """``"it ranks 1 in your list (61 with no history): ..."`` where the history lifts the item up the list
    (``rank`` above ``empty_history_rank``), else "". Said where the score alone tells the other story: a single
    watched film lowered its sequel's score, and the sentence said the score rested on the empty history, while
    that film had taken the sequel from 61st to 1st by lowering the 60 films above it more."""
    places = _places(expl)
    if places is None or places[0] >= places[1]:
        return ""
    r, r0 = places
    return f"it ranks {r} in your list ({r0} with no history): your history lowers the items that would outrank it more"


def _primary_values(rec: dict[str, Any], cols: MetadataColumns) -> list[str]:
    return split_values(rec.get(cols.multi[0]), cols.separator) if cols.multi else []


def one_item(expl: dict[str, Any], history: list[dict[str, Any]]) -> bool:
    """Whether the history pools one item the model has learned (at one position or repeated) and the dict has its
    total: that item's share is then ``history_total`` (removing it leaves the empty history), whatever each
    position's share says (a first-order estimate's, or leave-one-out's of one copy among several). The sentence
    read the positions: gradxinput's +0.0138 for Star Wars, the whole history, gave "your history lowers it
    overall (-0.0421), though Star Wars (1977) raises it"."""
    return (expl.get("history_total") is not None and len({h["item_id"] for h in history}) == 1
            and not history[0].get("cold"))


def _raises(h: dict[str, Any], total: float | None) -> bool:
    """Whether history entry ``h`` raises the score: its contribution, or ``total`` (not None) for a history of
    one item (:func:`one_item`)."""
    return (h["contribution"] if total is None else total) > 0


def sentence_facts(expl: dict[str, Any], cols: MetadataColumns, history: list[dict[str, Any]]) -> dict[str, Any]:
    """What the sentence may claim, read off the attribution table ``history`` (every pooled item).

    ``named``: up to :data:`NAMED` history items with a *positive* contribution,
    largest first. ``common``: values of the first multi-valued column that the
    recommended item and every named item have. ``others``: among ``common``,
    the value held by the most further positive contributors, and how many
    (``None`` when no other positive contributor shares one). ``categorical``: the
    item's value of each categorical column that every named item has too (said
    before ``common``: "(both cat toys, bundle)"). Items whose
    contribution is zero or negative are never counted: they did not raise the score; nor are items without
    training interactions (``cold`` entries), which moved it by vectors the model has not learned.
    An item at several history positions is named and counted once. A history of one item raises the score
    where ``history_total`` does (:func:`one_item`).
    """
    # one entry per item: a history may hold an item twice (a re-watch, a repeat purchase), each position its own
    # row of the table; counted per position the sentence said "Because you watched Star Wars and Star Wars" and
    # "N other titles" counted one title N times. The table is largest first, so an item keeps its largest share.
    seen: set[Any] = set()
    positive = []
    total = expl["history_total"] if one_item(expl, history) else None
    for h in history:
        # a cold history item (no training interactions) moved the score by its untrained vector: no reason to give
        if _raises(h, total) and h["item_id"] not in seen and not h.get("cold"):
            seen.add(h["item_id"])
            positive.append(h)
    named = positive[:NAMED]
    mine = _primary_values(expl["item"], cols)
    common = [v for v in mine if named and all(v in _primary_values(h, cols) for h in named)]
    # a single-valued column (an e-commerce catalogue's category) is often the fact that matters most: with tags
    # as the only multi-valued column, "Because you bought X and Y" never said that all three are cat toys
    shared = []
    for c in cols.categorical:
        v = expl["item"].get(c)
        if _said_value(v) and named and all(h.get(c) == v for h in named) and v not in common + shared:
            shared.append(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v))
    others = None
    rest = positive[len(named):]
    best = max(common, key=lambda v: sum(v in _primary_values(h, cols) for h in rest), default=None)
    if best is not None:
        n = sum(best in _primary_values(h, cols) for h in rest)
        others = {"value": best, "count": n} if n > 0 else None
    return {"named": [h["item_id"] for h in named], "common": common, "others": others,
            "positive": len(positive), "column": cols.multi[0] if cols.multi else None, "categorical": shared}


def _noun(cols: MetadataColumns) -> str:
    """What the sentence calls history items it counts: "title" for a run whose history is watched (MovieLens, the
    default data.history_verb), "item" otherwise ("3 other cat toys titles" read as film wording on a shop)."""
    return "title" if cols.verb == "watched" else "item"


def _said_value(v: Any) -> bool:
    """A categorical cell the sentence may name: text or a finite number, not a missing cell."""
    if isinstance(v, str):
        return bool(v.strip())
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def explanation_text(expl: dict[str, Any], cols: MetadataColumns, history: list[dict[str, Any]] | None = None,
                     *, with_user_id: bool = False, names: Mapping[str, str] | None = None,
                     cold_reads: tuple[str, ...] = (), item_text: bool = True) -> str:
    """The sentence for an explanation dict (everything but ``text`` filled in).

    ``history`` is the full attribution table, largest contribution first
    (default: ``expl["history"]``, which may be cut to the top few).
    ``with_user_id``: the user tower reads a learned user-ID embedding beside
    the user features, so a ``features`` basis names both (the dict's
    ``profile`` names only the first of the chain, and its keys stay as they are).
    ``names``: ``{item_id: name}`` for the items of the catalogue that share a title (the run's
    :func:`~twotower.explain.explainer.run_item_names`); any other item is named by its title.
    ``cold_reads``: what the item tower reads of an item besides its ID (``"text"``, ``"features"``), named
    when the dict's ``cold`` says the item had no training interactions. ``item_text``: whether the item has any
    text (a dual-head tower's semantic head otherwise read the empty string every such item shares).
    """
    title = _name(expl["item"], expl["item_id"], names)
    if expl["already_seen"]:
        return f"You already {cols.verb} {title}: it is in your history, so this is not a new recommendation."
    if expl.get("cold"):
        return _cold_sentence(expl, cols, title, cold_reads)
    heads = _heads_clause(expl.get("heads"), item_text)
    if expl["basis"] != "history":
        why = "You have no history yet" if expl["reads_history"] else "This model does not read your history"
        if expl["reads_history"] and expl.get("history_left_out"):  # a history, but of items the model has not learned
            why = "The model has learned no item of your history (none had training interactions)"
        return f"{why}, so the score of {title} rests only on {_rests_on(expl, with_user_id)}{heads}."
    table = expl["history"] if history is None else history
    facts = sentence_facts(expl, cols, table)
    if not facts["named"]:
        # only leave-one-out measures a removal; gradient x input is a first-order estimate, which says nothing
        # of what removing an item would do, so it is named instead
        one = expl.get("history_window") == 1  # not "any one of them" for a one-item history
        # one item at every position (["50", "50", "50"]): "any one of them" read as several items, and removing a
        # copy leaves the others, which is why it does not lower the score
        repeated = len(table) > 1 and len({h["item_id"] for h in table}) == 1
        if one_item(expl, table):
            # its share is the history's total, exact for either method: removing it leaves the empty history
            how = (f"it is one item, repeated {len(table)} times, and removing it would not lower it" if repeated
                   else "removing that one item would not lower it")
        elif expl.get("method", "loo") != "loo":
            how = "by the first-order gradient x input estimate"
        elif repeated:
            how = (f"it is one item, repeated {len(table)} times: removing one copy leaves the others, and would not "
                   "lower it")
        else:
            how = "removing that one item would not lower it" if one else "removing any one of them would not lower it"
        if any(h.get("cold") and h["contribution"] > 0 for h in table):
            # a cold item does raise it, by its untrained vector: "removing any one of them would not lower it" was false
            how = ("none the model has learned would; what raises it comes from items without training "
                   "interactions, whose vectors it has not learned")
        total = expl.get("history_total")
        if total is not None and total > 0:
            # one by one none raises it, yet the history as a whole does (a sequence tower over a long history,
            # where the empty-history score may be 0): "it rests on the empty-history representation" was false.
            # One item is not "together" (gradxinput's first-order share of it can be <= 0 where it raises the score)
            whole = "your history as a whole does" if one else "together they do"
            return (f"No item in your history raises the score of {title} ({how}), but {whole} "
                    f"({total:+.4f} over {_rests_on(expl, with_user_id)}){heads}.")
        lifted = _lifted(expl)
        if lifted:
            return f"No item in your history raises the score of {title} ({how}), yet {lifted}{heads}."
        return (f"No item in your history raises the score of {title} ({how}); "
                f"it rests on {_rests_on(expl, with_user_id)}{heads}.")
    by_id = {h["item_id"]: h for h in table}
    named = [by_id[i] for i in facts["named"]]
    said = _join([_name(h, h["item_id"], names) for h in named])
    total = expl.get("history_total")
    if total is not None and total < 0:
        # the named items raise the score, but the history as a whole lowers it: "Because you watched X" would
        # give as the cause of the score what the numbers beside it contradict. What holds it up is the rest
        parts = [f"The score of {title} rests on {_rests_on(expl, with_user_id)}; your history lowers it overall "
                 f"({total:+.4f}), though {said} raise{'s' if len(named) == 1 else ''} it"]
    else:
        parts = [f"Because you {cols.verb} {said}"]
    if facts["categorical"] or facts["common"]:
        parts.append(f" ({'both ' if len(named) == 2 else ''}{', '.join(facts['categorical'] + facts['common'])})")
    if facts["others"] is not None:
        n, v = facts["others"]["count"], facts["others"]["value"]
        noun = _noun(cols)
        parts.append(f" and {n} other {v} {f'{noun}s that also raise' if n != 1 else f'{noun} that also raises'} its score")
    places = _places(expl)
    if total is not None and total < 0:
        lifted = _lifted(expl)
        if lifted:
            parts.append(f"; yet {lifted}")
    elif places is not None and places[1] < places[0]:
        # the named items raise its score, but the history raises other items more: "Because you watched X" alone
        # gave the history as the reason for a place the item would hold, higher, without it
        parts.append(f"; with no history it would rank higher still ({places[1]}, against {places[0]} in your list)")
    return "".join(parts) + heads + "."


def _cold_heads_clause(heads: dict[str, Any] | None, reads: tuple[str, ...] = ()) -> str:
    """A dual-head cold item's split, said after "its text": the semantic head's share, then what the collaborative
    head read. Without item features that is the zero ID vector every cold item shares; with them it is the item's
    own features (cold items of other features get other collaborative vectors: "the collaborative vector every cold
    item shares" was false there, and "its text and features (N% ..., through the semantic head)" gave the features
    to the head that does not read them)."""
    if not heads:
        return ""
    pct = _semantic_share(heads)
    share = f" ({pct}% of the score, through the semantic head)" if pct is not None else ""
    if "features" in reads:
        return f"{share} and its features (through the collaborative head)"
    return f"{share} and the collaborative vector every cold item shares"


def _shared_clause(expl: dict[str, Any], cols: MetadataColumns) -> str:
    """``"; it shares Comedy (13 items) and Animation (2) with the 50 items of your history window"`` from the
    dict's shared metadata (first multi-valued column), or "" when it shares none. A tower that reads no history
    has no window: its items are the whole history, which the sentence says the model does not read."""
    shared = expl.get("shared_metadata") or {}
    values = shared.get(cols.multi[0]) if cols.multi else None
    if not values:
        return ""
    said = [f"{v['value']} ({v['count']} item{'' if v['count'] == 1 else 's'})" if i == 0 else f"{v['value']} ({v['count']})"
            for i, v in enumerate(values[:3])]
    n = shared.get("history_items", 0)
    where = "your history window" if expl.get("reads_history", True) else "your history, which this model does not read"
    return f"; it shares {_join(said)} with the {n} item{'' if n == 1 else 's'} of {where}"


def _cold_sentence(expl: dict[str, Any], cols: MetadataColumns, title: str, reads: tuple[str, ...]) -> str:
    """An item without training interactions: no one's history trained its vector, so "Because you watched X"
    would credit co-watching that never happened (the leave-one-out numbers stay in the dict's history table,
    as what they measure: the user side). The sentence says it is cold and cites its metadata only."""
    what = {("text",): "its text", ("features",): "its features", ("features", "text"): "its text and features"}
    if expl.get("heads") and "text" not in reads:
        # a dual-head item without text: its semantic head read the empty string, as every such item's does, so
        # "its text (N% of the score, through the semantic head)" credited text the item does not have
        basis = "its features (through the collaborative head)" if "features" in reads else \
            "the vector every cold item without text shares"
        pct = _semantic_share(expl["heads"])
        if "features" in reads and pct is not None:  # the empty text's semantic vector carries its share too
            basis += f" and the semantic head's vector for items without text ({pct}% of the score)"
        return (f"{title} has no training interactions (a cold item) and no text, so its score rests on {basis}, "
                f"not on who {cols.verb} it{_shared_clause(expl, cols)}.")
    heads = _cold_heads_clause(expl.get("heads"), reads)
    if heads:  # a dual-head tower: the text is the semantic head's, any features the collaborative head's
        basis = "its text"
    else:
        basis = what.get(tuple(sorted(reads)), "the vector every cold item shares (the tower reads no text or features)")
    return (f"{title} has no training interactions (a cold item), so its score rests on {basis}{heads}, "
            f"not on who {cols.verb} it{_shared_clause(expl, cols)}.")
