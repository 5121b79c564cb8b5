"""How a data file's bytes become text: the codec (``data.encoding``), byte-order marks, and the line and
character a decoding error names.

Every reader of interactions and feature tables opens files through these, so one setting and one wording hold
for CSV, JSON lines and the SASRec format alike.
"""
from __future__ import annotations

import codecs
import io
import logging
import re
from pathlib import Path

from twotower.config import check_encoding
from twotower.errors import DataError

__all__ = ["ENCODING_SETTING", "check_wide_bom", "codec_for", "decode_error", "first_char", "one_line", "read_text", "warn_if_utf8"]

log = logging.getLogger("twotower.data.readers")  # the readers' logger: what users filter on stays the same


#: the setting that names the text encoding, in the interaction readers' words (a command with its own flag
#: passes that flag instead)
ENCODING_SETTING = "data.encoding"


def codec_for(encoding: str) -> str:
    """The codec a file is opened with: UTF-8 as ``utf-8-sig``, so the byte-order mark Windows tools write
    (Excel's "CSV UTF-8") is not read as part of the first column's name."""
    check_encoding(encoding)
    name = codecs.lookup(encoding).name
    return "utf-8-sig" if name == "utf-8" else encoding


def check_wide_bom(path: Path, label: str, encoding: str) -> None:
    """Refuse a UTF-16/32 file (by its byte-order mark) read in another encoding, and a file without one read as
    utf-16 / utf-32 (:func:`_check_bom_needed`).

    Excel's "Unicode Text" is UTF-16: read as UTF-8 it failed on byte 0xff with advice to try cp1252, and read
    as cp1252 every name and id came out as 'u\\x00s\\x00e\\x00r...', reported only as a missing column.
    """
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        wide = "utf-32"
    elif head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        wide = "utf-16"
    else:
        _check_bom_needed(head, label, encoding)
        return
    if not codecs.lookup(encoding).name.startswith(wide):
        raise DataError(f"the file opens with a {wide.upper()} byte-order mark (Excel's 'Unicode Text' is UTF-16), "
                        f"but is read as {encoding!r}: set data.encoding={wide}", file=label, row=1, unit="line")


def _check_bom_needed(head: bytes, label: str, encoding: str) -> None:
    """Refuse a file without a byte-order mark read as ``utf-16`` / ``utf-32``, the codecs that tell the byte order
    from it: Python raised "UTF-16 stream does not start with BOM", a traceback from the SASRec reader's format check
    and "could not read as csv (UnicodeError: ...)" from the table reader, naming neither data.encoding nor the fix."""
    wide = codecs.lookup(encoding).name
    if not head or wide not in ("utf-16", "utf-32"):  # an empty file is refused as empty by the reader
        return
    raise DataError(f"the file has no byte-order mark, which data.encoding={encoding} needs to tell the byte order: "
                    f"set data.encoding={wide}-le (or {wide}-be) for {wide.upper()} text without one, or the file's "
                    "own encoding (utf-8, the default, for most files)", file=label, row=1, unit="line")


def warn_if_utf8(path: Path, label: str, encoding: str, setting: str = ENCODING_SETTING) -> None:
    """Warn when a file read in a legacy encoding (data.encoding=cp1252 ...) is UTF-8 text with accents.

    data.encoding is one setting for every file, so a UTF-8 item table beside cp1252 interactions read as
    "CafÃ©", a key no interaction has, without an error. Non-ASCII UTF-8 is almost never valid cp1252 text.
    ``setting`` names the encoding setting as the command takes it (``search prepare``'s is ``--encoding``).
    """
    if codecs.lookup(encoding).name.startswith("utf"):
        return
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)  # the first MiB says enough; an incremental decoder allows a character cut at its end
    if head.isascii():
        return
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return  # not UTF-8: the setting is right
    word = next((w for w in re.split(rb"[\s,;|\t\"]+", head) if not w.isascii()), head[:40])
    log.warning("%s: read as %s (%s), but it is UTF-8 text: %r comes out as %r. %s applies to every file; re-save "
                "this one in %s, or the others in UTF-8 and drop the setting", label, encoding, setting,
                word.decode("utf-8", errors="replace"), word.decode(encoding, errors="replace"), setting, encoding)


def read_text(path: Path, encoding: str) -> io.StringIO:
    """The whole file as text (pandas' JSON reader stops at a byte-order mark: 'Expected object or value at
    position 0', and takes only UTF-8 from a path)."""
    return io.StringIO(path.read_text(encoding=codec_for(encoding)))


def first_char(path: Path, encoding: str) -> str:
    """The first character that is not white space or a byte-order mark ('' for none in the first 64 Ki characters)."""
    with open(path, encoding=codec_for(encoding), errors="replace") as fh:
        head = fh.read(65536).lstrip("\ufeff \t\r\n")
    return head[:1]


def one_line(e: BaseException) -> str:
    """An exception's message on one line (pandas' parser messages end in a newline)."""
    return " ".join(str(e).split())


def decode_error(path: Path, label: str, e: UnicodeDecodeError, encoding: str) -> DataError:
    """The first undecodable byte of the file, by line (the exception's position is within a chunk)."""
    codec = codecs.lookup(encoding).name
    fix = ("set data.encoding to the file's encoding (cp1252 or latin-1 for most Windows and Excel exports), "
           "or re-save the file as UTF-8" if codec == "utf-8" else
           f"set data.encoding to the file's encoding (it is {encoding!r} now; utf-8 is the default)")
    what = "UTF-8" if codec == "utf-8" else encoding
    data = path.read_bytes()
    try:
        data.decode(codec)  # not utf-8-sig: its positions would count from after the byte-order mark
    except UnicodeDecodeError as bad:
        if "\n".encode(codec) == b"\n":  # lines are counted in bytes only where a newline is one byte
            start = data.rfind(b"\n", 0, bad.start) + 1
            char = len(data[start: bad.start].decode(codec, errors="replace").lstrip("\ufeff")) + 1
            return DataError(f"not {what} text: byte 0x{data[bad.start]:02x} at character {char} cannot be "
                             f"decoded; {fix}", file=label, row=data.count(b"\n", 0, bad.start) + 1, unit="line")
        return DataError(f"not {what} text: byte 0x{data[bad.start]:02x} at byte offset {bad.start} cannot be "
                         f"decoded; {fix}", file=label)
    return DataError(f"not {what} text ({one_line(e)}); {fix}", file=label)
