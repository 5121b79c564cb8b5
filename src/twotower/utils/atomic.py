"""Atomic file writes: a crash leaves the old file or the new one, never half of one.

Every artefact (checkpoint, vocabulary, index, cache) is written to a temporary
file in the same directory, flushed and fsynced, then moved over the target
with :func:`os.replace`, which is atomic on POSIX and Windows. The finished file
gets the mode a plain ``open()`` would give it (``0o666 & ~umask``), or the mode
of the file it replaces. A symlinked target is written through: its resolved file
is replaced and the link kept. A target that is not a regular file (``/dev/null``,
a FIFO, ``/dev/stdout``) is written straight into, as there is nothing to replace.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import errno
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Iterator

from twotower.errors import ConfigError, IntegrityError

__all__ = [
    "check_output_dir",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "atomic_write_set",
    "json_text",
    "atomic_path",
    "atomic_dir",
    "atomic_files",
    "resolve_write_target",
    "read_json",
    "sha256_file",
    "sweep_dead_temporaries",
    "sha256_bytes",
]


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(str(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tmp_prefix(target: Path) -> str:
    """``.NAME.tmp-PID-sSTART-hHOST-`` (mkstemp adds its random letters, then ``.tmp``): the writer's pid and, where
    /proc tells it, its start time, so a temporary of a killed writer is told from a live one even once the pid is
    reused by another process (``.NAME.tmp-PID-`` alone was then kept for ever); and :func:`_pid_space`, the pids'
    namespace, without which a sweep cannot tell whether the pid is one it can see."""
    start = _start_ticks(os.getpid())
    return f".{target.name}.tmp-{os.getpid()}-" + ("" if start is None else f"s{start}-") + f"h{_pid_space()}-"


_pid_space_token: list[str] = []


def _pid_space() -> str:
    """8 hex digits naming the pid namespace this process sees: its host name, boot id and pid namespace's inode.

    A pid is only meaningful there: a writer in another container sharing the volume, or on another machine over
    NFS, has a pid this process cannot see (or sees as some other process), so its live temporary looked dead and
    was removed under it. A sweep judges by pid only the temporaries written in its own namespace."""
    if not _pid_space_token:
        import socket

        parts = [socket.gethostname()]
        with contextlib.suppress(OSError):
            parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
        with contextlib.suppress(OSError):
            parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
        _pid_space_token.append(hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8])
    return _pid_space_token[0]


#: how old (mtime) a temporary or ``.old`` folder named without :func:`_pid_space` (written before it was recorded)
#: must be before a dead-looking pid is believed: the writer may run in another pid namespace
UNMARKED_SWEEP_AGE_S = 24 * 3600.0


def _old_path(target: Path) -> Path:
    """Where :func:`atomic_dir` keeps ``target``'s previous version between its two renames: ``.NAME.old.PID-hHOST``."""
    return target.parent / f".{target.name}.old.{os.getpid()}-h{_pid_space()}"


def _old_aged(p: Path) -> bool:
    try:
        return time.time() - p.lstat().st_mtime > UNMARKED_SWEEP_AGE_S
    except OSError:
        return False


def _judged_by_pid(host: str | None, p: Path) -> bool:
    """May ``p``'s recorded pid be looked up here? Written in this pid namespace, or (a name from before the
    namespace was recorded) left untouched for :data:`UNMARKED_SWEEP_AGE_S`."""
    return host == _pid_space() if host is not None else _old_aged(p)


