"""The core text of each refusal the CLI, the HTTP service and the Python API share: one function each.

Each interface adds only where the value came from, in its own style: the command line its flag
(``--k: ...``), HTTP the JSON field path (``body.k: ...`` in the 422's message, ``loc`` in its details, or
``history[1]: ...`` and ``"field"`` in a 404), Python the argument (``k: ...``, ``history[1]: ...``). The
words after the location are these functions', so a client reading one interface's refusal reads the
others'. No torch here: the CLI calls these before a run is loaded.
"""
from __future__ import annotations

import contextlib
import numbers
from typing import Any, Callable, Iterable, Iterator, Sequence

from twotower.config import MAX_K
from twotower.errors import ConfigError, NotFoundError

def unknown_user_hint(history: str = "the history") -> str:
    """What to send for a user unseen in training; ``history``: how the interface names a new user's items
    (``--history`` on the command line, which said HTTP's "the history")."""
    return (f"a user not in the run's training data is served from their items: send them as {history} "
            "(item ids, oldest first) instead of the user id")


UNKNOWN_USER_HINT = unknown_user_hint()  # HTTP's and Python's words

#: an id of no characters, said by every interface that takes one (HTTP: for "" and "  " alike, as an id loses its
#: surrounding spaces first)
EMPTY_ID = 'is empty ("" or only spaces)'

#: how many unknown ids a refusal names (then a count of the rest): a history of thousands stays one line
MAX_NAMED_UNKNOWN = 10
#: what :func:`rows_naming_every_unknown` calls each list of ids, on every surface that takes one
USER_LIST = "user list"  # `recommend --users`, tt.recommend's user_ids
ITEM_LIST = "item list"  # `similar --items`, tt.similar's item_ids
ITEM_ID_FILTER = "item_id filter"  # filters.item_id (`--filter item_id=...`)

__all__ = ["COUNT_NOT_TEXT", "k_refusal", "range_refusal", "top_refusal", "number_words", "filters_shape_refusal", "filter_values_refusal", "id_list_refusal", "user_features_shape_refusal", "python_type_words", "user_features_refusal", "known_user_features_refusal", "refuse_oversized_user_features", "empty_history_refusal", "EMPTY_ID", "empty_user_id_refusal", "server_bound_note", "too_many", "too_long", "locate", "located",
           "hint_unknown_user", "unknown_user_hint", "UNKNOWN_USER_HINT", "MAX_NAMED_UNKNOWN", "rows_naming_every_unknown", "USER_LIST", "ITEM_LIST",
           "ITEM_ID_FILTER"]


def server_bound_note(setting: str) -> str:
    """``(this server's max_k: `twotower serve --max-k` sets it, up to 10000)``: a bound the HTTP service sets lower
    than the CLI's and Python's, named as the server's and with the flag that raises it."""
    upto = f", up to {MAX_K}" if setting == "max_k" else ""
    return f"(this server's {setting}: `twotower serve --{setting.replace('_', '-')}` sets it{upto})"


def too_many(upper: int, what: str, got: Any, setting: str | None = None) -> str:
    """``must hold at most 500 item ids (this server's max_history: ...), got 501``: a list over a service bound,
    in the same words from HTTP (a 422) and from the service's Python API (a ConfigError). ``setting``: the
    server setting the bound is (None: a fixed bound of the request schema)."""
    note = f" {server_bound_note(setting)}" if setting else ""
    return f"must hold at most {upper} {what}{note}, got {got}"


def too_long(upper: int, got: Any, what: str = "") -> str:
    """``must be at most 256 characters, got 257``: a string over a bound of the service's request schema (an id,
    a filter value; ``what``: ``"a field name"`` for a mapping's key, whose location is the mapping's, as the
    key itself is not echoed), in the same words from HTTP (a 422) and from the service's Python API."""
    return f"{what + ' ' if what else ''}must be at most {upper} characters, got {got}"


def user_features_refusal(features: Any) -> str | None:
    """None when ``features`` (a new user's ``user_features``, column -> value) is within the HTTP schema's bounds,
    else why not, in its 422's words: ``must hold at most 64 columns, got 65``, ``a column name must be at most 64
    characters, got 65`` (the name is not echoed). One rule for POST /recommend and /explain, RecommenderService from
    Python and `twotower recommend/explain --user-features`: the CLI and Python echoed a 10,000-character name whole
    as "not a user feature of this run". Anything but a mapping: None (its own check says what is wrong)."""
    from collections.abc import Mapping

    from twotower.serving.settings import MAX_FIELD_NAME_CHARS, MAX_USER_FEATURES

    if not isinstance(features, Mapping):
        return None
    if len(features) > MAX_USER_FEATURES:
        return too_many(MAX_USER_FEATURES, "columns", len(features))
    over = next((len(c) for c in features if isinstance(c, str) and len(c) > MAX_FIELD_NAME_CHARS), None)
    return None if over is None else too_long(MAX_FIELD_NAME_CHARS, over, "a column name")


