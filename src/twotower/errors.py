"""Exception hierarchy shared by every layer.

User mistakes (bad files, bad config, unknown ids) raise a subclass of
:class:`TwoTowerError`; the CLI prints its message without a traceback and the
HTTP service maps it to a status code in one place.
"""
from __future__ import annotations

from typing import Sequence

__all__ = [
    "TwoTowerError",
    "DataError",
    "ConfigError",
    "LengthPastModel",
    "NotFoundError",
    "IntegrityError",
    "OverloadError",
    "TrainingDiverged",
    "OutOfMemory",
    "out_of_memory",
]


class TwoTowerError(Exception):
    """Base class for every error this package raises on purpose."""


class DataError(TwoTowerError, ValueError):
    """Bad input data; names the file, row and column where known.

    ``row`` is 1-based and counts data rows as a user sees them in a
    spreadsheet: the header is row 1, so the first data row is row 2.
    ``unit`` names what ``row`` counts where a file has no spreadsheet rows:
    ``"line"`` (a JSON lines file, or the physical line of a text file) or
    ``"record"`` (a Parquet file's 1-based record number), or ``"iloc"`` (a DataFrame's 0-based position,
    ``df.iloc[row]``). ``line``: the editor's line that row starts on, where it is another number (a quoted line
    break earlier in a CSV file: its row 4 is line 6), said beside the row: ``row 4 (line 6)``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
        unit: str = "row",
        line: int | None = None,
    ) -> None:
        self.file = file
        self.row = row
        self.column = column
        self.unit = unit
        self.line = line if line != row else None
        where = []
        if file is not None:
            where.append(f"file {file!s}")
        if row is not None:
            where.append(f"{unit} {row}" + (f" (line {self.line})" if self.line is not None else ""))
        if column is not None:
            where.append(f"column {column!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
        self.message = message


class ConfigError(TwoTowerError, ValueError):
    """An invalid configuration value; the message names the setting."""


class LengthPastModel(ConfigError):
    """A word-piece limit past the model's position embeddings (the forward pass would fail with a tensor-size
    RuntimeError). ``setting`` names it as the caller gave it (``max_length``, ``query_max_length``), so a command
    can say it under the flag typed without reading the message back."""

    def __init__(self, setting: str, value: int, limit: int, model: str) -> None:
        super().__init__(f"{setting} {value} is more word pieces than the model {model} can read ({limit}); "
                         f"give at most {limit}")
        self.setting, self.value, self.limit, self.model = setting, value, limit, model


class NotFoundError(TwoTowerError, KeyError):
    """An unknown user, item, run or file. ``kind`` and ``id`` say which."""

    def __init__(self, kind: str, id: object, hint: str = "") -> None:
        self.kind = kind
        self.id = id
        self.near: tuple[str, ...] = ()  # known ids that differ from it in case or leading zeros (not_among)
        msg = f"unknown {kind} {id!r}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)
        self.message = msg

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message

    @classmethod
    def not_among(cls, kind: str, id: object, n: int, near: Sequence[str] = ()) -> NotFoundError:
        """``unknown item 'x' (not among the 60 known items)``: one wording for an id missing from a set of ``n``,
        so that the CLI (a run's vocabulary) and the service (its catalogue) name the same thing; the catalogue
        said "catalogue items" where the vocabulary said "known items". ``near``: known ids that differ from it
        only in leading zeros or case (``'000480'`` for ``480``, which a JSON integer or a spreadsheet gives)."""
        hint = f"not among the {n} known {kind}s"
        if near:
            shown = ", ".join(repr(i) for i in near[:3]) + (f" and {len(near) - 3} more" if len(near) > 3 else "")
            hint += (f"; {shown} {'is' if len(near) == 1 else 'are'} known: ids are text, so leading zeros and "
                     "case count")
        err = cls(kind, id, hint)
        err.near = tuple(near)  # what a caller's own hint must not contradict (cli/flags.flag_named)
        return err


class IntegrityError(TwoTowerError):
    """A saved artefact is corrupted, truncated or belongs to another model."""


class OverloadError(TwoTowerError):
    """The service is at capacity; the caller should retry later (HTTP 429)."""


class TrainingDiverged(TwoTowerError):
    """A training step's loss is not finite (NaN or infinite); the step's update is not applied."""


class OutOfMemory(MemoryError):
    """Memory ran out where the package knows what sizes it (training: the estimate and the settings to lower); the
    message is whole, and the CLI prints it in one line. A MemoryError, so callers that catch those still do."""


def out_of_memory(e: BaseException) -> bool:
    """True for an allocation that failed: Python's and numpy's MemoryError, torch's CPU allocator ("can't allocate
    memory", a RuntimeError) and its CUDA OutOfMemoryError."""
    if isinstance(e, MemoryError):
        return True
    return isinstance(e, RuntimeError) and (type(e).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(e))


def memory_detail(e: BaseException) -> str:
    """What an allocation failure says of its size, in a few words: numpy's "Unable to allocate 3.5 GiB for an array
    with shape (...)", torch's "you tried to allocate N bytes"; empty when it says nothing (Python's own)."""
    import re

    text = str(e).strip()
    tried = re.search(r"tried to allocate ([\d.]+) ?(\w+)", text, re.IGNORECASE)  # CUDA's: "Tried to allocate 2.00 GiB"
    if tried:
        size, unit = tried.groups()
        shown = f"{float(size) / 2**30:,.1f} GiB" if unit == "bytes" else f"{size} {unit}"
        return f"an allocation of {shown} failed"
    return text.splitlines()[0] if text else ""
