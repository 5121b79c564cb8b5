"""One writer at a time for a folder that a command rewrites file by file (a run folder).

Every file of a run is written atomically, but a run is many files: two ``twotower train --out R`` at once
interleaved them, and the one that finished last sealed a ``manifest.json`` over the other's ``config.json``
and vocabularies beside its own weights (a run that fails to load, or loads the wrong settings). The lock is an
advisory ``flock`` on a file inside the folder, so the kernel releases it when the holder dies (``kill -9``
included): a killed writer never leaves the folder locked.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from twotower.errors import ConfigError

try:  # POSIX only; elsewhere writers are not serialised (as before)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "exclusive_writer"]

#: folders this process holds the lock of: `twotower train` holds its run folder across train_run and its closing
#: evaluation, and train_run takes it again inside (a second flock on another open of the same file would refuse
#: the process itself)
_held: set[Path] = set()

#: the lock file a writer holds inside the folder; kept after the writer ends (removing a file others may have
#: opened would let a second writer lock a different inode)
LOCK_FILE = ".twotower.lock"


def _holder(path: Path) -> str:
    """``" (pid 123)"`` from the lock file (what the holder wrote there), else nothing."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return f" (pid {int(path.read_text(encoding='utf-8').split()[0])})"
    return ""


def _created_chain(folder: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would create for ``folder``, deepest first."""
    missing: list[Path] = []
    for p in (folder, *folder.parents):
        if p.exists():
            break
        missing.append(p)
    return missing


@contextlib.contextmanager
def exclusive_writer(folder: str | os.PathLike[str], what: str, fix: str) -> Iterator[None]:
    """Hold ``folder``'s writer lock for the ``with`` block; ConfigError at once when another process holds it.

    ``what`` names the command in the message (``"twotower train"``), ``fix`` says what to do instead. A folder
    this call had to create is removed again when the block leaves nothing in it but the lock file (a refused
    or failed command leaves no empty run folder behind).
    """
    folder = Path(folder)
    key = Path(os.path.abspath(folder))
    if key in _held:  # taken further out in this process: the outer holder releases it
        yield
        return
    created = _created_chain(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    try:
        with open(path, "a+", encoding="utf-8") as fh:
            if fcntl is not None:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise ConfigError(f"{folder}: another {what}{_holder(path)} is writing this folder; {fix}") from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            _held.add(key)
            try:
                yield
            finally:
                _held.discard(key)
    finally:
        with contextlib.suppress(OSError):
            if created and [p.name for p in folder.iterdir()] == [LOCK_FILE]:
                path.unlink()
                for p in created:
                    p.rmdir()