def known_user_features_refusal(id_field: str = "user_id", history_field: str = "a history") -> str:
    """Why ``user_features`` sent with a known user (``id_field``: how the interface names it, ``user_id`` over HTTP,
    ``user_ids`` from ``tt.recommend``, ``--user`` on the command line; ``history_field``: how it names a new user's
    history, ``--history`` there) are refused, after the ``user_features: `` (``--user-features: ``) the caller puts
    before it: POST /recommend, /explain, RecommenderService, ``tt.recommend`` and ``recommend/explain
    --user-features`` said it in three wordings."""
    return (f"the features of a user unseen in training go with {history_field}, not with {id_field} (a known user "
            "is read with the features it was trained with)")


def refuse_oversized_user_features(features: Any) -> None:
    """:func:`user_features_refusal` raised as HTTP's 422 words it after its field (ConfigError ``user_features:
    must hold at most 64 columns, got 65``): RecommenderService, ``tt.recommend``, ``tt.explain_by_id`` and every
    other Python entry point that takes a new user's raw ``user_features``."""
    if (why := user_features_refusal(features)) is not None:
        raise ConfigError(f"user_features: {why}")


#: a list length sent as text, said after what was sent: ids take text or integers, counts integers only
COUNT_NOT_TEXT = "only ids accept text as well as integers"


def _python_words(value: Any) -> str:
    """A value that is no integer, as a Python caller wrote it (``'5'``, ``5.5``, ``True``, ``None``), bounded."""
    if isinstance(value, str) and len(value) > 20:
        return f"a string of {len(value)} characters"
    said = repr(value)
    return said if len(said) <= 40 else f"a {type(value).__name__}"


def python_type_words(value: Any) -> str:
    """A Python value's type in words, as HTTP names a JSON one (``a string``, ``a list``, ``an int``)."""
    if isinstance(value, str):
        return "a string"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def filters_shape_refusal(sent: str) -> str:
    """Why ``filters`` that are no mapping are refused (``"filters": "genres=Comedy"``), after the caller's location
    (``body.filters: ``, ``filters: ``); ``sent``: what was sent, in the caller's terms (``a string``). HTTP said
    pydantic's "Input should be a valid dictionary", Python "filters is a mapping of ...; got str"."""
    return f'must map item metadata fields to lists of values, e.g. {{"genres": ["Comedy"]}}, got {sent}'


def filter_values_refusal(field: str, sent: str, value: Any = None) -> str:
    """Why a filter field's values that are no list are refused (``{"genres": "Comedy"}``), after the field's location
    (``body.filters.genres: ``, ``filters.genres: ``): the example lists ``value`` when it is text (the one value
    meant), else a placeholder. HTTP said pydantic's "Input should be a valid list"."""
    import json

    example = json.dumps({field: [value if isinstance(value, str) and len(value) <= 40 else "..."]})
    return f"must be a list of values, e.g. {example}, got {sent}"


def id_list_refusal(sent: str, value: Any = None, *, oldest_first: bool = False, what: str = "item") -> str:
    """Why a list of item ids that is no list is refused (``"history": "i1"``, ``exclude=5``), after the caller's
    location (``body.history: ``, ``history: ``, ``exclude: ``); ``sent``: what was sent, in the caller's terms (``a
    string``); ``oldest_first``: a history's; ``what``: whose ids (``"user"`` for ``user_ids``). The example lists
    ``value`` when it is one id (text or an integer, the one item meant), else a placeholder. HTTP said pydantic's
    "Input should be a valid list", Python "history is a list of item ids, oldest first, e.g. ['i1']; got a string"."""
    import json

    one = (isinstance(value, str) and len(value) <= 40) or (type(value) is int and abs(value) < 10**12)
    order = ", oldest first" if oldest_first else ""
    example: list[Any] = [value if one else "..."]
    if isinstance(value, str) and one and "," in value:  # "1,2" is a comma list: ["1,2"] was one unknown id
        example = [part.strip() for part in value.split(",") if part.strip()] or example
    return f"must be a list of {what} ids{order}, e.g. {json.dumps(example)}, got {sent}"


