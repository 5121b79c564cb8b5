"""One writer at a time for a folder that a command rewrites file by file (a run folder).

Every file of a run is written atomically, but a run is many files: two ``twotower train --out R`` at once
interleaved them, and the one that finished last sealed a ``manifest.json`` over the other's ``config.json``
and vocabularies beside its own weights (a run that fails to load, or loads the wrong settings). The lock is an
advisory ``flock`` on a file inside the folder, so the kernel releases it when the holder dies (``kill -9``
included): a killed writer never leaves the folder locked.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from twotower.errors import ConfigError

try:  # POSIX only; elsewhere writers are not serialised (as before)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "exclusive_writer", "active_writer", "idle_lock_file", "lock_path", "writes_folder"]

F = TypeVar("F", bound=Callable[..., Any])

#: lock files this process holds, each with the thread that holds it: `twotower train` holds its run folder across
#: train_run and its closing evaluation, and train_run takes it again inside (a second flock on another open of the
#: same file would refuse the process itself); another thread of the process is refused as another process is
_held: dict[Path, int] = {}

#: the lock file a writer holds inside the folder; kept after the writer ends (removing a file others may have
#: opened would let a second writer lock a different inode)
LOCK_FILE = ".twotower.lock"


#: how long a writer retries a lock it finds taken before refusing: a reader's probe (:func:`active_writer`) holds
#: it for microseconds, and a writer starting at that moment must not be refused as if another writer held it
_RETRY_S = 0.5


def _record(path: Path) -> tuple[int | None, str | None]:
    """(pid, command) the holder wrote into the lock file: ``"123 twotower train"``; (None, None) if unreadable.

    An older version wrote the pid alone, so the command may be None."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid, _, what = path.read_text(encoding="utf-8").strip().partition(" ")
        return int(pid), what.strip() or None
    return None, None


def _holder(path: Path, what: str) -> str:
    """``"twotower train (pid 123)"``: who holds the lock, for a ``what`` refused by it (``"another <what>"`` when
    the holder is the same kind of command or did not say which it is)."""
    pid, held_by = _record(path)
    name = f"another {what}" if held_by in (None, what) else held_by
    return name + (f" (pid {pid})" if pid is not None else "")


def _lock_now(fd: int) -> bool:
    """Take ``fd``'s exclusive flock, retrying for a moment; False when another process keeps it."""
    deadline = time.monotonic() + _RETRY_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def lock_path(folder: str | os.PathLike[str], *, beside: bool = False) -> Path:
    """The lock file of ``folder``: ``FOLDER/.twotower.lock``, or with ``beside`` ``PARENT/.NAME.twotower.lock``.

    ``beside`` is for a folder swapped in whole (:func:`twotower.utils.atomic.atomic_dir`, an index built outside
    a run): a lock file inside it would be swapped out with the old contents, and the next writer would lock the
    new folder's file, a different inode. A link is followed, as the swap follows it to the folder it replaces.
    """
    folder = Path(folder)
    if not beside:
        return folder / LOCK_FILE
    real = Path(os.path.realpath(folder))
    return real.parent / f".{real.name}{LOCK_FILE}"


def active_writer(folder: str | os.PathLike[str]) -> str | None:
    """``"twotower train (pid 123)"`` while another process holds ``folder``'s writer lock, else None.

    For readers: creates nothing (a folder without a lock file has no writer) and holds the lock only for the
    probe. A lock this process holds is no other writer (`twotower train` loads the run it has just written).
    """
    path = lock_path(folder)
    if fcntl is None or Path(os.path.abspath(path)) in _held:
        return None
    return _probe(path)


def _probe(path: Path) -> str | None:
    """Who holds the lock file ``path`` now (as :func:`active_writer` says it), else None; holds it only to probe."""
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below; read-only: a reader creates no file
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, what = _record(path)
            return (what or "another command") + (f" (pid {pid})" if pid is not None else "")
        except OSError:
            return None
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return None


def idle_lock_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a lock file twotower left (``FOLDER/.twotower.lock`` or ``PARENT/.NAME.twotower.lock``,
    kept after its writer ended) that no process holds now: not the user's file, so a folder holding only such
    files is an empty one to the "not yours to replace" checks, and they are not listed among the user's files."""
    path = Path(path)
    if not (path.name == LOCK_FILE or (path.name.startswith(".") and path.name.endswith(LOCK_FILE))):
        return False
    if path.is_symlink() or not path.is_file():
        return False
    # a lock file this process holds: an open flock of ours refuses the probe's shared lock as another's would
    return fcntl is None or _probe(path) is None


