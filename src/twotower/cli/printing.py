"""Catalogue text on the terminal: control characters escaped, and the item lists of `recommend` and `similar`."""
from __future__ import annotations

import codecs
import contextlib
import json
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any

__all__ = ["STDOUT", "printable", "quiet_lines", "say", "say_out", "stdout_data_write", "stdout_json", "tolerate_narrow_streams"]

#: whether the running command was given ``-q`` (main sets it around the command, through :func:`quiet_lines`)
_quiet = False


@contextlib.contextmanager
def quiet_lines(quiet: bool) -> Iterator[None]:
    """Within it, :func:`say` writes nothing where ``quiet``; restored after, so that a later command run in the
    same process (a test, a notebook calling ``main``) speaks again."""
    global _quiet
    before, _quiet = _quiet, quiet
    try:
        yield
    finally:
        _quiet = before


def say(line: str, *, quiet_too: bool = False) -> None:
    """An information line on stderr: which index answered, what was written where. It is neither a warning nor the
    command's output, so ``-q`` (warnings, errors and the output only) leaves it out as it leaves out the INFO log
    lines; printed, not logged, because it reads without the log's time and logger name. ``quiet_too``: a line
    printed under ``-q`` as well, where the user cannot do without it: the address a server listens on (a quiet
    server, whose uvicorn logs at warning, said nothing of where it was)."""
    if quiet_too or not _quiet:
        print(line, file=sys.stderr)


def say_out(line: str) -> None:
    """An information line among a command's output on stdout (a hint below train's table, index build's opening
    line): left out under ``-q`` as :func:`say`'s are, and kept on stdout otherwise, where scripts have read it."""
    if not _quiet:
        print(line)


def _writes_unicode(stream: Any) -> bool:
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name.startswith("utf")
    except LookupError:
        return False


def tolerate_narrow_streams() -> None:
    """stdout and stderr in an encoding that lacks some characters (``LC_ALL=C`` with ``PYTHONUTF8=0``, a Latin-1
    locale, a Windows code page) write those as escapes (``Mis\\xe9rables``) instead of ending the command with a
    UnicodeEncodeError traceback halfway through a list of titles."""
    for stream in (sys.stdout, sys.stderr):
        if not _writes_unicode(stream) and getattr(stream, "errors", None) in ("strict", "surrogateescape") \
                and hasattr(stream, "reconfigure"):
            codecs.register_error(_ESCAPE, _escape)
            stream.reconfigure(errors=_ESCAPE)


_ESCAPE = "twotower-escape"


def _escape(err: UnicodeError) -> tuple[bytes, int]:
    """``backslashreplace``, except that the bytes a file name undecodable in the locale came in as
    (``surrogateescape``, the C locale's own handler) are written back as they were."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    bad = err.object[err.start:err.end]
    out = b"".join(bytes([ord(c) - 0xDC00]) if 0xDC80 <= ord(c) <= 0xDCFF
                   else c.encode("ascii", "backslashreplace") for c in bad)
    return out, err.end


#: the file name a failed write of :func:`stdout_data_write` is raised with
STDOUT = "<stdout>"


def stdout_data_write(text: str) -> None:
    """Write ``text``, data such as the CSV of ``--out -``, to stdout as UTF-8 whatever the locale: an ASCII stdout
    (``LC_ALL=C``) wrote ``Mis\\xe9rables`` escapes into the CSV, ids that no longer join with the data they came
    from. The files the commands write are UTF-8 alike; lines for people still go through the escaping stream."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    try:
        if buffer is None or _writes_unicode(stream):
            stream.write(text)
            return
        stream.flush()  # what was printed before stays before
        buffer.write(text.encode("utf-8", "surrogateescape"))  # undecodable bytes a name came in as, back as they were
    except OSError as e:
        if e.filename is not None:
            raise
        # named, so the CLI tells stdout's failure (> /dev/full) from a file's: written in one piece, the data
        # leaves nothing in the buffer to fail again (OSError keeps its subclass: a closed pipe stays BrokenPipeError)
        raise OSError(e.errno, e.strerror, STDOUT) from e


def stdout_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` for printing: non-ASCII text as is where stdout writes Unicode, as ``\\u00e9`` escapes where it
    does not (the JSON stays valid and reads back the same; a backslash-escaped byte inside a string would not)."""
    return json.dumps(obj, ensure_ascii=not _writes_unicode(sys.stdout), **kwargs)


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
        print(stdout_json(answer, default=str))
        return
    # "top 200 for user u0" over 67 lines read as a list cut short: the heading says the count, as --json's shortfall
    print(title if len(items) >= k else f"{title} ({len(items)} listed: fewer than k={k} are left after the exclusions)")
    for it in items:
        extra = f"  [{printable(it['genres'])}]" if isinstance(it.get("genres"), str) and it.get("genres") else ""
        if it.get("title"):
            print(f"{it['rank']:>3}. {printable(it['title'])} (item {printable(it['item_id'])}, "
                  f"score {it['score']:.3f}){extra}")
        else:  # a catalogue without titles: the id once, not "150 (item 150, ...)"
            print(f"{it['rank']:>3}. item {printable(it['item_id'])} (score {it['score']:.3f}){extra}")