#: a new user's user_features as an example: the schema's description's
USER_FEATURES_EXAMPLE = '{"age": 25, "gender": "F"}'


def user_features_shape_refusal(sent: str) -> str:
    """Why ``user_features`` that are no mapping are refused (``"user_features": "age=3"``), after the caller's
    location (``body.user_features: ``, ``user_features: ``). HTTP said pydantic's "Input should be a valid
    dictionary", Python "user_features must be an object of column -> value, got str"."""
    return f"must map user feature columns to values, e.g. {USER_FEATURES_EXAMPLE}, got {sent}"


def k_refusal(k: Any, upper: int = MAX_K, *, server_setting: str | None = None, sent: str | None = None) -> str | None:
    """None when ``k`` is a list length from 1 to ``upper``, else why not: ``must be at least 1, got 0``, or
    ``must be at most 10000 (twotower.config.MAX_K), got 10001``. ``server_setting``: the service's setting that
    ``upper`` is (``"max_k"``), said as the server's with the flag that raises it, since the CLI and Python allow
    up to :data:`~twotower.config.MAX_K`. A ``k`` that is no integer: ``must be an integer from 1 to 100, got '5'
    (only ids accept text as well as integers)``, what was sent said in the caller's terms: ``sent`` (HTTP: ``a
    string``, ``null``), else as Python writes it. HTTP said ``must be a JSON integer such as 5 (not a string ...)``
    where Python said ``must be an integer from 1 to 100, got '5'``."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        said = f"must be an integer from 1 to {upper}, got {_python_words(k) if sent is None else sent}"
        return f"{said} ({COUNT_NOT_TEXT})" if isinstance(k, str) else said
    got = int(k) if abs(k) < 10**15 else f"a number of {len(str(abs(int(k))))} digits"  # a bounded echo
    if k < 1:
        return f"must be at least 1, got {got}"
    if k > upper:
        why = server_bound_note(server_setting) if server_setting else "(twotower.config.MAX_K)"
        return f"must be at most {upper} {why}, got {got}"
    return None


def number_words(value: Any) -> str:
    """A number as a refusal echoes it: an integer whole (a bounded echo past 15 digits, as :func:`k_refusal`'s), a
    float as typed where it is whole (``-1``, not ``-1.0``), else as Python writes it (``0.5``, ``1e+300``, ``nan``)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value)) if abs(value) < 10**15 else f"a number of {len(str(abs(int(value))))} digits"
    if isinstance(value, float) and value.is_integer() and abs(value) < 10**15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def range_refusal(value: Any, lo: Any = None, hi: Any = None, *, lo_open: bool = False, hi_open: bool = False,
                  why: str = "", hi_said: str | None = None) -> str | None:
    """None when the number ``value`` lies in the range, else why not, in the words of :func:`k_refusal` (``--k:
    must be at least 1, got 0``) after the caller's location (``--epochs: ``): ``must be at least 1, got 0``,
    ``must be at most 1024, got 2000``, ``must be between 0 and 65535, got -1``, ``must be more than 0 and at most 1,
    got 0`` (``lo_open`` / ``hi_open``: the bound itself is out, "more than" / "less than"). A range with two bounds
    names both. ``why``: what the range is, in parentheses after it (``(0: no validation)``); ``hi_said``: the upper
    bound as written where its digits say less (``2**64 - 1``). NaN lies in no range."""
    inside = ((lo is None or (value > lo if lo_open else value >= lo))
              and (hi is None or (value < hi if hi_open else value <= hi)))
    if inside:
        return None
    low = None if lo is None else f"{'more than' if lo_open else 'at least'} {number_words(lo)}"
    high = None if hi is None else f"{'less than' if hi_open else 'at most'} {hi_said or number_words(hi)}"
    if low and high:
        said = (f"between {number_words(lo)} and {hi_said or number_words(hi)}" if not (lo_open or hi_open)
                else f"{low} and {high}")
    else:
        said = low or high or "a number"
    return f"must be {said}{f' ({why})' if why else ''}, got {number_words(value)}"