#: pid -> start time of this process (a fork has another pid, so it reads its own)
_own_start: dict[int, int | None] = {}


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``'s 22nd field; no wall clock, so
    a clock step changes nothing): with the pid it names one process. None without /proc, or with the process gone.
    """
    if pid == os.getpid() and pid in _own_start:
        return _own_start[pid]
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the name, which may hold spaces and ")"
        start: int | None = int(fields[19])  # field 22; fields[0] is field 3 (the state)
    except (OSError, ValueError, IndexError):
        start = None
    if pid == os.getpid():
        _own_start[pid] = start
    return start


def _writer_alive(pid: int, start: int | None) -> bool:
    """Is the writer of a temporary named with ``pid`` (and ``start``, None in names without it) still running?
    Unsure (no /proc, a process hidden from us) counts as running: its temporary is kept."""
    if not _alive(pid):
        return False
    if start is None:
        return True
    now = _start_ticks(pid)
    return now is None or now == start  # another start time: the pid was reused, the writer is gone


#: a temporary :func:`atomic_path` / :func:`atomic_dir` / :func:`atomic_files` names (:func:`_tmp_prefix`, then
#: mkstemp's letters and ``.tmp``): ``.NAME.tmp-PID-sSTART-hHOST-abcd1234.tmp``, ``sSTART-`` absent where /proc was
#: not, ``hHOST-`` in names written before the pid namespace was recorded
_TMP_NAME = re.compile(r"\.(?P<name>.+)\.tmp-(?P<pid>\d+)-(?:s(?P<start>\d+)-)?(?:h(?P<host>[0-9a-f]{8})-)?"
                       r"[a-z0-9_]+\.tmp")

#: ``.NAME.old.PID-hHOST`` (:func:`_old_path`), or ``.NAME.old.PID`` as written before the namespace was recorded
_OLD_NAME = re.compile(r"\.(?P<name>.+)\.old\.(?P<pid>\d+)(?:-h(?P<host>[0-9a-f]{8}))?")


def _dead_writers_temporary(p: Path) -> bool:
    """``p`` is a temporary of :data:`_TMP_NAME`'s form whose writer is provably gone: written in this pid namespace
    (:func:`_judged_by_pid`), its pid names no process, or one started at another time than the name records (the
    pid was reused)."""
    m = _TMP_NAME.fullmatch(p.name)
    if m is None:
        return False
    pid, start = int(m.group("pid")), m.group("start")
    if pid == os.getpid() and start is None:  # this process's, or a dead one's whose pid it now has: unsure, kept
        return False
    if not _judged_by_pid(m.group("host"), p):  # another container's or machine's writer: its pid means nothing here
        return False
    return not _writer_alive(pid, None if start is None else int(start))


def _remove(p: Path) -> bool:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            p.unlink()
    return not p.exists() and not p.is_symlink()


def sweep_dead_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove from ``folder`` every temporary a dead writer left (a ``kill -9`` while it saved: a ~90 MB
    ``.X.tmp-PID-...`` folder beside ``X``), whichever file or folder it was for; the ones removed.

    Only a writer provably gone counts (:func:`_dead_writers_temporary`): a live one's temporary is never touched,
    whatever its age. Every atomic write sweeps its own folder so (:func:`_sweep_stale`), so a temporary no longer
    waits for a later write into that very target, which may never come."""
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for p in Path(folder).iterdir():
            if _dead_writers_temporary(p) and _remove(p):
                removed.append(p)
    return removed


def _sweep_stale(target: Path) -> None:
    """Remove temporaries of ``target`` left by a process that was killed mid-write (its pid is gone, or now names
    a process started later), and those a dead writer left for any other name in ``target``'s folder.

    Nothing is removed for its age alone: a writer may hold its temporary for days (a long index build fills a folder
    whose mtime stays that of its creation), and only the writer's identity tells a live one from a dead one, a pid
    being looked up only in the pid namespace it was written in (:func:`_judged_by_pid`)."""
    with contextlib.suppress(OSError):
        for p in target.parent.iterdir():
            if p.name.startswith(f".{target.name}.old.") and p.is_dir():
                m = _OLD_NAME.fullmatch(p.name)
                if m is None or m.group("name") != target.name:
                    continue
                pid = int(m.group("pid"))
                if pid != os.getpid() and _judged_by_pid(m.group("host"), p) and not _alive(pid):
                    if not target.exists():
                        os.replace(p, target)  # killed between the two renames: the old version is whole
                    else:
                        shutil.rmtree(p, ignore_errors=True)
                continue
            # this target's temporaries and a sibling's alike (a sibling's waited for a write into that very target)
            if _dead_writers_temporary(p):
                _remove(p)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but not ours
        return True
    return True


def _rename_exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2(RENAME_EXCHANGE)``); False when unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0


# /proc/<pid>/fd (or a thread's): its entries are the open descriptors of a process, whatever they point at
_FD_DIR = re.compile(r"/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd")
_MAX_LINKS = 40  # the kernel's own limit before ELOOP


def _names_open_fd(path: Path) -> bool:
    """True when ``path`` leads through ``/dev/stdout``, ``/dev/fd/N`` or ``/proc/self/fd/N``.

    Such a path stands for a descriptor the caller was handed (``> out.csv``, a pipe, a tty),
    so it is written into. Replacing the file it points at would leave the descriptor on an
    orphaned inode (later output lost), or create a file named ``out.csv (deleted)``.
    """
    for _ in range(_MAX_LINKS):
        parent = os.path.realpath(path.parent)
        if _FD_DIR.fullmatch(parent):
            return True
        if not path.is_symlink():
            return False
        path = Path(parent) / os.readlink(path)  # an absolute link replaces the parent
    return False


