"""Flags several subcommands read alike: ``--threads``, ``--user-features``, and unknown ids named by their flag."""
from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from twotower.errors import ConfigError, DataError, NotFoundError
from twotower.utils.wording import json_error

__all__ = ["OneId", "TypedCount", "fields_as_flags", "number_flag_refusal", "check_range", "typed_words", "add_filter_exact_max_flag", "check_k_flag", "count_or_typed", "add_filter_flag", "check_filter_exact_max", "filter_at", "filter_item_at", "flag_named", "id_place", "parse_filters", "parse_user_features",
           "say_flag_note", "user_features_named"]


def id_place(flag: str, what: str, pos: int, n: int) -> str:
    """Where the command line names an id of a list flag in a refusal: its place, 1-based as an empty item of
    the list is named (``--history: item 2 of 4``, ``--users: user 2 of 2``, ``--filter item_id: item 1 of 3``).
    HTTP and Python name the same id by its 0-based index (``history[1]``, ``user_ids[1]``,
    ``filters.item_id[0]``); the words after the place are theirs. ``pos``: 0-based."""
    return f"{flag}: {what} {pos + 1} of {n}"


@contextlib.contextmanager
def flag_named(flag: str) -> Iterator[None]:
    """An unknown id raised inside names the flag it came from: ``--history: unknown item '9' (...)``."""
    try:
        yield
    except NotFoundError as e:
        from twotower.pipeline.refusals import locate  # the location rule of HTTP's and Python's

        locate(e, flag)
        parts = str(e.id).replace(";", " ").split() if isinstance(e.id, str) else []
        # `--history '50 181'` or '50;181': one unknown id; not where a known id is named instead ('café crème'
        # for 'Café crème' was told "--history takes a comma list, e.g. --history café,crème")
        if flag in ("--history", "--users") and len(parts) > 1 and not e.near:
            e.message += f"; {flag} takes a comma list, e.g. {flag} {','.join(parts[:3])}"
        raise


@dataclass(frozen=True)
class TypedCount:
    """A list length flag's value that is no integer (``--k 5.5``), as typed: the command refuses it where it checks
    the length, in the words of HTTP and Python (argparse said "argument --k: invalid int value: '5.5'")."""

    text: str

    def __str__(self) -> str:
        return self.text


def count_or_typed(text: str) -> int | TypedCount:
    """``--k``'s argparse type: the integer typed (as ``type=int`` reads it), else the text kept for the refusal."""
    try:
        return int(text)
    except ValueError:
        return TypedCount(text)


def typed_words(text: str) -> str:
    """A flag's value as typed, quoted, bounded as Python's echo is: ``'5.5'``, ``a value of 30 characters``."""
    return repr(text) if len(text) <= 20 else f"a value of {len(text)} characters"


def number_flag_refusal(flag: str, text: str, kind: type = int) -> str:
    """Why a number flag's value is refused when it is no number of its ``kind`` (``int`` or ``float``):
    ``--top: must be an integer, got '1.5'``, the words of ``--k: must be an integer from 1 to 10000, got '5.5'``.
    argparse said "argument --top: invalid int value: '1.5'" after the usage lines; its range, where the flag has
    one, is checked by the command with the number typed."""
    return f"{flag}: must be {'an integer' if kind is int else 'a number'}, got {typed_words(text)}"


def fields_as_flags(message: str, cls: str, flag_of: Callable[[str], str | None]) -> str:
    """``message`` with each ``<cls>.<field>`` (``ServiceSettings.max_k: must be ...``) replaced by the field's flag,
    ``flag_of(field)``; a field it gives no flag for (None) is left as written. A config names its fields with its
    class for a Python caller; the command that built it from flags names the flags its user typed."""
    return re.sub(rf"\b{re.escape(cls)}\.(\w+)", lambda m: flag_of(m[1]) or m[0], message)