def top_refusal(top: Any) -> str | None:
    """None when ``top`` (explain's history items listed) is an integer >= 0, else why not: ``must be at least 0
    (history items listed), got -1``, the words of `explain --top`, POST /explain's ``top`` and tt.explain_by_id. No
    upper bound: past the user tower's window (at most model.user.history_len items) the whole window is listed, so
    the answer is bounded by the run; POST /explain alone refused past 500 (serve --max-history, a request's longest
    history), where the CLI and Python listed the window."""
    return range_refusal(top, 0, why="history items listed")


def empty_history_refusal(feature_columns: Sequence[str] = (), features_field: str = "user_features", *,
                          untrained: str | None = None) -> str:
    """Why an empty new-user history is refused: it would be answered with the empty-history list, the same for
    every caller, which no one sending a history asks for. ``feature_columns``: the user features the run's user
    tower reads (none: today's words alone); with them, a user with no history yet is served from their features
    alone (``features_field``: how the interface names them, ``--user-features`` on the command line), said here.
    ``untrained``: why a history of items reads as empty (every one without training interactions,
    :func:`~twotower.pipeline.similar.untrained_history_refusal`), said instead of "no item ids given"."""
    said = ("no item ids given; a new user's history needs at least one item id, oldest first" if untrained is None
            else f"{untrained}; a new user's history needs at least one item with training interactions")
    if feature_columns:
        said += (f"; a user with no history yet is served from {features_field} alone, with a value for at least "
                 f"one of this run's user features ({', '.join(feature_columns)})")
    return said


def empty_user_id_refusal(history: str = "the history") -> str:
    """Why an empty user id is refused, with what to send instead; ``history``: how the interface names a new user's
    items (``--history`` on the command line). ``unknown user ''`` (the CLI and Python) did not say the id was
    missing, nor, as POST /recommend's 422 did, what to send."""
    return (f"{EMPTY_ID}; send a known user's id, or a new user's items as {history} (item ids, oldest first) "
            "instead")


def locate(e: NotFoundError, where: str) -> NotFoundError:
    """``e`` with its message led by ``where`` (``--history``, ``history[1]``), once: a located error is not
    located again."""
    if not e.message.startswith(where + ": "):
        e.message = f"{where}: {e.message}"
        e.args = (e.message,)
    return e


@contextlib.contextmanager
def located(where: str) -> Iterator[None]:
    """An unknown id raised inside is named with ``where``: ``item_ids[1]: unknown item 'x' (...)``."""
    try:
        yield
    except NotFoundError as e:
        raise locate(e, where)


def hint_unknown_user(e: NotFoundError, run: Any, history: str = "the history") -> NotFoundError:
    """``e`` (an unknown user) with :func:`unknown_user_hint` (``history``: as there) when the run's user tower reads
    a history and no user ID, so a user who first appears after training (the test split) can be served: said by
    ``recommend --user`` alone; POST /recommend, POST /explain, ``explain --user`` and Python answered "unknown user"
    without a way on."""
    tower = run.model.user_tower
    hint = unknown_user_hint(history)
    if getattr(tower, "id_emb", None) is None and getattr(tower, "uses_history", False) and hint not in e.message:
        e.message += f"; {hint}"
        e.args = (e.message,)
    return e


def rows_naming_every_unknown(
    ids: Iterable[Any], row: Callable[[Any], int], at: Callable[[int, NotFoundError], BaseException],
    what: str = "history",
) -> list[int]:
    """``row(i)`` of each id of ``ids``; when some are unknown, the first one's error raised through ``at(pos, e)``
    (which locates it in the interface's words: ``history[1]``, ``--history``), naming every unknown id after it:
    ``history[1]: unknown item 'nope' (...); the history holds 2 unknown ids: 'nope', 'nope2'`` (the first
    :data:`MAX_NAMED_UNKNOWN` of them, then a count). A history with several unknown ids named only the first, so
    fixing it took one request per id."""
    rows: list[int] = []
    first: tuple[int, NotFoundError] | None = None
    unknown: dict[Any, None] = {}  # in order, each once
    for pos, i in enumerate(ids):
        try:
            rows.append(row(i))
        except NotFoundError as e:
            first = first or (pos, e)
            unknown[e.id] = None
    if first is None:
        return rows
    pos, e = first
    if len(unknown) > 1:
        named = list(unknown)
        more = f" and {len(named) - MAX_NAMED_UNKNOWN} more" if len(named) > MAX_NAMED_UNKNOWN else ""
        e.message += (f"; the {what} holds {len(named)} unknown ids: "
                      + ", ".join(repr(i) for i in named[:MAX_NAMED_UNKNOWN]) + more)
        e.args = (e.message,)
    raise at(pos, e)
