"""Crash windows of the atomic writers (issue 7): a kill at any point leaves a whole artefact."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from twotower.utils import atomic
from twotower.utils.atomic import atomic_dir, atomic_path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dir_swap_is_one_atomic_exchange_on_linux(tmp_path, monkeypatch):
    """Regression: the swap used two renames; SIGKILL between them left no checkpoint at all."""
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux-only")
    target = tmp_path / "checkpoint"
    with atomic_dir(target) as d:
        (d / "a").write_text("old")
    calls = []
    real_replace = os.replace
    monkeypatch.setattr(atomic.os, "replace", lambda *a: (calls.append(a), real_replace(*a)))
    with atomic_dir(target) as d:
        (d / "a").write_text("new")
    assert (target / "a").read_text() == "new"
    assert calls == []  # no window in which `target` is missing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_two_rename_fallback_recovers_the_old_version_after_a_kill(tmp_path, monkeypatch):
    """Where the exchange is unavailable, a kill between the renames is repaired by the next write."""
    target = tmp_path / "checkpoint"
    with atomic_dir(target) as d:
        (d / "a").write_text("old")
    # what a SIGKILL between `os.replace(target, old)` and `os.replace(tmp, target)` leaves behind
    os.replace(target, tmp_path / f".checkpoint.old.{_dead_pid()}-h{atomic._pid_space()}")
    assert not target.exists()
    monkeypatch.setattr(atomic, "_rename_exchange", lambda a, b: False)
    with atomic_dir(target) as d:
        assert (target / "a").read_text() == "old"  # restored before the new version is built
        (d / "a").write_text("new")
    assert (target / "a").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_temporaries_of_killed_writers_are_swept(tmp_path):
    dead = _dead_pid()
    host = atomic._pid_space()  # written in this pid namespace: the pid is looked up here
    (tmp_path / f".model.safetensors.tmp-{dead}-h{host}-abc.tmp").write_bytes(b"half")
    (tmp_path / f".index.tmp-{dead}-h{host}-xyz.tmp").mkdir()
    live = tmp_path / f".model.safetensors.tmp-{os.getppid()}-live.tmp"  # a running writer: kept
    live.write_bytes(b"busy")
    with atomic_path(tmp_path / "model.safetensors") as p:
        p.write_bytes(b"whole")
    with atomic_dir(tmp_path / "index") as d:
        (d / "x").write_text("1")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["model.safetensors", "index", live.name])


def test_a_set_is_written_whole_or_not_at_all(tmp_path):
    """atomic_write_set stages every file before moving any into place: a failure on one leaves all old files."""
    from twotower.utils.atomic import atomic_write_set

    a, b = tmp_path / "train.csv", tmp_path / "valid.csv"
    atomic_write_set({a: b"old train", b: b"old valid"})
    (tmp_path / "blocker").write_text("a file where a folder should be")
    with pytest.raises(OSError):
        atomic_write_set({a: b"new train", b: b"new valid", tmp_path / "blocker" / "report.json": b"{}"})
    assert (a.read_bytes(), b.read_bytes()) == (b"old train", b"old valid")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "train.csv", "valid.csv"]  # no temporaries
    atomic_write_set({a: b"new train", b: b"new valid"})
    assert (a.read_bytes(), b.read_bytes()) == (b"new train", b"new valid")


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_between_the_moves_of_a_file_set_waits_for_the_whole_set(tmp_path, monkeypatch, signum):
    """Durability audit: Ctrl-C (or SIGTERM) while `data split` moved its files in left the new train.csv beside
    the previous split's valid.csv and test.csv (15,000 rows of the new train in the old test); 4 of 4 tries hit
    the window. The signal is now delivered once every file of the set is in place."""
    import signal

    from twotower.utils.atomic import atomic_write_set

    files = {tmp_path / f"{n}.csv": n.encode() for n in ("train", "valid", "test")}
    for path in files:
        path.write_bytes(b"old")
    real_replace = os.replace
    moved: list[str] = []

    def replace_then_signal(src, dst):  # noqa: ANN001
        real_replace(src, dst)
        moved.append(os.path.basename(dst))
        if len(moved) == 1:
            signal.raise_signal(getattr(signal, signum))  # lands right after the first move

    class Stop(Exception):
        pass

    def stop(signum: int, frame: object) -> None:
        raise Stop  # SIGTERM's own action would end pytest; Ctrl-C's is a KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, stop)
    # a test run started in the background of a shell inherits an ignored SIGINT: Ctrl-C's own handler here
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        monkeypatch.setattr(atomic.os, "replace", replace_then_signal)
        with pytest.raises(KeyboardInterrupt if signum == "SIGINT" else Stop):
            atomic_write_set(files)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    assert {p.name: p.read_bytes() for p in files} == {p.name: d for p, d in files.items()}  # the whole new set
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.csv", "train.csv", "valid.csv"]  # no temporaries


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="start times are read from /proc")
def test_a_temporary_whose_pid_was_reused_is_swept_and_a_live_writers_is_kept(tmp_path):
    """A killed writer's temporary was kept for ever once its pid named another live process; the name now
    records the writer's start time too, so a live pid with another start time is a reused one."""
    from twotower.utils.atomic import _start_ticks

    parent = os.getppid()  # a live process: as if it had reused the dead writer's pid
    start = _start_ticks(parent)
    reused = tmp_path / f".model.safetensors.tmp-{parent}-s{start + 1}-h{atomic._pid_space()}-abc.tmp"
    reused.write_bytes(b"half")
    live = tmp_path / f".model.safetensors.tmp-{parent}-s{start}-def.tmp"  # that process's own: kept
    live.write_bytes(b"busy")
    older = tmp_path / f".model.safetensors.tmp-{parent}-ghi.tmp"  # a name without a start time: kept, as before
    older.write_bytes(b"busy")
    with atomic_path(tmp_path / "model.safetensors") as p:
        assert p.name.startswith(f".model.safetensors.tmp-{os.getpid()}-s{_start_ticks(os.getpid())}-h{atomic._pid_space()}-")
        p.write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model.safetensors", live.name, older.name])