def resolve_write_target(target: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Where a write to ``target`` lands, and whether it can be atomic (temp file + replace).

    * a symlink: its resolved file, atomically (the link is kept, the real file replaced);
    * an existing non-regular file (device, FIFO, ``/dev/stdout``): ``target`` itself, not atomically;
    * otherwise (a regular file, or nothing yet): ``target``, atomically.

    Raises IsADirectoryError for a folder and OSError(ELOOP) for a symlink loop, naming the path.
    """
    target = Path(target)
    if _names_open_fd(target):
        return target, False
    real = Path(os.path.realpath(target)) if target.is_symlink() else target
    if real.is_symlink():  # realpath gives up on a loop and returns a link
        raise OSError(errno.ELOOP, "symbolic link loop; point the link at a file or remove it", str(target))
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real, True  # new file (or a dangling link: its target is created)
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(target))
    if not stat.S_ISREG(mode):
        return target, False
    return real, True


def _final_mode(target: Path) -> int:
    """The mode the finished file should have: the replaced file's, else what ``open()`` would create."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return 0o666 & ~_umask()
    return stat.S_IMODE(st.st_mode)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; on success move it into place.

    Use for libraries that insist on writing to a path themselves
    (``faiss.write_index``, ``safetensors.torch.save_file``). A symlink is followed
    (the file it points at is replaced); a device or FIFO is yielded as is and
    written straight into (see :func:`resolve_write_target`).
    """
    real, atomic = resolve_write_target(target)
    if not atomic:
        yield real
        return
    real.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(real)
    # the temp file must sit beside the real file: os.replace is atomic only within one filesystem
    fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(real), suffix=".tmp", dir=real.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            # mkstemp makes 0600 files, unreadable to the other users of a shared deployment;
            # set the mode before fsync so it is durable with the data (no fchmod on older Windows Pythons)
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), _final_mode(real))
            os.fsync(fh.fileno())
        os.replace(tmp_path, real)
        _fsync_dir(real.parent)
    except Exception as e:
        _raise_storage_error(e, real.parent, target)
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


#: errors of the storage written to, not of the code: a full disk, a full quota, a file over the size limit,
#: a read-only filesystem
STORAGE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS") if hasattr(errno, n))

def storage_error_line(e: OSError) -> str | None:
    """``error: No space left on device: FILE`` for a failure of the storage written to (:data:`STORAGE_ERRNOS`),
    for the CLI to print with its way out instead of a traceback; None for any other error."""
    if e.errno not in STORAGE_ERRNOS:
        return None
    return f"error: {e.strerror or e}" + (f": {e.filename!s}" if e.filename else "")


#: how Rust's std::io::Error ends its message: "... (os error 28)"
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")

#: free bytes under which a failed write is put down to a full disk: the failing writer's partial file is still there
_FULL_DISK_BYTES = 1 << 20


def _raise_storage_error(e: BaseException, where: Path, target: str | os.PathLike[str]) -> None:
    """Re-raise a write's failure as an OSError naming ``target`` when the storage, not the code, failed.

    A failed ``write()`` names no file ("[Errno 28] No space left on device"), and the libraries that write
    weights say a full disk in their own words (safetensors: "I/O error: No space left on device"; torch.save:
    "unexpected pos 1101184 vs 1101076"), which reached the user as a traceback. Returns when ``e`` is
    something else, for the caller to re-raise.
    """
    if isinstance(e, OSError):
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror or str(e), str(target)) from e
        return
    # a Rust writer (safetensors) says the errno itself: "I/O error: No space left on device (os error 28)". It
    # removes its partial file before raising, so the free space below is back above the threshold by then
    said = _RUST_OS_ERROR.search(str(e))
    if said is not None and int(said.group(1)) in STORAGE_ERRNOS:
        code = int(said.group(1))
        raise OSError(code, os.strerror(code), str(target)) from e
    try:
        st = os.statvfs(where)
    except (OSError, AttributeError):  # no statvfs on Windows
        return
    if st.f_bavail * st.f_frsize < _FULL_DISK_BYTES:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target)) from e


def atomic_write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(target, text.encode("utf-8"))


def atomic_write_json(target: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(target, json_text(obj))


def json_text(obj: Any) -> str:
    """``obj`` as :func:`atomic_write_json` writes it (sorted keys, indented, numpy scalars as numbers)."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"


def atomic_write_set(files: Mapping[Path, bytes | Iterable[bytes]]) -> None:
    """Write files that are read together (a split's train/valid/test) as one set, in the order given.

    Every file is first written and synced to a temporary beside it; only then are they moved into place,
    one rename after another. A crash or Ctrl-C while writing (the slow part) leaves every old file as it
    was, instead of a new ``train.csv`` beside the previous split's ``valid.csv`` and ``test.csv``.

    A file's content is its bytes, or pieces of them (a generator, consumed as it is written: a large file need
    not be held in memory whole); the files are written in the order given, so a generator may use what the
    files before it recorded as they were written (a report of their digests).
    """
    with contextlib.ExitStack() as stack:
        # the stack moves the last one entered into place first: entered in reverse, they move in the order given
        temps = {target: stack.enter_context(atomic_path(target)) for target in reversed(list(files))}
        for target, data in files.items():
            _write_pieces(temps[target], data, target)
        with signals_deferred():  # a Ctrl-C between two moves left a new train.csv beside the old valid/test.csv
            stack.close()


def _write_pieces(tmp: Path, data: bytes | Iterable[bytes], target: Path) -> None:
    """Write and sync one file of :func:`atomic_write_set` to its temporary ``tmp``; a failure of the storage is
    raised naming ``target``. Left to the set's :func:`atomic_path` exits, it was named by the one that exits first,
    the set's first file: a disk that filled while valid.csv was written said "No space left on device: train.csv"."""
    try:
        with open(tmp, "wb") as fh:
            for piece in ((data,) if isinstance(data, (bytes, bytearray, memoryview)) else data):
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
    except Exception as e:
        _raise_storage_error(e, tmp.parent, target)
        raise


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the ``with`` block, then deliver them: for the moves that put a set of
    files into place, which a Ctrl-C or a scheduler's SIGTERM must not cut in two (SIGKILL still can, in a
    window of a few renames). Only the main thread may set handlers; elsewhere, or beside a handler set
    outside Python, the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = (signal.SIGINT, signal.SIGTERM)
    if any(signal.getsignal(s) is None for s in wanted):
        yield
        return
    got: list[int] = []
    before = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in wanted}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        for signum in dict.fromkeys(got):  # now, to the handlers just restored (KeyboardInterrupt, or the exit)
            signal.raise_signal(signum)