def check_range(flag: str, value: Any, lo: Any = None, hi: Any = None, *, lo_open: bool = False,
                hi_open: bool = False, why: str = "", hi_said: str | None = None) -> None:
    """A number flag's value out of its range refused naming the flag, in the words of ``--k 0`` (``--epochs: must be
    at least 1, got 0``, ``--port: must be between 0 and 65535, got -1``; the rule is
    :func:`twotower.pipeline.refusals.range_refusal`'s). ``value`` None: the flag was not given."""
    if value is None:
        return
    from twotower.pipeline.refusals import range_refusal

    why = range_refusal(value, lo, hi, lo_open=lo_open, hi_open=hi_open, why=why, hi_said=hi_said)
    if why is not None:
        raise ConfigError(f"{flag}: {why}")


def check_k_flag(k: Any) -> None:
    """``--k``'s list length refused in the words of ``tt.recommend`` and POST /recommend (``--k: must be an integer
    from 1 to 10000, got '5.5'``): what was typed is quoted, bounded as Python's echo is."""
    from twotower.pipeline.refusals import k_refusal

    sent = typed_words(k.text) if isinstance(k, TypedCount) else None
    if (why := k_refusal(k, sent=sent)) is not None:
        raise ConfigError(f"--k: {why}")


class OneId(argparse.Action):
    """A flag that names one id (``similar --item``, ``recommend --user``, ``explain --user/--item``), given twice
    with two values, is refused naming both: argparse kept the last, so ``similar --item 50 --item 181`` printed
    181's list alone without a word about 50. The same value twice is no clash. ``plural``: the flag that takes
    several (``--items``), named with the values in its own form; None where the command answers for one. ``hint``:
    what to do instead, where "run the command once for each" is poor advice (``demo`` trains for minutes)."""

    def __init__(self, option_strings: list[str], dest: str, plural: str | None = None, hint: str | None = None,
                 **kwargs: Any) -> None:
        self.plural, self.hint = plural, hint
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        # white space at either end dropped, as from the ids of --users / --history and of an HTTP body (whose
        # answer echoes the id so): `--user ' 42'` was refused as unknown where {"user_id": " 42"} was served
        values = values.strip() or values
        seen = getattr(namespace, f"_{self.dest}_given", None) or []
        if values not in seen:
            seen = [*seen, values]
        setattr(namespace, f"_{self.dest}_given", seen)
        if len(seen) > 1:
            given = " and ".join(repr(v) for v in seen)
            if self.plural is not None:
                # an id holding a comma is written as a JSON array there (cli/id_lists.py), quoted for the shell
                odd = any("," in v or v.lstrip().startswith("[") for v in seen)
                ids = f"'{json.dumps(seen)}'" if odd else ",".join(seen)
                hint = f"for the lists of several, write {self.plural} {ids}"
            else:
                hint = self.hint or "run the command once for each"
            raise argparse.ArgumentError(self, f"given {len(seen)} times with different values ({given}); it takes "
                                               f"one id: {hint}")
        setattr(namespace, self.dest, values)


def refuse_json_with_out(args: argparse.Namespace, lists_of: str) -> None:
    """``--json`` prints the lists as JSON records, ``--out`` writes them as CSV (with its record FILE.json).

    Together, the CSV was written and ``--json`` ignored without a word, leaving CSV in a file the user named
    ``.json``: refused, saying how to get either (``recommend`` and ``similar`` alike).
    """
    if args.json and args.out:
        raise ConfigError(f"--json prints the lists of {lists_of} as JSON records and --out writes them as CSV: "
                          f"pass one of them (JSON in a file: --json > FILE)")


def _threads(args: argparse.Namespace, default: int | None = None) -> None:
    """--threads, else TWOTOWER_THREADS, else ``default`` (None: the libraries' own count)."""
    from twotower.utils.runtime import set_threads, threads_from_env

    set_threads(getattr(args, "threads", None) or threads_from_env(default))


