"""How a sentence names an item: its title, made distinct where another item of the catalogue has it too.

MovieLens-100K lists 18 films under two ids each with one title ("Kull the Conqueror (1997)" is both 266 and
680): "Because you watched Kull the Conqueror (1997)" did not say which one was watched, and beside the
recommended Kull the Conqueror (1997) it read as if the item explained itself. A title held by one item is
used as it is. A shared one gets the item's year where the year alone tells it from the others and the title
does not end in a parenthesis already ("Sabrina (1954)" / "Sabrina (1995)"; "Twin (1990) (1997)" would read as
two years), else the item's id ("Kull the Conqueror (1997) [item 680]"). Only the catalogue's own values are read, so a run always names an item the same way.

:func:`name_of` is that name for any item (an item without a title is ``item 42``): the sentences and the service's
``display_name`` field (which the explorer page shows) both read it, and the demo prints these names too.
:func:`title_column` is the column they all take titles from: ``data.title_col``, else a column named ``title``
(a run without the setting showed its ``title`` column on the explorer page while its sentences said "item 42").
"""
from __future__ import annotations

import math
import unicodedata
from collections import Counter, defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

from twotower.utils.whole_numbers import cell_text

__all__ = ["distinct_names", "catalogue_names", "name_of", "title_column", "YEAR_COLUMN", "TITLE_COLUMN"]

#: the item column whose value may tell two items with one title apart (MovieLens' release year)
YEAR_COLUMN = "year"
#: the item column that names items when the run does not set ``data.title_col``
TITLE_COLUMN = "title"


def title_column(title_col: str | None, columns: Iterable[str]) -> str | None:
    """The item column that names a run's items: ``title_col`` (``data.title_col``) when set, else a column
    called :data:`TITLE_COLUMN` when the item table has one, else None (items named by id). The service's item
    records, the explorer page, the explanation sentences and ``run.title`` all ask this, so they agree."""
    if title_col:
        return title_col
    return TITLE_COLUMN if TITLE_COLUMN in columns else None


def _year(value: Any) -> str | None:
    """A year cell as the title would print it (``1995.0`` -> ``"1995"``); None when missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        return None
    return str(int(value)) if float(value).is_integer() else str(value)


def distinct_names(titles: Sequence[Any], id_at: Callable[[int], str],
                   years: Sequence[Any] | None = None) -> dict[str, str]:
    """``{item_id: name}`` for the items whose title is another item's title too (row ``r`` has ``titles[r]``,
    ``id_at(r)`` and ``years[r]``); every other item is left out and named by its title.

    A missing title (None, NaN or empty) is never shared: such an item is named by its id already. A number is
    a title as its text (:func:`~twotower.utils.whole_numbers.cell_text`: ``1917``, ``1917.0`` -> ``"1917"``).
    The names differ from each other, and a name by year is no title of the catalogue.
    """
    titles = [cell_text(t) for t in titles]  # a number read from Parquet or JSON lines is a title (the film 1917)
    # titles compared as they read: "é" as one code point and as "e" + a combining accent print alike, and the
    # sentence named two such items "Title é" both
    counts = Counter(_reads_as(t) for t in titles if isinstance(t, str) and t)
    shared: dict[str, list[int]] = defaultdict(list)
    for r, t in enumerate(titles):
        if isinstance(t, str) and t and counts.get(_reads_as(t), 0) > 1:
            shared[_reads_as(t)].append(r)
    taken = set(counts)
    out: dict[str, str] = {}
    for rows in shared.values():
        ys = {r: _year(years[r]) for r in rows} if years is not None else {}
        per_year = Counter(y for y in ys.values() if y is not None)
        for r in rows:
            y, title = ys.get(r), titles[r]  # each item keeps its own spelling
            by_year = f"{title} ({y})"
            if (y is not None and per_year[y] == 1 and not title.rstrip().endswith(")")
                    and _reads_as(by_year) not in taken):
                out[id_at(r)] = by_year
            else:  # the year is missing, shared, after a parenthesis, or another item's title: the id is unique
                out[id_at(r)] = f"{title} [item {id_at(r)}]"
    return out


def _reads_as(title: str) -> str:
    """A title as it reads (Unicode NFC): the spellings that print alike compare equal."""
    return unicodedata.normalize("NFC", title)


def catalogue_names(columns: Mapping[str, Sequence[Any]], title_col: str | None,
                    id_at: Callable[[int], str]) -> dict[str, str]:
    """:func:`distinct_names` of a catalogue held column by column (``columns[title_col]`` the titles, the
    :data:`YEAR_COLUMN` column the years when there is one); empty without a title column (items named by id)."""
    titles = columns.get(title_col) if title_col else None
    return {} if titles is None else distinct_names(titles, id_at, columns.get(YEAR_COLUMN))


def name_of(title: Any, item_id: Any, names: Mapping[str, str] | None = None) -> str:
    """An item's name: its distinct name when ``names`` (:func:`distinct_names`) has one, else its title, else
    ``item 42`` when it has none (a missing title, or the item's own id standing in for one: "Because you
    watched 20." read like a number). A title that is a number reads as its text (the film ``1917``, read from
    Parquet as ``1917.0``), as the item's text embeddings read it; NaN is no title."""
    if names and str(item_id) in names:
        return names[str(item_id)]
    text = cell_text(title)
    return text if text not in (None, "") and text != str(item_id) else f"item {item_id}"