def _json_default(obj: Any) -> Any:
    # numpy scalars and paths turn up in configs and metrics
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read JSON, turning a truncated or corrupted file into an IntegrityError."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IntegrityError(f"{path}: not valid JSON ({e}); the file is corrupted or half-written") from e


def _readable_inside(folder: Path) -> None:
    """Give every file and folder inside ``folder`` the read (and, on folders, search) bits ``open()`` would: a
    library that writes through a temporary file of its own (safetensors' ``save_file``, under sentence-transformers'
    ``save``) leaves 0600 weights, which the other users of a shared deployment (a service account serving a
    model trained by another) cannot read. Write bits are left as the writer made them; links are not followed."""
    read, search = 0o444 & ~_umask(), 0o555 & ~_umask()
    for root, dirs, files in os.walk(folder):
        for name, bits in [(d, search) for d in dirs] + [(f, read) for f in files]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) and st.st_mode & bits != bits:
                os.chmod(path, stat.S_IMODE(st.st_mode) | bits)


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a whole directory in a temporary sibling, then swap it into place.

    The previous directory (if any) is removed only after the new one is
    complete, so readers see the old version or the new one. On Linux the
    swap is one ``renameat2(RENAME_EXCHANGE)``, so even a SIGKILL between
    steps leaves a complete ``target``; elsewhere it is two renames, and a
    crash between them leaves the previous version in ``.<name>.old.<pid>``,
    which the next write for ``target`` moves back when ``target`` is missing.
    Temporaries of killed writers are swept on the next write. A symlink is
    followed: the folder it points at is replaced, the link stays.
    """
    target = Path(target)
    if target.is_symlink():
        # the folder the link points at is replaced and the link kept, as atomic_path does for a file: swapping the
        # link itself put a real folder in its place and left the link's target holding the old contents
        target = Path(os.path.realpath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(target)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(target), suffix=".tmp", dir=target.parent))
    # mkdtemp makes 0700 folders; the finished artefact should have normal permissions
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        try:
            yield tmp
        except Exception as e:
            if isinstance(e, OSError) and e.filename is not None and Path(e.filename).is_relative_to(tmp):
                # named by the file it will have, not by the temporary folder (gone when this returns)
                raise OSError(e.errno, e.strerror, str(target / Path(e.filename).relative_to(tmp))) from e
            _raise_storage_error(e, tmp, target)
            raise
        _readable_inside(tmp)
        if target.is_dir() and _rename_exchange(tmp, target):
            # one atomic step: target holds the new contents, tmp the old ones (removed below);
            # a crash at any point leaves a complete target (the old one or the new one)
            _fsync_dir(target.parent)
            return
        old = None
        if target.exists():
            old = _old_path(target)
            if old.exists():
                shutil.rmtree(old)
            os.replace(target, old)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def atomic_files(folder: str | os.PathLike[str], last: str) -> Iterator[Path]:
    """Yield a temporary folder inside ``folder``; on success move every file in it into ``folder``.

    For artefacts whose files share a folder with others (an ONNX export may sit in a run folder), so
    the folder cannot be swapped whole. ``last`` names the file that says the set is complete: it is
    removed first and moved in last, so a crash during the moves leaves a set without it (unfinished)
    rather than new files beside an old record that describes others. A crash or error before the moves
    leaves the previous files as they were; temporaries of killed writers are swept on the next write.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / last
    _sweep_stale(marker)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(marker), suffix=".tmp", dir=folder))
    try:
        yield tmp
        names = sorted(p.name for p in tmp.iterdir() if p.is_file() and p.name != last)
        for name in (*names, last):
            if (tmp / name).is_file():
                with open(tmp / name, "rb+") as fh:
                    os.fsync(fh.fileno())
        marker.unlink(missing_ok=True)
        _fsync_dir(folder)
        for name in names:
            os.replace(tmp / name, folder / name)
        if (tmp / last).is_file():
            os.replace(tmp / last, marker)
        _fsync_dir(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    """The process umask, read from /proc where the kernel shows it.

    The ``os.umask(0)`` probe sets the mask to 0 for every thread until it is restored,
    so a file another thread creates in that window would come out world-writable.
    """
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return mask


def verify_files(directory: str | os.PathLike[str], table: dict[str, str], *, fix: str) -> None:
    """Check every ``name -> sha256`` of ``table`` under ``directory``.

    A missing file or a digest mismatch raises IntegrityError naming the file
    and ending with ``fix`` (how to recover). Shared by run manifests,
    checkpoints and saved indexes.
    """
    directory = Path(directory)
    for name, digest in sorted(table.items()):
        path = directory / name
        if not path.is_file():
            raise IntegrityError(f"{path}: missing (the artefact is incomplete); {fix}")
        if sha256_file(path) != digest:
            raise IntegrityError(f"{path}: sha256 mismatch (corrupted, truncated or replaced); {fix}")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


# output folders, checked before any work (the CLI's --out and train_run's out)
def _cannot_write(folder: Path) -> str:
    """Why ``folder`` refuses writes, in the user's terms: a read-only mount is not a permission to ask for."""
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs on Windows
        read_only = False
    return "read-only file system" if read_only else "permission denied"


def _parents_ok(path: Path, flag: str) -> None:
    """Every existing ancestor must be a folder, the nearest one writable (the rest is created in it later)."""
    for parent in reversed(path.parents):
        if not parent.exists():  # the nearest existing one is still checked below: a job ran, then failed there
            break
        if not parent.is_dir():
            raise ConfigError(f"{flag} {path}: {parent} is a file, not a folder; choose another path")
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: cannot write into {existing} ({_cannot_write(existing)})")


def check_output_dir(path: str | os.PathLike[str], flag: str = "--out", *, swapped: bool = False) -> Path:
    """``path`` must be a folder or creatable as one; returns it as a Path.

    ``swapped``: the artefact is built beside ``path`` and swapped in whole (:func:`atomic_dir`), so the parent
    must take writes too. Otherwise an existing folder is written into and only its own permission counts: a
    user's ``/scratch/alice`` under a root-owned ``/scratch`` was refused as "cannot write into /scratch".
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        # `export_onnx(run, None)`: pathlib's "expected str, bytes or os.PathLike object, not NoneType", a traceback
        raise ConfigError(f"{flag}: expected a folder's path (a str or pathlib.Path), got {path!r:.60}")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {p}: exists and is a file, not a folder; choose another path")
    if not (p.is_dir() and not swapped):
        _parents_ok(p, flag)
    if p.is_dir() and not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {p}: cannot write into this folder ({_cannot_write(p)})")
    return p