def parse_user_features(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--user-features JSON`` (with ``--history``: a new user) as a dict, or None when not given."""
    if getattr(args, "user_features", None) is None:
        return None
    if args.history is None:  # the refusal of POST /recommend, /explain and tt.recommend, with the flags' names
        from twotower.pipeline.refusals import known_user_features_refusal

        given = "--users" if getattr(args, "users", None) is not None else "--user"
        raise ConfigError(f"--user-features: {known_user_features_refusal(given, '--history')}")
    try:
        features = json.loads(args.user_features)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--user-features: not JSON ({json_error(e)}); e.g. "
                          '\'{"age": 25, "gender": "F"}\'') from None
    if not isinstance(features, dict):  # named as JSON names it: "got list" and "got NoneType" were Python's words
        got = ("null" if features is None else "a boolean" if isinstance(features, bool)
               else "a number" if isinstance(features, (int, float)) else "a string" if isinstance(features, str)
               else "an array")
        from twotower.pipeline.refusals import user_features_shape_refusal  # the words of HTTP's 422 and Python's

        raise ConfigError(f"--user-features: {user_features_shape_refusal(got)}")
    from twotower.pipeline.refusals import user_features_refusal  # the words of HTTP's 422 and RecommenderService

    if (why := user_features_refusal(features)) is not None:
        raise ConfigError(f"--user-features: {why}")
    return features


def refuse_empty_history_early(history: list[str] | None, run_dir: str) -> None:
    """``--history ''`` refused before the (slow) run load, in the words of HTTP's 422 and Python, on a run without
    a user feature table. A run with one is left to decide once loaded (:func:`check_new_history`): there a
    user with no history yet is served from ``--user-features`` alone, and the refusal says so."""
    from pathlib import Path

    if history is None or history or (Path(run_dir) / "features" / "users.json").is_file():
        return
    from twotower.pipeline.refusals import empty_history_refusal

    raise ConfigError(f"--history: {empty_history_refusal()}")


def user_features_words(message: str) -> str | None:
    """``user_features.age: ...`` (HTTP's and Python's field) as the command line names it, ``--user-features age:
    ...``; None for a message about something else."""
    head, sep, rest = message.partition(":")
    if not sep or not (head == "user_features" or head.startswith("user_features.")):
        return None
    column = head.removeprefix("user_features").removeprefix(".")
    return f"--user-features{' ' + column if column else ''}:{rest}"


def say_feature_notes(notes: list[str]) -> None:
    """A new user's feature values training never saw (``run.new_user_feature_notes``), one ``warning:`` line each on
    stderr, named by the flag as a refused value is: the log line ``... WARNING twotower.pipeline.recommend:
    user_features.gender: ...`` named a field no flag has."""
    import sys

    for note in notes:
        print(f"warning: {user_features_words(note) or note}", file=sys.stderr)


def say_flag_note(note: str, field: str, flag: str) -> None:
    """A warning worded for HTTP's and Python's ``field`` (``history: 60 items given; ...``) as one ``warning:`` line
    on stderr named by the command line's ``flag`` (``warning: --history: 60 items given; ...``), as
    :func:`say_feature_notes` says the features': it was a timestamped log line naming a field no flag has."""
    import sys

    head, sep, rest = note.partition(":")
    print(f"warning: {flag}:{rest}" if sep and head == field else f"warning: {note}", file=sys.stderr)


@contextlib.contextmanager
def user_features_named() -> Iterator[None]:
    """A bad ``--user-features`` column or value named by the flag, as ``--filter genres: ...`` names a filter:
    ``--user-features age: expected a JSON number, got the string 'x'`` where HTTP and Python say
    ``user_features.age: ...`` (the command line printed those words, naming a field no flag has)."""
    try:
        yield
    except (ConfigError, DataError) as e:
        said = user_features_words(e.message if isinstance(e, DataError) else str(e))
        if said is None:
            raise
        raise type(e)(said) from None


def check_history_flag(history: list[str], run: Any, features: dict[str, Any] | None) -> list[str]:
    """``--history`` checked with the loaded run: empty only with ``--user-features`` that describe the user on a run
    whose user tower reads them (tt.recommend's and POST /recommend's rule); then ``--user-features``' columns and
    values (POST /recommend's checks, before the index is opened), a bad one named by the flag."""
    from twotower.pipeline.artifacts import check_new_history

    with user_features_named():
        history = check_new_history(history, "--history", run=run, user_features=features,
                                    features_field="--user-features")
        run.encode_new_user_features(features)
    return history


def check_history_ids(history: list[str], run: Any, flag: str = "--history") -> None:
    """Refuse the unknown ids of a new user's ``--history``, the first named by its place as an empty item is
    (1-based, ``--history: item 2 of 4: unknown item 'nope' (...)``), then every other one: HTTP and Python name
    its place (``history[1]: ...``) and the command line named none, so in a history of 40 ids the user had to find
    it. The words after the place are theirs."""
    from twotower.pipeline.refusals import locate, rows_naming_every_unknown

    n = len(history)
    with flag_named(flag):
        rows_naming_every_unknown(history, run.item_vocab.index,
                                  lambda pos, e: locate(e, id_place(flag, "item", pos, n)))


def filter_help(route: str) -> str:
    """``--filter``'s help, naming the HTTP route whose ``filters`` it is."""
    return ("FIELD=VALUE[,VALUE...]: only items whose metadata FIELD holds one of the values, as "
            f'the "filters" of {route} ({{"FIELD": ["VALUE", ...]}}) and filters= from Python; repeat it for more '
            "fields, each of which an item must match (--filter genres=Comedy,Drama --filter year=1995 is "
            '{"genres": ["Comedy", "Drama"], "year": ["1995"]}); item_id=ID,ID: those items only; a JSON array '
            "for values holding commas (--filter 'title=[\"a, b\"]')")


def add_filter_flag(p: argparse.ArgumentParser, route: str) -> None:
    """``--filter FIELD=VALUE[,VALUE...]``, repeatable: the ``filters`` of ``route``'s JSON body."""
    p.add_argument("--filter", action="append", metavar="FIELD=VALUES", dest="filter", help=filter_help(route))


def add_filter_exact_max_flag(p: argparse.ArgumentParser, *, serve: bool = False) -> None:
    """``--filter-exact-max N``: filters matching at most N items rank them exactly, broader ones widen the index's
    search, on an index that can read its vectors back exactly (``FaissIndex._lossless_vectors``: an IVF with an
    ``RFlat`` refine is one, a plain IVF is not and filters in its search); ``serve``'s setting, on ``recommend`` and ``similar`` too with the same default
    (``ServiceSettings.filter_exact_max``), so a list ranked through an ANN index with a filter is the one a server
    started with the same value answers."""
    from twotower.serving.settings import ServiceSettings  # light: a dataclass and the errors module

    what, same = ("requests whose filters", "") if serve else ("--filter flags that", ", as `serve --filter-exact-max`")
    p.add_argument("--filter-exact-max", type=int, default=ServiceSettings.filter_exact_max,
                   help=f"{what} match at most this many items rank them exactly; more widen the index's search "
                        f"instead (default %(default)s{same}); used by an index that keeps exact vectors (exact, "
                        "flat, hnsw, or an IVF with an RFlat refine stage such as ivfpq,RFlat); ignored by any other: "
                        "a plain ivf or ivfpq index filters during its search, a lossy refine (Refine(SQ8)) widens it")


def check_filter_exact_max(args: argparse.Namespace) -> int:
    """``--filter-exact-max`` checked before the run loads, in serve's words (``--filter-exact-max: must be at least
    0, got -1``): ServiceSettings' bounds (tt.recommend's and tt.similar's), said as ``--k 0`` is."""
    from twotower.serving.settings import INT64_MAX, INT_BOUNDS, checked_filter_exact_max

    lo, hi = INT_BOUNDS["filter_exact_max"]
    check_range("--filter-exact-max", args.filter_exact_max, lo, hi)
    check_range("--filter-exact-max", args.filter_exact_max, hi=INT64_MAX, hi_said="2**63 - 1")
    return checked_filter_exact_max(args.filter_exact_max, "--filter-exact-max")


def add_exclude_items_flag(p: argparse.ArgumentParser, route: str, beside: str, each: str) -> None:
    """``--exclude-items ID,ID``: the ``exclude_items`` of ``route``'s JSON body (``exclude=`` from Python), on top of
    ``beside``; with the ``each`` flag (a list of queries), left out of every list."""
    p.add_argument("--exclude-items", metavar="ID,ID", default=None,
                   help=f"item ids never to list (already in the cart, already shown), on top of {beside}: "
                        f'the "exclude_items" of {route} and exclude= from Python; with {each}, left out of '
                        "every list; a JSON array for ids holding commas")


def filter_at(field: str) -> str:
    """How the command line names a filter field in a refusal (HTTP and Python: ``filters.genres``)."""
    return f"--filter {field}"


def filter_item_at(pos: int, n: int) -> str:
    """How the command line names the ``pos``-th (0-based) of ``n`` ids of ``--filter item_id=...``: 1-based, as
    ``--history``'s (``--filter item_id: item 2 of 2``); HTTP and Python say ``filters.item_id[1]``."""
    return id_place(filter_at("item_id"), "item", pos, n)


def parse_filters(given: list[str] | None) -> dict[str, list[str]] | None:
    """``--filter FIELD=VALUE[,VALUE...]`` flags as the JSON ``filters`` they stand for, ``{"FIELD": [VALUE, ...]}``
    (None when none is given). Values are a comma list or a JSON array, as ``--history``'s ids; a field given twice
    is refused (a JSON object holds a field once: its values go in one flag)."""
    if not given:
        return None
    from twotower.cli.id_lists import parse_id_list

    out: dict[str, list[str]] = {}
    for text in given:
        field, eq, values = text.partition("=")
        field = field.strip()
        if not eq or not field:
            raise ConfigError(f"--filter: FIELD=VALUE[,VALUE...], e.g. --filter genres=Comedy,Drama; got {text!r}")
        if field in out:
            raise ConfigError(f"{filter_at(field)} is given twice; list its values in one flag, e.g. "
                              f"--filter {field}={','.join([*out[field], values.strip()][:3])}")
        out[field] = parse_id_list(values, filter_at(field))
    return out


def refuse_missing_inputs(files: dict[str, list[str] | None]) -> None:
    """Refuse an input file that does not exist (``{flag: [paths]}``) before the run loads: a missing
    ``--history-from`` file was reported only after the run and the held-out file had been read (seconds; a
    minute on a large run), in words that named no flag. A pipe (``<(...)``, ``/dev/stdin``) and ``-`` are
    refused too: the file is read more than once."""
    from pathlib import Path

    for flag, paths in files.items():
        for path in paths or ():
            if path == "-":  # read as a file named "-" once the run had loaded: "file -: file not found"
                raise ConfigError(f"{flag} -: standard input is not read (an input file is read more than once); "
                                  "write it to a file first and pass that file")
            if path is not None and not Path(path).is_file():
                from twotower.data.readers import CHECK_PATH, pipe_refusal  # pandas: only to say what is wrong

                pipe = pipe_refusal(Path(path))
                if pipe is not None:
                    raise DataError(f"{flag}: {pipe}", file=str(path))
                what = "is a folder, not a file" if Path(path).is_dir() else "file not found"
                raise DataError(f"{flag}: {what}; {CHECK_PATH}",
                                file=str(path))
