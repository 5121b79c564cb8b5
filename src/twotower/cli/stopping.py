"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) stops a command that writes outputs as Ctrl-C does: the
atomic writes unwind (their temporaries removed), one line says what the outputs hold, and the status is the
shell's for death by the signal (143; 130 for Ctrl-C), as `twotower train` and `twotower index build` have it.

By default SIGTERM ended Python on the spot: the temporary file or folder of the write under way was left beside
the output, nothing was said, and the status was -15, so the user could not tell whether the output was the
earlier one, the new one or half of it. :func:`sigterm_keeps_files` is for commands writing files (``--out``,
``--csv``, ``--plot``), :func:`sigterm_keeps_folder` for those whose folder is swapped in whole.

Every command runs under :func:`terminate_as_interrupt` (``cli.main``), so one that only reads and prints
(``explain``, ``index info``, ``search query``) ends with ``terminated (SIGTERM)`` and 143 too; these wrappers add
what the outputs hold to that line.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

__all__ = ["Terminated", "interrupt_status", "path_identity", "sigterm_keeps_files", "sigterm_keeps_folder", "sigterm_keeps_folder_at", "sigterm_keeps_out", "sigterm_says",
           "stopped_by", "terminate_as_interrupt"]

Command = Callable[[argparse.Namespace], int]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that it unwinds like Ctrl-C."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's preemption, `timeout`, `kill`) stops the command as Ctrl-C does.

    By default SIGTERM ends Python on the spot: the temporary files of an atomic write are left behind and
    nothing says that the checkpoint can be resumed. Only the main thread may set a handler, and one set by
    someone else (an embedding application, or an outer ``terminate_as_interrupt``) is kept.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def raise_terminated(signum: int, frame: object) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stopped_by(e: KeyboardInterrupt) -> str:
    """The start of the line a stopped command prints."""
    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"


def interrupt_status(e: KeyboardInterrupt) -> int:
    """The shell's status for death by the signal (128 + its number), which schedulers read."""
    return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)


def sigterm_says(left: Callable[[argparse.Namespace], Callable[[], str]]) -> Callable[[Command], Command]:
    """``cmd`` with SIGTERM stopping it as Ctrl-C does; ``left(args)``, called before the work, returns what to say
    of the outputs once it stopped ("" for nothing)."""

    def wrap(cmd: Command) -> Command:
        @functools.wraps(cmd)
        def run(args: argparse.Namespace) -> int:
            say = left(args)
            try:
                with terminate_as_interrupt():
                    return cmd(args)
            except KeyboardInterrupt as e:
                line = say()
                print(stopped_by(e) + (f": {line}" if line else ""), file=sys.stderr)
                return interrupt_status(e)

        return run

    return wrap


def path_identity(path: str | os.PathLike[str] | None) -> tuple[int, int] | None:
    """The file or folder at ``path`` (a link's target) as (device, inode), None when there is none: outputs are
    moved into place whole, so a new identity says the new one is there."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def sigterm_keeps_files(*flags: str) -> Callable[[Command], Command]:
    """For a command writing the files its ``flags`` (argparse destinations) name, each moved into place whole
    (with its record beside it, if it has one): one clause per file given says whether it was written."""

    def left(args: argparse.Namespace) -> Callable[[], str]:
        from twotower.cli.paths import STDOUT

        outs = [out for out in (getattr(args, f, None) for f in flags) if out not in (None, STDOUT)]
        before = {out: path_identity(out) for out in outs}

        def said() -> str:
            if len(outs) > 1 and all(b is None and path_identity(o) is None for o, b in before.items()):
                return (f"it stopped before {' and '.join(outs)} were written, so no file was saved; run the command "
                        "again to write them")
            clauses = [_file_left(out, before[out]) for out in outs]
            again = [c.rpartition("; run the command again")[0] or c for c in clauses[:-1]]  # said once, last
            return "; ".join(again + clauses[-1:])

        return said

    return sigterm_says(left)


#: `recommend --users ... --out`, `similar --items ... --out`: the CSV and its record
sigterm_keeps_out = sigterm_keeps_files("out")


def _file_left(out: str, before: tuple[int, int] | None) -> str:
    """What a stopped command left at ``out``: a CSV and its record are moved into place together, after both are
    written in full (:func:`~twotower.cli.provenance.write_csv_and_record`), so either the new pair is there or
    the earlier one."""
    from twotower.cli.provenance import record_path

    record = record_path(out)
    if record is None:  # a device or FIFO, written into: what reached it is all there is
        return f"{out} is written into directly, so it may hold part of the rows; run the command again"
    now = path_identity(out)
    if now is not None and now != before:
        return (f"{out}" + (f" (and its record {record.name})" if record.is_file() else "")
                + " was written before it stopped: it holds this command's output"
                + (" (the previous file was replaced)" if before is not None else ""))
    if before is not None:
        kept = (f"the previous {out} and its record {record.name} are kept, intact, as they were" if record.is_file()
                else f"the previous {out} is kept, intact, as it was")
        return f"it stopped before {out} was written; {kept}; run the command again to replace it"
    return f"it stopped before {out} was written, so no file was saved; run the command again to write it"


def sigterm_keeps_folder_at(where: Callable[[argparse.Namespace], str | None]) -> Callable[[Command], Command]:
    """For a command whose output folder, ``where(args)`` (None: none), is swapped in whole
    (:func:`~twotower.utils.atomic.atomic_dir`): a bi-encoder, cross-encoder, ONNX export or dataset copy killed
    while it was saved left its temporary folder beside it."""

    def left(args: argparse.Namespace) -> Callable[[], str]:
        out = where(args)
        before = path_identity(out)
        earlier = before is not None and _holds_files(out)  # an empty --out holds nothing to keep
        return lambda: "" if out is None else _folder_left(out, before, earlier)

    return sigterm_says(left)


#: search prepare/index/train, rerank train, export: ``--out``
sigterm_keeps_folder = sigterm_keeps_folder_at(lambda args: getattr(args, "out", None))


def _holds_files(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    except OSError:  # a file, not a folder (refused by the command itself), or unreadable
        return False


def _folder_left(out: str, before: tuple[int, int] | None, earlier: bool) -> str:
    """What a stopped command left at ``out``: a Ctrl-C in the second after the save (the saved model is loaded back,
    the summary printed) said "interrupted" alone, though the new output had replaced the earlier one."""
    if path_identity(out) not in (None, before):
        return f"{out} was written before it stopped: it holds this command's output" + (
            " (the previous one was replaced)" if earlier else "")
    if earlier:
        return (f"it stopped before {out} was written; the previous output there is kept, intact, as it was; "
                "run the command again to replace it")
    return f"it stopped before {out} was written, so nothing was saved there; run the command again to write it"
