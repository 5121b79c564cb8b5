"""What atomic_path writes through (symlinks, devices, FIFOs, open descriptors) and the modes it leaves.

Regression for a user walkthrough: ``recommend --out /dev/stdout`` as root replaced the
/dev/stdout symlink with a 0600 regular file, and every artefact came out 0600. The device
cases go through a symlink in tmp_path, so a regression replaces that link, never /dev itself.
"""
from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from twotower.utils.atomic import atomic_path, atomic_write_bytes, atomic_write_text, resolve_write_target
from tests.utils.umask_switch import umask as _umask

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks, FIFOs and modes")
pytestmark = posix_only


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---------------------------------------------------------------- symlinks
def test_a_symlink_is_kept_and_its_target_replaced(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to("real.csv")
    atomic_write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.csv"
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]  # no temporaries left


def test_the_temporary_goes_beside_the_real_file_of_a_link_into_another_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    real = tmp_path / "b" / "real.bin"
    real.write_bytes(b"old")
    link = tmp_path / "a" / "link.bin"
    link.symlink_to(Path("..") / "b" / "real.bin")
    with atomic_path(link) as tmp:
        assert tmp.parent == real.parent.resolve()  # os.replace is atomic only within one folder's filesystem
        tmp.write_bytes(b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["link.bin"]
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["real.bin"]


def test_a_chain_of_links_and_a_dangling_link_are_written_through(tmp_path):
    first = tmp_path / "first"
    second = tmp_path / "second"
    second.symlink_to("missing.txt")
    first.symlink_to("second")
    atomic_write_text(first, "made")
    assert first.is_symlink() and second.is_symlink()
    assert (tmp_path / "missing.txt").read_text() == "made"


def test_a_symlink_loop_is_an_error_naming_the_path_and_is_left_alone(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to("b")
    b.symlink_to("a")
    with pytest.raises(OSError) as info:
        atomic_write_text(a, "x")
    assert info.value.errno == errno.ELOOP and info.value.filename == str(a)
    assert a.is_symlink() and b.is_symlink()


def test_a_folder_is_refused_naming_it(tmp_path):
    with pytest.raises(IsADirectoryError) as info:
        atomic_write_text(tmp_path, "x")
    assert info.value.filename == str(tmp_path)


# ---------------------------------------------------------------- devices, FIFOs, open descriptors
@pytest.mark.skipif(not Path("/dev/null").is_char_device(), reason="needs /dev/null")
def test_a_link_to_dev_null_is_written_into_not_replaced(tmp_path):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    before = os.stat("/dev/null")
    assert resolve_write_target(link) == (link, False)
    atomic_write_bytes(link, b"discarded")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


def test_a_fifo_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()  # opening a FIFO for writing waits for a reader
    atomic_write_bytes(fifo, b"through the pipe")
    reader.join(timeout=30)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
def test_a_link_to_an_open_descriptor_writes_into_that_descriptors_file(tmp_path):
    """Like ``--out /dev/stdout > out.csv``: the file the descriptor holds gets the data, not a new inode."""
    out = tmp_path / "out.csv"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{fd}")
        assert resolve_write_target(link) == (link, False)
        atomic_write_text(link, "rows\n")
        assert link.is_symlink()
        assert os.fstat(fd).st_ino == os.stat(out).st_ino  # not replaced behind the descriptor
        assert out.read_text() == "rows\n"
    finally:
        os.close(fd)


@pytest.mark.skipif(not Path("/dev/stdout").is_symlink(), reason="needs the /dev/stdout link")
def test_dev_stdout_is_not_a_replace_target():
    assert resolve_write_target("/dev/stdout") == (Path("/dev/stdout"), False)  # resolution only: nothing written


# ---------------------------------------------------------------- modes
@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_open_would_give_it(tmp_path, mask, expected):
    target = tmp_path / "new.json"
    with _umask(mask):
        atomic_write_text(target, "{}")
        plain = tmp_path / "plain.json"
        plain.write_text("{}")
    assert _mode(target) == expected == _mode(plain)


def test_a_new_file_through_atomic_path_gets_the_umask_mode_too(tmp_path):
    """Libraries that write the path themselves (faiss, safetensors) may recreate it with their own mode."""
    target = tmp_path / "index.faiss"
    with _umask(0o022), atomic_path(target) as tmp:
        tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"index")
        os.close(fd)
    assert _mode(target) == 0o644 and target.read_bytes() == b"index"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o444])
def test_a_replaced_file_keeps_its_mode(tmp_path, mode):
    target = tmp_path / "run.json"
    target.write_text("old")
    os.chmod(target, mode)
    with _umask(0o077):  # would give 0600 if the umask were applied instead
        atomic_write_text(target, "new")
    assert target.read_text() == "new" and _mode(target) == mode


def test_a_file_replaced_through_a_link_keeps_the_real_files_mode(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new" and _mode(real) == 0o640


@posix_only
def test_a_linked_folder_is_replaced_where_the_link_points_and_the_link_kept(tmp_path):
    """atomic_dir swapped the link itself: ``out -> v1`` became a real folder, v1 kept the old contents (an export
    or index the link's other readers went on using) and the link was left behind as a stray temporary."""
    from twotower.utils.atomic import atomic_dir

    (tmp_path / "disk").mkdir()
    real = tmp_path / "disk" / "v1"
    real.mkdir()
    (real / "old.txt").write_text("old")
    link = tmp_path / "out"
    link.symlink_to(Path("disk") / "v1")
    with atomic_dir(link) as tmp:
        assert tmp.parent == real.parent.resolve()  # the swap stays within the real folder's filesystem
        (tmp / "new.txt").write_text("new")
    assert link.is_symlink() and os.readlink(link) == str(Path("disk") / "v1")
    assert sorted(p.name for p in real.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "out"]
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["v1"]  # no temporaries left