def _created_chain(folder: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would create for ``folder``, deepest first."""
    missing: list[Path] = []
    for p in (folder, *folder.parents):
        if p.exists():
            break
        missing.append(p)
    return missing


@contextlib.contextmanager
def exclusive_writer(folder: str | os.PathLike[str], what: str, fix: str, *, beside: bool = False,
                     sweep: bool = False) -> Iterator[None]:
    """Hold ``folder``'s writer lock for the ``with`` block; ConfigError at once when another process holds it.

    ``what`` names the command (``"twotower train"``): it is recorded in the lock file, so that a command refused
    by this one names it, and ``fix`` says what to do instead. A folder
    this call had to create is removed again when the block leaves nothing in it but the lock file (a refused
    or failed command leaves no empty run folder behind). ``beside``: the lock file lies beside the folder
    (:func:`lock_path`), for a folder the writer swaps in whole.

    ``sweep``: once the lock is taken, the temporaries that dead writers (``kill -9`` while saving) left beside the
    folder are removed (:func:`~twotower.utils.atomic.sweep_dead_temporaries`), whichever folder they were for: a
    ~90 MB ``.X.tmp-PID-...`` stayed until a later write into that very X. A lock taken again further in (a command
    around a Python call) sweeps nothing more.
    """
    folder = Path(folder)
    path = lock_path(folder, beside=beside)
    key = Path(os.path.abspath(path))
    if key in _held:
        if _held[key] == threading.get_ident():  # taken further out in this thread: the outer holder releases it
            yield
            return
        # another thread of this process: two Python calls side by side, one would swap its folder over the other's
        raise ConfigError(f"{folder}: {_holder(path, what)} is writing this folder; {fix}")
    base = path.parent  # the folder itself, or (beside) its parent
    created = _created_chain(base)
    try:
        base.mkdir(parents=True, exist_ok=True)
        lock_file = open(path, "a+", encoding="utf-8")
    except OSError as e:
        for p in created:  # the folders made for the lock (deepest first), still empty
            with contextlib.suppress(OSError):
                p.rmdir()
        # "Permission denied: /nfs/.x.twotower.lock" named a file the user never asked for, not the folder given
        # (root on an NFS share with root_squash, or a special file system, passes the os.access checks before it)
        raise ConfigError(f"{folder}: cannot write its lock file {path} ({e.strerror or e}); choose a folder this "
                          "user can write into") from e
    try:
        with lock_file as fh:
            if fcntl is not None and not _lock_now(fh.fileno()):
                raise ConfigError(f"{folder}: {_holder(path, what)} is writing this folder; {fix}")
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()} {what}\n")  # read by a refused writer and by readers (active_writer)
            fh.flush()
            _held[key] = threading.get_ident()
            try:
                if sweep:
                    _sweep_beside(folder)
                yield
            finally:
                _held.pop(key, None)
    finally:
        with contextlib.suppress(OSError):
            if created and [p.name for p in base.iterdir()] == [path.name]:
                path.unlink()
                for p in created:
                    p.rmdir()


def _sweep_beside(folder: Path) -> None:
    from twotower.utils.atomic import sweep_dead_temporaries

    for p in sweep_dead_temporaries(Path(os.path.realpath(folder)).parent):
        logging.getLogger(__name__).info("removed %s, left by a writer that is gone (killed while it saved)", p)


#: writes_folder's ``check``: (the folder, the parameter's name, the call's bound arguments) -> None, raising
Check = Callable[[Any, str, dict[str, Any]], None]


def writes_folder(param: str, what: str, *, check: Check | None = None) -> Callable[[F], F]:
    """Decorator for a Python API function that swaps the folder its argument ``param`` names in whole
    (``finetune_bi_encoder``'s ``out_dir``, ``SearchIndex.save``'s ``path``): the folder's writer lock, kept beside
    it, is held for the whole call, as the commands hold ``--out``'s (they hold it further out, and the call takes it
    again). A second writer of the folder, another process or another thread, is refused at once, before any work:
    before, two calls with one ``out_dir`` ran side by side and the one that finished last silently replaced the
    other's folder. ``what`` names the writer to the one refused.

    ``check`` is called first, before the lock and any work, with the folder, ``param`` and the call's arguments:
    it refuses a folder the call must not replace (a non-empty folder of another kind, as ``--out`` is refused;
    :func:`twotower.search.artefacts.out_check`). Once the lock is held, dead writers' temporaries beside the
    folder are removed (``exclusive_writer``'s ``sweep``), as the commands do for ``--out``."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                folder = bound.arguments[param]
            except (TypeError, KeyError):  # the function's own TypeError, raised by the call below
                return fn(*args, **kwargs)
            if not isinstance(folder, (str, os.PathLike)):
                return fn(*args, **kwargs)  # the function says what is wrong with it
            if check is not None:
                check(folder, param, dict(bound.arguments))
            with exclusive_writer(folder, what, f"wait for it to finish, or give another {param}", beside=True,
                                  sweep=True):
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
